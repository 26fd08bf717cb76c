package sim

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// TestRateWindowNoLongerThanStep checks that a rate window of at most one
// step leaves every observation as it was without one: the demo, the
// evidence and the agents' training run with RateWindow 0.
func TestRateWindowNoLongerThanStep(t *testing.T) {
	tr := stepTrace(t)
	for _, w := range []time.Duration{0, 10 * time.Second, 15 * time.Second} {
		t.Run(w.String(), func(t *testing.T) {
			base := newSim(t, Config{}, testApp(0.05, 0.01, 1), tr, 3)
			with := newSim(t, Config{RateWindow: w}, testApp(0.05, 0.01, 1), tr, 3)
			for i := range tr.Rates {
				base.Step()
				with.Step()
				a, b := base.Observation(), with.Observation()
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("window %d: observation with RateWindow %s differs:\n%+v\n%+v", i, w, b, a)
				}
			}
		})
	}
}

// stepTrace is a load step that overloads one pod of testApp(0.05, …):
// 6 windows at 8/s (ρ 0.4), then 10 at 30/s (beyond capacity, so requests
// time out and the window's p95 reaches the timeout).
func stepTrace(t *testing.T) *Trace {
	t.Helper()
	rates := make([]float64, 16)
	for i := range rates {
		rates[i] = 8
		if i >= 6 {
			rates[i] = 30
		}
	}
	return &Trace{Name: "step", Step: 15 * time.Second, Rates: rates}
}

// TestRateWindowPools checks what a policy sees with a rate window of four
// steps against the windows the evaluator counts: the request and error
// rates are the mean of the last four windows' (of all windows so far
// before four have run), Observation.RateWindow says so, the usage stays
// the window's own, and the pooled p95 is the timeout exactly when more
// than 5% of the pooled requests were lost, and otherwise lies within the
// range of the pooled windows' own p95s (a quantile of a mixture lies
// between its components' quantiles).
func TestRateWindowPools(t *testing.T) {
	const k = 4
	tr := stepTrace(t)
	app := testApp(0.05, 0.01, 1)
	s := newSim(t, Config{RateWindow: k * 15 * time.Second, KeepHistory: true}, app, tr, 5)
	ref := newSim(t, Config{}, app, tr, 5)
	sawTimeout, sawMixed := false, false
	for i := range tr.Rates {
		m := s.Step()
		ref.Step()
		o := s.Observation()
		h := s.History()
		from := max(0, len(h)-k)
		var arrivals, lost float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, w := range h[from:] {
			arrivals += w.Arrivals
			lost += w.Failed + w.TimedOut
			lo, hi = math.Min(lo, w.Latency.P95), math.Max(hi, w.Latency.P95)
		}
		span := float64(len(h)-from) * 15
		if o.RateWindow != k*15*time.Second || o.Window != 15*time.Second {
			t.Fatalf("window %d: RateWindow %s, Window %s", i, o.RateWindow, o.Window)
		}
		if math.Abs(o.RequestRate-arrivals/span) > 1e-9 || math.Abs(o.ErrorRate-lost/span) > 1e-9 {
			t.Fatalf("window %d: rate %g, error rate %g; want %g, %g", i, o.RequestRate, o.ErrorRate, arrivals/span, lost/span)
		}
		if got, want := o.Containers[0].Usage, ref.Observation().Containers[0].Usage; got != want {
			t.Fatalf("window %d: usage %+v, without the window %+v", i, got, want)
		}
		if m.Latency != ref.out.last.Latency {
			t.Fatalf("window %d: the evaluator's latency changed with the window: %+v, %+v", i, m.Latency, ref.out.last.Latency)
		}
		timeout := 30.0
		switch share := lost / arrivals; {
		case share > 0.05:
			sawTimeout = true
			if o.Latency.P95 != timeout {
				t.Fatalf("window %d: %.1f%% lost, p95 %g, want the timeout", i, 100*share, o.Latency.P95)
			}
		case lost == 0:
			if o.Latency.P95 < lo-1e-9 || o.Latency.P95 > hi+1e-9 {
				t.Fatalf("window %d: pooled p95 %g outside the windows' [%g, %g]", i, o.Latency.P95, lo, hi)
			}
			if hi-lo > 1e-6 {
				sawMixed = true
			}
		}
	}
	if !sawTimeout || !sawMixed {
		t.Fatalf("the trace did not exercise both cases (timeout %v, mixed windows %v)", sawTimeout, sawMixed)
	}
}

// TestRateWindowLagsAStep is the real node's lag (docs/real-node-rounds.md,
// round fifteen) in the model: after a step from 8 to 30 requests/s, a
// 2-minute window reads the mean of quiet and loaded windows, so the rate
// a policy sees trails the offered one until the window has passed.
func TestRateWindowLagsAStep(t *testing.T) {
	tr := stepTrace(t)
	s := newSim(t, Config{RateWindow: 2 * time.Minute}, testApp(0.05, 0.01, 4), tr, 9)
	var seen []float64
	for range tr.Rates {
		s.Step()
		seen = append(seen, s.Observation().RequestRate)
	}
	if r := seen[6]; !(r > 8 && r < 15) {
		t.Errorf("first loaded window: the policy sees %.1f/s, want between 8 and 15 (one loaded window in seven)", r)
	}
	if r := seen[len(seen)-1]; math.Abs(r-30)/30 > 0.1 {
		t.Errorf("a window after the step: the policy sees %.1f/s, want 30 ± 10%%", r)
	}
	var _ workload.Observation = s.Observation()
}

// TestUnreadPercentiles checks Config.Unread against a simulator that
// computes every percentile, for each set of unread ones, with and
// without a rate window: the windows the evaluator counts are the same,
// the observation is the same but for its latency, the percentiles read
// are the same bit for bit, and the others are 0. A set beyond the three
// is refused.
func TestUnreadPercentiles(t *testing.T) {
	tr := stepTrace(t)
	app := testApp(0.05, 0.01, 1)
	for _, cfg := range []Config{{}, {RateWindow: 4 * 15 * time.Second, SampledLatency: true}} {
		for unread := workload.NoPercentiles; unread <= workload.AllPercentiles; unread++ {
			t.Run(fmt.Sprintf("rate window %s/unread %03b", cfg.RateWindow, unread), func(t *testing.T) {
				base := newSim(t, cfg, app, tr, 7)
				with := cfg
				with.Unread = unread
				s := newSim(t, with, app, tr, 7)
				read := workload.AllPercentiles &^ unread
				for i := range tr.Rates {
					if a, b := base.Step(), s.Step(); a != b {
						t.Fatalf("window %d: metrics %+v, want %+v", i, b, a)
					}
					a, b := base.Observation(), s.Observation()
					if want := read.Keep(a.Latency); b.Latency != want {
						t.Fatalf("window %d: latency %+v, want %+v", i, b.Latency, want)
					}
					if b.Latency = a.Latency; !reflect.DeepEqual(a, b) {
						t.Fatalf("window %d: observation differs beyond its latency:\n%+v\n%+v", i, b, a)
					}
				}
			})
		}
	}
	if _, err := New(Config{Unread: workload.AllPercentiles + 1}, app, tr, 1); err == nil || !strings.Contains(err.Error(), "unread") {
		t.Errorf("New with unread %03b: %v, want an unread-percentiles error", workload.AllPercentiles+1, err)
	}
}

// TestWindowPool checks a window read from finer steps: one step pooled
// alone is that step's own latency (the same quantile code), a reset pool
// reads nothing, and three steps pooled give the timeout exactly when
// more than 5% of their requests were lost, and otherwise a p95 within
// the range of the steps' own (a quantile of a mixture lies between its
// components').
func TestWindowPool(t *testing.T) {
	const k = 3
	rates := make([]float64, 0, 48)
	for _, r := range stepTrace(t).Rates {
		rates = append(rates, r, r, r)
	}
	tr := &Trace{Name: "step, 5-s steps", Step: 5 * time.Second, Rates: rates}
	s := newSim(t, Config{Step: 5 * time.Second}, testApp(0.05, 0.01, 1), tr, 9)
	one, pool := NewWindowPool(s, 1), NewWindowPool(s, k)
	if got := pool.Latency(); got != (workload.Latency{}) {
		t.Fatalf("an empty pool read %+v", got)
	}
	sawTimeout, sawMixed := false, false
	var steps []StepMetrics
	for i := range rates {
		m := s.Step()
		one.Reset()
		one.Add(s)
		if got := one.Latency(); got != m.Latency {
			t.Fatalf("step %d: one step pooled %+v, its own %+v", i, got, m.Latency)
		}
		pool.Add(s)
		steps = append(steps, m)
		if len(steps) < k {
			continue
		}
		got := pool.Latency()
		pool.Reset()
		var arrivals, lost float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, w := range steps {
			arrivals += w.Arrivals
			lost += w.Failed + w.TimedOut
			lo, hi = math.Min(lo, w.Latency.P95), math.Max(hi, w.Latency.P95)
		}
		steps = steps[:0]
		switch share := lost / arrivals; {
		case share > 0.05:
			sawTimeout = true
			if got.P95 != 30 {
				t.Fatalf("step %d: %.1f%% lost, pooled p95 %g, want the timeout", i, 100*share, got.P95)
			}
		case lost == 0:
			if got.P95 < lo-1e-9 || got.P95 > hi+1e-9 {
				t.Fatalf("step %d: pooled p95 %g outside the steps' [%g, %g]", i, got.P95, lo, hi)
			}
			sawMixed = sawMixed || hi-lo > 1e-6
		}
	}
	if !sawTimeout || !sawMixed {
		t.Fatalf("the trace did not exercise both cases (timeout %v, mixed steps %v)", sawTimeout, sawMixed)
	}
}
