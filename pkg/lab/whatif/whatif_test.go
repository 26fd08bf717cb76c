package whatif

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

const step = time.Minute

// truthApp is the app whose history the tests record: its CPU seconds per
// request, base memory and memory per request are the truth the fit must
// find.
func truthApp(name string) sim.App {
	return sim.App{
		Name: name, Container: "app",
		StartupDelay: 30 * time.Second, SLO: 0.4, BaseRate: 40,
		Replicas: 4, Requests: workload.Resources{CPU: 0.5, Memory: 512 << 20},
		Limits:      workload.Resources{CPU: 1, Memory: 1 << 30},
		Constraints: workload.Constraints{MinReplicas: 1, MaxReplicas: 40},
		Demand: sim.Demand{
			CPUSeconds:       0.05,
			BaseMemory:       200 << 20,
			MemoryPerRequest: 4 << 20,
		},
	}
}

// record runs app under a diurnal trace with the HPA, as a cluster would
// have run it, and returns what Prometheus would have recorded.
func record(t testing.TB, app sim.App, steps int, seed uint64) *Series {
	t.Helper()
	return recordWith(t, app, steps, seed, false)
}

// recordWith is record, with the app's requests in flight per pod as its
// own gauge would count them when gauge is set.
func recordWith(t testing.TB, app sim.App, steps int, seed uint64, gauge bool) *Series {
	t.Helper()
	return recordOn(t, sim.DefaultConfig(), app, steps, seed, gauge)
}

// recordOn is recordWith on the cluster cfg (its Step is the tests').
func recordOn(t testing.TB, cfg sim.Config, app sim.App, steps int, seed uint64, gauge bool) *Series {
	t.Helper()
	tr, err := sim.GenerateTrace(sim.Diurnal, sim.TraceOptions{Mean: app.BaseRate, Steps: steps, Step: step, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Step = step
	s, err := sim.New(cfg, app, &tr, seed)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := hpa.NewPolicyFactory(hpa.PolicyOptions{})(app.Constraints)
	if err != nil {
		t.Fatal(err)
	}
	out := &Series{Name: app.Name, Container: app.Container, Start: cfg.Start, Step: step, SLO: app.SLO}
	for range steps {
		m := s.Step()
		ready := float64(m.Ready)
		out.Rate = append(out.Rate, m.Arrivals/step.Seconds())
		out.CPU = append(out.CPU, m.Used.CPU/ready)
		out.Memory = append(out.Memory, m.Used.Memory/ready)
		out.Replicas = append(out.Replicas, ready)
		out.RequestCPU = append(out.RequestCPU, m.Requests.CPU)
		out.RequestMemory = append(out.RequestMemory, m.Requests.Memory)
		out.LimitCPU = append(out.LimitCPU, m.Limits.CPU)
		out.LimitMemory = append(out.LimitMemory, m.Limits.Memory)
		out.P95 = append(out.P95, m.Latency.P95)
		if gauge {
			// As Prometheus averages them: over every pod with a series,
			// starting pods (base memory, nothing in flight) included.
			pods := float64(m.Replicas - m.Pending)
			out.Memory[len(out.Memory)-1] = m.Used.Memory / pods
			out.InFlight = append(out.InFlight, m.InFlight/pods)
		}
		rec, err := pol.Recommend(context.Background(), s.Observation())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestFitRecoversTruth(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		app := truthApp("shop/web")
		s := record(t, app, 1440, seed)
		f, err := FitApp(s, FitOptions{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if e := f.App.CPUSeconds/app.CPUSeconds - 1; math.Abs(e) > 0.05 {
			t.Errorf("seed %d: CPU seconds %g, truth %g (%.1f%%)", seed, f.App.CPUSeconds, app.CPUSeconds, 100*e)
		}
		if e := f.App.BaseMemory/app.BaseMemory - 1; math.Abs(e) > 0.10 {
			t.Errorf("seed %d: base memory %g, truth %g (%.1f%%)", seed, f.App.BaseMemory, app.BaseMemory, 100*e)
		}
		if f.CPU.R2 < 0.9 {
			t.Errorf("seed %d: CPU R² %g on the model's own data", seed, f.CPU.R2)
		}
		if f.StartupMeasured || f.App.StartupDelay != 30*time.Second {
			t.Errorf("seed %d: start-up delay %s measured %v without pod history", seed, f.App.StartupDelay, f.StartupMeasured)
		}
		if f.App.Replicas != int32(s.Replicas[0]) || f.App.Requests.CPU != s.RequestCPU[0] || f.App.Limits.Memory != s.LimitMemory[0] {
			t.Errorf("seed %d: app not deployed as the history starts: %+v", seed, f.App)
		}
	}
}

func TestFitMemoryInFlight(t *testing.T) {
	// Half a second of I/O wait per request: each pod holds several
	// requests, so their memory stands out of the base, and Little's law
	// on the CPU alone (the history has no I/O wait) counts far too few.
	app := truthApp("shop/web")
	app.IOWait = 0.5
	sparse := func() *Series {
		s := recordWith(t, app, 1440, 1, true)
		for i := range s.InFlight {
			if i%40 != 0 {
				s.InFlight[i] = math.NaN()
			}
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		series *Series
		want   string
		// tol bounds the memory per request's error against the truth;
		// off, when set, is the least error wanted (Little's law here).
		tol, off float64
	}{
		{"the app's gauge", recordWith(t, app, 1440, 1, true), InFlightGauge, 0.05, 0},
		{"the app's gauge, another seed", recordWith(t, app, 1440, 2, true), InFlightGauge, 0.05, 0},
		{"no gauge: Little's law", record(t, app, 1440, 1), InFlightLittle, 0, 0.5},
		{"a gauge at too few steps: Little's law", sparse(), InFlightLittle, 0, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := FitApp(tc.series, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f.MemoryInFlight != tc.want {
				t.Errorf("requests in flight from %q, want %q", f.MemoryInFlight, tc.want)
			}
			e := f.App.MemoryPerRequest/app.MemoryPerRequest - 1
			if (tc.tol > 0 && math.Abs(e) > tc.tol) || (tc.off > 0 && math.Abs(e) < tc.off) {
				t.Errorf("memory per request %.3g MiB, truth %.3g MiB (%+.1f%%)", f.App.MemoryPerRequest/(1<<20), app.MemoryPerRequest/(1<<20), 100*e)
			}
			if e := f.App.BaseMemory/app.BaseMemory - 1; tc.tol > 0 && math.Abs(e) > tc.tol {
				t.Errorf("base memory %.4g MiB, truth %.4g MiB (%.1f%%)", f.App.BaseMemory/(1<<20), app.BaseMemory/(1<<20), 100*e)
			}
		})
	}
	t.Run("the fit line names the source", func(t *testing.T) {
		s := recordWith(t, app, 1440, 1, true)
		f, err := FitApp(s, FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := (&Result{Fits: []Fit{f}}).WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "requests in flight from the app's gauge") {
			t.Errorf("fit line lacks the source:\n%s", b.String())
		}
	})
}

// synthetic is a series with CPU = perReq·rate/replicas + noise, for the
// refusals.
func synthetic(n int, rate func(i int) float64, cpu func(i int, r float64) float64) *Series {
	s := &Series{Name: "ns/syn", Container: "app", Step: step}
	for i := range n {
		r := rate(i)
		s.Rate = append(s.Rate, r)
		s.Replicas = append(s.Replicas, 2)
		s.CPU = append(s.CPU, cpu(i, r)/2)
		s.Memory = append(s.Memory, 100<<20)
		s.RequestCPU = append(s.RequestCPU, 0.5)
		s.RequestMemory = append(s.RequestMemory, 256<<20)
	}
	return s
}

func TestFitRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	wave := func(i int) float64 { return 10 + 5*math.Sin(float64(i)/30) }
	linear := func(_ int, r float64) float64 { return 0.1 * r }
	tests := []struct {
		name   string
		series *Series
		want   error
		reason string
	}{
		{"few points", synthetic(30, wave, linear), ErrTooThin, "30 usable steps"},
		{"gaps leave too few", func() *Series {
			s := synthetic(200, wave, linear)
			for i := range 150 {
				s.CPU[i] = math.NaN()
			}
			return s
		}(), ErrTooThin, "50 usable steps"},
		{"constant rate", synthetic(500, func(int) float64 { return 10 }, linear), ErrTooThin, "never varied"},
		{"cpu unrelated to rate", synthetic(500, wave, func(_ int, r float64) float64 { return 0.01*r + 2*rng.Float64() }), ErrPoorFit, "of the CPU's variance"},
		{"cpu falls with rate", synthetic(500, wave, func(_ int, r float64) float64 { return 5 - 0.1*r }), ErrPoorFit, "does not grow"},
		{"memory all over", func() *Series {
			s := synthetic(500, wave, linear)
			for i := range s.Memory {
				s.Memory[i] = float64(rng.IntN(1000)+1) * (1 << 20)
			}
			return s
		}(), ErrPoorFit, "working set's residual"},
		{"mismatched lengths", func() *Series {
			s := synthetic(100, wave, linear)
			s.Memory = s.Memory[:50]
			return s
		}(), ErrSeries, "memory has 50 values"},
		{"no requests recorded", func() *Series {
			s := synthetic(100, wave, linear)
			for i := range s.RequestCPU {
				s.RequestCPU[i] = math.NaN()
			}
			return s
		}(), ErrSeries, "never recorded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := FitApp(tc.series, FitOptions{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if !strings.Contains(f.Refused, tc.reason) {
				t.Errorf("reason %q does not say %q", f.Refused, tc.reason)
			}
		})
	}
}

func TestFitStartupDelay(t *testing.T) {
	tests := []struct {
		name     string
		delays   []float64
		want     time.Duration
		measured bool
	}{
		{"none", nil, 30 * time.Second, false},
		{"too few pods", []float64{5, 6}, 30 * time.Second, false},
		{"median ignores a flap", []float64{12, 10, 900, 11}, 11500 * time.Millisecond, true},
		{"invalid values skipped", []float64{8, math.NaN(), -1, 9, 10}, 9 * time.Second, true},
	}
	s := record(t, truthApp("ns/up"), 300, 9)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.StartupDelays = tc.delays
			f, err := FitApp(s, FitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if f.App.StartupDelay != tc.want || f.StartupMeasured != tc.measured {
				t.Errorf("start-up %s measured %v, want %s %v", f.App.StartupDelay, f.StartupMeasured, tc.want, tc.measured)
			}
		})
	}
}

func TestFitAcceptsGappySeries(t *testing.T) {
	s := record(t, truthApp("ns/gappy"), 600, 4)
	for i := 0; i+1 < len(s.Rate); i += 7 { // two steps in seven lost
		s.CPU[i], s.Rate[i+1] = math.NaN(), math.NaN()
	}
	f, err := FitApp(s, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := f.App.CPUSeconds/0.05 - 1; math.Abs(e) > 0.05 {
		t.Errorf("CPU seconds %g with gaps, truth 0.05", f.App.CPUSeconds)
	}
}

// TestConsistency: replaying what actually ran on the model's own history
// gives back its cost and replicas closely, and the error is reported, not
// hidden: with the requests doubled in the "recorded" replay, it is +100%.
func TestConsistency(t *testing.T) {
	s := record(t, truthApp("ns/web"), 1440, 5)
	f, err := FitApp(s, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	c, err := Check(s, f, cfg, sim.DefaultPrices(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.CostError) > 0.05 {
		t.Errorf("cost error %.1f%%, want within 5%%: %+v", 100*c.CostError, c)
	}
	if c.ReplicasMAE > 0.5 {
		t.Errorf("replicas MAE %g: %+v", c.ReplicasMAE, c)
	}
	if math.Abs(c.CPUError) > 0.05 {
		t.Errorf("CPU error %.1f%%: %+v", 100*c.CPUError, c)
	}
	if !c.LatencyMeasured || math.Abs(c.SLOError) > 0.05 {
		t.Errorf("SLO error %g (measured %v): %+v", c.SLOError, c.LatencyMeasured, c)
	}
	// The spread: the fit's interval holds its estimate, and a request
	// costing more violates the SLO no less often; cost follows the
	// recorded requests, so it hardly moves.
	if sp := c.Spread; sp == nil {
		t.Error("no spread for a fit with an interval")
	} else {
		if !(sp.CPUSeconds[0] < f.App.CPUSeconds && f.App.CPUSeconds < sp.CPUSeconds[1]) {
			t.Errorf("interval %v does not hold the fit %g", sp.CPUSeconds, f.App.CPUSeconds)
		}
		if sp.ReplayViolations[0] > sp.ReplayViolations[1] {
			t.Errorf("violations %v fall as CPU per request grows", sp.ReplayViolations)
		}
		if math.Abs(sp.CostError[0]-c.CostError) > 0.02 || math.Abs(sp.CostError[1]-c.CostError) > 0.02 {
			t.Errorf("cost error %v at the ends, %g at the fit: the recorded requests set the cost", sp.CostError, c.CostError)
		}
	}
	t.Run("error shows", func(t *testing.T) {
		bad := *s
		bad.Memory = append([]float64(nil), s.Memory...)
		for i := range bad.Memory {
			bad.Memory[i] *= 2
		}
		c, err := Check(&bad, f, cfg, sim.DefaultPrices(), 5)
		if err != nil {
			t.Fatal(err)
		}
		if c.MemoryError > -0.4 {
			t.Errorf("memory error %.1f%% on a history with twice the working set, want about -50%%", 100*c.MemoryError)
		}
	})
}

func TestReplay(t *testing.T) {
	var ws []Workload
	for i, name := range []string{"ns/a", "ns/b", "ns/thin"} {
		n := 720
		if name == "ns/thin" {
			n = 20
		}
		s := record(t, truthApp(name), n, uint64(10+i))
		f, err := FitApp(s, FitOptions{})
		if name == "ns/thin" {
			if !errors.Is(err, ErrTooThin) {
				t.Fatalf("thin: %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, Workload{Series: s, Fit: f})
	}
	res, err := Replay(context.Background(), ws, ReplayOptions{Seeds: 3, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fits) != 3 || len(res.Consistency) != 2 {
		t.Fatalf("fits %d consistency %d", len(res.Fits), len(res.Consistency))
	}
	if got := len(res.Report.Summaries); got != len(Policies()) {
		t.Fatalf("%d summaries, want %d", got, len(Policies()))
	}
	if res.Report.Summaries[0].Policy != PolicyActual || res.Report.Summaries[0].Runs != 6 {
		t.Errorf("first summary %+v, want actual over 6 runs", res.Report.Summaries[0])
	}
	if len(res.Comparisons) != len(Policies())-1 || res.Comparisons[0].Pairs != 6 {
		t.Errorf("comparisons %+v", res.Comparisons)
	}
	var text, js bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ns/thin: not predicted", "CPU seconds per request", "error bar", "Paired against actual", "fused"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	t.Log("\n" + text.String())
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"refused"`) || !strings.Contains(js.String(), `"costError"`) {
		t.Errorf("JSON lacks the refusal or the error bar")
	}

	t.Run("all refused", func(t *testing.T) {
		if _, err := Replay(context.Background(), ws[2:], ReplayOptions{}); err == nil {
			t.Fatal("replayed nothing without an error")
		}
	})
	t.Run("fused variant", func(t *testing.T) {
		res, err := Replay(context.Background(), ws[:1], ReplayOptions{Seeds: 2, Policies: []string{"fused:target=0.5"}})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.Report.Summaries); n != 2 || res.Report.Summaries[1].Policy != "fused:target=0.5" {
			t.Fatalf("summaries %+v", res.Report.Summaries)
		}
		if _, err := Replay(context.Background(), ws[:1], ReplayOptions{Policies: []string{"fused:target=7"}}); err == nil {
			t.Fatal("a bad variant was accepted")
		}
	})
	t.Run("unknown policy", func(t *testing.T) {
		if _, err := Replay(context.Background(), ws[:1], ReplayOptions{Policies: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "unknown policy") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("added in any order", func(t *testing.T) {
		// The what-if adds workloads as their reads finish: from
		// several goroutines, last first. The result is Replay's.
		o := ReplayOptions{Seeds: 3, Workers: 2, Plot: true}
		want, err := Replay(context.Background(), ws, o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReplayer(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := len(ws) - 1; i >= 0; i-- {
			wg.Go(func() {
				if err := r.Add(i, ws[i]); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, err := r.Result()
		if err != nil {
			t.Fatal(err)
		}
		var a, b bytes.Buffer
		if err := want.WriteJSON(&a); err != nil {
			t.Fatal(err)
		}
		if err := got.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Error("the Replayer's result differs from Replay's")
		}
		if len(got.Plots) != len(want.Plots) || !reflect.DeepEqual(got.Plots, want.Plots) {
			t.Errorf("plots differ: %d and %d", len(got.Plots), len(want.Plots))
		}
	})
	t.Run("refusals", func(t *testing.T) {
		other := *ws[1].Series
		other.Step *= 2
		for _, tc := range []struct {
			name    string
			add     []Workload
			wantErr string
		}{
			{"a workload twice", []Workload{ws[0], ws[0]}, "given twice"},
			{"another step", []Workload{ws[0], {Series: &other, Fit: ws[1].Fit}}, "has step"},
			{"no history", []Workload{{Fit: ws[0].Fit}}, "no history"},
		} {
			r, err := NewReplayer(context.Background(), ReplayOptions{Seeds: 1})
			if err != nil {
				t.Fatal(err)
			}
			var last error
			for i, w := range tc.add {
				if last = r.Add(i, w); last != nil {
					break
				}
			}
			if last == nil || !strings.Contains(last.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, last, tc.wantErr)
			}
			r.Result()
		}
	})
}

// TestFitLatencyModel: LatencyAuto picks the latency model a history was
// recorded with (the simulator's fluid or burst model of the same app),
// an explicit model is kept, and without a recorded p95 the fit keeps the
// fluid model, as before the choice existed.
func TestFitLatencyModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		burst  bool
		option string
		noP95  bool
		want   string
	}{
		{"recorded fluid, auto", false, LatencyAuto, false, LatencyFluid},
		{"recorded burst, auto", true, LatencyAuto, false, LatencyBurst},
		{"recorded burst, fluid asked", true, LatencyFluid, false, LatencyFluid},
		{"recorded fluid, burst asked", false, LatencyBurst, false, LatencyBurst},
		{"no recorded p95, auto", true, LatencyAuto, true, LatencyFluid},
		{"an old file's options", true, "", false, LatencyFluid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := truthApp("shop/web")
			app.CPUBurst = tc.burst
			s := record(t, app, 240, 4)
			if tc.noP95 {
				s.P95 = nil
			}
			o := DefaultFitOptions()
			o.LatencyModel = tc.option
			f, err := FitApp(s, o)
			if err != nil {
				t.Fatal(err)
			}
			if f.Latency.Model != tc.want || f.App.CPUBurst != (tc.want == LatencyBurst) {
				t.Fatalf("latency %+v, app burst %v; want %s", f.Latency, f.App.CPUBurst, tc.want)
			}
			if tc.option == LatencyAuto && !tc.noP95 {
				if f.Latency.Steps < MinLatencySteps {
					t.Fatalf("chose on %d calm steps", f.Latency.Steps)
				}
				right, wrong := f.Latency.FluidError, f.Latency.BurstError
				if tc.burst {
					right, wrong = wrong, right
				}
				if !(right < 0.05 && wrong > right) {
					t.Errorf("errors: the recorded model's %.3f, the other's %.3f", right, wrong)
				}
			}
		})
	}
}

// TestFitLatencyWindow: a recorded p95 is a quantile over the latency
// query's range, so for that long after the replicas change it still
// holds what came before (here: a range of timeouts after each change).
// With FitOptions.LatencyWindow those steps are not calm and the choice
// reads the clean ones; without it they are the majority of the calm
// steps and both models' errors are large.
func TestFitLatencyWindow(t *testing.T) {
	// Steps per replica level, steps the p95 holds after each change
	// (the history begins with one too), levels.
	const seg, held, levels = 14, 8, 8
	app := truthApp("shop/web")
	app.CPUBurst = true
	s := record(t, app, levels*seg, 4)
	for i := range s.Rate {
		k := i / seg
		if k%2 == 1 {
			// More replicas, the same rate per pod: the recorded p95
			// still describes the model's pods.
			s.Replicas[i] *= 1.25
			s.Rate[i] *= 1.25
		}
		if i%seg < held {
			s.P95[i] = 10
		}
	}
	for _, tc := range []struct {
		name      string
		window    time.Duration
		wantRight func(float64) bool
	}{
		{"the p95's range known", held * step, func(e float64) bool { return e < 0.1 }},
		{"each step's own p95 assumed", 0, func(e float64) bool { return e > 0.5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultFitOptions()
			o.LatencyWindow = tc.window
			f, err := FitApp(s, o)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.wantRight(f.Latency.BurstError) {
				t.Errorf("latency %+v: the recorded model's error %.3f", f.Latency, f.Latency.BurstError)
			}
		})
	}
	t.Run("the range known: the recorded model chosen", func(t *testing.T) {
		o := DefaultFitOptions()
		o.LatencyWindow = held * step
		f, err := FitApp(s, o)
		if err != nil {
			t.Fatal(err)
		}
		if f.Latency.Model != LatencyBurst || f.Latency.Steps < MinLatencySteps {
			t.Errorf("latency %+v, want burst over at least %d steps", f.Latency, MinLatencySteps)
		}
	})
}

// BenchmarkReplayWeek is the replay of one workload's week at one minute,
// as `recommender whatif` replays each of make bench-whatif's 100: what
// ran and every default policy, 5 seeds, one worker, the pods resized in
// place and the policies reading the rate and the p95 over the
// recommender's 2-minute window (the command's defaults).
func BenchmarkReplayWeek(b *testing.B) {
	series := record(b, truthApp("ns/week"), 7*24*60, 1)
	f, err := FitApp(series, FitOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ws := []Workload{{Series: series, Fit: f}}
	for b.Loop() {
		o := ReplayOptions{Seeds: 5, Workers: 1, Config: sim.Config{Resize: sim.ResizeInPlace, RateWindow: 2 * time.Minute}}
		if _, err := Replay(context.Background(), ws, o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSlopeInterval: the slope's standard error by hand on a small line,
// and no interval where there is none.
func TestSlopeInterval(t *testing.T) {
	// y = 2x + e with e = +1, −1, −1, +1 at x = 0..3: slope 2 (the
	// residuals are orthogonal to x), SSres 4, Sxx 5, SE √(4/2/5).
	r, ok := regress([]float64{0, 1, 2, 3}, []float64{1, 1, 3, 7})
	if !ok {
		t.Fatal("no line")
	}
	wantSE := math.Sqrt(4.0 / 2 / 5)
	if math.Abs(r.Slope-2) > 1e-12 || math.Abs(r.SlopeSE-wantSE) > 1e-12 {
		t.Errorf("slope %g ± %g, want 2 ± %g", r.Slope, r.SlopeSE, wantSE)
	}
	lo, hi := r.SlopeInterval()
	// t(0.975, 2 df) = 4.303.
	if h := 4.303 * wantSE; math.Abs(lo-(2-h)) > 1e-3 || math.Abs(hi-(2+h)) > 1e-3 {
		t.Errorf("interval [%g, %g], want 2 ± %g", lo, hi, h)
	}
	for name, r := range map[string]Regression{
		"two points": {Slope: 3, SlopeSE: 1, Points: 2},
		"no error":   {Slope: 3, Points: 50},
	} {
		if lo, hi := r.SlopeInterval(); lo != 3 || hi != 3 {
			t.Errorf("%s: interval [%g, %g], want the slope alone", name, lo, hi)
		}
	}
}

// TestFitNodeTick: the latency model is chosen with the nodes' scheduler
// tick (FitOptions.NodeTick), which moves the burst model's p95 at a small
// CPU quota; the app is replayed as one that serves past its clients'
// timeout when FitOptions.ServesTimedOut says so.
func TestFitNodeTick(t *testing.T) {
	app := truthApp("shop/small")
	app.CPUBurst = true
	// Ten 12-ms requests a second on each 200m pod: ρ = 0.6, where the
	// quota shapes the p95 and the tick moves it.
	app.Requests.CPU, app.Limits.CPU, app.Demand.CPUSeconds = 0.2, 0.2, 0.012
	cfg := sim.DefaultConfig()
	cfg.NodeCores, cfg.NodeTick = 2, 4*time.Millisecond
	s := recordOn(t, cfg, app, 240, 5, false)
	fit := func(tick time.Duration, served bool) Fit {
		t.Helper()
		o := DefaultFitOptions()
		o.NodeCPU, o.NodeTick, o.ServesTimedOut = 2, tick, served
		f, err := FitApp(s, o)
		if err != nil {
			t.Fatal(err)
		}
		if f.Latency.Model != LatencyBurst || f.Latency.Steps < MinLatencySteps {
			t.Fatalf("tick %v: latency %+v, want burst on %d calm steps or more", tick, f.Latency, MinLatencySteps)
		}
		if f.App.ServesTimedOut != served {
			t.Fatalf("app serves timed out %v, want %v", f.App.ServesTimedOut, served)
		}
		return f
	}
	right, none := fit(4*time.Millisecond, true), fit(0, false)
	// The CPU fit's slope is not exact (here 0.053 with the recorded
	// tick), so neither error is 0; the tick the history was recorded with
	// must explain its p95 better (0.099 without it).
	if !(right.Latency.BurstError < 0.08 && none.Latency.BurstError > 1.5*right.Latency.BurstError) {
		t.Fatalf("burst model's error: %.3f with the recorded tick, %.3f without", right.Latency.BurstError, none.Latency.BurstError)
	}
}
