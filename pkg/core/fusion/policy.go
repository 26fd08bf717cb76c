package fusion

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
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
	// TargetOfLimit makes the HPA target CPU utilisation a fraction of the
	// pods' CPU limit instead of their request: with limit/request ratio q
	// the utilisation of the request is held at q times the target.
	TargetOfLimit bool
	// PressureHold, with TargetOfLimit, reads the target as a fraction of
	// the request again for this long after a window in which the pods
	// were starved of CPU by their node (CPU pressure of at least 5%): the
	// CPU above the requests is counted on only while the node has shown
	// that it gives it. 0 keeps the target on the limit whatever the
	// pressure.
	PressureHold time.Duration
	// BurstRatio, with TargetOfLimit, reads the target as a fraction of the
	// request while the request rate's decayed peak is at least this many
	// times its decayed mean (both with half-life burstHalfLife): a pod
	// already running above its request has less room below its limit for
	// a burst, and on bursty load the windows it takes to add pods are
	// violations. 0 keeps the target on the limit whatever the load's shape.
	BurstRatio float64
	// ShrinkAfter, when positive, lowers nothing before a container's
	// history spans this long (VPA's confidence: the smaller of the
	// samples' time span and their count at one a minute). Off by default:
	// measured in the simulator and motivated by the real node
	// (docs/real-node.md), it would also hold an over-sized pod for that
	// long where usage is known at once.
	ShrinkAfter time.Duration
	// ScaleUpPercent, when positive, replaces the HPA's default scale-up
	// rate (the larger of +100% and +4 pods per 15 s) for an autoscaler
	// that sets no scale-up behaviour of its own: the count may grow by
	// this percent (or 4 pods) per 15 s. Under bursty load the default rate
	// is what keeps pods missing for windows after the burst is seen; the
	// request-rate metric already knows how many are needed. An autoscaler's
	// own spec.behavior.scaleUp always wins.
	ScaleUpPercent int32
	// UsageFloor sizes rule 3's SLO floor for the usage the pod carries
	// (its histogram's usage, plus the spare ln(20)·s/SLO, over the
	// limit/request ratio) where that is below the floor for the highest
	// utilisation the horizontal loop tolerates. Off by default: in the
	// simulator (200 apps × 6 traces × 3 seeds, paired) it costs 1.1% less
	// and breaks the SLO in 0.09 points more windows; on the real node the
	// default's floor put a 0.2-core load on a 1-core pod
	// (docs/real-node.md).
	UsageFloor bool
	// FloorBandBoth resizes a pod whose CPU request the SLO floor set once
	// the floor falls floorBand below that request, as the default resizes
	// it once the floor rises floorBand above. Without it the upper bound
	// is the histogram's, up to upperBand above the floor: on the real node
	// the one pod after a load step kept the size of the floor's early
	// estimate, 0.69–0.87 core from the same traffic, while the estimate
	// fell 8–22% by the run's end (docs/real-node-rounds.md, "The floor's
	// pod after the step"). Off by default: the shipped agents were
	// trained beside the wide band (their CPU factors below 1 then often
	// resize nothing) and resize several times more beside this one.
	FloorBandBoth bool
}

// Validate rejects unusable options.
func (o Options) Validate() error {
	var errs []error
	if o.ShrinkAfter < 0 {
		errs = append(errs, fmt.Errorf("shrink-after must be >= 0, got %v", o.ShrinkAfter))
	}
	if o.PressureHold < 0 {
		errs = append(errs, fmt.Errorf("pressure hold must be >= 0, got %v", o.PressureHold))
	}
	if o.ScaleUpPercent < 0 {
		errs = append(errs, fmt.Errorf("scale-up percent must be >= 0 (0: the HPA default), got %d", o.ScaleUpPercent))
	}
	if !(o.BurstRatio == 0 || o.BurstRatio > 1) || math.IsInf(o.BurstRatio, 0) {
		errs = append(errs, fmt.Errorf("burst ratio must be 0 (off) or finite and > 1, got %v", o.BurstRatio))
	}
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
		d, err := hpa.NewDecider(WithScaleUp(c, opts.ScaleUpPercent), h.Calculator())
		if err != nil {
			return nil, fmt.Errorf("fused: %w", err)
		}
		r, err := vpa.NewRecommender(opts.VPA)
		if err != nil {
			return nil, fmt.Errorf("fused: %w", err)
		}
		return &Fused{c: c, opts: opts, target: h.TargetCPUUtilization, decider: d, rec: r, slo: sloState{gain: 1}}, nil
	}
}

// WithScaleUp returns c with the HPA's default scale-up rules, at percent
// instead of +100% per 15 s, when c sets none and percent is positive; c's
// own rules, and c itself, are left alone. The updater holds a variant's
// recommendations to the same rules (its --default-variant), or it would
// cut a faster scale-up back to the HPA's rate.
func WithScaleUp(c workload.Constraints, percent int32) workload.Constraints {
	if percent <= 0 || (c.Behavior != nil && c.Behavior.ScaleUp != nil) {
		return c
	}
	up := hpa.DefaultScaleUpRules()
	up.Policies = slices.Clone(up.Policies)
	for i := range up.Policies {
		if up.Policies[i].Type == workload.PercentScalingPolicy {
			up.Policies[i].Value = percent
		}
	}
	b := workload.Behavior{ScaleUp: &up}
	if c.Behavior != nil {
		b.ScaleDown = c.Behavior.ScaleDown
	}
	c.Behavior = &b
	return c
}

// Fused is the "fused" workload.Policy. Not safe for concurrent use.
type Fused struct {
	c workload.Constraints
	// opts are the options the policy was made with; target is their HPA
	// target CPU utilisation, defaulted.
	opts   Options
	target float64
	// burst is the rate's peak and mean (Options.BurstRatio).
	burst burstState
	// starvedAt is the end of the last window whose pods were starved of
	// CPU by their node (zero: none yet).
	starvedAt time.Time
	decider   *hpa.Decider
	rec       *vpa.Recommender
	pods      []hpa.PodMetric
	metrics   []hpa.Metric
	slo       sloState
	// lag is what the rate's and the latency's window (longer than the
	// observation's, Observation.RateWindow) still hold.
	lag lagState
}

// lagState is what a rate or percentile over Observation.RateWindow still
// remembers after the workload changed.
type lagState struct {
	// usage averages the workload's CPU over the request rate's window.
	usage usageRing
	// rollout is when the current requests were first seen rolled out.
	rollout rolloutClock
	// serving is when the serving pods last grew in number.
	serving servingClock
}

var _ workload.Policy = (*Fused)(nil)

// Name implements workload.Policy.
func (f *Fused) Name() string { return FusedName }

// ReadsLatency implements workload.LatencyReader: the p95 alone, which it
// compares with the SLO (never shrink while it is violated, and grow).
func (f *Fused) ReadsLatency() workload.Percentiles { return workload.PercentileP95 }

// Recommender exposes the histograms, e.g. for checkpointing.
func (f *Fused) Recommender() *vpa.Recommender { return f.rec }

// CarryOver takes from old, the policy this one replaces after a change of
// its autoscaler's spec, what old learned about the workload rather than
// read from the spec: the CPU-seconds-per-request estimate and its gain,
// the usage samples over the rate's window, the request rate's burst
// statistics and when the pods were last starved. A mode switch or new
// bounds do not change the workload; on the real node the default rebuilt
// at a Shadow→On switch started the estimate afresh and re-sized the pod
// from its first windows. The histograms travel separately (Recommender).
// It reports whether old was a *Fused; f is unchanged when not.
func (f *Fused) CarryOver(old workload.Policy) bool {
	o, ok := old.(*Fused)
	if !ok || o == nil || o == f {
		return false
	}
	f.slo, f.burst, f.starvedAt = o.slo, o.burst, o.starvedAt
	f.lag = o.lag
	f.lag.usage = usageRing{samples: slices.Clone(o.lag.usage.samples)}
	return true
}

// Recommend implements workload.Policy.
func (f *Fused) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	if err := ctx.Err(); err != nil {
		return workload.Recommendation{}, err
	}
	if err := obs.Validate(); err != nil {
		return workload.Recommendation{}, fmt.Errorf("fused: invalid observation: %w", err)
	}

	// 1. Per-pod usage normalised to ready pods; 6. memory only from windows
	// at the operating point.
	scale, ok := perReadyPodScale(&obs)
	usage, request, limit := podCPU(&obs, scale)
	starved := maxCPUPressure(&obs) >= starvedPressure
	if starved {
		f.starvedAt = obs.Time
	}
	saturated := limit > 0 && max(usage, peakPodCPU(&obs)) >= saturatedUtilisation*limit || starved
	// 11. Pods at their CPU limit: their usage is a lower bound of demand.
	sat := cpuSaturation(&obs)
	violated := obs.SLO > 0 && obs.Latency.P95 > obs.SLO
	if f.opts.BurstRatio > 0 && obs.Samples > 0 {
		f.burst.observe(obs.Time, obs.RequestRate)
	}
	// What an OOM kill needs is read before the kill is recorded: the
	// record raises the interval's peak, which the need is computed from.
	ooms := f.oomNeeds(&obs, !saturated)
	if err := f.observe(&obs, scale, ok, !violated && !saturated, !saturated); err != nil {
		return workload.Recommendation{}, fmt.Errorf("fused: %w", err)
	}
	// 3. Growth reads the p95 over the rate's window too: only once that
	// window holds nothing but the current requests.
	settled := f.lag.rollout.settled(&obs, request)
	// 8. Scale-out reads the p95 over the rate's window too: only once
	// that window holds nothing but the pods serving now.
	current := f.lag.serving.current(&obs)
	// 3. CPU-seconds per request from the usage and the rate over the same
	// period: the rate's window, when it is longer than the observation's.
	measured := ok && obs.Samples > 0
	rateCPU, rateSaturated, matched := usage*float64(obs.ReadyReplicas), saturated, true
	if obs.RateWindow > obs.Window {
		f.lag.usage.add(usageSample{end: obs.Time, cpu: rateCPU, measured: measured, saturated: saturated}, obs.RateWindow)
		rateCPU, matched, rateSaturated = f.lag.usage.mean(obs.Time, obs.RateWindow, obs.Window)
	}
	if measured && matched && obs.RequestRate > 0 && !rateSaturated {
		f.slo.observe(obs.Time, rateCPU, obs.RequestRate)
	}

	// 2. Vertical first, with the HPA target as the CPU headroom (a
	// Resource CPU goal with a Utilization target replaces the default).
	// q is the pods' CPU limit over their request (1 without a higher limit).
	q := 1.0
	if limit > request {
		q = limit / request
	}
	target := f.cpuTarget(&obs, q)
	containers := f.vertical(&obs, target, ooms)

	// 3. SLO floor on the per-pod CPU request, and vertical growth when the
	// SLO is violated although utilisation is within the HPA target.
	tolUp := f.decider.Calculator().Tolerances.ScaleUp
	maxUtil := target * (1 + tolUp)
	sizeBound := false // the pod size, not the load, limits latency
	floorNote := ""
	if _, known := f.slo.cpuPerRequest(); !known && saturated && measured && matched && obs.RequestRate > 0 && rateCPU > 0 {
		// 3. No unsaturated window yet: a saturated one's usage over its
		// arrival rate is a lower bound of s (usage is capped, arrivals
		// are not), so the floor it gives is a lower bound of the size the
		// SLO needs. It is not kept in the estimate, but the largest is
		// kept until the estimate exists: a window between them (below
		// the saturation mark, its rate's window still holding saturated
		// ones) gives neither. Only over the rate's window: a lagging rate
		// would make it no bound at all.
		f.slo.atLeast = max(f.slo.atLeast, rateCPU/obs.RequestRate)
	}
	s, known, atLeast := f.slo.perRequest()
	// 3. While the rate's window fills, the floor is unknown for want of a
	// rate to divide by, not for want of traffic: the CPU request is not
	// lowered before the SLO's need is known.
	waitRate := !known && obs.SLO > 0 && !matched
	if known && obs.SLO > 0 && request > 0 {
		sizeBound = violated && ok && !saturated && usage <= maxUtil*request
		// Grow only once the last change has taken effect, and not for a
		// window whose violation is an OOM kill's lost requests.
		grow := sizeBound && !anyOOM(&obs) && settled
		base := baseFloor(s, obs.SLO, q, maxUtil)
		spare := spareNeed(s, obs.SLO)
		// The usage the pod is sized for: the histogram's (its target
		// times the target utilisation), or the current one when higher.
		podUsage := controlledCPU(f.c, containers) * target
		if grow {
			g := max(f.slo.gain*growStep, growStep*request/base)
			if f.opts.UsageFloor {
				// The usage floor too reaches growStep times the request.
				g = max(g, (growStep*q*request-podUsage)/spare)
			}
			f.slo.gain = min(maxGain, g)
			floorNote = fmt.Sprintf("; SLOVerticalGrow(gain %.3g)", f.slo.gain)
		}
		podFloor := f.slo.gain * base
		if f.opts.UsageFloor {
			podFloor = min(podFloor, usageFloor(podUsage, f.slo.gain*spare, q))
		}
		if f.applyFloor(&obs, containers, podFloor) && floorNote == "" {
			floorNote = floorReason(s, f.slo.gain, podFloor, atLeast)
		}
	}
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

	if waitRate {
		floorNote = "; SLORateWindowFilling"
	}
	if sat.pods || waitRate {
		// 11. Never lower the CPU of pods at their limit. 3. Nor before the
		// rate's window has filled.
		f.holdCPU(&obs, containers)
	}
	if f.opts.ShrinkAfter > 0 {
		// 5. Nothing is lowered from less than shrinkAfter of history.
		f.holdYoung(&obs, containers)
	}

	// 5. Bounds: a request more than upperBand above the target is resized;
	// one within the bounds is kept, and the target says so.
	for i := range containers {
		bandBounds(&containers[i])
		f.keepWithinBounds(&obs, &containers[i])
	}

	// 7. Horizontal against the recommended per-pod CPU request (which rule
	// 5 made the request in effect). 8. An SLO violation never scales in; it
	// scales out unless the pod size, not the load, is the bottleneck (then
	// the vertical growth above answers it).
	podRequest := recommendedPodCPU(&obs, containers)
	f.pods = hpa.PodMetrics(&obs, workload.CPU, &podRequest, f.pods)
	// 4, 8, 11. The replicas a violation or saturation holds, and the one
	// more it asks for, are capacity at the size the pods run: pods grown
	// in this step give it with fewer of them. Asking for both put a new
	// 1-core replica beside a pod whose resize to 1 core the node then
	// could not hold, and held two 200m pods as two 679m ones (measured
	// on the real node, docs/real-node-rounds.md, round twenty). 7. The
	// stabilization windows count pods of the recommended size too.
	running := runningCPU(&obs, request)
	hold, more := obs.Replicas, obs.Replicas+1
	if obs.Replicas > 0 {
		hold = podsFor(running, podRequest, obs.Replicas)
		more = podsFor(running*float64(obs.Replicas+1)/float64(obs.Replicas), podRequest, obs.Replicas+1)
	}
	f.decider.SetUnit(podRequest)
	// 12. A resize the node defers: one more pod would not fit either,
	// and one fewer frees the room the deferred pod waits for.
	shed := resizeDeferred(&obs)
	floor := int32(0)
	if violated {
		floor = hold
		if !sizeBound && current && !shed {
			floor = more
		}
		if !current {
			floorNote += "; SLOWindowBeforeScaleOut"
		}
	}
	// 11. Serving pods at their limit: at least one more replica, unless a
	// pod asked for has not started yet: the capacity asked for is on its
	// way, or the nodes have no room for it, and one more pod would only
	// wait beside it (on the real node: 2 → 3 with the second pod
	// unschedulable, docs/real-node-rounds.md, round eighteen). No fewer either.
	saturatedMore := sat.serving && !unstarted(&obs) && !shed
	switch {
	case saturatedMore:
		floor = max(floor, more)
	case sat.serving && !shed:
		floor = max(floor, hold)
		floorNote += "; CPUSaturatedPodsNotStarted"
	case sat.serving:
		floor = max(floor, hold)
	}
	if (violated || sat.serving) && hold < obs.Replicas {
		floorNote += "; CapacityInGrownPods"
	}
	if shed {
		floorNote += "; ResizeDeferred"
	}
	metrics := append(f.metrics[:0], hpa.Metric{
		Name: "cpu", Kind: hpa.ResourceUtilization, Target: target, Pods: f.pods, CPU: true, Window: obs.Window,
	})
	if s, known := f.slo.cpuPerRequest(); known && obs.RequestRate > 0 && podRequest > 0 {
		// The same target expressed in requests (from an estimate of s,
		// not from rule 3's lower bound): CPU usage saturates at the
		// limit, the request rate does not.
		metrics = append(metrics, hpa.Metric{
			Name: "requests", Kind: hpa.ObjectAverageValue, Value: obs.RequestRate, Target: target * podRequest / s,
		})
	}
	// 10. Goals: each other goal proposes a count; the largest wins.
	own := len(metrics)
	metrics = f.goalMetrics(&obs, containers, metrics)
	f.metrics = metrics
	decide := f.decider.DecideAtLeast
	if shed {
		decide = f.decider.DecideShedding
	}
	dec, err := decide(obs.Time, obs.Replicas, metrics, floor)
	reason := dec.Reason
	if err != nil {
		reason = "FailedGetResourceMetric: " + err.Error()
		if i := slices.IndexFunc(dec.Errors, func(e error) bool { return e != nil }); i >= own {
			reason = "FailedGetGoalMetric: " + err.Error()
		}
		if (violated && !sizeBound && current || saturatedMore) && obs.Replicas > 0 {
			// Without metrics nothing scales in, even to grown pods.
			dec.Replicas, reason = f.decider.Normalize(obs.Time, obs.Replicas, max(more, obs.Replicas))
		}
	}
	if sat.serving {
		reason = "CPUSaturated: " + reason
	}
	if violated {
		reason = "SLOViolated: " + reason
	}
	reason += floorNote

	// 9. At maxReplicas, move the unmet horizontal factor to vertical CPU:
	// the factor of the CPU and request-rate metrics (and the SLO floor)
	// only, since bigger pods need not answer a goal metric.
	proposed := dec.Proposed
	if len(metrics) > own && dec.Metrics != nil {
		proposed = floor
		for i := range own {
			if dec.Errors[i] == nil {
				proposed = max(proposed, dec.Metrics[i].Replicas)
			}
		}
	}
	if err == nil && f.c.MaxReplicas > 0 && dec.Replicas == f.c.MaxReplicas && proposed > f.c.MaxReplicas {
		factor := float64(proposed) / float64(f.c.MaxReplicas)
		f.growCPU(&obs, containers, factor)
		for i := range containers {
			forceCPU(&containers[i])
			bandBounds(&containers[i])
			f.keepWithinBounds(&obs, &containers[i])
		}
		reason += "; MaxReplicasVerticalAbsorb"
	}
	return workload.Recommendation{Replicas: dec.Replicas, Containers: containers, Source: workload.SourceDefault, Reason: reason}, nil
}

// vertical computes the container recommendations with CPU sized as
// p(usage)/targetUtilisation instead of p(usage)·(1+margin).
// ooms[name], when set, is the memory an OOM kill of that container in this
// window needs (rule 6).
func (f *Fused) vertical(obs *workload.Observation, target float64, ooms map[string]float64) []workload.ContainerRecommendation {
	out := make([]workload.ContainerRecommendation, 0, len(obs.Containers))
	floor := f.rec.PodMinimum(len(obs.Containers))
	k := 1 / (target * (1 + f.rec.Options().SafetyMargin))
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
		if need, ok := ooms[co.Name]; ok {
			// The request the container was killed at is proven too
			// small: the target is at least the kill's need, and so is the
			// lower bound, so that rule 5 does not keep that request and
			// the updater applies the raise (as VPA's updater applies a
			// quick OOM's recommendation whatever its bounds).
			e.Target.Memory = max(e.Target.Memory, need)
			e.LowerBound.Memory = max(e.LowerBound.Memory, need)
			e.UpperBound.Memory = max(e.UpperBound.Memory, need)
		}
		out = append(out, keepUnsampled(vpa.Cap(e, p, co), s, co))
	}
	return out
}

// keepUnsampled keeps the current request of a resource whose histogram
// holds no sample yet. Rule 6 can leave the memory histogram empty while
// the CPU one fills (every window so far CPU-saturated or violating the
// SLO; a kill of saturated pods records no bump either), and an empty
// histogram's percentile is 0, which the floor turns into the pod minimum
// (250Mi): a cut of a container whose pods are being OOM-killed at their
// limit, from which the policy never recovers because the saturated
// windows that follow add no memory sample either. An empty CPU histogram
// beside a filled memory one (an OOM kill with no pod ready) would cut CPU
// the same way.
func keepUnsampled(c workload.ContainerRecommendation, s *vpa.ContainerState, co *workload.ContainerObservation) workload.ContainerRecommendation {
	for _, r := range []struct {
		res   workload.Resource
		empty bool
	}{{workload.CPU, s.CPU().IsEmpty()}, {workload.Memory, s.Memory().IsEmpty()}} {
		if !r.empty {
			continue
		}
		cur := co.Requests.Get(r.res)
		c.Target = c.Target.With(r.res, cur)
		c.LowerBound = c.LowerBound.With(r.res, cur)
		c.UpperBound = c.UpperBound.With(r.res, cur)
		c.UncappedTarget = c.UncappedTarget.With(r.res, cur)
	}
	return c
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
	return recommendedPod(obs, recs, workload.CPU)
}

// recommendedPod is recommendedPodCPU for resource res.
func recommendedPod(obs *workload.Observation, recs []workload.ContainerRecommendation, res workload.Resource) float64 {
	sum := 0.0
	for _, co := range obs.Containers {
		v := co.Requests.Get(res)
		for _, r := range recs {
			if r.Name == co.Name {
				v = r.Target.Get(res)
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

// observe feeds the histograms like vpa.Recommender.Observe with the
// per-ready-pod scale, except that memory samples are taken only when
// memory is true and OOM kills are recorded only when oom is true (see rule
// 6 of the package documentation). ok is false when no pod is ready: then
// only OOM kills are recorded.
func (f *Fused) observe(obs *workload.Observation, scale float64, ok, memory, oom bool) error {
	for i := range obs.Containers {
		co := &obs.Containers[i]
		if f.c.ContainerPolicy(co.Name).Mode == workload.ContainerModeOff {
			continue
		}
		s := f.rec.State(co.Name)
		if ok && obs.Samples > 0 {
			if err := s.AddCPUSample(obs.Time, co.Usage.CPU*scale, co.Requests.CPU); err != nil {
				return fmt.Errorf("container %q: %w", co.Name, err)
			}
			if memory {
				mem := co.Peak.Memory
				if mem == 0 {
					mem = co.Usage.Memory
				}
				if err := s.AddMemorySample(obs.Time, mem*scale); err != nil {
					return fmt.Errorf("container %q: %w", co.Name, err)
				}
			}
		}
		if oom && co.OOMKills > 0 {
			if err := s.RecordOOM(obs.Time, vpa.MemoryAtOOM(co)); err != nil {
				return fmt.Errorf("container %q: %w", co.Name, err)
			}
		}
	}
	return nil
}

// applyFloor raises the CPU targets of the containers whose CPU is
// controlled, in proportion, so that the pod's recommended CPU is at least
// podFloor (within maxAllowed), and raises their lower bounds to within
// floorBand of the new target so that the change is applied. It reports
// whether the floor raised anything.
func (f *Fused) applyFloor(obs *workload.Observation, containers []workload.ContainerRecommendation, podFloor float64) bool {
	cur := controlledCPU(f.c, containers)
	if !(cur > 0) || cur >= podFloor {
		return false
	}
	f.growCPU(obs, containers, podFloor/cur)
	for i := range containers {
		forceCPU(&containers[i])
		if f.opts.FloorBandBoth {
			// Options.FloorBandBoth: the band of forceCPU above the floor
			// too, whatever the histogram's upper bound.
			containers[i].UpperBound.CPU = containers[i].Target.CPU * (1 + floorBand)
		}
	}
	return true
}

// forceCPU raises the CPU lower bound to within floorBand of the target, so
// that a request further below the target is resized, and keeps the upper
// bound at least floorBand above it. The target set here (the SLO floor, or
// the growth at maxReplicas) is above what the histogram asks for, so the
// histogram's upper bound is below it and rule 5 would put the upper bound
// on the target itself: the floor moves with the decayed CPU-seconds per
// request every window, and each drift of a fraction of a percent below a
// request applied earlier would resize the pods again (measured: up to 48
// rolling restarts in a day of one app, each for less than 1%).
func forceCPU(c *workload.ContainerRecommendation) {
	c.LowerBound.CPU = max(c.LowerBound.CPU, c.Target.CPU*(1-floorBand))
	c.UpperBound.CPU = max(c.UpperBound.CPU, c.Target.CPU*(1+floorBand))
}

// bandBounds keeps the target within the bounds and caps the upper bound at
// upperBand times the target: the fused policy resizes an over-sized pod
// without waiting for the confidence interval of the histograms to narrow
// (the horizontal loop, not the upper bound, absorbs load changes).
func bandBounds(c *workload.ContainerRecommendation) {
	c.LowerBound = minResources(c.LowerBound, c.Target)
	c.UpperBound = maxRes(minResources(c.UpperBound, c.Target.Scale(upperBand)), c.Target)
}

// keepWithinBounds sets the target of each controlled resource whose
// current request lies within [LowerBound, UpperBound] to that request: the
// updater would not change it, so the target (which the admission controller
// gives new pods, and which the horizontal loop measures against) must not
// differ from it.
func (f *Fused) keepWithinBounds(obs *workload.Observation, c *workload.ContainerRecommendation) {
	co, ok := obs.Container(c.Name)
	if !ok {
		return
	}
	p := f.c.ContainerPolicy(c.Name)
	for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
		cur := co.Requests.Get(r)
		if p.Controls(r) && cur > 0 && cur >= c.LowerBound.Get(r) && cur <= c.UpperBound.Get(r) {
			c.Target = c.Target.With(r, cur)
		}
	}
}

// oomNeeds maps each controlled container OOM-killed in the window to the
// memory its kill needs (vpa.ContainerState.OOMNeed of the memory at the
// kill), when bumps are recorded (bump; see rule 6). nil when none was
// killed, so the common window allocates nothing.
func (f *Fused) oomNeeds(obs *workload.Observation, bump bool) map[string]float64 {
	if !bump {
		return nil
	}
	var out map[string]float64
	for i := range obs.Containers {
		co := &obs.Containers[i]
		p := f.c.ContainerPolicy(co.Name)
		if co.OOMKills == 0 || p.Mode == workload.ContainerModeOff || !p.Controls(workload.Memory) {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[co.Name] = f.rec.State(co.Name).OOMNeed(vpa.MemoryAtOOM(co))
	}
	return out
}

// anyOOM reports an OOM kill of any container in the window.
func anyOOM(obs *workload.Observation) bool {
	for _, co := range obs.Containers {
		if co.OOMKills > 0 {
			return true
		}
	}
	return false
}

// peakPodCPU sums the containers' peak per-pod CPU usage of the window.
// maxCPUPressure is the highest CPU pressure of the pod's containers.
func maxCPUPressure(obs *workload.Observation) float64 {
	p := 0.0
	for _, co := range obs.Containers {
		p = max(p, co.CPUPressure)
	}
	return p
}

func peakPodCPU(obs *workload.Observation) float64 {
	sum := 0.0
	for _, co := range obs.Containers {
		sum += co.Peak.CPU
	}
	return sum
}

// controlledCPU sums the CPU targets of the containers whose CPU the
// autoscaler controls: the pod's recommended CPU.
func controlledCPU(c workload.Constraints, containers []workload.ContainerRecommendation) float64 {
	cur := 0.0
	for i := range containers {
		if p := c.ContainerPolicy(containers[i].Name); p.Controls(workload.CPU) {
			cur += containers[i].Target.CPU
		}
	}
	return cur
}
