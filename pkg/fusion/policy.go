package fusion

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/aware-k8s/aware/pkg/hpa"
	"github.com/aware-k8s/aware/pkg/vpa"
	"github.com/aware-k8s/aware/pkg/workload"
)

// Policy names for reports.
const (
	FusedName = "fused"
	NaiveName = "hpa+vpa"
)

// Options configures the "fused" and "hpa+vpa" policies. The zero value
// means defaults.
type Options struct {
	HPA hpa.PolicyOptions
	VPA vpa.Options
}

// Validate rejects unusable options.
func (o Options) Validate() error {
	var errs []error
	if err := o.HPA.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("hpa: %w", err))
	}
	if err := o.VPA.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("vpa: %w", err))
	}
	return errors.Join(errs...)
}

// NewPolicyFactory returns a factory for the "fused" policy (see the
// package documentation for the rule).
func NewPolicyFactory(opts Options) workload.PolicyFactory {
	return func(c workload.Constraints) (workload.Policy, error) {
		if err := opts.Validate(); err != nil {
			return nil, fmt.Errorf("fused: invalid options: %w", err)
		}
		h := opts.HPA.WithDefaults()
		d, err := hpa.NewDecider(c, h.Calculator())
		if err != nil {
			return nil, fmt.Errorf("fused: %w", err)
		}
		r, err := vpa.NewRecommender(opts.VPA)
		if err != nil {
			return nil, fmt.Errorf("fused: %w", err)
		}
		return &Fused{c: c, target: h.TargetCPUUtilization, decider: d, rec: r}, nil
	}
}

// Fused is the "fused" workload.Policy. Not safe for concurrent use.
type Fused struct {
	c       workload.Constraints
	target  float64
	decider *hpa.Decider
	rec     *vpa.Recommender
	pods    []hpa.PodMetric
}

var _ workload.Policy = (*Fused)(nil)

// Name implements workload.Policy.
func (f *Fused) Name() string { return FusedName }

// Recommender exposes the histograms, e.g. for checkpointing.
func (f *Fused) Recommender() *vpa.Recommender { return f.rec }

// Recommend implements workload.Policy.
func (f *Fused) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	if err := ctx.Err(); err != nil {
		return workload.Recommendation{}, err
	}
	if err := obs.Validate(); err != nil {
		return workload.Recommendation{}, fmt.Errorf("fused: invalid observation: %w", err)
	}

	// 1. Per-pod usage normalised to ready pods.
	scale, ok := perReadyPodScale(&obs)
	in := obs
	if !ok {
		in.Samples = 0 // nothing serves load: record OOMs only
	}
	if err := f.rec.Observe(&in, &f.c, scale); err != nil {
		return workload.Recommendation{}, fmt.Errorf("fused: %w", err)
	}

	// 2. Vertical first, with the HPA target as the CPU headroom.
	containers := f.vertical(&obs)
	violated := obs.SLO > 0 && obs.Latency.P95 > obs.SLO
	if violated {
		// 4. Never shrink while the SLO is violated.
		for i := range containers {
			co, _ := obs.Container(containers[i].Name)
			p := f.c.ContainerPolicy(co.Name)
			for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
				if p.Controls(r) {
					containers[i].Target = containers[i].Target.With(r, max(containers[i].Target.Get(r), co.Requests.Get(r)))
				}
			}
		}
	}

	// 3. Horizontal against the recommended per-pod CPU request.
	podRequest := recommendedPodCPU(&obs, containers)
	f.pods = hpa.PodMetrics(&obs, workload.CPU, &podRequest, f.pods)
	floor := int32(0)
	if violated {
		floor = obs.Replicas + 1
	}
	dec, err := f.decider.DecideAtLeast(obs.Time, obs.Replicas, []hpa.Metric{{
		Name: "cpu", Kind: hpa.ResourceUtilization, Target: f.target, Pods: f.pods, CPU: true, Window: obs.Window,
	}}, floor)
	reason := dec.Reason
	if err != nil {
		reason = "FailedGetResourceMetric: " + err.Error()
		if violated && obs.Replicas > 0 {
			dec.Replicas, reason = f.decider.Normalize(obs.Time, obs.Replicas, obs.Replicas+1)
			reason = "SLOViolated: " + reason
		}
	} else if violated {
		reason = "SLOViolated: " + reason
	}

	// 5. At maxReplicas, move the unmet horizontal factor to vertical CPU.
	if err == nil && f.c.MaxReplicas > 0 && dec.Replicas == f.c.MaxReplicas && dec.Proposed > f.c.MaxReplicas {
		factor := float64(dec.Proposed) / float64(f.c.MaxReplicas)
		f.growCPU(&obs, containers, factor)
		reason += "; MaxReplicasVerticalAbsorb"
	}
	for i := range containers {
		c := &containers[i]
		c.LowerBound = minResources(c.LowerBound, c.Target)
		c.UpperBound = maxRes(c.UpperBound, c.Target)
	}
	return workload.Recommendation{Replicas: dec.Replicas, Containers: containers, Source: workload.SourceDefault, Reason: reason}, nil
}

// vertical computes the container recommendations with CPU sized as
// p(usage)/targetUtilisation instead of p(usage)·(1+margin).
func (f *Fused) vertical(obs *workload.Observation) []workload.ContainerRecommendation {
	out := make([]workload.ContainerRecommendation, 0, len(obs.Containers))
	floor := f.rec.PodMinimum(len(obs.Containers))
	k := 1 / (f.target * (1 + f.rec.Options().SafetyMargin))
	for i := range obs.Containers {
		co := &obs.Containers[i]
		p := f.c.ContainerPolicy(co.Name)
		if p.Mode == workload.ContainerModeOff {
			continue
		}
		s := f.rec.State(co.Name)
		if s.CPU().IsEmpty() && s.Memory().IsEmpty() {
			out = append(out, workload.ContainerRecommendation{
				Name: co.Name, Target: co.Requests, LowerBound: co.Requests, UpperBound: co.Requests, UncappedTarget: co.Requests,
			})
			continue
		}
		e := f.rec.Estimate(s, floor)
		e.Target.CPU = max(e.Target.CPU*k, floor.CPU)
		e.LowerBound.CPU = max(e.LowerBound.CPU*k, floor.CPU)
		e.UpperBound.CPU = max(math.Min(e.UpperBound.CPU*k, f.rec.Options().HistogramMaxCPU()), floor.CPU)
		out = append(out, vpa.Cap(e, p, co))
	}
	return out
}

// growCPU multiplies the controlled CPU targets by factor, within maxAllowed.
func (f *Fused) growCPU(obs *workload.Observation, containers []workload.ContainerRecommendation, factor float64) {
	for i := range containers {
		c := &containers[i]
		p := f.c.ContainerPolicy(c.Name)
		if !p.Controls(workload.CPU) {
			continue
		}
		v := c.Target.CPU * factor
		if hi := p.MaxAllowed.CPU; hi > 0 {
			v = min(v, hi)
		}
		if p.ControlledValues == workload.RequestsOnly {
			if co, ok := obs.Container(c.Name); ok && co.Limits.CPU > 0 {
				v = min(v, co.Limits.CPU)
			}
		}
		c.Target.CPU = max(c.Target.CPU, v)
	}
}

// perReadyPodScale returns the factor turning the observation's mean
// per-pod usage (over pods with metrics) into total/ready, and false when
// no pod is ready.
func perReadyPodScale(obs *workload.Observation) (float64, bool) {
	if obs.ReadyReplicas <= 0 {
		return 0, false
	}
	withMetrics := float64(obs.ReadyReplicas)
	if len(obs.Pods) > 0 {
		n := 0
		for _, p := range obs.Pods {
			if p.HasMetrics {
				n++
			}
		}
		withMetrics = float64(n)
	}
	return withMetrics / float64(obs.ReadyReplicas), true
}

// recommendedPodCPU sums the recommended CPU of the observation's
// containers; containers without a recommendation (mode Off) count at their
// current request.
func recommendedPodCPU(obs *workload.Observation, recs []workload.ContainerRecommendation) float64 {
	sum := 0.0
	for _, co := range obs.Containers {
		v := co.Requests.CPU
		for _, r := range recs {
			if r.Name == co.Name {
				v = r.Target.CPU
				break
			}
		}
		sum += v
	}
	return sum
}

func minResources(a, b workload.Resources) workload.Resources {
	return workload.Resources{CPU: min(a.CPU, b.CPU), Memory: min(a.Memory, b.Memory)}
}

func maxRes(a, b workload.Resources) workload.Resources {
	return workload.Resources{CPU: max(a.CPU, b.CPU), Memory: max(a.Memory, b.Memory)}
}
