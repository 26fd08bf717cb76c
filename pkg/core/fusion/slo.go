package fusion

import (
	"fmt"
	"math"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Constants of the SLO-aware CPU floor (see the package documentation).
const (
	// tailFactor is ln(20): the p95 of an exponential delay in units of its
	// mean. A processor-sharing pod with spare capacity x cores serves a
	// request of s CPU-seconds in s/x on average, so its p95 is about
	// tailFactor·s/x.
	tailFactor = 2.995732273553991
	// cpuPerRequestHalfLife weighs the CPU-seconds-per-request estimate.
	cpuPerRequestHalfLife = time.Hour
	// saturatedUtilisation of the CPU limit marks a pod as CPU-bound: its
	// usage is capped, a backlog forms, and neither its usage per request
	// nor its working set describe the workload at its operating point.
	saturatedUtilisation = 0.9
	// starvedPressure of CPU pressure marks a pod as CPU-bound below its
	// limit: its node did not give it the CPU it wanted for at least this
	// share of the window, so, as at the limit, a backlog forms. Measured on
	// packed simulated nodes (docs/results/evidence-cost.md), 0.01 removes nearly all the
	// memory that starved pods' OOM bumps added and 0.1 a little more than
	// half; 0.05 leaves room for the pressure a busy node shows without
	// starving anyone (PSI counts any wait of any of the pod's threads).
	starvedPressure = 0.05
	// growStep is the vertical step taken when the SLO is violated at a
	// utilisation the horizontal loop is content with.
	growStep = 1.25
	// maxGain bounds the learned correction of the floor (SLO/(SLO−W) for
	// a non-CPU latency W, so 10 allows W up to 90% of the SLO).
	maxGain = 10
	// minSpare is the smallest spare fraction of the request assumed in the
	// floor's denominator, so that a target utilisation near or above the
	// limit cannot make the floor infinite.
	minSpare = 0.1
	// floorBand: a request within this fraction below the floor is left
	// alone (no rolling restart for a few percent).
	floorBand = 0.1
	// upperBand: a request more than this factor above the target is
	// resized down.
	upperBand = 1.5
)

// sloState is the fused policy's memory for the SLO rule.
type sloState struct {
	// cpuSum and rateSum are exponentially decayed sums of the workload's
	// total CPU usage (cores) and request rate (1/s) over windows whose
	// pods were not CPU-saturated; their ratio is CPU-seconds per request.
	cpuSum, rateSum float64
	last            time.Time
	// gain ≥ 1 multiplies the floor; it grows when the SLO is violated at
	// low utilisation (the floor under-estimated the need, e.g. because of
	// latency that is not CPU: I/O, remote calls).
	gain float64
	// atLeast is the largest lower bound of the CPU-seconds per request
	// that a saturated window gave (its usage over its rate), 0 before
	// any. It stands in for the estimate until the estimate exists.
	atLeast float64
}

// perRequest returns the CPU-seconds per request that rule 3's floor is
// computed from: the estimate once an unsaturated window gave one, else
// the largest saturated lower bound seen (bound true), and false before
// either.
func (s *sloState) perRequest() (cpuPerReq float64, known, bound bool) {
	if c, ok := s.cpuPerRequest(); ok {
		return c, true, false
	}
	if s.atLeast > 0 {
		return s.atLeast, true, true
	}
	return 0, false, false
}

// observe updates the CPU-seconds-per-request estimate from a window in
// which the ready pods used totalCPU cores while serving rate requests/s.
func (s *sloState) observe(now time.Time, totalCPU, rate float64) {
	if !s.last.IsZero() {
		d := decay(s.last, now, cpuPerRequestHalfLife)
		s.cpuSum *= d
		s.rateSum *= d
	}
	if now.After(s.last) {
		s.last = now
	}
	s.cpuSum += totalCPU
	s.rateSum += rate
}

// cpuPerRequest returns the estimated CPU-seconds per request, and false
// before any usable window.
func (s *sloState) cpuPerRequest() (float64, bool) {
	if !(s.rateSum > 0) || !(s.cpuSum > 0) {
		return 0, false
	}
	return s.cpuSum / s.rateSum, true
}

// usageRing keeps the workload's total CPU usage of recent windows, one
// sample per observation, so that it can be averaged over the request
// rate's window (Observation.RateWindow). CPU-seconds per request is then a
// ratio of two means over the same period. Dividing the current usage by a
// rate over minutes overstates it after a load rises, and above all while
// the rate's window still holds the quiet before the traffic began. On the
// real node an autoscaler created 45 s into the load read half the rate
// from a 2-minute window, estimated twice the CPU per request, and sized a
// 0.6-core pod at 1 core; the estimate, with its one-hour half-life, kept
// it there (docs/real-node-rounds.md, round fifteen).
type usageRing struct {
	samples []usageSample
}

// usageSample is one window's total CPU of the ready pods (cores).
// measured is false when the window had no usable usage; saturated when
// its pods were CPU-bound, so its usage is a lower bound of the demand.
type usageSample struct {
	end                 time.Time
	cpu                 float64
	measured, saturated bool
}

// add appends s and drops what ends at or before s.end − keep. A sample
// not after the newest one (a clock set back) restarts the ring: the
// samples' order is what mean relies on.
func (u *usageRing) add(s usageSample, keep time.Duration) {
	if n := len(u.samples); n > 0 && !s.end.After(u.samples[n-1].end) {
		u.samples = u.samples[:0]
	}
	cut := 0
	for cut < len(u.samples) && !u.samples[cut].end.After(s.end.Add(-keep)) {
		cut++
	}
	u.samples = append(u.samples[:copy(u.samples, u.samples[cut:])], s)
}

// mean returns the mean CPU of the samples ending in (now − w, now], and
// whether they cover that period: the oldest of them began (step before
// its end) no later than half a step after now − w, and every one was
// measured. saturated reports that any of them was CPU-bound.
func (u *usageRing) mean(now time.Time, w, step time.Duration) (cpu float64, covered, saturated bool) {
	from := now.Add(-w)
	n, oldest := 0, time.Time{}
	for _, s := range u.samples {
		if !s.end.After(from) || s.end.After(now) {
			continue
		}
		if !s.measured {
			return 0, false, false
		}
		if n == 0 {
			oldest = s.end
		}
		n++
		cpu += s.cpu
		saturated = saturated || s.saturated
	}
	if n == 0 || oldest.Add(-step).After(from.Add(step/2)) {
		return 0, false, saturated
	}
	return cpu / float64(n), true, saturated
}

// rolloutClock remembers since when every pod has run the current CPU
// request, so that rule 3 grows a pod only for a violation its current
// size caused. The p95 is a histogram quantile over the rate's window
// (Observation.RateWindow): for that long after a resize it still holds
// the latencies of the smaller pod. On the real node a pod resized from
// 0.2 to 0.6 core, whose p95 then fell to a tenth of the SLO, was grown to
// 0.78 and 0.98 core 30 and 45 s later, and its gain kept.
type rolloutClock struct {
	request float64
	since   time.Time
}

// settled reports whether obs's p95 describes the pods at request: they
// all run it and have since the start of the latency's window. It is
// rolledOut when the latency covers only the observation's own window
// (RateWindow not longer than Window), as in the simulator.
func (c *rolloutClock) settled(obs *workload.Observation, request float64) bool {
	if !rolledOut(obs, request) {
		c.since = time.Time{}
		return false
	}
	if c.since.IsZero() || c.request != request {
		c.request, c.since = request, obs.Time
	}
	return obs.RateWindow <= obs.Window || obs.Time.Sub(c.since) >= obs.RateWindow
}

// servingClock remembers when the Ready pods last grew, in number or in
// the CPU they run with, so that rule 8 adds a replica only for a
// violation the pods serving now caused. The p95 is a histogram quantile
// over the rate's window: for that long after a scale-out, or a resize,
// it still holds the latencies of the smaller capacity. On the real node a
// load step during the rate's first window had the default add one
// replica every 15 s up to 8 (docs/real-node-rounds.md, round seventeen),
// although every window's own p95 was under the SLO after the third pod
// served and pods 4 to 8 could not be scheduled; and a second pod resized
// from 200m to 585m 91 s before was followed by a third that the node
// could not schedule, every window's own p95 at 17 ms (round twenty-one).
// The smallest Ready pod growing restarts the clock too, whatever the
// total: with the requests spread evenly, the smallest pod's queue makes
// the p95, and once a deferred resize had kept a 200m pod beside a 742m
// one, shedding the small pod and growing the other to 703m left the
// 2-minute p95 over the SLO for two more minutes, every window's own p95
// at 25–50 ms, and rule 8 asked a second 703m pod the node could not
// place (round twenty-five).
type servingClock struct {
	seen  bool
	ready int32
	// capacity is the CPU requests the Ready pods run with (cores), and
	// smallest the smallest of them per pod.
	capacity, smallest float64
	// since is when ready, capacity or smallest last grew; zero when they
	// were there at the first observation (they then count as having
	// served for long).
	since time.Time
}

// servingCapacity is the CPU requests the Ready pods run with: their
// samples' (the requests in effect) when the observation has per-pod
// samples, else the Ready count times the containers' requests.
func servingCapacity(obs *workload.Observation) float64 {
	var c float64
	if len(obs.Pods) == 0 {
		for _, co := range obs.Containers {
			c += co.Requests.CPU
		}
		return c * float64(obs.ReadyReplicas)
	}
	for _, p := range obs.Pods {
		if p.Ready {
			c += p.Requests.CPU
		}
	}
	return c
}

// smallestServing is the CPU request of the smallest Ready pod: from the
// samples when the observation has per-pod samples (0 with none Ready),
// else the containers' requests, which every pod runs with.
func smallestServing(obs *workload.Observation) float64 {
	if len(obs.Pods) == 0 {
		var c float64
		for _, co := range obs.Containers {
			c += co.Requests.CPU
		}
		return c
	}
	smallest := math.Inf(1)
	for _, p := range obs.Pods {
		if p.Ready {
			smallest = min(smallest, p.Requests.CPU)
		}
	}
	if math.IsInf(smallest, 1) {
		return 0
	}
	return smallest
}

// current reports whether a violation in obs's p95 can be laid to the pods
// serving now: every pod the spec asks for is Ready (the capacity asked for
// and not serving yet is on its way), and the latency's window began after
// the Ready pods last grew in number, in CPU or in the smallest pod's CPU.
// It is always true when the latency covers only the observation's own
// window (RateWindow not longer than Window), as in the simulator without
// a rate window: that p95 is current. Fewer Ready pods, or smaller ones,
// do not reset the clock: a violation after a pod was lost is no less the
// current pods' (unless the pod lost was the smallest).
func (c *servingClock) current(obs *workload.Observation) bool {
	capacity, smallest := servingCapacity(obs), smallestServing(obs)
	switch ready := obs.ReadyReplicas; {
	case !c.seen:
		c.seen = true
	case ready > c.ready || capacity > c.capacity*(1+1e-9) || smallest > c.smallest*(1+1e-9):
		c.since = obs.Time
	}
	c.ready, c.capacity, c.smallest = obs.ReadyReplicas, capacity, smallest
	if obs.RateWindow <= obs.Window {
		return true
	}
	if obs.ReadyReplicas < obs.Replicas {
		return false
	}
	return c.since.IsZero() || obs.Time.Sub(c.since) >= obs.RateWindow
}

// baseFloor is the per-pod CPU request (cores) below which a request's p95
// would exceed the SLO when the pod runs at the highest utilisation the
// horizontal loop tolerates, before the learned gain: with s CPU-seconds per
// request, limit/request ratio q and utilisation at most u of the request,
// the spare capacity of the limit is (q − u)·request and must be at least
// ln(20)·s/SLO.
func baseFloor(cpuPerReq, slo, limitRatio, maxUtil float64) float64 {
	return spareNeed(cpuPerReq, slo) / math.Max(limitRatio-maxUtil, minSpare)
}

// floorReason is rule 3's note when the floor raised the CPU request:
// the CPU-seconds per request s it was computed from, the gain and the
// per-pod floor, so that an event says why two runs of the same workload
// were sized differently (on the real node, runs one loop phase apart
// sized the same pod 745m and 866m from the same traffic). atLeast marks
// s as a saturated window's lower bound.
func floorReason(s, gain, floor float64, atLeast bool) string {
	bound := ""
	if atLeast {
		bound = "saturated, at least "
	}
	return fmt.Sprintf("; SLOCPUFloor(%s%.3gms/request, gain %.3g: %.0fm)", bound, s*1000, gain, floor*1000)
}

// spareNeed is the spare CPU (cores) a pod's limit must keep above its
// usage for a request's p95 to stay within the SLO: ln(20)·s/SLO.
func spareNeed(cpuPerReq, slo float64) float64 {
	return tailFactor * cpuPerReq / slo
}

// usageFloor is the per-pod CPU request that keeps spare (the spare need
// times the gain) above the usage podUsage the pod carries, under a limit
// limitRatio times the request. Below the usage at which the horizontal
// loop would scale out it is lower than baseFloor: baseFloor sizes every
// pod for the highest utilisation the horizontal loop tolerates, which a
// pod of that size reaches only when it carries far more than its load
// (measured on the real node: a 1-core pod for 0.2 cores of load, since
// with requests equal to limits the 12% of spare an 88% utilisation leaves
// must hold the whole ln(20)·s/SLO).
func usageFloor(podUsage, spare, limitRatio float64) float64 {
	return (podUsage + spare) / limitRatio
}

// podCPU sums the CPU of the observation's containers: per ready pod usage
// (scaled), requests and limits (limit 0 when any container has none).
func podCPU(obs *workload.Observation, scale float64) (usage, request, limit float64) {
	unlimited := false
	for _, co := range obs.Containers {
		usage += co.Usage.CPU * scale
		request += co.Requests.CPU
		limit += co.Limits.CPU
		if co.Limits.CPU <= 0 {
			unlimited = true
		}
	}
	if unlimited {
		limit = 0
	}
	return usage, request, limit
}

// rolledOut reports whether every pod runs the current requests and is
// ready: a vertical change has fully taken effect.
func rolledOut(obs *workload.Observation, podRequest float64) bool {
	if obs.ReadyReplicas != obs.Replicas {
		return false
	}
	for _, p := range obs.Pods {
		if !p.Ready || math.Abs(p.Requests.CPU-podRequest) > 1e-9*math.Max(1, podRequest) {
			return false
		}
	}
	return true
}

// burstHalfLife weighs the request rate's peak and mean for the burst gate.
const burstHalfLife = time.Hour

// burstState tracks the request rate's exponentially decayed peak and mean.
type burstState struct {
	peak, mean float64
	last       time.Time
}

func (b *burstState) observe(now time.Time, rate float64) {
	if b.last.IsZero() {
		b.peak, b.mean, b.last = rate, rate, now
		return
	}
	d := decay(b.last, now, burstHalfLife)
	if now.After(b.last) {
		b.last = now
	}
	b.peak = max(rate, b.peak*d)
	b.mean = d*b.mean + (1-d)*rate
}

// ratio is the decayed peak over the decayed mean (1 before any rate).
func (b *burstState) ratio() float64 {
	if !(b.mean > 0) {
		return 1
	}
	return b.peak / b.mean
}

// decay is the weight left to what was observed at last when now is
// halfLife-weighted: 1 unless now is after last.
func decay(last, now time.Time, halfLife time.Duration) float64 {
	if !now.After(last) {
		return 1
	}
	return math.Exp2(-float64(now.Sub(last)) / float64(halfLife))
}
