package vpa

import (
	"fmt"
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Estimate is an uncapped recommendation for one container.
type Estimate struct {
	Target     workload.Resources
	LowerBound workload.Resources
	UpperBound workload.Resources
}

// Recommender keeps a ContainerState per container of one workload and turns
// it into recommendations. It is not safe for concurrent use.
type Recommender struct {
	opts   Options
	states map[string]*ContainerState
}

// NewRecommender validates opts (zero fields mean defaults).
func NewRecommender(opts Options) (*Recommender, error) {
	o, err := opts.prepared()
	if err != nil {
		return nil, fmt.Errorf("invalid vpa options: %w", err)
	}
	return &Recommender{opts: o, states: map[string]*ContainerState{}}, nil
}

// Options returns the effective (defaulted) options.
func (r *Recommender) Options() Options { return r.opts }

// State returns the named container's state, creating an empty one.
func (r *Recommender) State(name string) *ContainerState {
	s, ok := r.states[name]
	if !ok {
		s = newContainerState(&r.opts)
		r.states[name] = s
	}
	return s
}

// Observe feeds one observation into the histograms. Per-pod usage is
// multiplied by usageScale (1 for plain VPA; the fused policy passes the
// normalisation to per-ready-pod usage). Containers with mode Off are not
// tracked. The observation must already be validated.
func (r *Recommender) Observe(obs *workload.Observation, c *workload.Constraints, usageScale float64) error {
	if math.IsNaN(usageScale) || math.IsInf(usageScale, 0) || usageScale < 0 {
		return fmt.Errorf("usage scale must be finite and non-negative, got %g", usageScale)
	}
	for i := range obs.Containers {
		co := &obs.Containers[i]
		if c.ContainerPolicy(co.Name).Mode == workload.ContainerModeOff {
			continue
		}
		s := r.State(co.Name)
		if obs.Samples > 0 {
			if err := s.AddCPUSample(obs.Time, co.Usage.CPU*usageScale, co.Requests.CPU); err != nil {
				return fmt.Errorf("container %q: %w", co.Name, err)
			}
			mem := co.Peak.Memory
			if mem == 0 {
				mem = co.Usage.Memory
			}
			if err := s.AddMemorySample(obs.Time, mem*usageScale); err != nil {
				return fmt.Errorf("container %q: %w", co.Name, err)
			}
		}
		if co.OOMKills > 0 {
			if err := s.RecordOOM(obs.Time, memoryAtOOM(co)); err != nil {
				return fmt.Errorf("container %q: %w", co.Name, err)
			}
		}
	}
	return nil
}

// MemoryAtOOM is the working set Observe records for an OOM kill of co
// (before the bump); exported for policies that feed a ContainerState
// themselves.
func MemoryAtOOM(co *workload.ContainerObservation) float64 { return memoryAtOOM(co) }

// memoryAtOOM is the best estimate of the working set when the kernel
// killed the container: the limit it hit, else the request, else the peak.
// Upstream uses the request; with limit > request the kill happens at the
// limit, and bumping from the request would recommend less than was used.
func memoryAtOOM(co *workload.ContainerObservation) float64 {
	at := co.Limits.Memory
	if at == 0 {
		at = co.Requests.Memory
	}
	return max(at, co.Peak.Memory)
}

// PodMinimum is the per-container floor: the per-pod minimum split among n
// containers.
func (r *Recommender) PodMinimum(n int) workload.Resources {
	n = max(n, 1)
	return workload.Resources{CPU: r.opts.PodMinCPU / float64(n), Memory: r.opts.PodMinMemory / float64(n)}
}

// Estimate computes target (p90), lowerBound (p50) and upperBound (p95) of s,
// each with the safety margin; the bounds scaled by the confidence
// multipliers; all raised to floor.
func (r *Recommender) Estimate(s *ContainerState, floor workload.Resources) Estimate {
	m := 1 + r.opts.SafetyMargin
	pct := func(p float64) workload.Resources {
		return workload.Resources{CPU: s.cpu.Percentile(p) * m, Memory: s.mem.Percentile(p) * m}
	}
	e := Estimate{
		Target:     pct(r.opts.TargetPercentile),
		LowerBound: pct(r.opts.LowerBoundPercentile),
		UpperBound: pct(r.opts.UpperBoundPercentile),
	}
	conf := s.Confidence()
	// With no history the upper multiplier is +Inf and the lower one 0:
	// the bounds open up so the updater leaves young pods alone.
	e.UpperBound = r.saturate(e.UpperBound.Scale(math.Pow(1+upperBoundMultiplier/conf, upperBoundExponent)))
	e.LowerBound = r.saturate(e.LowerBound.Scale(math.Pow(1+lowerBoundMultiplier/conf, lowerBoundExponent)))
	e.Target = maxResources(e.Target, floor)
	e.LowerBound = maxResources(e.LowerBound, floor)
	e.UpperBound = maxResources(e.UpperBound, floor)
	return e
}

// saturate keeps amounts finite: an infinite bound becomes the histogram's
// largest value (which the container policy's maxAllowed may lower further).
func (r *Recommender) saturate(x workload.Resources) workload.Resources {
	fix := func(v, hi float64) float64 {
		if math.IsNaN(v) {
			return 0
		}
		return min(v, hi)
	}
	return workload.Resources{CPU: fix(x.CPU, r.opts.cpuLayout.MaxValue), Memory: fix(x.Memory, r.opts.memLayout.MaxValue)}
}

func maxResources(a, b workload.Resources) workload.Resources {
	return workload.Resources{CPU: max(a.CPU, b.CPU), Memory: max(a.Memory, b.Memory)}
}

// Cap applies the container policy to an estimate: uncontrolled resources
// keep the current request; controlled ones are clamped to
// [minAllowed, maxAllowed] (zero = unbounded) and, under RequestsOnly, to
// the current limit so the pod stays valid (request <= limit).
// UncappedTarget keeps the estimate's target.
func Cap(e Estimate, p workload.ContainerPolicy, co *workload.ContainerObservation) workload.ContainerRecommendation {
	out := workload.ContainerRecommendation{Name: co.Name}
	for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
		if !p.Controls(r) {
			cur := co.Requests.Get(r)
			out.Target = out.Target.With(r, cur)
			out.LowerBound = out.LowerBound.With(r, cur)
			out.UpperBound = out.UpperBound.With(r, cur)
			out.UncappedTarget = out.UncappedTarget.With(r, cur)
			continue
		}
		lo, hi := p.MinAllowed.Get(r), p.MaxAllowed.Get(r)
		if p.ControlledValues == workload.RequestsOnly {
			if l := co.Limits.Get(r); l > 0 && (hi == 0 || l < hi) {
				hi = l
			}
		}
		clamp := func(v float64) float64 {
			if hi > 0 {
				v = min(v, hi)
			}
			return max(v, lo)
		}
		out.UncappedTarget = out.UncappedTarget.With(r, e.Target.Get(r))
		out.Target = out.Target.With(r, clamp(e.Target.Get(r)))
		out.LowerBound = out.LowerBound.With(r, clamp(e.LowerBound.Get(r)))
		out.UpperBound = out.UpperBound.With(r, clamp(e.UpperBound.Get(r)))
	}
	return out
}

// Recommend returns one recommendation per container of obs that is not
// Off. A container without any recorded sample keeps its current requests.
func (r *Recommender) Recommend(obs *workload.Observation, c *workload.Constraints) []workload.ContainerRecommendation {
	out := make([]workload.ContainerRecommendation, 0, len(obs.Containers))
	floor := r.PodMinimum(len(obs.Containers))
	for i := range obs.Containers {
		co := &obs.Containers[i]
		p := c.ContainerPolicy(co.Name)
		if p.Mode == workload.ContainerModeOff {
			continue
		}
		s, ok := r.states[co.Name]
		if !ok || (s.cpu.IsEmpty() && s.mem.IsEmpty()) {
			out = append(out, workload.ContainerRecommendation{
				Name: co.Name, Target: co.Requests, LowerBound: co.Requests, UpperBound: co.Requests, UncappedTarget: co.Requests,
			})
			continue
		}
		out = append(out, Cap(r.Estimate(s, floor), p, co))
	}
	return out
}
