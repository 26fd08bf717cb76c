// Package faas simulates serverless functions packed on nodes of fixed
// capacity, invocation by invocation, to measure FaaSRM's idea (Yu et al.,
// "Harvesting idle resources in serverless computing via reinforcement
// learning"): moving idle CPU and memory from functions that do not use
// their user-defined allocation to functions that need more, behind a
// safeguard that gives a function its allocation back as soon as it is
// used.
//
// The model. Each function has a user-defined allocation (CPU cores and
// memory) and a per-window invocation rate. Invocations arrive as a
// Poisson process within each window and each needs an amount of CPU work
// (seconds of one core). An invocation runs on at most one core: the
// running invocations of a function share its CPU allocation equally
// (processor sharing), each at min(1, CPU / running) of a core. Memory
// bounds concurrency: a function holds BaseMemory plus InvocationMemory
// per running invocation, and an invocation that would exceed the memory
// allocation waits, first come first served. An invocation's completion
// time is from its arrival to the end of its work, the wait included.
// Functions on one node interact only through the allocations the policy
// sets at each window's start; the node's capacity bounds their sum.
//
// Three policies: PolicyFixed keeps every function at its user allocation
// (the platform's default resource manager), PolicyHarvest is the rule
// (not FaaSRM's learned allocator) of harvester, behind the safeguard, and
// PolicyUnguarded the same rule without it.
//
// The package is pure: randomness comes from seeds.
package faas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// MiB is a mebibyte in bytes.
const MiB = 1 << 20

// Function is one serverless function.
type Function struct {
	Name string
	// Rates are invocations per second, one per window.
	Rates []float64
	// Work is the mean CPU work of an invocation, in core-seconds; each
	// invocation's is log-normal around it (WorkSigma).
	Work float64
	// BaseMemory is what the function holds idle; InvocationMemory is
	// added per running invocation (bytes).
	BaseMemory, InvocationMemory float64
	// User is the user-defined allocation.
	User workload.Resources
	// Seed drives the function's arrivals and work, the same under every
	// policy (common random numbers).
	Seed uint64
}

// DefaultTimeout is Azure Functions' default on its consumption plan.
const DefaultTimeout = 5 * time.Minute

// CPUSample is the period (seconds) CPU usage is averaged over before its
// window's peak is taken.
const CPUSample = 1.0

// ProvisionSigma is the log-normal shape of the factor between a generated
// function's user CPU allocation and its mean load (median 2).
var ProvisionSigma = 0.7

// WorkSigma is the log-normal shape of an invocation's work around the
// function's mean.
const WorkSigma = 0.5

// Node is a set of functions sharing one node's capacity.
type Node struct {
	Capacity  workload.Resources
	Functions []Function
}

// Policy names.
const (
	PolicyFixed   = "fixed"
	PolicyHarvest = "faasrm"
	// PolicyUnguarded is the rule without the safeguard: the ablation
	// that measures what the safeguard is worth.
	PolicyUnguarded = "faasrm-unguarded"
)

// Options configure the harvesting rule. The zero value means the
// defaults.
type Options struct {
	// Step is the window length; zero means 15 s.
	Step time.Duration
	// Threshold is the share of its allocation a function's recent peak
	// must stay under for the function to be harvested from, and the
	// safeguard's: a harvested function whose recent peak reached it gets
	// its user allocation back. Zero means 0.9.
	Threshold float64
	// PeakWindows is how many windows "recent" spans for the rule's donor
	// level (the peak usage of that many windows). Zero means 20 (5 min
	// of 15 s windows).
	PeakWindows int
	// Headroom multiplies a donor's recent peak to give its harvested
	// allocation, which stays within [recent peak, user]; at 1.25 a donor
	// at its recent peak runs at 80% of its allocation, under the
	// safeguard's threshold. Zero means 1.25.
	Headroom float64
	// SafeguardWindows is how many windows the safeguard's recent peak
	// spans (safeguard.Options.Window). Zero means its default, 5.
	SafeguardWindows int
	// Timeout ends an invocation that has not completed this long after
	// its arrival, waiting or running: it counts as timed out, with a
	// completion time of Timeout. Zero means none: a function short of
	// CPU for hours then queues its invocations for hours.
	// DefaultTimeout is the demo's.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Step == 0 {
		o.Step = 15 * time.Second
	}
	if o.Threshold == 0 {
		o.Threshold = 0.9
	}
	if o.PeakWindows == 0 {
		o.PeakWindows = 20
	}
	if o.Headroom == 0 {
		o.Headroom = 1.25
	}
	return o
}

// Validate rejects options that cannot be used (after defaulting).
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.Step < 0 || o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("step and timeout must be > 0, got %s and %s", o.Step, o.Timeout))
	}
	if !(o.Threshold > 0 && o.Threshold <= 1) {
		errs = append(errs, fmt.Errorf("threshold must be in (0, 1], got %g", o.Threshold))
	}
	if o.PeakWindows < 1 || o.SafeguardWindows < 0 {
		errs = append(errs, fmt.Errorf("peak windows must be >= 1 and safeguard windows >= 0, got %d and %d", o.PeakWindows, o.SafeguardWindows))
	}
	if !(o.Headroom >= 1) || math.IsInf(o.Headroom, 0) {
		errs = append(errs, fmt.Errorf("headroom must be finite and >= 1, got %g", o.Headroom))
	}
	return errors.Join(errs...)
}

// Validate rejects a node whose functions cannot run on it.
func (n *Node) Validate() error {
	var errs []error
	var sum workload.Resources
	for i, f := range n.Functions {
		if !(f.Work > 0) || !(f.InvocationMemory > 0) || f.BaseMemory < 0 || !(f.User.CPU > 0) ||
			!(f.User.Memory >= f.BaseMemory+f.InvocationMemory) || len(f.Rates) == 0 {
			errs = append(errs, fmt.Errorf("function %d (%s): needs work, memory per invocation, a CPU allocation, memory for one invocation and rates", i, f.Name))
		}
		for w, r := range f.Rates {
			if !(r >= 0) || math.IsInf(r, 0) {
				errs = append(errs, fmt.Errorf("function %d (%s): window %d: rate %g", i, f.Name, w, r))
				break
			}
		}
		sum = sum.Add(f.User)
	}
	if sum.CPU > n.Capacity.CPU+1e-9 || sum.Memory > n.Capacity.Memory+1e-9 {
		errs = append(errs, fmt.Errorf("user allocations %v exceed the node's capacity %v", sum, n.Capacity))
	}
	return errors.Join(errs...)
}

// Invocations are a function's completion times under one policy: from
// arrival to the end of its work, in seconds (for an invocation unfinished
// at the end, to the end of the run), and how many arrived while its
// allocation was below (Harvested), or above (Accelerated), the user's in
// CPU or memory.
type Invocations struct {
	Completion             []float32
	Harvested, Accelerated int
	// TimedOut counts those ended by Options.Timeout.
	TimedOut int
}

func (v *Invocations) add(completion float64, j *job) {
	v.Completion = append(v.Completion, float32(completion))
	if j.harvested {
		v.Harvested++
	}
	if j.accelera {
		v.Accelerated++
	}
}

// funcState is one function's invocations in flight.
type funcState struct {
	rng     *rand.Rand
	f       *Function
	running []*job // remaining work
	waiting []*job
	alloc   workload.Resources
	next    float64 // next arrival time within the current window, absolute
	timeout float64 // seconds
}

type job struct {
	arrival, remaining  float64
	harvested, accelera bool
}

// windowStats is what a function did in one window: its peak usage and
// its peak need (running and waiting invocations, each a core and its
// memory).
type windowStats struct {
	peakUsed, peakNeed workload.Resources
	meanCPU            float64
}

func (s *funcState) memFor(n int) float64 {
	return s.f.BaseMemory + float64(n)*s.f.InvocationMemory
}

// admit starts waiting invocations while memory allows (always at least
// one running invocation, so a function never deadlocks).
func (s *funcState) admit() {
	for len(s.waiting) > 0 && (len(s.running) == 0 || s.memFor(len(s.running)+1) <= s.alloc.Memory+1e-9) {
		s.running = append(s.running, s.waiting[0])
		s.waiting = s.waiting[1:]
	}
}

// expire ends the invocations whose timeout is at or before t.
func (s *funcState) expire(t float64, out *Invocations) {
	late := func(j *job) bool {
		if j.arrival+s.timeout > t+1e-9 {
			return false
		}
		out.add(s.timeout, j)
		out.TimedOut++
		return true
	}
	s.running = slices.DeleteFunc(s.running, late)
	for len(s.waiting) > 0 && late(s.waiting[0]) {
		s.waiting = s.waiting[1:]
	}
}

func (s *funcState) observe(st *windowStats) {
	st.peakUsed.Memory = math.Max(st.peakUsed.Memory, s.memFor(len(s.running)))
	all := len(s.running) + len(s.waiting)
	st.peakNeed.CPU = math.Max(st.peakNeed.CPU, float64(all))
	st.peakNeed.Memory = math.Max(st.peakNeed.Memory, s.memFor(all))
}

// window simulates [t0, t1) at the current allocation, appending the
// invocations that complete to out.
func (s *funcState) window(t0, t1, rate float64, out *Invocations) windowStats {
	var st windowStats
	harvested := s.alloc.CPU < s.f.User.CPU-1e-9 || s.alloc.Memory < s.f.User.Memory-1e-9
	accel := s.alloc.CPU > s.f.User.CPU+1e-9 || s.alloc.Memory > s.f.User.Memory+1e-9
	if rate > 0 {
		s.next = t0 + s.rng.ExpFloat64()/rate
	} else {
		s.next = math.Inf(1)
	}
	s.admit()
	s.observe(&st)
	t := t0
	sample := 0.0 // CPU-seconds used in the current second
	for t < t1 {
		speed := 0.0
		if n := len(s.running); n > 0 {
			speed = math.Min(1, s.alloc.CPU/float64(n))
		}
		// The next event: an arrival, the first completion, the first
		// timeout or the end.
		deadline := math.Inf(1)
		if s.timeout > 0 {
			if len(s.waiting) > 0 {
				deadline = s.waiting[0].arrival + s.timeout // the oldest waiting
			}
			for _, j := range s.running {
				deadline = math.Min(deadline, j.arrival+s.timeout)
			}
		}
		next := math.Min(math.Min(s.next, t1), deadline)
		first := -1
		for i, j := range s.running {
			if speed > 0 {
				if c := t + j.remaining/speed; c < next {
					next, first = c, i
				}
			}
		}
		dt := next - t
		for _, j := range s.running {
			j.remaining -= speed * dt
		}
		used := speed * float64(len(s.running))
		st.meanCPU += used * dt
		// CPU usage is sampled as the mean of each second, as metrics
		// read it: a single invocation on a function of half a core uses
		// half a core, not the whole core it would take alone.
		for t < next {
			bound := (math.Floor(t/CPUSample) + 1) * CPUSample
			end := math.Min(next, bound)
			sample += used * (end - t)
			if t = end; t >= bound {
				st.peakUsed.CPU = math.Max(st.peakUsed.CPU, sample/CPUSample)
				sample = 0
			}
		}
		switch {
		case first >= 0:
			j := s.running[first]
			s.running = slices.Delete(s.running, first, first+1)
			out.add(t-j.arrival, j)
		case t >= deadline:
			s.expire(t, out)
		case s.next <= t && s.next < t1:
			work := s.f.Work * math.Exp(WorkSigma*s.rng.NormFloat64()-WorkSigma*WorkSigma/2)
			s.waiting = append(s.waiting, &job{arrival: t, remaining: work, harvested: harvested, accelera: accel})
			s.next = t + s.rng.ExpFloat64()/rate
		}
		s.admit()
		s.observe(&st)
	}
	st.peakUsed.CPU = math.Max(st.peakUsed.CPU, sample/CPUSample)
	st.meanCPU /= t1 - t0
	return st
}

// Result is one policy's run of one node.
type Result struct {
	Policy string
	// Functions holds each function's invocations, in the node's order.
	Functions []Invocations
	// Restores counts the safeguard's restorations (function-windows).
	Restores int
	// Harvested and Accelerated count function-windows below, or above,
	// the user allocation.
	HarvestedWindows, AcceleratedWindows, Windows int
}

// Simulate runs the node's functions under the named policy (PolicyFixed
// PolicyHarvest or PolicyUnguarded) for the length of their rates.
func Simulate(n *Node, policy string, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("faas: %w", err)
	}
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("faas: %w", err)
	}
	o = o.withDefaults()
	var alloc allocator
	switch policy {
	case PolicyFixed:
		alloc = fixedAllocator{}
	case PolicyHarvest, PolicyUnguarded:
		h, err := newHarvester(n, o, policy == PolicyHarvest)
		if err != nil {
			return nil, err
		}
		alloc = h
	default:
		return nil, fmt.Errorf("faas: unknown policy %q (known: %s, %s, %s)", policy, PolicyFixed, PolicyHarvest, PolicyUnguarded)
	}
	steps := 0
	fs := make([]*funcState, len(n.Functions))
	for i := range n.Functions {
		f := &n.Functions[i]
		fs[i] = &funcState{rng: rand.New(rand.NewPCG(f.Seed, 0xfaa5)), f: f, alloc: f.User, timeout: o.Timeout.Seconds()}
		steps = max(steps, len(f.Rates))
	}
	res := &Result{Policy: policy, Functions: make([]Invocations, len(fs))}
	dt := o.Step.Seconds()
	stats := make([]windowStats, len(fs))
	for w := range steps {
		if w > 0 {
			allocs, err := alloc.allocate(w, stats)
			if err != nil {
				return nil, err
			}
			for i, a := range allocs {
				fs[i].alloc = a
			}
		}
		for i, s := range fs {
			stats[i] = s.window(float64(w)*dt, float64(w+1)*dt, s.f.Rates[min(w, len(s.f.Rates)-1)], &res.Functions[i])
			res.Windows++
			switch {
			case s.alloc.CPU < s.f.User.CPU-1e-9 || s.alloc.Memory < s.f.User.Memory-1e-9:
				res.HarvestedWindows++
			case s.alloc.CPU > s.f.User.CPU+1e-9 || s.alloc.Memory > s.f.User.Memory+1e-9:
				res.AcceleratedWindows++
			}
		}
	}
	end := float64(steps) * dt
	for i, s := range fs {
		for _, j := range append(s.running, s.waiting...) {
			res.Functions[i].add(end-j.arrival, j)
		}
	}
	if h, ok := alloc.(*harvester); ok {
		res.Restores = h.restores
	}
	return res, nil
}

type allocator interface {
	allocate(w int, stats []windowStats) ([]workload.Resources, error)
}

type fixedAllocator struct{}

func (fixedAllocator) allocate(int, []windowStats) ([]workload.Resources, error) { return nil, nil }

// Pack places functions on nodes of the given capacity, first fit in the
// given order, opening a node when none has room for a function's user
// allocation.
func Pack(fs []Function, capacity workload.Resources) ([]Node, error) {
	var nodes []Node
	var used []workload.Resources
	for _, f := range fs {
		if f.User.CPU > capacity.CPU || f.User.Memory > capacity.Memory {
			return nil, fmt.Errorf("faas: function %s's allocation %v does not fit a node of %v", f.Name, f.User, capacity)
		}
		placed := false
		for i := range nodes {
			if u := used[i].Add(f.User); u.CPU <= capacity.CPU+1e-9 && u.Memory <= capacity.Memory+1e-9 {
				nodes[i].Functions, used[i], placed = append(nodes[i].Functions, f), u, true
				break
			}
		}
		if !placed {
			nodes = append(nodes, Node{Capacity: capacity, Functions: []Function{f}})
			used = append(used, f.User)
		}
	}
	return nodes, nil
}

// Bounds of the generated functions: a mean load in cores, and the user's
// CPU allocation, half a node of the simulator's default capacity.
const (
	MaxLoad    = 4
	MaxUserCPU = 8
)

// Generate draws n functions for seed, each under one of sim's trace kinds
// (round-robin) for steps windows of step:
//   - mean rate log-normal, median 1 invocation/s (σ 1, within [0.02, 40]);
//   - mean work log-normal, median 0.2 core-seconds (σ 0.8, within
//     [0.01, 4]); the rate is lowered if need be so that the mean load
//     (rate × work) is at most MaxLoad cores;
//   - memory 30 MiB idle plus 32 to 256 MiB per running invocation;
//   - the user's CPU allocation the mean load (rate × work, in cores)
//     times a log-normal factor, median 2 (σ 0.7): most functions are
//     over-provisioned, about one in six below its mean load; at least
//     0.1 core and at most MaxUserCPU, in steps of 0.05;
//   - the user's memory room for concurrency as many invocations as its
//     CPU allocation has cores, times a log-normal factor of median 2
//     (σ 0.7), at least one.
func Generate(seed uint64, n, steps int, step time.Duration) ([]Function, error) {
	rng := rand.New(rand.NewPCG(seed, 0xfaa5_9e2))
	logn := func(median, sigma, lo, hi float64) float64 {
		return math.Min(math.Max(median*math.Exp(sigma*rng.NormFloat64()), lo), hi)
	}
	kinds := sim.TraceKinds()
	out := make([]Function, 0, n)
	for i := range n {
		rate := logn(1, 1, 0.02, 40)
		work := logn(0.2, 0.8, 0.01, 4)
		rate = math.Min(rate, MaxLoad/work) // a function's mean load is at most MaxLoad cores
		kind := kinds[i%len(kinds)]
		tr, err := sim.GenerateTrace(kind, sim.TraceOptions{Mean: rate, Steps: steps, Step: step, Period: 24 * time.Hour, Seed: seed*7919 + uint64(i)})
		if err != nil {
			return nil, err
		}
		cpu := math.Min(MaxUserCPU, math.Max(0.1, math.Round(rate*work*logn(2, ProvisionSigma, 0.1, 20)*20)/20))
		perInv := 32*MiB + rng.Float64()*224*MiB
		conc := math.Max(1, math.Ceil(cpu*logn(2, 0.7, 0.1, 20)))
		base := 30.0 * MiB
		out = append(out, Function{
			Name: fmt.Sprintf("fn-%d-%s", i, kind), Rates: tr.Rates, Work: work,
			BaseMemory: base, InvocationMemory: perInv,
			User: workload.Resources{CPU: cpu, Memory: base + conc*perInv},
			Seed: seed*1_000_003 + uint64(i),
		})
	}
	return out, nil
}
