package workload

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Resource names a dimension that vertical scaling controls.
type Resource string

const (
	CPU    Resource = "cpu"
	Memory Resource = "memory"
)

// Resources is an amount of CPU (cores) and memory (bytes).
type Resources struct {
	CPU    float64
	Memory float64
}

// Get returns the amount of r.
func (r Resources) Get(name Resource) float64 {
	if name == Memory {
		return r.Memory
	}
	return r.CPU
}

// With returns a copy of r with name set to v.
func (r Resources) With(name Resource, v float64) Resources {
	if name == Memory {
		r.Memory = v
	} else {
		r.CPU = v
	}
	return r
}

// Add returns r+o.
func (r Resources) Add(o Resources) Resources {
	return Resources{CPU: r.CPU + o.CPU, Memory: r.Memory + o.Memory}
}

// Scale returns r*f.
func (r Resources) Scale(f float64) Resources {
	return Resources{CPU: r.CPU * f, Memory: r.Memory * f}
}

// Valid reports an error when an amount is NaN, infinite or negative.
func (r Resources) Valid() error {
	if r.valid() {
		return nil
	}
	return r.problem()
}

// problem names the first problem of resources Valid refuses.
func (r Resources) problem() error {
	for _, v := range []struct {
		n string
		x float64
	}{{"cpu", r.CPU}, {"memory", r.Memory}} {
		if err := finiteNonNegative(v.n, v.x); err != nil {
			return err
		}
	}
	return nil
}

// Latency holds latency percentiles in seconds. Zero means "no requests
// completed in the window", which callers must not read as "fast".
type Latency struct {
	P50 float64
	P95 float64
	P99 float64
}

// PodSample is one pod's state in the observation window. The HPA rules for
// missing and unready pods need per-pod detail, not only aggregates.
type PodSample struct {
	Name string
	// Ready is the pod's Ready condition at the end of the window.
	Ready bool
	// HasMetrics is false when no usage sample exists for the pod.
	HasMetrics bool
	// Started is when the pod's containers last started; zero if unknown.
	Started time.Time
	// ReadySince is when the Ready condition last changed (its
	// lastTransitionTime); zero if unknown. The HPA unready-pod rule needs it
	// to tell a pod that just became ready from one whose metrics already
	// cover a full window of readiness.
	ReadySince time.Time
	// Usage is the summed usage of the pod's controlled containers.
	Usage Resources
	// Requests is the summed requests of the pod's controlled containers.
	Requests Resources
	// ResizeDeferredSince is when the node began deferring an in-place
	// resize of the pod (it has no room for it now; the kubelet retries
	// when room frees up); zero when none is deferred. The pod runs its
	// old requests meanwhile.
	ResizeDeferredSince time.Time
}

// ContainerObservation describes one container (by name) across the pods of
// a workload.
type ContainerObservation struct {
	Name string
	// Requests and Limits are the per-pod values currently in the pod spec.
	Requests Resources
	Limits   Resources
	// Usage is the mean per-pod usage over the window (CPU cores, memory
	// working set bytes) across pods that have metrics.
	Usage Resources
	// Peak is the highest per-pod usage seen in the window.
	Peak Resources
	// OOMKills counts OOM kills of this container since the previous
	// observation.
	OOMKills int
	// CPUPressure is the mean over pods with metrics of the share of the
	// window in which the container's runnable work waited for CPU (the
	// cgroup's PSI "some" CPU pressure), in [0, 1]. It tells a pod starved by
	// its neighbours on the node, whose usage stays below both its limit and
	// its demand, from one that is idle. 0 also when it is not measured, so
	// policies read it only as evidence of pressure, never of its absence.
	CPUPressure float64
}

// Observation is what a policy sees of one workload at one tick.
type Observation struct {
	// Time is the end of the window; policies treat it as "now".
	Time time.Time
	// Window is the length of the period the aggregates cover.
	Window time.Duration
	// Replicas is the current scale (spec.replicas of the target).
	Replicas int32
	// ReadyReplicas counts pods that are Ready.
	ReadyReplicas int32
	// Containers lists the controlled containers, in pod-spec order.
	Containers []ContainerObservation
	// Pods holds per-pod samples; may be empty when only aggregates exist.
	Pods []PodSample
	// RequestRate is the arrival rate across the workload (requests/s).
	RequestRate float64
	// RateWindow is the period RequestRate averages over when that is
	// longer than Window (a Prometheus rate() over minutes beside usage
	// sampled every Window); 0 when RequestRate covers Window, as in the
	// simulator. A policy that divides usage by the rate must average the
	// usage over the same period: right after a load step, or while the
	// rate's window still holds the quiet before the traffic began, the
	// rate lags the usage.
	RateWindow time.Duration
	// Latency is the end-to-end request latency over the window.
	Latency Latency
	// ErrorRate is failed or timed-out requests per second; 0 also when it
	// is not measured (no error-rate metric), like RequestRate.
	ErrorRate float64
	// SLO is the latency objective (seconds) for the p95; 0 means none.
	SLO float64
	// Samples is how many usage samples the window holds; 0 means the
	// workload has no metrics yet.
	Samples int
	// StartupDelay is how long the workload's pods took to become Ready:
	// MedianStartupDelay of the pods; 0 when no pod tells. The recommender
	// sets it for the agent contract, which carries no pods; the simulator
	// leaves it 0, and a reader that has Pods computes it from them.
	StartupDelay time.Duration
	// Goals are the user's scaling goals (spec.goals.metrics) with their
	// readings, in spec order. Invariant: only the recommender sets Goals,
	// from the autoscaler's spec; the simulator never does, and an
	// observation without goals is decided exactly as before goals existed.
	// A goal whose reading is missing or invalid is still listed, with
	// Problem set, so that policies can apply the HPA rule that a missing
	// metric blocks a scale-down.
	Goals []Goal
}

// GoalKind selects the autoscaling/v2 arithmetic of a goal.
type GoalKind string

const (
	// GoalUtilization is a Resource goal with a Utilization target:
	// Target is the mean usage of Resource over the request, as a fraction.
	GoalUtilization GoalKind = "Utilization"
	// GoalAverageValue is a per-pod average: a Pods goal (values in
	// PerPod) or a Resource goal with an AverageValue target (the pods'
	// usage of Resource).
	GoalAverageValue GoalKind = "AverageValue"
	// GoalValue is an Object or External goal with a Value target: the
	// ratio Value/Target scales the ready pods.
	GoalValue GoalKind = "Value"
	// GoalTotalAverageValue is an Object or External goal with an
	// AverageValue target: Value/Target pods.
	GoalTotalAverageValue GoalKind = "TotalAverageValue"
)

// Goal is one scaling goal and its reading. Exactly one source applies:
// Resource set means the reading is the pods' usage in the observation;
// otherwise a GoalAverageValue goal reads PerPod and the others Value.
type Goal struct {
	// Name identifies the goal in reasons and logs (metric or resource).
	Name string
	Kind GoalKind
	// Resource is set for Resource goals.
	Resource Resource
	// Target is a fraction for GoalUtilization, else a value (> 0).
	Target float64
	// PerPod holds the per-pod values of a Pods goal by pod name (the
	// names of Observation.Pods); a pod without an entry has no value.
	PerPod map[string]float64
	// Value is the reading of an Object or External goal.
	Value float64
	// Problem, when not empty, says why the goal has no usable reading
	// (not read, no data, NaN...): the goal proposes nothing and, as in the
	// HPA, prevents a scale-down. The reading fields are then ignored.
	Problem string
}

// Validate rejects observations that no policy can reason about: NaN,
// infinite or negative quantities, and containers without names. It never
// mutates the observation.
func (o *Observation) Validate() error {
	if o.valid() {
		return nil
	}
	return o.problems()
}

// problems names every problem of an observation Validate refuses.
func (o *Observation) problems() error {
	var errs []error
	if o.Replicas < 0 || o.ReadyReplicas < 0 {
		errs = append(errs, fmt.Errorf("replicas must be >= 0, got %d (ready %d)", o.Replicas, o.ReadyReplicas))
	}
	if o.StartupDelay < 0 {
		errs = append(errs, fmt.Errorf("startupDelay must be >= 0, got %v", o.StartupDelay))
	}
	if o.RateWindow < 0 {
		errs = append(errs, fmt.Errorf("rateWindow must be >= 0, got %v", o.RateWindow))
	}
	for _, f := range []struct {
		n string
		x float64
	}{
		{"requestRate", o.RequestRate}, {"errorRate", o.ErrorRate}, {"slo", o.SLO},
		{"latency.p50", o.Latency.P50}, {"latency.p95", o.Latency.P95}, {"latency.p99", o.Latency.P99},
	} {
		if err := finiteNonNegative(f.n, f.x); err != nil {
			errs = append(errs, err)
		}
	}
	for i, c := range o.Containers {
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("containers[%d]: name is empty", i))
		}
		for _, r := range []struct {
			n string
			v Resources
		}{{"requests", c.Requests}, {"limits", c.Limits}, {"usage", c.Usage}, {"peak", c.Peak}} {
			if err := r.v.problem(); err != nil {
				errs = append(errs, fmt.Errorf("containers[%d] %q %s: %w", i, c.Name, r.n, err))
			}
		}
		if c.OOMKills < 0 {
			errs = append(errs, fmt.Errorf("containers[%d] %q: oomKills must be >= 0", i, c.Name))
		}
		if !(c.CPUPressure >= 0 && c.CPUPressure <= 1) {
			errs = append(errs, fmt.Errorf("containers[%d] %q: cpuPressure must be in [0, 1], got %g", i, c.Name, c.CPUPressure))
		}
	}
	for i, g := range o.Goals {
		if err := g.validate(); err != nil {
			errs = append(errs, fmt.Errorf("goals[%d] %q: %w", i, g.Name, err))
		}
	}
	for i, p := range o.Pods {
		if err := p.Usage.problem(); err != nil {
			errs = append(errs, fmt.Errorf("pods[%d] %q usage: %w", i, p.Name, err))
		}
		if err := p.Requests.problem(); err != nil {
			errs = append(errs, fmt.Errorf("pods[%d] %q requests: %w", i, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Container returns the observation of the named container, if present.
func (o *Observation) Container(name string) (ContainerObservation, bool) {
	for _, c := range o.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return ContainerObservation{}, false
}

// validate checks a usable goal's target and reading; a goal with a
// Problem carries no reading to check.
func (g *Goal) validate() error {
	switch g.Kind {
	case GoalUtilization, GoalAverageValue, GoalValue, GoalTotalAverageValue:
	default:
		return fmt.Errorf("unknown kind %q", g.Kind)
	}
	if g.Resource != "" && g.Resource != CPU && g.Resource != Memory {
		return fmt.Errorf("unknown resource %q", g.Resource)
	}
	if g.Kind == GoalUtilization && g.Resource == "" {
		return errors.New("a utilization goal needs a resource")
	}
	if g.Problem != "" {
		return nil
	}
	if err := finiteNonNegative("target", g.Target); err != nil {
		return err
	}
	if g.Target == 0 {
		return errors.New("target must be positive")
	}
	if err := finiteNonNegative("value", g.Value); err != nil {
		return err
	}
	for pod, v := range g.PerPod {
		if err := finiteNonNegative("pod "+pod, v); err != nil {
			return err
		}
	}
	return nil
}

// valid is Validate() == nil without building an error: every policy
// validates every observation it is given, and replays give millions.
// TestValidFastPath holds the two equal.
func (o *Observation) valid() bool {
	if o.Replicas < 0 || o.ReadyReplicas < 0 || o.StartupDelay < 0 || o.RateWindow < 0 ||
		!number(o.RequestRate) || !number(o.ErrorRate) || !number(o.SLO) ||
		!number(o.Latency.P50) || !number(o.Latency.P95) || !number(o.Latency.P99) {
		return false
	}
	for i := range o.Containers {
		c := &o.Containers[i]
		if c.Name == "" || !c.Requests.valid() || !c.Limits.valid() || !c.Usage.valid() || !c.Peak.valid() ||
			c.OOMKills < 0 || !(c.CPUPressure >= 0 && c.CPUPressure <= 1) {
			return false
		}
	}
	for i := range o.Goals {
		if o.Goals[i].validate() != nil {
			return false
		}
	}
	for i := range o.Pods {
		if !o.Pods[i].Usage.valid() || !o.Pods[i].Requests.valid() {
			return false
		}
	}
	return true
}

// valid is Valid() == nil without building an error.
func (r Resources) valid() bool { return number(r.CPU) && number(r.Memory) }

// number is finiteNonNegative(_, x) == nil: false for NaN, infinities and
// negative numbers.
func number(x float64) bool { return x >= 0 && x <= math.MaxFloat64 }

func finiteNonNegative(name string, x float64) error {
	switch {
	case math.IsNaN(x):
		return fmt.Errorf("%s is NaN", name)
	case math.IsInf(x, 0):
		return fmt.Errorf("%s is infinite", name)
	case x < 0:
		return fmt.Errorf("%s is negative (%g)", name, x)
	}
	return nil
}

// MedianStartupDelay is the median over the Ready pods of how long each took
// from its start to Ready (ReadySince − Started), and false when no Ready
// pod has both times in that order.
func MedianStartupDelay(pods []PodSample) (time.Duration, bool) {
	var delays []time.Duration
	for _, p := range pods {
		if !p.Ready || p.Started.IsZero() || p.ReadySince.Before(p.Started) {
			continue
		}
		delays = append(delays, p.ReadySince.Sub(p.Started))
	}
	if len(delays) == 0 {
		return 0, false
	}
	slices.Sort(delays)
	return delays[len(delays)/2], true
}
