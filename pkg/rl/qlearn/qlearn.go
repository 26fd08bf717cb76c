// Package qlearn is the tabular Q-learning baseline after Schuler et al.
// ("AI-based resource allocation: reinforcement learning for adaptive
// auto-scaling in serverless environments"): instead of choosing replicas
// directly, the agent learns a per-workload scaling target — the average
// utilisation that the HPA-style rule then aims for.
//
// State: the discretised (current target, CPU utilisation, memory
// utilisation). Actions: lower, keep or raise the target by one level.
// Exploration is ε-greedy with a seeded generator, and the reward of a step
// is AWARE's R = α·RU + (1−α)·SP from pkg/rl/reward, measured on the
// observation that follows the action. Replicas follow the target like the
// HPA: ceil(replicas × CPU utilisation / target), clamped by the
// constraints. Requests are never changed: this is a horizontal policy.
//
// The package is pure: time, randomness (a seed) and observations are
// inputs.
package qlearn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// PolicyName is the name the policy reports.
const PolicyName = "qlearn"

// Actions on the target level.
const (
	Lower = iota
	Keep
	Raise
	numActions
)

// Options configure the learner. The zero value means the defaults.
type Options struct {
	// Targets are the utilisation targets the agent chooses among, strictly
	// increasing, in (0, 1]. Nil means 0.3, 0.4, …, 0.9.
	Targets []float64
	// InitialTarget is the index into Targets to start from. Nil means the
	// level closest to 0.7 (the HPA default).
	InitialTarget *int
	// UtilBins is the number of equal bins utilisation in [0, MaxUtil) is
	// cut into; utilisation at or above MaxUtil falls into one more bin.
	// Zero means 10.
	UtilBins int
	// MaxUtil is the top of the binned range. Zero means 1.
	MaxUtil float64
	// LearningRate (Q-learning's α), Discount (γ) and Epsilon (the
	// exploration probability). Zero means 0.3, 0.9 and 0.1; set
	// ExplicitZeroEpsilon for a purely greedy policy.
	LearningRate, Discount, Epsilon float64
	ExplicitZeroEpsilon             bool
	// Reward weighs the reward's terms (α, penalties); see pkg/rl/reward.
	Reward reward.Options
	// Seed drives exploration and tie-breaking.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.Targets == nil {
		o.Targets = []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
	}
	if o.InitialTarget == nil {
		best := 0
		for i, t := range o.Targets {
			if math.Abs(t-0.7) < math.Abs(o.Targets[best]-0.7) {
				best = i
			}
		}
		o.InitialTarget = &best
	}
	if o.UtilBins == 0 {
		o.UtilBins = 10
	}
	if o.MaxUtil == 0 {
		o.MaxUtil = 1
	}
	if o.LearningRate == 0 {
		o.LearningRate = 0.3
	}
	if o.Discount == 0 {
		o.Discount = 0.9
	}
	if o.Epsilon == 0 && !o.ExplicitZeroEpsilon {
		o.Epsilon = 0.1
	}
	return o
}

// Validate rejects options that cannot be used (after defaulting).
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if len(o.Targets) < 2 {
		errs = append(errs, fmt.Errorf("targets: need at least 2 levels, got %d", len(o.Targets)))
	}
	for i, t := range o.Targets {
		if !(t > 0 && t <= 1) {
			errs = append(errs, fmt.Errorf("targets[%d] must be in (0, 1], got %g", i, t))
		}
		if i > 0 && !(t > o.Targets[i-1]) {
			errs = append(errs, fmt.Errorf("targets must be strictly increasing, got %g after %g", t, o.Targets[i-1]))
		}
	}
	if *o.InitialTarget < 0 || *o.InitialTarget >= len(o.Targets) {
		errs = append(errs, fmt.Errorf("initialTarget %d out of range [0, %d)", *o.InitialTarget, len(o.Targets)))
	}
	if o.UtilBins < 1 || o.UtilBins > 1000 {
		errs = append(errs, fmt.Errorf("utilBins must be in [1, 1000], got %d", o.UtilBins))
	}
	if !(o.MaxUtil > 0) || math.IsInf(o.MaxUtil, 0) {
		errs = append(errs, fmt.Errorf("maxUtil must be positive and finite, got %g", o.MaxUtil))
	}
	for _, f := range []struct {
		n string
		v float64
	}{{"learningRate", o.LearningRate}, {"discount", o.Discount}, {"epsilon", o.Epsilon}} {
		if !(f.v >= 0 && f.v <= 1) {
			errs = append(errs, fmt.Errorf("%s must be in [0, 1], got %g", f.n, f.v))
		}
	}
	if !(o.LearningRate > 0) {
		errs = append(errs, errors.New("learningRate must be > 0"))
	}
	return errors.Join(errs...)
}

// State is a discretised observation.
type State struct{ Target, CPU, Memory int }

// Policy is the Q-learning workload.Policy. It is not safe for concurrent
// use: it learns from the sequence of one workload's observations.
type Policy struct {
	opts        Options
	constraints workload.Constraints
	rng         *rand.Rand
	// q holds Q(s, a) at index ((target·bins + cpu)·bins + memory)·3 + a,
	// with bins = UtilBins+1. Unvisited entries are 0, which is optimistic
	// next to the penalties and neutral next to rewards in [0, 1].
	q      []float64
	bins   int
	target int // index into opts.Targets
	// prev is the state and action of the previous decision, whose reward
	// the next observation reveals; havePrev is false until then and after
	// an observation without metrics.
	prev     State
	prevA    int
	havePrev bool
}

var _ workload.Policy = (*Policy)(nil)

// New returns a learner for a workload with the given constraints.
func New(c workload.Constraints, opts Options) (*Policy, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("qlearn: invalid options: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("qlearn: invalid constraints: %w", err)
	}
	o := opts.withDefaults()
	o.Targets = append([]float64(nil), o.Targets...)
	bins := o.UtilBins + 1
	return &Policy{
		opts:        o,
		constraints: c,
		rng:         rand.New(rand.NewPCG(o.Seed, 0x9_1ea7)),
		q:           make([]float64, len(o.Targets)*bins*bins*numActions),
		bins:        bins,
		target:      *o.InitialTarget,
	}, nil
}

// NewPolicyFactory returns a factory of independent learners, one per
// workload, all with opts.
func NewPolicyFactory(opts Options) workload.PolicyFactory {
	return func(c workload.Constraints) (workload.Policy, error) { return New(c, opts) }
}

// Name implements workload.Policy.
func (p *Policy) Name() string { return PolicyName }

// Target returns the current utilisation target.
func (p *Policy) Target() float64 { return p.opts.Targets[p.target] }

// Q returns the learnt value of action a in state s.
func (p *Policy) Q(s State, a int) float64 { return p.q[p.index(s, a)] }

func (p *Policy) index(s State, a int) int {
	return ((s.Target*p.bins+s.CPU)*p.bins+s.Memory)*numActions + a
}

// bin maps a utilisation to its bin; everything at or above MaxUtil shares
// the last bin.
func (p *Policy) bin(u float64) int {
	b := int(u / p.opts.MaxUtil * float64(p.opts.UtilBins))
	return min(max(b, 0), p.opts.UtilBins)
}

// Utilisation returns the workload's per-pod CPU and memory usage over
// requests, summed over containers; a resource without requests has
// utilisation 0.
func Utilisation(obs *workload.Observation) (cpu, mem float64) {
	var used, req workload.Resources
	for _, c := range obs.Containers {
		used = used.Add(c.Usage)
		req = req.Add(c.Requests)
	}
	if req.CPU > 0 {
		cpu = used.CPU / req.CPU
	}
	if req.Memory > 0 {
		mem = used.Memory / req.Memory
	}
	return cpu, mem
}

// Reward is AWARE's reward of one observation window (see pkg/rl/reward).
func Reward(obs *workload.Observation, o reward.Options) (float64, error) {
	var used, req workload.Resources
	oom := 0
	for _, c := range obs.Containers {
		used = used.Add(c.Usage)
		req = req.Add(c.Requests)
		oom += c.OOMKills
	}
	secs := obs.Window.Seconds()
	t, err := reward.Compute(reward.Inputs{
		CPUUsed: used.CPU, CPUAllocated: req.CPU,
		MemoryUsed: used.Memory, MemoryAllocated: req.Memory,
		P95: obs.Latency.P95, SLO: obs.SLO,
		Requests: obs.RequestRate * secs, Lost: obs.ErrorRate * secs,
		OOMKills: oom,
	}, o)
	if err != nil {
		return 0, err
	}
	return t.Reward, nil
}

// Recommend implements workload.Policy: it learns from the reward of the
// previous decision, chooses the next target ε-greedily and converts it into
// replicas.
func (p *Policy) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	if err := ctx.Err(); err != nil {
		return workload.Recommendation{}, err
	}
	if err := obs.Validate(); err != nil {
		return workload.Recommendation{}, fmt.Errorf("qlearn: invalid observation: %w", err)
	}
	rec := workload.Recommendation{
		Replicas:   p.constraints.ClampReplicas(obs.Replicas),
		Source:     workload.SourceAgent,
		Containers: unchanged(&obs),
	}
	if obs.Samples == 0 {
		// No metrics: nothing to learn from or to scale on. The pending
		// reward is dropped rather than attributed to a later window.
		p.havePrev = false
		rec.Reason = fmt.Sprintf("no metrics; target %.2f", p.Target())
		return rec, nil
	}
	cpu, mem := Utilisation(&obs)
	s := State{Target: p.target, CPU: p.bin(cpu), Memory: p.bin(mem)}
	if p.havePrev {
		r, err := Reward(&obs, p.opts.Reward)
		if err != nil {
			return workload.Recommendation{}, fmt.Errorf("qlearn: reward: %w", err)
		}
		i := p.index(p.prev, p.prevA)
		best := p.q[p.index(s, p.greedy(s))]
		p.q[i] += p.opts.LearningRate * (r + p.opts.Discount*best - p.q[i])
	}
	a := p.greedy(s)
	if p.rng.Float64() < p.opts.Epsilon {
		a = p.rng.IntN(numActions)
	}
	switch a {
	case Lower:
		p.target = max(p.target-1, 0)
	case Raise:
		p.target = min(p.target+1, len(p.opts.Targets)-1)
	}
	p.prev, p.prevA, p.havePrev = s, a, true

	target := p.Target()
	rec.Replicas = p.constraints.ClampReplicas(DesiredReplicas(obs.Replicas, cpu, target))
	rec.Reason = fmt.Sprintf("cpu utilisation %.2f, target %.2f (action %s)", cpu, target, [...]string{"lower", "keep", "raise"}[a])
	return rec, nil
}

// greedy returns the action with the highest Q in s, breaking ties with the
// generator so that an untrained table does not always keep (or always
// lower) the target.
func (p *Policy) greedy(s State) int {
	base := p.index(s, 0)
	best, n := 0, 0
	for a := range numActions {
		switch v := p.q[base+a]; {
		case a == 0 || v > p.q[base+best]:
			best, n = a, 1
		case v == p.q[base+best]:
			n++
			if p.rng.IntN(n) == 0 {
				best = a
			}
		}
	}
	return best
}

// DesiredReplicas is the HPA rule ceil(current × utilisation / target);
// zero current replicas stay zero (the workload is scaled to zero by its
// owner).
func DesiredReplicas(current int32, util, target float64) int32 {
	if current <= 0 || target <= 0 {
		return current
	}
	// The small offset keeps ceil from rounding 3.0000000000000004 (a
	// utilisation exactly at target, after floating-point division) up to 4.
	d := math.Ceil(float64(current)*util/target - 1e-9)
	if d > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(d)
}

func unchanged(obs *workload.Observation) []workload.ContainerRecommendation {
	out := make([]workload.ContainerRecommendation, len(obs.Containers))
	for i, c := range obs.Containers {
		out[i] = workload.ContainerRecommendation{
			Name: c.Name, Target: c.Requests, LowerBound: c.Requests, UpperBound: c.Requests, UncappedTarget: c.Requests,
		}
	}
	return out
}
