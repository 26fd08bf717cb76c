// The recommender's side of the contract. Conversions towards the wire are
// total; conversions from the wire are strict: an agent is an external
// program, and a NaN, infinite or negative amount, a missing field or an
// unnamed container makes the whole answer unusable rather than partly
// applied.

package wire

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// ErrInvalidAnswer marks an agent answer that must not be applied.
var ErrInvalidAnswer = errors.New("invalid agent answer")

func toResources(r workload.Resources) *pb.Resources {
	return &pb.Resources{CpuCores: r.CPU, MemoryBytes: r.Memory}
}

// ToObservation converts an observation for the wire.
func ToObservation(o *workload.Observation) *pb.Observation {
	out := &pb.Observation{
		Time: timestamppb.New(o.Time), Window: durationpb.New(o.Window),
		Replicas: o.Replicas, ReadyReplicas: o.ReadyReplicas,
		RequestRate: o.RequestRate, ErrorRate: o.ErrorRate, SloSeconds: o.SLO,
		Latency: &pb.Latency{P50Seconds: o.Latency.P50, P95Seconds: o.Latency.P95, P99Seconds: o.Latency.P99},
		Samples: int32(min(o.Samples, math.MaxInt32)),
	}
	if o.StartupDelay > 0 {
		out.StartupDelay = durationpb.New(o.StartupDelay)
	}
	for _, c := range o.Containers {
		out.Containers = append(out.Containers, &pb.ContainerObservation{
			Name: c.Name, Requests: toResources(c.Requests), Limits: toResources(c.Limits),
			Usage: toResources(c.Usage), Peak: toResources(c.Peak), OomKills: int32(min(c.OOMKills, math.MaxInt32)),
			CpuPressure: c.CPUPressure,
		})
	}
	return out
}

// ToConstraints converts constraints for the wire.
func ToConstraints(c *workload.Constraints) *pb.Constraints {
	out := &pb.Constraints{MinReplicas: c.MinReplicas, MaxReplicas: c.MaxReplicas}
	for _, p := range c.Containers {
		cc := &pb.ContainerConstraints{
			Name: p.Name, Mode: pb.ContainerMode_CONTAINER_MODE_AUTO,
			MinAllowed: toResources(p.MinAllowed), MaxAllowed: toResources(p.MaxAllowed),
			ControlledValues: pb.ControlledValues_CONTROLLED_VALUES_REQUESTS_AND_LIMITS,
		}
		if p.Mode == workload.ContainerModeOff {
			cc.Mode = pb.ContainerMode_CONTAINER_MODE_OFF
		}
		if p.ControlledValues == workload.RequestsOnly {
			cc.ControlledValues = pb.ControlledValues_CONTROLLED_VALUES_REQUESTS_ONLY
		}
		for _, r := range p.ControlledResources {
			if r == workload.Memory {
				cc.ControlledResources = append(cc.ControlledResources, pb.Resource_RESOURCE_MEMORY)
			} else {
				cc.ControlledResources = append(cc.ControlledResources, pb.Resource_RESOURCE_CPU)
			}
		}
		out.Containers = append(out.Containers, cc)
	}
	return out
}

// ToRecommendation converts a recommendation for the wire.
func ToRecommendation(r *workload.Recommendation) *pb.Recommendation {
	out := &pb.Recommendation{Replicas: r.Replicas}
	for _, c := range r.Containers {
		out.Containers = append(out.Containers, &pb.ContainerRecommendation{
			Name: c.Name, Target: toResources(c.Target), LowerBound: toResources(c.LowerBound), UpperBound: toResources(c.UpperBound),
		})
	}
	return out
}

// ToSource converts a source for the wire.
func ToSource(s workload.Source) pb.Source {
	switch s {
	case workload.SourceAgent:
		return pb.Source_SOURCE_AGENT
	case workload.SourceSafeguard:
		return pb.Source_SOURCE_SAFEGUARD
	}
	return pb.Source_SOURCE_DEFAULT
}

func fromResources(field string, r *pb.Resources, required bool) (workload.Resources, error) {
	if r == nil {
		if required {
			return workload.Resources{}, fmt.Errorf("%w: %s is missing", ErrInvalidAnswer, field)
		}
		return workload.Resources{}, nil
	}
	out := workload.Resources{CPU: r.GetCpuCores(), Memory: r.GetMemoryBytes()}
	if err := out.Valid(); err != nil {
		return workload.Resources{}, fmt.Errorf("%w: %s: %w", ErrInvalidAnswer, field, err)
	}
	return out, nil
}

// FromRecommendation converts an agent's recommendation, rejecting it
// whole when any field is unusable. Bounds the agent leaves out are the
// target.
func FromRecommendation(r *pb.Recommendation) (workload.Recommendation, error) {
	if r == nil {
		return workload.Recommendation{}, fmt.Errorf("%w: recommendation is missing", ErrInvalidAnswer)
	}
	if r.GetReplicas() < 1 {
		return workload.Recommendation{}, fmt.Errorf("%w: replicas must be >= 1, got %d", ErrInvalidAnswer, r.GetReplicas())
	}
	out := workload.Recommendation{Replicas: r.GetReplicas(), Source: workload.SourceAgent}
	seen := map[string]bool{}
	for i, c := range r.GetContainers() {
		if c == nil || c.GetName() == "" {
			return workload.Recommendation{}, fmt.Errorf("%w: containers[%d]: name is empty", ErrInvalidAnswer, i)
		}
		if seen[c.GetName()] {
			return workload.Recommendation{}, fmt.Errorf("%w: container %q appears twice", ErrInvalidAnswer, c.GetName())
		}
		seen[c.GetName()] = true
		t, err := fromResources(fmt.Sprintf("containers[%d].target", i), c.GetTarget(), true)
		if err != nil {
			return workload.Recommendation{}, err
		}
		lo, err := fromResources(fmt.Sprintf("containers[%d].lowerBound", i), c.GetLowerBound(), false)
		if err != nil {
			return workload.Recommendation{}, err
		}
		hi, err := fromResources(fmt.Sprintf("containers[%d].upperBound", i), c.GetUpperBound(), false)
		if err != nil {
			return workload.Recommendation{}, err
		}
		if c.GetLowerBound() == nil {
			lo = t
		}
		if c.GetUpperBound() == nil {
			hi = t
		}
		out.Containers = append(out.Containers, workload.ContainerRecommendation{Name: c.GetName(), Target: t, LowerBound: lo, UpperBound: hi, UncappedTarget: t})
	}
	return out, nil
}

// Within reports why rec breaks c, or nil: replicas within
// [min, max] and each controlled resource's target within
// [minAllowed, maxAllowed]. The recommender never clips an agent's answer
// into bounds: an agent proposing outside them is not trusted this tick.
func Within(rec *workload.Recommendation, c *workload.Constraints) error {
	if rec.Replicas < max(c.MinReplicas, 1) || (c.MaxReplicas > 0 && rec.Replicas > c.MaxReplicas) {
		return fmt.Errorf("replicas %d outside [%d, %d]", rec.Replicas, max(c.MinReplicas, 1), c.MaxReplicas)
	}
	for _, cr := range rec.Containers {
		p := c.ContainerPolicy(cr.Name)
		for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
			if !p.Controls(r) {
				continue
			}
			v := cr.Target.Get(r)
			if lo := p.MinAllowed.Get(r); v < lo {
				return fmt.Errorf("container %q %s %g below minAllowed %g", cr.Name, r, v, lo)
			}
			if hi := p.MaxAllowed.Get(r); hi > 0 && v > hi {
				return fmt.Errorf("container %q %s %g above maxAllowed %g", cr.Name, r, v, hi)
			}
		}
	}
	return nil
}

// ToStage is the wire form of a lifecycle stage.
func ToStage(s lifecycle.Stage) pb.Stage {
	switch s {
	case lifecycle.Bootstrapping:
		return pb.Stage_STAGE_BOOTSTRAPPING
	case lifecycle.OnlineTraining:
		return pb.Stage_STAGE_ONLINE_TRAINING
	case lifecycle.Serving:
		return pb.Stage_STAGE_SERVING
	case lifecycle.Retraining:
		return pb.Stage_STAGE_RETRAINING
	}
	return pb.Stage_STAGE_UNSPECIFIED
}
