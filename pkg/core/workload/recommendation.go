package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Source says who produced a recommendation.
type Source string

const (
	SourceDefault   Source = "Default"
	SourceAgent     Source = "Agent"
	SourceSafeguard Source = "Safeguard"
)

// ContainerRecommendation is the vertical recommendation for one container,
// as per-pod requests. Limits are derived from requests by the applier
// according to ControlledValues.
type ContainerRecommendation struct {
	Name string
	// Target is the recommended request.
	Target Resources
	// LowerBound and UpperBound delimit requests that need no change.
	LowerBound Resources
	UpperBound Resources
	// UncappedTarget is Target before the container policy was applied.
	UncappedTarget Resources
}

// Changes reports whether applying c changes a request cur of r: c has a
// target for r that differs from cur, and cur is not within c's bounds
// (both set). It is how the simulator, and the agent charging a learner
// for vertical changes, decide that pods will be resized.
func (c *ContainerRecommendation) Changes(r Resource, cur float64) bool {
	target := c.Target.Get(r)
	if target <= 0 {
		return false
	}
	if lo, hi := c.LowerBound.Get(r), c.UpperBound.Get(r); lo > 0 && hi > 0 && cur >= lo && cur <= hi {
		return false
	}
	return math.Abs(target-cur) > 1e-9*math.Max(target, cur)
}

// Recommendation is one decision for both dimensions of a workload.
type Recommendation struct {
	// Replicas is the desired replica count, already within constraints.
	Replicas int32
	// Containers holds one entry per controlled container.
	Containers []ContainerRecommendation
	Source     Source
	// Reason explains the source, e.g. why the agent was not used.
	Reason string
}

// TargetCPU is the CPU the recommendation asks for one pod: the sum of its
// containers' CPU targets (0 when it sets none).
func (r *Recommendation) TargetCPU() float64 {
	var sum float64
	for _, c := range r.Containers {
		sum += c.Target.CPU
	}
	return sum
}

// Container returns the recommendation for the named container, if any.
func (r *Recommendation) Container(name string) (ContainerRecommendation, bool) {
	for _, c := range r.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return ContainerRecommendation{}, false
}

// Validate rejects recommendations that must never be applied.
func (r *Recommendation) Validate() error {
	var errs []error
	if r.Replicas < 0 {
		errs = append(errs, fmt.Errorf("replicas must be >= 0, got %d", r.Replicas))
	}
	for i, c := range r.Containers {
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("containers[%d]: name is empty", i))
		}
		for _, v := range []struct {
			n string
			x Resources
		}{{"target", c.Target}, {"lowerBound", c.LowerBound}, {"upperBound", c.UpperBound}, {"uncappedTarget", c.UncappedTarget}} {
			if err := v.x.Valid(); err != nil {
				errs = append(errs, fmt.Errorf("containers[%d] %q %s: %w", i, c.Name, v.n, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Policy turns observations of one workload into recommendations. A Policy
// instance holds per-workload state (histograms, stabilization windows), so
// it serves exactly one workload and is not safe for concurrent use.
type Policy interface {
	// Name identifies the policy in reports and metrics.
	Name() string
	// Recommend decides for the workload at obs.Time. It returns an error,
	// and no recommendation, for an observation it cannot use.
	Recommend(ctx context.Context, obs Observation) (Recommendation, error)
}

// PolicyFactory makes a Policy for one workload under its constraints.
type PolicyFactory func(c Constraints) (Policy, error)
