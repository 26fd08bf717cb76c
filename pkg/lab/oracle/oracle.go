// Package oracle computes, with knowledge of the future load, the cheapest
// allocation that meets an app's SLO in the simulator's pod model, and plays
// it back as a workload.Policy so the evaluator can measure every other
// policy against it.
//
// The model is the simulator's (package sim): a pod with CPU limit c serving
// λi requests/s of cpuSeconds each has p95 latency
//
//	p95 = W + ln(20) · cpuSeconds / (c − λi·cpuSeconds)
//
// so meeting an SLO needs c ≥ λi·cpuSeconds + c0 with c0 = ln(20)·cpuSeconds/(SLO − W),
// and n replicas of limit c suffice when n ≥ λ·cpuSeconds / (c − c0).
//
// Assumptions, all of which favour the oracle:
//   - it knows every window's mean rate in advance, and plans for that rate
//     plus Headroom standard deviations of the window's Poisson arrivals;
//   - replicas are raised ahead of need by the app's start-up delay, and
//     lowered exactly when the load allows;
//   - the pod size (CPU and memory per pod) is fixed for the whole run, the
//     cheapest over a 1%-step grid, because under ResizeRestart every
//     vertical change costs a rolling restart (the size is still chosen per
//     app and trace, knowing the whole future);
//   - no node is oversubscribed (no CFS throttling) and every pod fits; on
//     nodes shared with other tenants (sim.Config.Tenants) a plan that
//     counts on the limits may be throttled, which it does not foresee;
//   - memory is sized so that, even with one replica down, the peak working
//     set stays below the limit for normal deviates up to MemoryZ; so OOM
//     kills are practically absent and a restart cannot cascade into more
//     (the pods of the user's initial size may still be killed while the
//     oracle's first rollout replaces them).
//
// The plan counts on each pod's CPU and memory limits and requests the
// limits' fraction the app's limit/request ratios give, so its pods run
// above their requests. Options.WithinRequests plans on the requests
// instead: the cheapest allocation, knowing the future, that never counts on
// capacity the scheduler did not reserve.
//
// The oracle is the cheapest allocation of this family; it is not a proof
// that no policy can be cheaper outside it (for instance by resizing in
// place every window).
package oracle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// Name is the policy name the oracle reports.
const Name = "oracle"

// Options tune the oracle's safety margins and prices.
type Options struct {
	// Headroom is how many standard deviations of Poisson window noise the
	// plan covers (default 3: one window in about 700 sees more).
	Headroom float64
	// SLOMargin is the fraction of the SLO kept as slack (default 0.05).
	SLOMargin float64
	// MemoryZ bounds the deviate of the peak working set (default 4.5).
	MemoryZ float64
	// Prices weigh CPU against memory (default sim.DefaultPrices).
	Prices sim.Prices
	// WithinRequests plans every pod's CPU and memory on its requests, as if
	// limits equalled them: the pods keep the app's limit/request ratios
	// (the simulator scales limits with requests), but the plan
	// never counts on using more than it requested. Without it the oracle
	// plans on the limits and requests a fraction of them, so that its pods
	// run above their requests on capacity the cost does not charge.
	WithinRequests bool
	// FeasibleFirst chooses, among the pod sizes of the grid, the one with
	// the fewest windows it cannot serve within the constraints
	// (Plan.Infeasible), then the cheapest of those. Without it the
	// cheapest size wins even when a larger one would serve windows it
	// cannot: under a trace whose bursts are short and far above its mean
	// (a sparse serverless function), the cheapest plan is a small pod
	// that loses nearly every request of the bursts (docs/serverless.md).
	FeasibleFirst bool
}

func (o Options) withDefaults() Options {
	if o.Headroom == 0 {
		o.Headroom = 3
	}
	if o.SLOMargin == 0 {
		o.SLOMargin = 0.05
	}
	if o.MemoryZ == 0 {
		o.MemoryZ = 4.5
	}
	if o.Prices == (sim.Prices{}) {
		o.Prices = sim.DefaultPrices()
	}
	return o
}

// Plan is the oracle's allocation for every window of a trace.
type Plan struct {
	// Requests is the per-pod request for the whole run.
	Requests workload.Resources
	// Replicas[i] is the replica count to have during window i.
	Replicas []int32
	// Infeasible counts windows where no allowed allocation meets the SLO;
	// the plan uses the largest allowed one there.
	Infeasible int
	// Cost is the planned price of the run (sim.Prices units).
	Cost float64
}

// Policy replays a Plan. It serves one app and trace, like any Policy.
type Policy struct {
	plan  Plan
	app   sim.App
	start time.Time
	step  time.Duration
}

var _ workload.Policy = (*Policy)(nil)

// New plans app under trace in a cluster configured by cfg.
func New(app sim.App, trace *sim.Trace, cfg sim.Config, o Options) (*Policy, error) {
	cfg = cfg.WithDefaults()
	plan, err := Compute(app, trace, cfg, o)
	if err != nil {
		return nil, err
	}
	return &Policy{plan: plan, app: app, start: cfg.Start, step: cfg.Step}, nil
}

// Plan returns the precomputed plan.
func (p *Policy) Plan() Plan { return p.plan }

// Name implements workload.Policy.
func (p *Policy) Name() string { return Name }

// Recommend returns the plan for the window after obs: obs.Time is the end of
// window k, and the recommendation applies from window k+1.
func (p *Policy) Recommend(_ context.Context, obs workload.Observation) (workload.Recommendation, error) {
	if obs.Time.Before(p.start) {
		return workload.Recommendation{}, fmt.Errorf("oracle: observation at %s precedes the run start %s", obs.Time, p.start)
	}
	next := int(obs.Time.Sub(p.start) / p.step) // index of the next window
	next = min(next, len(p.plan.Replicas)-1)
	return workload.Recommendation{
		Replicas: p.plan.Replicas[next],
		Containers: []workload.ContainerRecommendation{{
			Name:           p.app.Container,
			Target:         p.plan.Requests,
			UncappedTarget: p.plan.Requests,
		}},
		Source: workload.SourceDefault,
		Reason: "oracle: planned with knowledge of the future load",
	}, nil
}

// Compute finds the cheapest plan for app under trace.
func Compute(app sim.App, trace *sim.Trace, cfg sim.Config, o Options) (Plan, error) {
	o = o.withDefaults()
	cfg = cfg.WithDefaults()
	if err := app.Validate(); err != nil {
		return Plan{}, fmt.Errorf("oracle: %w", err)
	}
	if trace == nil || len(trace.Rates) == 0 {
		return Plan{}, errors.New("oracle: empty trace")
	}
	if !(app.SLO > app.IOWait) {
		return Plan{}, fmt.Errorf("oracle: app %q: SLO %gs is not above its I/O wait %gs, no allocation meets it", app.Name, app.SLO, app.IOWait)
	}
	dt := cfg.Step.Seconds()
	ratio := app.LimitRatio()
	if o.WithinRequests {
		ratio = workload.Resources{CPU: 1, Memory: 1}
	}
	if ratio.CPU == 0 {
		ratio.CPU = 1 // no CPU limit: the pod may use a node, but plan on its request
	}
	pol := app.Constraints.ContainerPolicy(app.Container)
	minN := int(app.Constraints.ClampReplicas(1))
	maxN := 1 << 20
	if app.Constraints.MaxReplicas > 0 {
		maxN = int(app.Constraints.MaxReplicas)
	}

	slo := app.SLO * (1 - o.SLOMargin)
	c0 := math.Log(20) * app.CPUSeconds / (slo - app.IOWait)
	// Planned rates: the window's mean plus Headroom sigmas of its Poisson
	// arrivals, expressed as a rate.
	rates := make([]float64, len(trace.Rates))
	for i, r := range trace.Rates {
		rates[i] = r + o.Headroom*math.Sqrt(r/dt)
	}
	lookahead := int(math.Ceil(app.StartupDelay.Seconds() / dt))

	cpuLo := math.Max(c0*1.01, pol.MinAllowed.CPU*ratio.CPU)
	cpuHi := cfg.NodeCapacity.CPU
	if pol.MaxAllowed.CPU > 0 {
		cpuHi = math.Min(cpuHi, pol.MaxAllowed.CPU*ratio.CPU)
	}
	if cpuLo > cpuHi {
		cpuLo = cpuHi
	}

	need := make([]int32, len(rates))
	best := Plan{Cost: math.Inf(1), Infeasible: math.MaxInt}
	for c := cpuLo; c <= cpuHi*1.0000001; c *= 1.01 {
		plan, ok := evaluate(app, cfg, o, rates, c, c0, ratio, pol, minN, maxN, lookahead, need)
		better := plan.Cost < best.Cost
		if o.FeasibleFirst && plan.Infeasible != best.Infeasible {
			better = plan.Infeasible < best.Infeasible
		}
		if ok && better {
			best = plan
		}
	}
	if math.IsInf(best.Cost, 1) {
		return Plan{}, fmt.Errorf("oracle: app %q: no pod size fits a node", app.Name)
	}
	return best, nil
}

// evaluate plans the run with pod CPU limit c; need is scratch space.
func evaluate(app sim.App, cfg sim.Config, o Options, rates []float64, c, c0 float64, ratio workload.Resources,
	pol workload.ContainerPolicy, minN, maxN, lookahead int, need []int32) (Plan, bool) {
	cpuSec := app.CPUSeconds
	// Cluster capacity bounds replicas of this size; memory is checked below.
	perNode := int(math.Floor(cfg.NodeCapacity.CPU / (c / ratio.CPU) * (1 + 1e-9)))
	hiN := min(maxN, perNode*cfg.Nodes)
	if hiN < minN {
		return Plan{}, false
	}
	var infeasible int
	var peakMem float64
	for i, lam := range rates {
		var n int
		if c > c0 {
			n = int(math.Ceil(lam * cpuSec / (c - c0)))
		}
		if c <= c0 || n > hiN {
			n = hiN
			infeasible++
		}
		n = max(n, minN)
		need[i] = int32(n)
		// Working set with one replica down (a restart or a rollout sends
		// its share to the others), bounded for deviates up to MemoryZ. A
		// pod sized only for its even share would be OOM-killed whenever a
		// peer restarts, and the kills would cascade.
		li := lam / float64(max(n-1, 1))
		rho := math.Min(li*cpuSec/c, 0.98)
		inflight := li * (app.IOWait + cpuSec/c/(1-rho))
		peakMem = math.Max(peakMem, app.BaseMemory+app.MemoryPerRequest*(inflight+(1+o.MemoryZ)*math.Sqrt(inflight)))
	}
	req := workload.Resources{CPU: c / ratio.CPU, Memory: peakMem}
	if ratio.Memory > 0 {
		req.Memory = peakMem / ratio.Memory
	}
	req.CPU = math.Max(req.CPU, pol.MinAllowed.CPU)
	req.Memory = math.Max(req.Memory, pol.MinAllowed.Memory)
	if (pol.MaxAllowed.Memory > 0 && req.Memory > pol.MaxAllowed.Memory) || req.Memory > cfg.NodeCapacity.Memory {
		return Plan{}, false
	}
	if fit := int(cfg.NodeCapacity.Memory/req.Memory) * cfg.Nodes; fit < hiN {
		hiN = fit
	}
	plan := Plan{Requests: req, Replicas: make([]int32, len(rates)), Infeasible: infeasible}
	dt := cfg.Step.Seconds()
	for i := range rates {
		// Hold enough replicas for every window until a pod created now is Ready.
		n := need[i]
		for j := i + 1; j <= i+lookahead && j < len(rates); j++ {
			n = max(n, need[j])
		}
		n = min(n, int32(hiN))
		plan.Replicas[i] = n
		plan.Cost += o.Prices.Cost(float64(n)*req.CPU, float64(n)*req.Memory, dt)
	}
	return plan, true
}
