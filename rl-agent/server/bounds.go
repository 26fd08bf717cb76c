package server

// Physical bounds on what the agent learns from. convert.go refuses what
// is malformed (NaN, negative, missing); this file refuses what is well
// formed but cannot have been measured or applied: more ready replicas
// than replicas, usage far above a container's limit or the largest node,
// a latency of hours, an observation from the future, a recommendation outside the
// workload's constraints, a transition that goes back in time, a reward
// outside its range. Such a request is refused with INVALID_ARGUMENT before
// it reaches the workload's agent, so it changes nothing, and is counted in
// aware_rlagent_out_of_bounds_requests_total by the bound it broke.

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

// Physical limits of a measurement or an allocation.
const (
	// MaxReplicas is Kubernetes' largest supported cluster: 150,000 pods.
	MaxReplicas = 150_000
	// MaxCPUCores and MaxMemoryBytes bound one container's allocation and
	// usage by the largest machines a node runs on (about 900 vCPUs and
	// 32 TiB); a container without a limit is bounded by them alone.
	MaxCPUCores    = 1024
	MaxMemoryBytes = 32 << 40
	// MaxLatencySeconds bounds a latency quantile and an SLO: one hour.
	MaxLatencySeconds = 3600
	// limitTolerance is how far above its limit a container's usage may be
	// reported. A pod cannot use much more than its own limit (the CPU
	// quota throttles it; memory above the limit is an OOM kill), but the
	// recommender reports the newest pod's limit beside the usage of every
	// pod, and during a rollout that cuts the limit older pods still use
	// what the old limit allowed. Four times covers such a cut; anything
	// beyond is not a measurement.
	limitTolerance = 4
	// MaxClockSkew is how far ahead of the agent's clock an observation
	// may be stamped.
	MaxClockSkew = 10 * time.Minute
	// RewardMin and RewardMax are the range of AWARE's reward (pkg/rl/reward):
	// utilisation and SLO terms in [0, 1], penalties down to -1.
	RewardMin, RewardMax = -1.0, 1.0
	// relTolerance absorbs float rounding in comparisons of two values.
	relTolerance = 1e-9
)

// Bounds broken, the values of the metric's bound label.
const (
	boundReplicas    = "replicas"
	boundAllocation  = "allocation"
	boundUsage       = "usage"
	boundLatency     = "latency"
	boundTime        = "time"
	boundAction      = "action"
	boundReward      = "reward"
	boundConstraints = "constraints"
)

// bounds checks requests against the physical bounds and remembers each
// workload's last constraints, which a ReportOutcome does not carry, to
// check the applied recommendation against them.
type bounds struct {
	now      func() time.Time
	rejected *prometheus.CounterVec

	mu      sync.Mutex
	cons    map[string]workload.Constraints
	maxCons int
}

func newBounds(r prometheus.Registerer, maxWorkloads int, now func() time.Time) (*bounds, error) {
	b := &bounds{
		now:     now,
		cons:    map[string]workload.Constraints{},
		maxCons: maxWorkloads,
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "aware", Subsystem: "rlagent", Name: "out_of_bounds_requests_total",
			Help: "Requests refused with INVALID_ARGUMENT because a value lies outside physical bounds (replicas, allocation, usage, latency, time, action, reward, constraints), by method and the bound broken; each request counts once per bound.",
		}, []string{"method", "bound"}),
	}
	if err := r.Register(b.rejected); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return b, nil
}

// boundChecker collects violations and the bounds they broke.
type boundChecker struct {
	wire.Checker
	broken []string
}

func (c *boundChecker) out(bound string, field wire.Path, format string, args ...any) {
	c.Add(field, format, args...)
	for _, b := range c.broken {
		if b == bound {
			return
		}
	}
	c.broken = append(c.broken, bound)
}

// result counts the bounds broken under method and returns the error.
func (b *bounds) result(method string, c *boundChecker) error {
	for _, bound := range c.broken {
		b.rejected.WithLabelValues(method, bound).Inc()
	}
	return c.Err()
}

// checkRecommend checks a converted RecommendRequest and, when it is
// within bounds, remembers its constraints.
func (b *bounds) checkRecommend(in *recommendInput) error {
	var c boundChecker
	now := b.now()
	c.observation(wire.Root("observation"), &in.obs, now)
	c.constraints(wire.Root("constraints"), &in.constraints)
	c.recommendation(wire.Root("default_recommendation"), &in.def, &in.constraints)
	if err := b.result("Recommend", &c); err != nil {
		return err
	}
	b.remember(in.key, in.constraints)
	return nil
}

// checkOutcome checks a converted ReportOutcomeRequest: both observations,
// the transition's direction in time, the applied recommendation against
// the workload's last constraints, and the reward it yields.
func (b *bounds) checkOutcome(in *outcomeInput) error {
	var c boundChecker
	now := b.now()
	o := &in.outcome
	c.observation(wire.Root("observation"), &o.Observation, now)
	c.observation(wire.Root("next_observation"), &o.Next, now)
	if !o.Observation.Time.IsZero() && !o.Next.Time.IsZero() && !o.Next.Time.After(o.Observation.Time) {
		next := wire.Root("next_observation")
		c.out(boundTime, next.Dot("time"), "%s must be after observation.time %s", o.Next.Time.Format(time.RFC3339), o.Observation.Time.Format(time.RFC3339))
	}
	cons, known := b.constraintsOf(in.key)
	var cp *workload.Constraints
	if known {
		cp = &cons
	}
	c.recommendation(wire.Root("applied"), &o.Applied, cp)
	if c.Len() == 0 {
		// Only on bounded inputs: the reward of malformed ones is
		// refused elsewhere.
		if t, err := learn.Reward(&o.Next, o.Config.Alpha); err == nil && !rewardInRange(t.Reward) {
			c.out(boundReward, wire.Root("next_observation"), "yields a reward of %v, outside [%v, %v]", t.Reward, RewardMin, RewardMax)
		}
	}
	return b.result("ReportOutcome", &c)
}

func (b *bounds) remember(key string, cons workload.Constraints) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.cons[key]; !ok && len(b.cons) >= b.maxCons {
		// Full: forget any one; its next outcome is checked without
		// constraints until its next Recommend.
		for k := range b.cons {
			delete(b.cons, k)
			break
		}
	}
	b.cons[key] = cons
}

// forget drops key's remembered constraints, with the workload's other
// state (forget.go): a re-created autoscaler's outcomes must not be
// checked against the constraints of the deleted one.
func (b *bounds) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.cons, key)
}

// remembered is how many workloads' constraints are kept.
func (b *bounds) remembered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.cons)
}

func (b *bounds) constraintsOf(key string) (workload.Constraints, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.cons[key]
	return c, ok
}

// rewardInRange reports whether r lies in the reward's range, within
// rounding. pkg/rl/reward keeps it there by construction; the check keeps a
// change there from letting crafted observations reach the learner with a
// reward no genuine window has.
func rewardInRange(r float64) bool {
	return r >= RewardMin-relTolerance && r <= RewardMax+relTolerance
}

// above reports whether x exceeds limit beyond rounding.
func above(x, limit float64) bool { return x > limit*(1+relTolerance) }

func (c *boundChecker) observation(field wire.Path, o *workload.Observation, now time.Time) {
	if o.Replicas > MaxReplicas {
		c.out(boundReplicas, field.Dot("replicas"), "%d exceeds the largest cluster (%d pods)", o.Replicas, MaxReplicas)
	}
	if o.ReadyReplicas > o.Replicas {
		c.out(boundReplicas, field.Dot("ready_replicas"), "%d exceeds replicas %d", o.ReadyReplicas, o.Replicas)
	}
	if !o.Time.IsZero() && o.Time.After(now.Add(MaxClockSkew)) {
		c.out(boundTime, field.Dot("time"), "%s is more than %s ahead of the agent's clock", o.Time.Format(time.RFC3339), MaxClockSkew)
	}
	lat := field.Dot("latency")
	for _, q := range []struct {
		name string
		v    float64
	}{{"p50_seconds", o.Latency.P50}, {"p95_seconds", o.Latency.P95}, {"p99_seconds", o.Latency.P99}} {
		if q.v > MaxLatencySeconds {
			c.out(boundLatency, lat.Dot(q.name), "%vs exceeds %ds", q.v, MaxLatencySeconds)
		}
	}
	if o.SLO > MaxLatencySeconds {
		c.out(boundLatency, field.Dot("slo_seconds"), "%vs exceeds %ds", o.SLO, MaxLatencySeconds)
	}
	for i := range o.Containers {
		c.container(field.Elem("containers", i), &o.Containers[i])
	}
}

// resourceMax is the physical maximum of one container's resource.
func resourceMax(r workload.Resource) float64 {
	if r == workload.CPU {
		return MaxCPUCores
	}
	return MaxMemoryBytes
}

// protoName is a resource's field in the contract's Resources message.
func protoName(r workload.Resource) string {
	if r == workload.CPU {
		return "cpu_cores"
	}
	return "memory_bytes"
}

func (c *boundChecker) container(f wire.Path, ct *workload.ContainerObservation) {
	for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
		req, lim, use, peak := ct.Requests.Get(r), ct.Limits.Get(r), ct.Usage.Get(r), ct.Peak.Get(r)
		name, maxR := protoName(r), resourceMax(r)
		reqF, limF := f.Dot("requests"), f.Dot("limits")
		if req > maxR {
			c.out(boundAllocation, reqF.Dot(name), "%v exceeds the largest node (%v)", req, maxR)
		}
		if lim > maxR {
			c.out(boundAllocation, limF.Dot(name), "%v exceeds the largest node (%v)", lim, maxR)
		}
		if lim > 0 && req > 0 && above(req, lim) {
			c.out(boundAllocation, reqF.Dot(name), "%v exceeds the limit %v", req, lim)
		}
		for _, u := range []struct {
			name string
			v    float64
		}{{"usage", use}, {"peak", peak}} {
			uf := f.Dot(u.name)
			switch {
			case u.v > maxR:
				c.out(boundUsage, uf.Dot(name), "%v exceeds the largest node (%v)", u.v, maxR)
			case lim > 0 && u.v > limitTolerance*lim:
				c.out(boundUsage, uf.Dot(name), "%v is more than %v times the limit %v", u.v, limitTolerance, lim)
			}
		}
		// The mean of a window's samples cannot exceed their maximum.
		if peak > 0 && above(use, peak) {
			uf := f.Dot("usage")
			c.out(boundUsage, uf.Dot(name), "%v exceeds the window's peak %v", use, peak)
		}
	}
}

func (c *boundChecker) constraints(f wire.Path, in *workload.Constraints) {
	if in.MinReplicas > MaxReplicas || in.MaxReplicas > MaxReplicas {
		c.out(boundConstraints, f, "replica bounds [%d, %d] exceed the largest cluster (%d pods)", in.MinReplicas, in.MaxReplicas, MaxReplicas)
	}
}

// recommendation checks a recommendation against the physical limits and,
// when cons is known, the workload's constraints. Replicas 0 is a
// recommendation without a horizontal part.
func (c *boundChecker) recommendation(f wire.Path, r *workload.Recommendation, cons *workload.Constraints) {
	if r.Replicas > MaxReplicas {
		c.out(boundAction, f.Dot("replicas"), "%d exceeds the largest cluster (%d pods)", r.Replicas, MaxReplicas)
	} else if cons != nil && r.Replicas > 0 && (r.Replicas < max(cons.MinReplicas, 1) || (cons.MaxReplicas > 0 && r.Replicas > cons.MaxReplicas)) {
		c.out(boundAction, f.Dot("replicas"), "%d is outside the constraints [%d, %s]", r.Replicas, max(cons.MinReplicas, 1), maxString(cons.MaxReplicas))
	}
	for i := range r.Containers {
		ct := &r.Containers[i]
		cf := f.Elem("containers", i)
		var cp *workload.ContainerPolicy
		if cons != nil {
			for j := range cons.Containers {
				if cons.Containers[j].Name == ct.Name {
					cp = &cons.Containers[j]
				}
			}
		}
		for _, res := range []workload.Resource{workload.CPU, workload.Memory} {
			name, maxR := protoName(res), resourceMax(res)
			for _, v := range []struct {
				name string
				x    float64
			}{{"target", ct.Target.Get(res)}, {"lower_bound", ct.LowerBound.Get(res)}, {"upper_bound", ct.UpperBound.Get(res)}} {
				if v.x > maxR {
					vf := cf.Dot(v.name)
					c.out(boundAction, vf.Dot(name), "%v exceeds the largest node (%v)", v.x, maxR)
				}
			}
			if t := ct.Target.Get(res); cp != nil && t > 0 {
				lo, hi := cp.MinAllowed.Get(res), cp.MaxAllowed.Get(res)
				if (lo > 0 && t < lo*(1-relTolerance)) || (hi > 0 && above(t, hi)) {
					tf := cf.Dot("target")
					c.out(boundAction, tf.Dot(name), "%v is outside the constraints' [%v, %s]", t, lo, maxFloatString(hi))
				}
			}
		}
	}
}

func maxString(n int32) string {
	if n == 0 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

func maxFloatString(x float64) string {
	if x == 0 || math.IsInf(x, 1) {
		return "unbounded"
	}
	return fmt.Sprint(x)
}
