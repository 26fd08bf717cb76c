package fusion

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestUsageRing(t *testing.T) {
	const step = 15 * time.Second
	const w = time.Minute
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sample := func(s int, cpu float64) usageSample {
		return usageSample{end: at(s), cpu: cpu, measured: true}
	}
	for _, tc := range []struct {
		name          string
		samples       []usageSample
		now           int
		wantCPU       float64
		wantCovered   bool
		wantSaturated bool
	}{
		{"empty", nil, 60, 0, false, false},
		{"three windows of a minute's four", []usageSample{sample(30, 1), sample(45, 1), sample(60, 1)}, 60, 0, false, false},
		{"four windows cover the minute", []usageSample{sample(15, 1), sample(30, 2), sample(45, 3), sample(60, 4)}, 60, 2.5, true, false},
		{"older windows are left out of the mean", []usageSample{sample(0, 100), sample(15, 1), sample(30, 2), sample(45, 3), sample(60, 4)}, 60, 2.5, true, false},
		{"a late loop is within half a step", []usageSample{sample(22, 1), sample(37, 1), sample(52, 1), sample(67, 1)}, 67, 1, true, false},
		{"a gap in the loops keeps the covered period", []usageSample{sample(15, 2), sample(60, 4)}, 60, 3, true, false},
		{"an unmeasured window leaves it unknown", []usageSample{sample(15, 1), {end: at(30)}, sample(45, 1), sample(60, 1)}, 60, 0, false, false},
		{"a saturated window is reported", []usageSample{sample(15, 1), {end: at(30), cpu: 1, measured: true, saturated: true}, sample(45, 1), sample(60, 1)}, 60, 1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u usageRing
			for _, s := range tc.samples {
				u.add(s, w)
			}
			cpu, covered, saturated := u.mean(at(tc.now), w, step)
			if math.Abs(cpu-tc.wantCPU) > 1e-12 || covered != tc.wantCovered || saturated != tc.wantSaturated {
				t.Errorf("mean = %g, covered %v, saturated %v; want %g, %v, %v", cpu, covered, saturated, tc.wantCPU, tc.wantCovered, tc.wantSaturated)
			}
		})
	}
	t.Run("add keeps only the window", func(t *testing.T) {
		var u usageRing
		for s := 0; s <= 600; s += 15 {
			u.add(sample(s, 1), w)
		}
		if n := len(u.samples); n != 4 {
			t.Errorf("%d samples kept, want the 4 ending within the last minute", n)
		}
	})
	t.Run("a clock set back restarts", func(t *testing.T) {
		var u usageRing
		for s := 15; s <= 60; s += 15 {
			u.add(sample(s, 1), w)
		}
		u.add(sample(30, 5), w)
		if len(u.samples) != 1 || u.samples[0].cpu != 5 {
			t.Errorf("samples %+v, want only the new one", u.samples)
		}
	})
}

// promRate is what a Prometheus rate() over window reports at elapsed
// seconds since a steady rate began: the increase over the part of the
// window that held traffic, divided by the whole window.
func promRate(rate float64, elapsed, window time.Duration) float64 {
	return rate * min(elapsed.Seconds(), window.Seconds()) / window.Seconds()
}

// TestRateWindowMatchesUsage replays what the real node showed (round
// fifteen, docs/real-node-rounds.md): an autoscaler created 45 s into a steady load
// reads the request rate from a 2-minute rate() that still holds the quiet
// before the load. Divided into the current usage, that rate doubled the
// CPU-seconds per request, and the floor sized the pod for twice its need.
// With Observation.RateWindow the estimate waits for its own usage samples
// to cover the window, and is exact; until then the CPU request is held.
func TestRateWindowMatchesUsage(t *testing.T) {
	const (
		rate    = 20.0 // requests/s
		cpuSec  = 0.02 // CPU-seconds per request: 0.4 cores of load
		slo     = 0.25
		request = 1.2 // above the usage's own size, below the lagged floor
		after   = 45 * time.Second
		step    = 15 * time.Second
		window  = 2 * time.Minute
	)
	obsAt := func(elapsed time.Duration, seen float64, rateWindow time.Duration) workload.Observation {
		o := served(t0.Add(elapsed), 1, rate, cpuSec, request)
		o.RequestRate, o.RateWindow, o.SLO, o.Latency.P95 = seen, rateWindow, slo, 0.1
		return o
	}
	type result struct {
		first, last workload.Recommendation
		sFirst, s   float64 // s after the first window and at the end
		held        bool    // the CPU target stayed at the request until s was known
	}
	run := func(t *testing.T, seen func(time.Duration) float64, rateWindow time.Duration) result {
		t.Helper()
		p, err := NewPolicyFactory(Options{})(workload.Constraints{MaxReplicas: 10})
		if err != nil {
			t.Fatal(err)
		}
		f := p.(*Fused)
		r := result{held: true}
		for e := after; e <= 10*time.Minute; e += step {
			rec, err := f.Recommend(context.Background(), obsAt(e, seen(e), rateWindow))
			if err != nil {
				t.Fatal(err)
			}
			if e == after {
				r.first = rec
				r.sFirst, _ = f.slo.cpuPerRequest()
			}
			r.last = rec
			if _, known := f.slo.cpuPerRequest(); !known {
				c, _ := rec.Container("app")
				if c.Target.CPU < request || !strings.Contains(rec.Reason, "SLORateWindowFilling") && rateWindow > 0 {
					r.held = false
				}
			}
		}
		r.s, _ = f.slo.cpuPerRequest()
		return r
	}
	lagged := func(e time.Duration) float64 { return promRate(rate, e, window) }
	truth := run(t, func(time.Duration) float64 { return rate }, 0)
	before := run(t, lagged, 0) // the rate's window not said: the old reading
	matched := run(t, lagged, window)

	if math.Abs(truth.s-cpuSec) > 1e-9 {
		t.Fatalf("with the true rate s = %g, want %g", truth.s, cpuSec)
	}
	// The scenario exercises the lag: read as if it were the window's own
	// rate, the lagged rate overstates s and the floor well past the need.
	if before.sFirst < 2*cpuSec {
		t.Errorf("lagged rate read as current: first s = %g, want it overstated (the scenario does not exercise the lag)", before.sFirst)
	}
	bc, _ := before.first.Container("app")
	tc, _ := truth.first.Container("app")
	if bc.Target.CPU < 1.5*tc.Target.CPU {
		t.Errorf("lagged rate read as current: first CPU target %g, want well above the true rate's %g", bc.Target.CPU, tc.Target.CPU)
	}
	// Matched: exact once covered, and nothing lowered before.
	if math.Abs(matched.s-cpuSec) > 1e-9 {
		t.Errorf("rate window said: s = %g, want %g", matched.s, cpuSec)
	}
	if !matched.held {
		t.Errorf("rate window said: the CPU request was lowered (or the reason did not say why it was held) before s was known")
	}
	mc, _ := matched.last.Container("app")
	lc, _ := truth.last.Container("app")
	if math.Abs(mc.Target.CPU-lc.Target.CPU) > 1e-9 || matched.last.Replicas != truth.last.Replicas {
		t.Errorf("after 10 min: %d x %g with the rate window, %d x %g with the true rate", matched.last.Replicas, mc.Target.CPU, truth.last.Replicas, lc.Target.CPU)
	}
}

// TestRateWindowSaturatedLowerBound: before any unsaturated window, rule 3
// takes the saturated windows' usage over their rate as a lower bound of s.
// Over a lagging rate it is none, so it waits for the window's samples.
func TestRateWindowSaturatedLowerBound(t *testing.T) {
	p, _ := NewPolicyFactory(Options{})(workload.Constraints{MaxReplicas: 10})
	// 0.8 cores of load on a 0.2-core pod: saturated from the start.
	for i := range 12 {
		e := time.Duration(i) * 15 * time.Second
		o := served(t0.Add(e), 1, 40, 0.02, 0.2)
		o.RequestRate, o.RateWindow, o.SLO, o.Latency.P95 = promRate(40, 45*time.Second+e, 2*time.Minute), 2*time.Minute, 0.1, 2
		rec, err := p.Recommend(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		atLeast := strings.Contains(rec.Reason, "SLOCPUFloor(saturated, at least ")
		if covered := e >= 2*time.Minute-15*time.Second; atLeast != covered {
			t.Errorf("at %s: reason %q; want the saturated lower bound only once the rate's window is covered (%v)", e, rec.Reason, covered)
		}
	}
}

// TestSaturatedLowerBoundKept replays round thirty-three's first learner
// run (docs/real-node-rounds.md): three 200m pods saturated by the load
// step were consolidated to one at the floor's 916m from a saturated
// window's bound. The next window's pods were at 88% of their limit, under
// the saturation mark, while the rate's window still held the saturated
// ones: no bound and no estimate, so no floor, and the default sized the
// pods 200m again (two of them, overloaded, a minute of lost requests and
// an OOM kill). The largest bound stands until the estimate exists.
func TestSaturatedLowerBoundKept(t *testing.T) {
	const (
		cpuSec = 0.0176 // CPU-seconds per request
		slo    = 0.25
		step   = 15 * time.Second
		window = 2 * time.Minute
	)
	p, err := NewPolicyFactory(Options{})(workload.Constraints{MaxReplicas: 10, Containers: []workload.ContainerPolicy{{Name: "*", MaxAllowed: workload.Resources{CPU: 1, Memory: 1 << 30}}}})
	if err != nil {
		t.Fatal(err)
	}
	f := p.(*Fused)
	cpuOf := func(rec workload.Recommendation) float64 {
		c, _ := rec.Container("app")
		return c.Target.CPU
	}
	recommend := func(o workload.Observation) workload.Recommendation {
		t.Helper()
		o.RateWindow, o.SLO = window, slo
		rec, err := f.Recommend(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	// 40 requests/s on three 200m pods: 0.7 cores of load on 0.6, every
	// window at the limit, the p95 far over the SLO.
	var last workload.Recommendation
	e := time.Duration(0)
	for ; e <= 3*time.Minute; e += step {
		o := served(t0.Add(e), 3, 40, cpuSec, 0.2)
		o.Latency.P95 = 0.9
		last = recommend(o)
	}
	if !strings.Contains(last.Reason, "SLOCPUFloor(saturated, at least ") {
		t.Fatalf("after three saturated minutes the reason is %q, want the saturated bound's floor (the test does not exercise it)", last.Reason)
	}
	bounded := cpuOf(last)
	if bounded <= 0.2 {
		t.Fatalf("the saturated bound's floor is %g cores, want it above the 200m pods", bounded)
	}
	// The next window: the same pods at 88% of their limit (30 requests/s),
	// the rate's window still holding the saturated ones.
	o := served(t0.Add(e), 3, 30, cpuSec, 0.2)
	o.Latency.P95 = 0.9
	if _, known := f.slo.cpuPerRequest(); known {
		t.Fatal("an estimate exists before the unsaturated window: the test does not exercise the gap")
	}
	between := recommend(o)
	if _, known := f.slo.cpuPerRequest(); known {
		t.Fatal("the window whose rate's window holds saturated ones gave an estimate: the test does not exercise the gap")
	}
	if got := cpuOf(between); got < bounded*(1-floorBand) || !strings.Contains(between.Reason, "SLOCPUFloor(saturated, at least ") {
		t.Errorf("the window between: CPU target %g (%q), want the kept bound's floor, at least %g", got, between.Reason, bounded*(1-floorBand))
	}
	// Unsaturated windows for the rate's whole window: the estimate takes over.
	for e += step; e <= 6*time.Minute; e += step {
		o := served(t0.Add(e), 3, 30, cpuSec, 0.2)
		o.Latency.P95 = 0.1
		last = recommend(o)
	}
	s, known := f.slo.cpuPerRequest()
	if !known || math.Abs(s-cpuSec) > 1e-9 {
		t.Fatalf("after three unsaturated minutes s = %g (known %v), want %g", s, known, cpuSec)
	}
	if got, _, bound := f.slo.perRequest(); bound || got != s {
		t.Errorf("perRequest = %g (bound %v) once the estimate exists, want the estimate %g", got, bound, s)
	}
	if strings.Contains(last.Reason, "saturated, at least") {
		t.Errorf("the floor still names the saturated bound once the estimate exists: %q", last.Reason)
	}
}

func TestCarryOver(t *testing.T) {
	factory := NewPolicyFactory(Options{BurstRatio: 2, TargetOfLimit: true})
	old, _ := factory(workload.Constraints{MaxReplicas: 10})
	for i := range 20 {
		o := served(t0.Add(time.Duration(i)*15*time.Second), 2, 20, 0.02, 1)
		o.RateWindow, o.SLO, o.Latency.P95 = time.Minute, 0.25, 0.1
		if _, err := old.Recommend(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	o := old.(*Fused)
	if _, known := o.slo.cpuPerRequest(); !known {
		t.Fatal("the old policy learned no estimate: the test does not exercise the carry")
	}
	p, _ := factory(workload.Constraints{MaxReplicas: 20})
	f := p.(*Fused)
	if !f.CarryOver(old) {
		t.Fatal("CarryOver of a *Fused returned false")
	}
	if f.slo != o.slo || f.burst != o.burst || !f.starvedAt.Equal(o.starvedAt) || len(f.lag.usage.samples) != len(o.lag.usage.samples) {
		t.Errorf("carried slo %+v burst %+v usage %d; old slo %+v burst %+v usage %d", f.slo, f.burst, len(f.lag.usage.samples), o.slo, o.burst, len(o.lag.usage.samples))
	}
	f.lag.usage.samples[0].cpu = -1
	if o.lag.usage.samples[0].cpu == -1 {
		t.Error("the carried usage samples share the old policy's array")
	}
	naive, _ := NewNaiveFactory(Options{})(workload.Constraints{MaxReplicas: 10})
	fresh, _ := factory(workload.Constraints{MaxReplicas: 10})
	for _, tc := range []struct {
		name string
		old  workload.Policy
	}{{"another policy", naive}, {"nil", nil}, {"itself", fresh}} {
		t.Run(tc.name, func(t *testing.T) {
			if fresh.(*Fused).CarryOver(tc.old) {
				t.Errorf("CarryOver(%s) = true", tc.name)
			}
			if _, known := fresh.(*Fused).slo.cpuPerRequest(); known {
				t.Errorf("CarryOver(%s) changed the policy", tc.name)
			}
		})
	}
}

// TestGrowthWaitsForTheLatencyWindow: the p95 over the rate's window still
// holds the latencies of the pod before its resize, so a violation read
// in that window does not grow the pod (and its gain for good); one read
// after it does. Without a rate window (the simulator) it grows at once.
func TestGrowthWaitsForTheLatencyWindow(t *testing.T) {
	const window = 2 * time.Minute
	for _, tc := range []struct {
		name       string
		rateWindow time.Duration
		firstGrow  time.Duration // after the resize
	}{
		{"latency over the rate window", window, window},
		{"latency over the observation's window", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := NewPolicyFactory(Options{})(workload.Constraints{MaxReplicas: 10})
			f := p.(*Fused)
			step := func(at time.Duration, request, p95 float64) workload.Recommendation {
				t.Helper()
				o := served(t0.Add(at), 1, 15, 0.02, request)
				o.RateWindow, o.SLO, o.Latency.P95 = tc.rateWindow, 0.25, p95
				rec, err := f.Recommend(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				return rec
			}
			var at time.Duration
			for ; at < 5*time.Minute; at += 15 * time.Second {
				step(at, 0.6, 0.1)
			}
			if f.slo.gain != 1 {
				t.Fatalf("gain %g before the resize, want 1", f.slo.gain)
			}
			resized := at
			grewAt := time.Duration(-1)
			for ; at < resized+4*time.Minute && grewAt < 0; at += 15 * time.Second {
				if rec := step(at, 0.8, 0.5); strings.Contains(rec.Reason, "SLOVerticalGrow") {
					grewAt = at - resized
				}
			}
			if grewAt != tc.firstGrow {
				t.Errorf("first growth %s after the resize, want %s", grewAt, tc.firstGrow)
			}
		})
	}
}

// TestScaleOutWaitsForTheLatencyWindow replays what the real node showed
// (round seventeen, docs/real-node-rounds.md): a p95 over the rate's window still
// holds a violation the pods serving now did not cause, so rule 8 adds a
// replica only once every asked-for pod is Ready and the window began after
// the Ready pods last grew in number. With the latency over the
// observation's own window it adds one at once, as before. The smallest
// pod growing restarts the window too (round twenty-five: a deferred 200m
// pod shed, the other grown, two more minutes of the old p95).
func TestScaleOutWaitsForTheLatencyWindow(t *testing.T) {
	const window = 2 * time.Minute
	type step struct {
		replicas, ready int32
		violated        bool
		request         float64   // the pods' CPU request; 0 is 0.2
		pods            []float64 // per-pod samples: the Ready pods' requests
	}
	steady := func(n int, replicas, ready int32, violated bool) []step {
		s := make([]step, n)
		for i := range s {
			s[i] = step{replicas, ready, violated, 0, nil}
		}
		return s
	}
	// resized is steady with the pods at 0.4 core.
	resized := func(n int, replicas, ready int32, violated bool) []step {
		s := steady(n, replicas, ready, violated)
		for i := range s {
			s[i].request = 0.4
		}
		return s
	}
	// uneven is n steps of Ready pods with these requests.
	uneven := func(n int, violated bool, pods ...float64) []step {
		s := make([]step, n)
		for i := range s {
			s[i] = step{int32(len(pods)), int32(len(pods)), violated, pods[0], pods}
		}
		return s
	}
	for _, tc := range []struct {
		name       string
		rateWindow time.Duration
		steps      []step // after ten calm minutes at 2 of 2 Ready
		want       int32  // replicas recommended at the last step
		waiting    bool   // the reason says the window predates the pods
	}{
		{"violation on the pods serving for long", window, steady(1, 2, 2, true), 3, false},
		{"a pod asked for is not Ready", window, steady(1, 3, 2, true), 3, true},
		{"a third pod Ready for 30 s", window, append(steady(2, 3, 3, false), steady(1, 3, 3, true)...), 3, true},
		{"a third pod Ready for the whole window", window, append(steady(8, 3, 3, false), steady(1, 3, 3, true)...), 4, false},
		{"a pod lost within the window", window, append(steady(2, 2, 1, false), steady(1, 1, 1, true)...), 2, false},
		{"the pods resized up 30 s ago", window, append(resized(2, 2, 2, false), resized(1, 2, 2, true)...), 2, true},
		{"the pods resized up for the whole window", window, append(resized(8, 2, 2, false), resized(1, 2, 2, true)...), 3, false},
		{"the pods resized down 30 s ago", window, append(resized(40, 2, 2, false), append(steady(2, 2, 2, false), steady(1, 2, 2, true)...)...), 3, false},
		{"the small pod shed, the other grown, 30 s ago", window, append(uneven(8, false, 0.7, 0.2), append(uneven(2, false, 0.7), uneven(1, true, 0.7)...)...), 1, true},
		{"the small pod shed, the other grown, for the whole window", window, append(uneven(8, false, 0.7, 0.2), append(uneven(8, false, 0.7), uneven(1, true, 0.7)...)...), 2, false},
		{"the big pod lost 30 s ago", window, append(uneven(8, false, 0.7, 0.2), append(uneven(2, false, 0.2), uneven(1, true, 0.2)...)...), 2, false},
		{"latency over the observation's window: pending pods", 0, steady(1, 3, 2, true), 4, false},
		{"latency over the observation's window: a pod Ready for 15 s", 0, append(steady(1, 3, 3, false), steady(1, 3, 3, true)...), 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicyFactory(Options{})(workload.Constraints{MaxReplicas: 10})
			if err != nil {
				t.Fatal(err)
			}
			all := append(steady(40, 2, 2, false), tc.steps...)
			var rec workload.Recommendation
			for i, s := range all {
				request := s.request
				if request == 0 {
					request = 0.2
				}
				o := observation(t0.Add(time.Duration(i)*15*time.Second), s.replicas, 0.1, request)
				o.ReadyReplicas, o.RateWindow, o.SLO, o.Latency.P95 = s.ready, tc.rateWindow, 0.25, 0.1
				for j, r := range s.pods {
					o.Pods = append(o.Pods, workload.PodSample{Name: fmt.Sprintf("app-%d", j), Ready: true, HasMetrics: true,
						Usage: workload.Resources{CPU: 0.1, Memory: 300 << 20}, Requests: workload.Resources{CPU: r, Memory: 1 << 30}})
				}
				if s.violated {
					o.Latency.P95 = 0.5
				}
				if rec, err = p.Recommend(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			waiting := strings.Contains(rec.Reason, "SLOWindowBeforeScaleOut")
			if rec.Replicas != tc.want || waiting != tc.waiting || !strings.Contains(rec.Reason, "SLOViolated") {
				t.Errorf("replicas %d, reason %q; want %d, waiting for the window %v", rec.Replicas, rec.Reason, tc.want, tc.waiting)
			}
		})
	}
}

// TestServingCapacity: the Ready pods' CPU in effect from the per-pod
// samples (a pod whose resize waits counts at its old size; an unready one
// not at all), else the Ready count times the containers' requests.
func TestServingCapacity(t *testing.T) {
	pod := func(ready bool, cpu float64) workload.PodSample {
		return workload.PodSample{Ready: ready, Requests: workload.Resources{CPU: cpu}}
	}
	for _, tc := range []struct {
		name string
		obs  workload.Observation
		want float64
	}{
		{"per-pod samples", workload.Observation{ReadyReplicas: 2, Pods: []workload.PodSample{pod(true, 0.687), pod(true, 0.2), pod(false, 0.687)}}, 0.887},
		{"no samples", workload.Observation{ReadyReplicas: 3, Containers: []workload.ContainerObservation{
			{Requests: workload.Resources{CPU: 0.5}}, {Requests: workload.Resources{CPU: 0.1}}}}, 1.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := servingCapacity(&tc.obs); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("capacity %g, want %g", got, tc.want)
			}
		})
	}
}
