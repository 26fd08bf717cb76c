package simside

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// Runs the simulator made from a known app must give that app back: the
// calibration measures what the simulator's model produces, so any bias
// here would be the method's own.
func TestCalibrateRecoversKnownApp(t *testing.T) {
	for _, tc := range []struct {
		name                                   string
		mean                                   string
		cpu, base, perRequest, startup, iowait float64
		// burst: the app's latency follows the burst model
		// (sim.App.CPUBurst), which the calibration must recognise.
		burst bool
		// idle is the CPU a Ready pod uses with no requests (sim.App.BaseCPU),
		// replayed with each window's usage its arrivals' work.
		idle float64
	}{
		{"the harness's app", "16", 0.020, 48 * sim.MiB, 1 * sim.MiB, 20, 0.005, false, 0},
		{"heavier, slower to start", "8", 0.030, 80 * sim.MiB, 2 * sim.MiB, 35, 0, false, 0},
		{"the harness's app, CFS bursts", "16", 0.020, 48 * sim.MiB, 1 * sim.MiB, 20, 0.005, true, 0},
		{"the real node's app: idle CPU, CFS bursts", "20", 0.0125, 48 * sim.MiB, 1 * sim.MiB, 20, 0.005, true, 0.015},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := settings()
			set["mean"] = tc.mean
			app := known(tc.cpu, tc.base, tc.perRequest, tc.startup, tc.iowait)
			// The p95 fit reads each window's mean Ready pod, which is
			// its pods' only when they are alike: the VPA's admitted pods
			// are not (a mixture's p95 is its slower pod's), so its new
			// pods take what its updater let through here.
			app.Timing.NoVPAAdmission = true
			if tc.burst {
				app.Throttling.Burst, app.Throttling.BurstIOWait = true, app.Throttling.IOWait
			}
			reps := 3
			if tc.idle > 0 {
				app.CPUFitted, app.BaseCPU, app.CPUPerRequest, app.SampledUsage = true, Estimate{Value: tc.idle}, Estimate{Value: tc.cpu}, true
				// Each window's usage varies with its arrivals: over 3
				// repetitions the CPU fit is off by up to 3%, which the
				// burst model's I/O wait, read at loads near the limit,
				// turns into 20 ms. 6 bring it within 1%.
				reps = 6
			}
			runs := replayAll(t, app, set, reps)
			c, err := Calibrate(runs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !c.CPUFitted {
				t.Fatalf("CPU fit not taken: %s", c.CPUFitReason)
			}
			within(t, "CPU seconds per request (fit)", c.CPUPerRequest.Value, tc.cpu, 0.03*tc.cpu)
			within(t, "idle CPU per pod", c.BaseCPU.Value, tc.idle, 0.003)
			if tc.idle == 0 {
				within(t, "CPU seconds per request", c.CPUSecondsPerRequest.Value, tc.cpu, 0.03*tc.cpu)
			}
			within(t, "base memory", c.BaseMemory.Value, tc.base, 0.03*tc.base)
			within(t, "memory per request", c.MemoryPerRequest.Value, tc.perRequest, 0.05*tc.perRequest)
			within(t, "start-up", c.StartupSeconds.Value, tc.startup, 0.5)
			if !c.Throttling.Resolved {
				t.Fatalf("throttling unresolved: %s", c.Throttling.Reason)
			}
			// The simulator's own shape: its slope and its I/O wait (the
			// latter small beside p95s of a second, so absolutely).
			// The slope carries the CPU per request's error (1–2% here: the
			// simulator's usage follows the rate, its answers the Poisson
			// arrivals) amplified by 1/(1−ρ) through S/(1−ρ).
			if !tc.burst {
				// The burst model's p95 is off the free line by ln(20)·S,
				// which varies with the pod size, so its slope is not ln 20.
				within(t, "p95 slope", c.Throttling.Slope.Value, math.Log(20), 0.1*math.Log(20))
			}
			if c.Throttling.Burst != tc.burst {
				t.Errorf("burst latency model chosen: %v, want %v (median log errors: fluid %.3f, burst %.3f)", c.Throttling.Burst, tc.burst, c.Throttling.FluidError, c.Throttling.BurstError)
			}
			within(t, "I/O wait", c.Throttling.SimIOWait(), tc.iowait, 0.01)
			// The free line is the fluid model's shape; the burst model's
			// p95 is off it by ln(20)·S, which varies with the pod size.
			if c.MemoryR2 < 0.99 || (!tc.burst && c.Throttling.R2 < 0.99) {
				t.Errorf("R² memory %.4f, p95 %.4f: want ≥ 0.99 on the model's own data", c.MemoryR2, c.Throttling.R2)
			}
			if c.Runs != len(runs) || c.MemoryWindows < MinFitWindows {
				t.Errorf("runs %d (want %d), memory windows %d", c.Runs, len(runs), c.MemoryWindows)
			}
			var b strings.Builder
			if err := c.Write(&b); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"CPU per request", "idle CPU per pod", "CPU fit", "memory per request", "R²", "start-up", "ln 20", "1.3 cores"} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("calibration report lacks %q:\n%s", want, b.String())
				}
			}
		})
	}
}

// calm returns n synthetic calm windows of one Ready pod of 100m at 2
// requests/s, with p95 and memory varying so the memory fit is defined.
func calm(n int) []result.Window {
	var ws []result.Window
	for i := range n {
		ready := 1 + i%2
		ws = append(ws, result.Window{
			Index: i, Start: float64(15 * i), End: float64(15 * (i + 1)),
			Expected: float64(30 * ready), Sent: 30 * ready, OK: 30 * ready,
			P95: 0.3 + 0.01*float64(i%3), Replicas: ready, Ready: ready,
			CPURequested: 0.1 * float64(ready), MemoryRequested: 96 * sim.MiB * float64(ready),
			CPUUsed: 0.01 * float64(ready),
		})
		// 50 MiB a pod and 1 MiB a request in flight, exactly.
		ws[i].MemoryUsed = float64(ready)*50*sim.MiB + inFlight(ws[i], 0)*sim.MiB
	}
	return ws
}

func TestCalibrateRefuses(t *testing.T) {
	good := result.Run{Policy: "fused", SLO: 0.25, Window: 15, CPUSecondsPerRequest: 0.02, StartupSeconds: []float64{12}, Windows: calm(20)}
	for _, tc := range []struct {
		name string
		runs func() []result.Run
		want string
	}{
		{"no runs", func() []result.Run { return nil }, "no runs"},
		{"no CPU per request", func() []result.Run { r := good; r.CPUSecondsPerRequest = 0; return []result.Run{r} }, "CPU seconds per request"},
		{"no start-up", func() []result.Run { r := good; r.StartupSeconds = nil; return []result.Run{r} }, "start-up delay is unmeasured"},
		{"too few calm windows", func() []result.Run {
			r := good
			r.Windows = calm(MinFitWindows + calmBefore - 1)
			return []result.Run{r}
		}, "calm windows with memory usage"},
		{"every window scaled", func() []result.Run {
			r := good
			r.Windows = calm(20)
			for i := range r.Windows {
				r.Windows[i].ReplicaChanges = 1
			}
			return []result.Run{r}
		}, "calm windows with memory usage"},
		{"memory collinear with pods", func() []result.Run {
			r := good
			r.Windows = calm(20)
			for i := range r.Windows {
				r.Windows[i].Sent, r.Windows[i].OK, r.Windows[i].P95 = 0, 0, 0 // nothing in flight
			}
			return []result.Run{r}
		}, "collinear"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Calibrate(tc.runs(), Options{})
			if !errors.Is(err, ErrThinData) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Calibrate: %v, want ErrThinData naming %q", err, tc.want)
			}
		})
	}
	t.Run("good data calibrates, throttling unresolved", func(t *testing.T) {
		// Every window has the same load on the same size of pod: the p95
		// cannot be fitted against it, the rest can.
		c, err := Calibrate([]result.Run{good}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Throttling.Resolved || !strings.Contains(c.Throttling.Reason, "collinear") {
			t.Errorf("throttling %+v, want unresolved (collinear)", c.Throttling)
		}
		if c.Throttling.IOWait.Value != 0 || c.App(0.25, 0.1).IOWait != 0 {
			t.Errorf("an unresolved throttling must leave the app without I/O wait, got %g", c.Throttling.IOWait.Value)
		}
		within(t, "base memory", c.BaseMemory.Value, 50*sim.MiB, 1e-3*sim.MiB)
		within(t, "memory per request", c.MemoryPerRequest.Value, sim.MiB, 1e-3*sim.MiB)
	})
}

func TestMeasureSpread(t *testing.T) {
	// calmRun is a run of n windows in one state whose p95 alternates
	// between p/f and p·f: the sd of the logs is ln f·√(n/(n−1)) for even n.
	calmRun := func(n int, p, f float64) result.Run {
		var r result.Run
		for i := range n {
			p95 := p * f
			if i%2 == 0 {
				p95 = p / f
			}
			r.Windows = append(r.Windows, result.Window{Index: i, Start: float64(15 * i), End: float64(15 * (i + 1)),
				Expected: 150, Sent: 150, OK: 150, P95: p95, Replicas: 1, Ready: 1, CPURequested: 0.2})
		}
		return r
	}
	t.Run("one state", func(t *testing.T) {
		// The first calmBefore windows are left out: 10 of 12 count.
		s := MeasureSpread([]result.Run{calmRun(12, 0.2, 1.5)})
		want := math.Log(1.5) * math.Sqrt(10.0/9)
		if s.States != 1 || s.Windows != 10 || math.Abs(s.SD.Value-want) > 1e-9 {
			t.Errorf("spread %+v, want 1 state of 10 windows, sd %.4f", s, want)
		}
		// 150 requests a window, no CPU used: 150 independent samples.
		if e := ExponentialSpread(150, 0); s.Exponential.N != 1 || s.Exponential.Value != e {
			t.Errorf("exponential spread %+v, want %.4f", s.Exponential, e)
		}
	})
	t.Run("the exponential yardstick", func(t *testing.T) {
		// The sd of the log of the p95 of m exponential draws, by
		// simulation, against the formula; and the utilisation's discount.
		rng := rand.New(rand.NewPCG(37, 1))
		for _, m := range []int{80, 400} {
			var logs []float64
			draws := make([]float64, m)
			for range 4000 {
				for i := range draws {
					draws[i] = rng.ExpFloat64()
				}
				slices.Sort(draws)
				logs = append(logs, math.Log(draws[int(math.Ceil(0.95*float64(m)))-1]))
			}
			iv, err := stats.Mean(logs, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			if want := ExponentialSpread(float64(m), 0); math.Abs(iv.StdDev/want-1) > 0.1 {
				t.Errorf("%d draws: sd of log p95 %.4f by simulation, formula %.4f", m, iv.StdDev, want)
			}
		}
		// At ρ = 0.5 the requests count for (1−ρ)²/(1+ρ) = 1/6 of theirs.
		if a, b := ExponentialSpread(450, 0.5), ExponentialSpread(75, 0); math.Abs(a-b) > 1e-12 {
			t.Errorf("450 requests at 0.5: %.4f, want 75 at 0: %.4f", a, b)
		}
		if !math.IsNaN(ExponentialSpread(0, 0)) {
			t.Error("no requests gave a spread")
		}
	})
	t.Run("a change splits the states", func(t *testing.T) {
		r := calmRun(24, 0.2, 1.5)
		for i := 12; i < 24; i++ {
			r.Windows[i].CPURequested = 0.6
		}
		r.Windows[12].Resizes = 1
		if s := MeasureSpread([]result.Run{r}); s.States != 2 || s.Windows != 19 {
			t.Errorf("spread %+v, want 2 states, 10 and 9 windows", s)
		}
	})
	t.Run("a lossy window ends a state; short ones do not count", func(t *testing.T) {
		r := calmRun(14, 0.2, 1.5)
		r.Windows[5].Lost = 1
		if s := MeasureSpread([]result.Run{r}); s.States != 1 || s.Windows != 6 {
			t.Errorf("spread %+v, want windows 8–13 only (the 3 before the loss are too few)", s)
		}
	})
	t.Run("nothing calm", func(t *testing.T) {
		r := calmRun(12, 0.2, 1.5)
		for i := range r.Windows {
			r.Windows[i].Ready = 0
		}
		var b strings.Builder
		if err := WriteSpread(&b, []result.Run{r}, nil); err != nil || !strings.Contains(b.String(), "real no stationary state") {
			t.Errorf("WriteSpread = %q, %v", b.String(), err)
		}
	})
}

// TestVPAFirstAction: the median over the runs whose VPA acted of its
// first action after the autoscaler's creation; without one, an updater
// loop, marked as not measured.
func TestVPAFirstAction(t *testing.T) {
	run := func(after float64, at ...float64) result.Run {
		r := result.Run{AutoscalerAfter: after, Events: []result.Event{{At: 10, Reason: "SuccessfulRescale"}}}
		for _, a := range at {
			r.Events = append(r.Events, result.Event{At: a, Reason: "InPlaceResizedByVPA"})
		}
		return r
	}
	e := vpaFirstAction([]result.Run{run(45, 151, 300), run(45, 138), run(0, 100), run(45)})
	if e.N != 3 || e.Value != 100 {
		t.Errorf("first action %+v, want the median of 106, 93 and 100 over 3 runs", e)
	}
	if e := vpaFirstAction([]result.Run{run(45)}); e.N != 0 || e.Value != VPAUpdaterInterval {
		t.Errorf("without an action %+v, want one updater loop, N 0", e)
	}
}

// TestCalibrateCPUTimeCV: runs replayed with the burst model's requests of
// CPU time CV 0.5 are nearest the model at that CV. Options.VaryCPUTime
// takes it, with its I/O wait; without, the calibration keeps a constant
// CPU time and, asked to try them (what benchreal asks), reports every
// CV's error, the least at 0.5.
func TestCalibrateCPUTimeCV(t *testing.T) {
	app := known(0.0125, 48*sim.MiB, 1*sim.MiB, 20, 0.005)
	app.Throttling.Burst, app.Throttling.BurstIOWait, app.Throttling.BurstCV = true, app.Throttling.IOWait, 0.5
	runs := replayAll(t, app, settings(), 2)
	t.Run("not asked to try them", func(t *testing.T) {
		c, err := Calibrate(runs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if th := c.Throttling; th.BurstCV != 0 || len(th.BurstErrors) != 1 || th.BurstErrors[0] != th.BurstError {
			t.Errorf("CV %g, errors %v (burst error %g): want the constant CPU time's alone", th.BurstCV, th.BurstErrors, th.BurstError)
		}
	})
	for _, tc := range []struct {
		name   string
		o      Options
		wantCV float64
	}{
		{"constant by default", Options{TryCPUTimeCVs: true}, 0},
		{"varying on request", Options{VaryCPUTime: true}, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Calibrate(runs, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			th := c.Throttling
			if !th.Burst || th.BurstCV != tc.wantCV || c.App(0.2, 0.25).CPUSecondsCV != tc.wantCV {
				t.Fatalf("burst %v, CV %g (the app's %g), want the burst model at CV %g", th.Burst, th.BurstCV, c.App(0.2, 0.25).CPUSecondsCV, tc.wantCV)
			}
			if len(th.BurstErrors) != len(BurstCVs) {
				t.Fatalf("errors %v for CVs %v", th.BurstErrors, BurstCVs)
			}
			best := 0
			for i, e := range th.BurstErrors {
				if e < th.BurstErrors[best] {
					best = i
				}
			}
			if BurstCVs[best] != 0.5 {
				t.Errorf("errors by CV %v: least at %g, want 0.5", th.BurstErrors, BurstCVs[best])
			}
			var b strings.Builder
			if err := c.Write(&b); err != nil || !strings.Contains(b.String(), "CPU time's CV (burst)") {
				t.Errorf("Write: %v\n%s", err, b.String())
			}
		})
	}
}

// TestBiasBySize: the burst model's signed error splits at SmallPodCPU of
// CPU per Ready pod, and a calibration without small pods still encodes
// as JSON (no NaN).
func TestBiasBySize(t *testing.T) {
	w := func(cpu float64, ready int) result.Window {
		return result.Window{CPURequested: cpu * float64(ready), Ready: ready, Replicas: ready}
	}
	ws := []result.Window{w(0.2, 1), w(0.2, 1), w(0.2, 1), w(0.35, 2), w(0.7, 1), w(0.7, 1)}
	ys := []float64{1, 1, 1, 1, 2, 4}
	model := []float64{2, 2, 4, 2, 1, 1}
	b := biasBySize(ws, ys, model)
	if b.SmallWindows != 4 || b.LargeWindows != 2 {
		t.Fatalf("windows %d small, %d large; want 4 and 2", b.SmallWindows, b.LargeWindows)
	}
	if want := -math.Ln2; math.Abs(b.Small-want) > 1e-12 {
		t.Errorf("small pods' bias %.4f, want %.4f (the median of ln ½, ln ½, ln ¼, ln ½)", b.Small, want)
	}
	if want := (math.Ln2 + math.Log(4)) / 2; math.Abs(b.Large-want) > 1e-12 {
		t.Errorf("large pods' bias %.4f, want %.4f", b.Large, want)
	}
	none := biasBySize(ws[4:], ys[4:], model[4:])
	if none.SmallWindows != 0 || none.Small != 0 {
		t.Errorf("no small pod: %+v", none)
	}
	if _, err := json.Marshal(Calibration{Throttling: Throttling{BurstBias: none}}); err != nil {
		t.Errorf("a calibration without small pods does not encode: %v", err)
	}
}
