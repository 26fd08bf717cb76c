package hpa

import (
	"fmt"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Reasons of a HorizontalDecision that considered no count.
const (
	// ReasonScalingDisabled: the workload runs 0 replicas (the user scaled
	// it to zero), which disables scaling, as for an HPA.
	ReasonScalingDisabled = "ScalingDisabled"
	// ReasonNoRecommendation: no desired count was given.
	ReasonNoRecommendation = "NoRecommendation"
)

// Horizontal decides the replica count of one workload from the
// recommender's desiredReplicas, as the updater applies it. It reuses the
// Decider for the
// constraints.global.behavior rules (stabilization windows, policies,
// selectPolicy), so an agent's or a third-party recommender's output is held
// to the same HPA semantics as the default: the stabilization windows are
// what keep it from flapping. A recommendation the fused default made was
// already held to those windows by the recommender, with the same
// constraints; for it only the rate limits apply here, so a window is
// waited out once, not twice.
//
// The decider records a scale event whenever it returns a count different
// from the current one. If the caller then fails to apply it, the rate
// limits count a change that did not happen, which only makes the next
// step more conservative.
type Horizontal struct {
	d *Decider
	c workload.Constraints
}

// HorizontalDecision is the outcome of Horizontal.Decide.
type HorizontalDecision struct {
	Current, Desired, Replicas int32
	// Reason is the HPA-style CamelCase reason of the decider, or why
	// nothing was considered.
	Reason string
}

// Changed reports whether the decision changes the replica count.
func (d HorizontalDecision) Changed() bool { return d.Replicas != d.Current }

// NewHorizontal validates the constraints and returns a fresh state; a
// fresh state does not scale down before a full scale-down window passed.
func NewHorizontal(c workload.Constraints) (*Horizontal, error) {
	d, err := NewDecider(c, DefaultCalculator())
	if err != nil {
		return nil, fmt.Errorf("horizontal: %w", err)
	}
	return &Horizontal{d: d, c: c}, nil
}

// SetUnit says that the counts given from now on are of pods of per-pod
// CPU unit (Decider.SetUnit): the stabilization windows then hold capacity,
// not counts. The updater and the simulator's agents set it from each
// recommendation's per-pod CPU target, so a scale-in that grows the pods
// to keep the capacity (an agent's two 200m pods into one of 807m) is not
// held as a capacity drop, while its resize already runs: on the real node
// the updater resized both pods to 807m, the node deferred one, and the
// scale-in came a loop later (docs/real-node-rounds.md, round twenty-seven).
// 0 turns the conversion off.
func (h *Horizontal) SetUnit(unit float64) { h.d.SetUnit(unit) }

// Decide returns the count to apply at now given the target's current
// count and the recommended count. stabilized says the recommended count
// already went through the behavior's stabilization windows (see
// Horizontal).
//
//   - current 0 means the user scaled the workload to zero: scaling is
//     disabled, as for an HPA.
//   - a current count outside [min, max] is brought to the bound at once.
//   - otherwise desired (clamped to [min, max]) goes through stabilization
//     (unless stabilized) and the behavior rate limits.
func (h *Horizontal) Decide(now time.Time, current, desired int32, stabilized bool) HorizontalDecision {
	out := HorizontalDecision{Current: current, Desired: desired, Replicas: current}
	lo, hi := max(h.c.MinReplicas, 1), h.c.MaxReplicas
	switch {
	case current <= 0:
		out.Reason = ReasonScalingDisabled
		return out
	case current < lo || (hi > 0 && current > hi):
		// Decide without metrics takes the out-of-bounds path only, and
		// records the scale event for the rate limits.
		dec, _ := h.d.Decide(now, current, nil)
		out.Replicas, out.Reason = dec.Replicas, dec.Reason
		return out
	case desired <= 0:
		out.Reason = ReasonNoRecommendation
		return out
	}
	proposed := h.c.ClampReplicas(desired)
	if stabilized {
		out.Replicas, out.Reason = h.d.NormalizeStabilized(now, current, proposed)
		return out
	}
	out.Replicas, out.Reason = h.d.Normalize(now, current, proposed)
	return out
}
