package hpa

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

const (
	// DefaultScaleUpStabilization is the autoscaling/v2 default scale-up window.
	DefaultScaleUpStabilization = 0 * time.Second
	// DefaultScaleDownStabilization is the autoscaling/v2 default scale-down
	// window (--horizontal-pod-autoscaler-downscale-stabilization).
	DefaultScaleDownStabilization = 300 * time.Second
	// MaxStabilizationWindow and MaxPolicyPeriod are the API validation limits.
	MaxStabilizationWindow = time.Hour
	MaxPolicyPeriod        = 30 * time.Minute
)

// DefaultScaleUpRules returns the autoscaling/v2 scale-up defaults: no
// stabilization, the larger of +100% and +4 pods every 15 s.
func DefaultScaleUpRules() workload.ScalingRules {
	w := DefaultScaleUpStabilization
	return workload.ScalingRules{
		StabilizationWindow: &w,
		Select:              workload.SelectMax,
		Policies: []workload.ScalingPolicy{
			{Type: workload.PercentScalingPolicy, Value: 100, Period: 15 * time.Second},
			{Type: workload.PodsScalingPolicy, Value: 4, Period: 15 * time.Second},
		},
	}
}

// DefaultScaleDownRules returns the autoscaling/v2 scale-down defaults: a
// 300 s stabilization window and up to -100% every 15 s.
func DefaultScaleDownRules() workload.ScalingRules {
	w := DefaultScaleDownStabilization
	return workload.ScalingRules{
		StabilizationWindow: &w,
		Select:              workload.SelectMax,
		Policies: []workload.ScalingPolicy{
			{Type: workload.PercentScalingPolicy, Value: 100, Period: 15 * time.Second},
		},
	}
}

// rules is a ScalingRules with every default filled in.
type rules struct {
	window    time.Duration
	sel       workload.SelectPolicy
	policies  []workload.ScalingPolicy
	tolerance float64
}

func resolveRules(r *workload.ScalingRules, def workload.ScalingRules, tol float64) (rules, error) {
	out := rules{window: *def.StabilizationWindow, sel: def.Select, policies: def.Policies, tolerance: tol}
	if r == nil {
		return out, nil
	}
	if r.StabilizationWindow != nil {
		out.window = *r.StabilizationWindow
	}
	if out.window < 0 || out.window > MaxStabilizationWindow {
		return rules{}, fmt.Errorf("stabilization window must be within [0, %s], got %s", MaxStabilizationWindow, out.window)
	}
	switch r.Select {
	case "":
	case workload.SelectMax, workload.SelectMin, workload.SelectDisabled:
		out.sel = r.Select
	default:
		return rules{}, fmt.Errorf("unknown selectPolicy %q", r.Select)
	}
	if len(r.Policies) > 0 {
		out.policies = append([]workload.ScalingPolicy(nil), r.Policies...)
	}
	for i, p := range out.policies {
		if p.Type != workload.PodsScalingPolicy && p.Type != workload.PercentScalingPolicy {
			return rules{}, fmt.Errorf("policies[%d]: unknown type %q", i, p.Type)
		}
		if p.Value <= 0 {
			return rules{}, fmt.Errorf("policies[%d]: value must be > 0, got %d", i, p.Value)
		}
		if p.Period <= 0 || p.Period > MaxPolicyPeriod {
			return rules{}, fmt.Errorf("policies[%d]: period must be within (0, %s], got %s", i, MaxPolicyPeriod, p.Period)
		}
	}
	if r.Tolerance != nil {
		t := *r.Tolerance
		if math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
			return rules{}, fmt.Errorf("tolerance must be a finite non-negative number, got %g", t)
		}
		out.tolerance = t
	}
	return out, nil
}

// longestPeriod bounds how long scale events must be kept.
func (r *rules) longestPeriod() time.Duration {
	var d time.Duration
	for _, p := range r.policies {
		d = max(d, p.Period)
	}
	return d
}

// timestampedRecommendation is one proposal of the windows' history, with
// the per-pod capacity unit its count was in (see SetUnit; 0: none).
type timestampedRecommendation struct {
	replicas int32
	at       time.Time
	unit     float64
}

// unitBand is how far the capacity unit may move before the history's
// counts are converted: a pod size that drifts by a few percent from one
// step to the next (the histogram's percentile, the SLO floor's estimate)
// must not round every count in the window up by one.
const unitBand = 0.1

type scaleEvent struct {
	change int32
	at     time.Time
}

// MetricKind selects the arithmetic for one metric.
type MetricKind int

const (
	// ResourceUtilization is a Resource metric with a Utilization target.
	ResourceUtilization MetricKind = iota
	// PodsAverageValue is a Pods metric, or a Resource metric with an
	// AverageValue target.
	PodsAverageValue
	// ObjectValue is an Object or External metric with a Value target.
	ObjectValue
	// ObjectAverageValue is an Object or External metric with an
	// AverageValue target.
	ObjectAverageValue
)

// Metric is one entry of spec.metrics with its current reading.
type Metric struct {
	Name string
	Kind MetricKind
	// Target is a fraction for ResourceUtilization, else a value.
	Target float64
	// Pods carries per-pod readings for ResourceUtilization and
	// PodsAverageValue.
	Pods []PodMetric
	// CPU enables the CPU initialisation/readiness rule for per-pod metrics.
	CPU bool
	// Window is the metric collection window.
	Window time.Duration
	// Value is the reading for ObjectValue and ObjectAverageValue.
	Value float64
	// ReadyPods is the ready pod count ObjectValue scales.
	ReadyPods int32
	// Err, when set, means the metric could not be read: it is invalid
	// (see Decide) and its other fields are ignored.
	Err error
}

// Decision is the outcome of Decide.
type Decision struct {
	// Replicas is the count to apply.
	Replicas int32
	// Proposed is the max over metrics before stabilization and limits
	// (equal to the current count when metrics were not consulted).
	Proposed int32
	// Metrics holds the per-metric results, in input order; failed metrics
	// have a nil entry in Errors at the same index otherwise.
	Metrics []Result
	Errors  []error
	// Reason is a short CamelCase explanation, as in HPA conditions.
	Reason string
}

// Decider is a stateful, clock-free HPA for one workload: it keeps the
// recommendation history for the stabilization windows and the scale-event
// history for the behavior policies. It is not safe for concurrent use.
type Decider struct {
	calc     Calculator
	min, max int32
	up, down rules
	recs     []timestampedRecommendation
	upEv     []scaleEvent
	downEv   []scaleEvent
	seeded   bool
	// unit is the per-pod capacity the counts are in (SetUnit); 0 when
	// counts are plain counts.
	unit float64
}

// NewDecider validates the constraints and calculator and returns a decider.
func NewDecider(c workload.Constraints, calc Calculator) (*Decider, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid constraints: %w", err)
	}
	if err := calc.Validate(); err != nil {
		return nil, fmt.Errorf("invalid calculator: %w", err)
	}
	var upR, downR *workload.ScalingRules
	if c.Behavior != nil {
		upR, downR = c.Behavior.ScaleUp, c.Behavior.ScaleDown
	}
	up, err := resolveRules(upR, DefaultScaleUpRules(), calc.Tolerances.ScaleUp)
	if err != nil {
		return nil, fmt.Errorf("behavior.scaleUp: %w", err)
	}
	down, err := resolveRules(downR, DefaultScaleDownRules(), calc.Tolerances.ScaleDown)
	if err != nil {
		return nil, fmt.Errorf("behavior.scaleDown: %w", err)
	}
	calc.Tolerances = Tolerances{ScaleUp: up.tolerance, ScaleDown: down.tolerance}
	d := &Decider{calc: calc, min: max(c.MinReplicas, 1), max: c.MaxReplicas, up: up, down: down}
	if d.max == 0 {
		d.max = math.MaxInt32
	}
	return d, nil
}

// SetUnit says that the counts given from now on are of pods of capacity
// unit (the fused default: the recommended per-pod CPU request). The
// stabilization windows then hold capacity, not counts: a count in the
// history recorded at another unit counts as the pods of the new unit that
// give the same capacity, ceil(replicas·old/unit), when the two units
// differ by more than unitBand. Without it, pods grown vertically after a
// scale-out were held at the scale-out's count for the whole scale-down
// window although fewer of the grown pods gave the capacity it asked for
// (on the real node: two 200m replicas kept as two 679m pods for five
// minutes, docs/real-node-rounds.md, round twenty). A unit of 0 (the default)
// turns the conversion off for the counts recorded from then on.
func (d *Decider) SetUnit(unit float64) {
	if math.IsNaN(unit) || math.IsInf(unit, 0) || unit < 0 {
		unit = 0
	}
	d.unit = unit
}

// inUnit is r's count in the current unit.
func (d *Decider) inUnit(r timestampedRecommendation) int32 {
	if d.unit <= 0 || r.unit <= 0 {
		return r.replicas
	}
	ratio := r.unit / d.unit
	if ratio >= 1/(1+unitBand) && ratio <= 1+unitBand {
		return r.replicas
	}
	return max(clampInt32(int64(math.Ceil(float64(r.replicas)*ratio-1e-9))), 1)
}

// Calculator returns the decider's arithmetic, with per-direction tolerances
// from the behavior applied.
func (d *Decider) Calculator() Calculator { return d.calc }

// Decide proposes a count for each metric, takes the max, and normalises it
// through stabilization, behavior and min/max. It errors, and records
// nothing, when no metric is usable or when some metric failed and the rest
// would scale down (upstream refuses to scale down on partial information).
func (d *Decider) Decide(now time.Time, current int32, metrics []Metric) (Decision, error) {
	return d.DecideAtLeast(now, current, metrics, 0)
}

// DecideAtLeast is Decide with the metric proposal raised to at least floor
// before stabilization and limits. The fused policy uses it to let an SLO
// violation force a scale-out that still honours behavior and max.
func (d *Decider) DecideAtLeast(now time.Time, current int32, metrics []Metric, floor int32) (Decision, error) {
	return d.decide(now, current, metrics, floor, false)
}

// DecideShedding is DecideAtLeast for capacity that cannot be provided:
// when the metrics propose fewer than current replicas, the floor is
// dropped and the scale-in is not held by the scale-down stabilization
// window (the rate limits and min/max still apply, and the proposal enters
// the window's history). Otherwise it is DecideAtLeast. The fused default
// uses it while the node defers a pod's resize: the replica it would shed
// holds room the deferred pod needs.
func (d *Decider) DecideShedding(now time.Time, current int32, metrics []Metric, floor int32) (Decision, error) {
	return d.decide(now, current, metrics, floor, true)
}

func (d *Decider) decide(now time.Time, current int32, metrics []Metric, floor int32, shed bool) (Decision, error) {
	if current < 0 {
		return Decision{}, fmt.Errorf("current replicas must be >= 0, got %d", current)
	}
	dec := Decision{Replicas: current, Proposed: current}
	switch {
	case current == 0:
		dec.Reason = "ScalingDisabled"
		return dec, nil
	case current > d.max:
		dec.Replicas, dec.Reason = d.max, "TooManyReplicas"
		d.recordEvent(now, current, dec.Replicas)
		return dec, nil
	case current < d.min:
		dec.Replicas, dec.Reason = d.min, "TooFewReplicas"
		d.recordEvent(now, current, dec.Replicas)
		return dec, nil
	}
	if len(metrics) == 0 {
		return dec, errors.New("no metrics to scale on")
	}
	dec.Metrics = make([]Result, len(metrics))
	dec.Errors = make([]error, len(metrics))
	proposed, invalid := int32(0), 0
	var firstErr error
	for i := range metrics {
		r, err := d.metricReplicas(now, current, &metrics[i])
		if err != nil {
			invalid++
			dec.Errors[i] = fmt.Errorf("metric %q: %w", metrics[i].Name, err)
			if firstErr == nil {
				firstErr = dec.Errors[i]
			}
			continue
		}
		dec.Metrics[i] = r
		proposed = max(proposed, r.Replicas)
	}
	if invalid == len(metrics) || (invalid > 0 && proposed < current) {
		return dec, firstErr
	}
	if shed && proposed < current {
		dec.Proposed = proposed
		dec.Replicas, dec.Reason = d.NormalizeStabilized(now, current, proposed)
		if dec.Reason == "ScaleWithinStabilization" {
			dec.Reason = "ScaleDownShedding"
		}
		return dec, nil
	}
	dec.Proposed = max(proposed, floor)
	dec.Replicas, dec.Reason = d.Normalize(now, current, dec.Proposed)
	return dec, nil
}

func (d *Decider) metricReplicas(now time.Time, current int32, m *Metric) (Result, error) {
	if m.Err != nil {
		return Result{}, m.Err
	}
	switch m.Kind {
	case ResourceUtilization:
		return d.calc.ResourceUtilizationReplicas(now, current, m.Pods, m.Target, m.CPU, m.Window)
	case PodsAverageValue:
		return d.calc.AverageValueReplicas(now, current, m.Pods, m.Target, m.CPU, m.Window)
	case ObjectValue:
		return d.calc.ObjectValueReplicas(current, m.ReadyPods, m.Value, m.Target)
	case ObjectAverageValue:
		return d.calc.ObjectAverageValueReplicas(current, m.Value, m.Target)
	}
	return Result{}, fmt.Errorf("unknown metric kind %d", m.Kind)
}

// Normalize runs an unstabilized proposal through the stabilization windows,
// the behavior rate limits and min/max, records the proposal and, if the
// result differs from current, the scale event. It returns the count and a
// reason.
func (d *Decider) Normalize(now time.Time, current, proposed int32) (int32, string) {
	if !d.seeded {
		// A fresh decider must not scale down before a full window has
		// passed: seed the history with the current count.
		d.recs = append(d.recs, timestampedRecommendation{current, now, d.unit})
		d.seeded = true
	}
	stabilized, reason := d.stabilize(now, current, proposed)
	out, limReason := d.limitRate(now, current, stabilized)
	if limReason != "" {
		reason = limReason
	}
	d.recordEvent(now, current, out)
	return out, reason
}

// NormalizeStabilized is Normalize for a proposal that already went through
// the same stabilization windows elsewhere (the recommender's fused
// default): holding it for the windows again would double every delay, so
// only the rate limits and min/max apply. The proposal still enters the
// window history, so a later unstabilized proposal is judged against it.
func (d *Decider) NormalizeStabilized(now time.Time, current, proposed int32) (int32, string) {
	if !d.seeded {
		d.recs = append(d.recs, timestampedRecommendation{current, now, d.unit})
		d.seeded = true
	}
	d.stabilize(now, current, proposed)
	out, reason := d.limitRate(now, current, proposed)
	if reason == "" {
		reason = "ScaleWithinStabilization"
	}
	d.recordEvent(now, current, out)
	return out, reason
}

func (d *Decider) stabilize(now time.Time, current, proposed int32) (int32, string) {
	upCutoff := now.Add(-d.up.window)
	downCutoff := now.Add(-d.down.window)
	upRec, downRec := proposed, proposed
	oldest := -1
	for i, r := range d.recs {
		if r.at.After(upCutoff) {
			upRec = min(upRec, d.inUnit(r))
		}
		if r.at.After(downCutoff) {
			downRec = max(downRec, d.inUnit(r))
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) && oldest < 0 {
			oldest = i
		}
	}
	// Reuse an expired slot so the history stays bounded by the window
	// length divided by the tick.
	if oldest >= 0 {
		d.recs[oldest] = timestampedRecommendation{proposed, now, d.unit}
	} else {
		d.recs = append(d.recs, timestampedRecommendation{proposed, now, d.unit})
	}
	rec := max(current, upRec)
	rec = min(rec, downRec)
	if rec == proposed {
		return rec, "ScaleWithinStabilization"
	}
	if rec < proposed {
		return rec, "ScaleUpStabilized"
	}
	return rec, "ScaleDownStabilized"
}

func (d *Decider) limitRate(now time.Time, current, desired int32) (int32, string) {
	switch {
	case desired > current:
		limit := d.scaleUpLimit(now, current)
		limit = max(limit, current)
		allowed, reason := d.max, "TooManyReplicas"
		if allowed > limit {
			allowed, reason = limit, "ScaleUpLimit"
		}
		if desired > allowed {
			return allowed, reason
		}
	case desired < current:
		limit := d.scaleDownLimit(now, current)
		limit = min(limit, current)
		allowed, reason := d.min, "TooFewReplicas"
		if allowed < limit {
			allowed, reason = limit, "ScaleDownLimit"
		}
		if desired < allowed {
			return allowed, reason
		}
	}
	return desired, ""
}

func changeInPeriod(now time.Time, period time.Duration, events []scaleEvent) int32 {
	cutoff := now.Add(-period)
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

func (d *Decider) scaleUpLimit(now time.Time, current int32) int32 {
	var result int64
	pick := func(a, b int64) int64 { return max(a, b) }
	switch d.up.sel {
	case workload.SelectDisabled:
		return current
	case workload.SelectMin:
		result, pick = math.MaxInt64, func(a, b int64) int64 { return min(a, b) }
	default:
		result = math.MinInt64
	}
	for _, p := range d.up.policies {
		start := int64(current) - int64(changeInPeriod(now, p.Period, d.upEv)) + int64(changeInPeriod(now, p.Period, d.downEv))
		var proposed int64
		if p.Type == workload.PodsScalingPolicy {
			proposed = start + int64(p.Value)
		} else {
			// Round up so a small percentage can still add a pod.
			proposed = int64(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return clampInt32(result)
}

func (d *Decider) scaleDownLimit(now time.Time, current int32) int32 {
	var result int64
	pick := func(a, b int64) int64 { return min(a, b) }
	switch d.down.sel {
	case workload.SelectDisabled:
		return current
	case workload.SelectMin:
		result, pick = math.MinInt64, func(a, b int64) int64 { return max(a, b) }
	default:
		result = math.MaxInt64
	}
	for _, p := range d.down.policies {
		start := int64(current) - int64(changeInPeriod(now, p.Period, d.upEv)) + int64(changeInPeriod(now, p.Period, d.downEv))
		var proposed int64
		if p.Type == workload.PodsScalingPolicy {
			proposed = start - int64(p.Value)
		} else {
			proposed = int64(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return clampInt32(result)
}

func clampInt32(x int64) int32 {
	return int32(min(max(x, math.MinInt32), math.MaxInt32))
}

// recordEvent stores a scale event and drops events older than the longest
// policy period, which is all the rate limits ever look at.
func (d *Decider) recordEvent(now time.Time, from, to int32) {
	d.upEv = pruneEvents(now, d.upEv, d.up.longestPeriod())
	d.downEv = pruneEvents(now, d.downEv, d.down.longestPeriod())
	switch {
	case to > from:
		d.upEv = append(d.upEv, scaleEvent{to - from, now})
	case to < from:
		d.downEv = append(d.downEv, scaleEvent{from - to, now})
	}
}

func pruneEvents(now time.Time, ev []scaleEvent, keep time.Duration) []scaleEvent {
	cutoff := now.Add(-keep)
	out := ev[:0]
	for _, e := range ev {
		if e.at.After(cutoff) {
			out = append(out, e)
		}
	}
	return out
}
