package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// calmLogP95 runs one pod of the real node's test app (as bench-real's
// calibration measured it: 11.3 ms of CPU per request, the burst latency
// model, the node's 2 cores) at a fixed request and rate for 80 windows,
// and returns the median and standard deviation of the windows' log p95
// and how many windows broke the app's 250-ms SLO.
func calmLogP95(t *testing.T, cpu, rate float64, sampled bool, seed uint64) (median, sd float64, over int) {
	t.Helper()
	const windows = 80
	app := calmApp(cpu, 0.0113)
	s := calmSim(t, app, rate, windows, Config{SampledLatency: sampled, NodeCores: 2}, seed)
	logs := make([]float64, windows)
	for i := range logs {
		p95 := s.Step().Latency.P95
		logs[i] = math.Log(p95)
		if p95 > app.SLO {
			over++
		}
	}
	var mean float64
	for _, l := range logs {
		mean += l / windows
	}
	for _, l := range logs {
		sd += (l - mean) * (l - mean) / (windows - 1)
	}
	slices.Sort(logs)
	return (logs[windows/2-1] + logs[windows/2]) / 2, math.Sqrt(sd), over
}

// TestSampledLatencySpread checks the model of the windows' spread against
// the real node (docs/real-node-rounds.md, rounds eighteen and nineteen): the
// standard deviation of the log p95 of calm 15-s windows was 0.24–0.50 for
// one 0.2-core pod at 10 requests/s, over eleven runs, with 25% of 452
// such windows of rounds fifteen to eighteen over a 250-ms SLO at a median
// of 181 ms, and 0.04–0.09 for a 1-core pod at 30 requests/s, both on the
// node's 2 cores. Simulated over 8 seeds (as measured; the bounds are
// wider): at 0.2 core the spread is 0.40–0.55, at the top of the real
// range, the median 175–203 ms and 27.3% of the windows over the SLO; at
// 1 core 0.030–0.063, below the real range's middle (the real requests
// carry a few milliseconds of network and scheduling jitter the model
// does not, 20 times below any SLO). Without SampledLatency the windows'
// p95 is the model's, the same in every calm window; with it their median
// is the model's within 10%, as the real windows' median is
// (TestQuotaModelAgainstRealNode).
func TestSampledLatencySpread(t *testing.T) {
	const seeds = 8
	for _, tc := range []struct {
		name       string
		cpu, rate  float64
		minSD, max float64
		// over bounds the share of the seeds' windows over the SLO.
		over [2]float64
	}{
		{"0.2 core at 10 requests/s", 0.2, 10, 0.20, 0.60, [2]float64{0.15, 0.35}},
		{"1 core at 30 requests/s", 1, 30, 0.025, 0.10, [2]float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model, flat, _ := calmLogP95(t, tc.cpu, tc.rate, false, 1)
			if flat > 1e-9 {
				t.Errorf("model's p95 varies between calm windows (sd of log %g)", flat)
			}
			over := 0
			for seed := uint64(1); seed <= seeds; seed++ {
				centre, sd, n := calmLogP95(t, tc.cpu, tc.rate, true, seed)
				t.Logf("seed %d: sd %.3f centre %.1f ms (model %.1f)", seed, sd, 1e3*math.Exp(centre), 1e3*math.Exp(model))
				over += n
				if sd < tc.minSD || sd > tc.max {
					t.Errorf("seed %d: sd of the windows' log p95 %.3f, want within [%.3f, %.2f]", seed, sd, tc.minSD, tc.max)
				}
				if d := centre - model; math.Abs(d) > 0.1 {
					t.Errorf("seed %d: windows' p95 centred at %.3f s, the model's %.3f s", seed, math.Exp(centre), math.Exp(model))
				}
			}
			if share := float64(over) / (seeds * 80); share < tc.over[0] || share > tc.over[1] {
				t.Errorf("%.1f%% of the windows broke the SLO, want within %v", 100*share, tc.over)
			}
			t.Logf("%.1f%% of the windows over the SLO", 100*float64(over)/(seeds*80))
		})
	}
}

func TestSampledLevels(t *testing.T) {
	groups := []latGroup{{shift: 0.01, mean: 0.05, weight: 100}, {shift: 0.02, mean: 0.2, weight: 20}}
	model := latencyAt(groups, 0, 30, modelLevels, workload.AllPercentiles)
	near := func(a, b float64) bool { return math.Abs(a/b-1) < 0.02 }
	for _, tc := range []struct {
		name string
		n, u float64
		want func(workload.Latency) bool
	}{
		{"no samples: the model's", 0, 0.9, func(l workload.Latency) bool { return l == model }},
		{"many samples: the model's", 1e7, 0.99, func(l workload.Latency) bool {
			return near(l.P50, model.P50) && near(l.P95, model.P95) && near(l.P99, model.P99)
		}},
		{"the median draw of a few: near the model's", 200, 0.5, func(l workload.Latency) bool { return math.Abs(l.P95/model.P95-1) < 0.1 }},
		{"a high draw: all three above", 50, 0.9, func(l workload.Latency) bool {
			return l.P50 > model.P50 && l.P95 > model.P95 && l.P99 > model.P99
		}},
		{"a low draw: all three below", 50, 0.1, func(l workload.Latency) bool {
			return l.P50 < model.P50 && l.P95 < model.P95 && l.P99 < model.P99
		}},
		{"one sample, the highest draw: within the timeout", 1, 1 - 1e-12, func(l workload.Latency) bool { return l.P99 <= 30 && l.P95 > model.P95 }},
		{"one sample, the lowest draw: not below the fastest", 1, 1e-12, func(l workload.Latency) bool { return l.P50 >= 0.01 && l.P50 < model.P50 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := latencyAt(groups, 0, 30, sampledLevels(tc.n, tc.u), workload.AllPercentiles); !tc.want(got) {
				t.Errorf("at sampledLevels(n %g, u %g): %+v; model %+v", tc.n, tc.u, got, model)
			}
		})
	}
}

func TestPooledLevels(t *testing.T) {
	high, low := levels{0.6, 0.97, 0.995}, levels{0.4, 0.93, 0.985}
	for _, tc := range []struct {
		name string
		ls   []levels
		ns   []float64
		want levels
	}{
		{"none: the model's", nil, nil, modelLevels},
		{"no samples: the model's", []levels{high}, []float64{0}, modelLevels},
		{"one window: its own", []levels{high}, []float64{30}, high},
		{"opposite errors of equal weight cancel", []levels{high, low}, []float64{30, 30}, modelLevels},
		{"weighted by samples", []levels{high, modelLevels}, []float64{30, 90}, levels{0.525, 0.955, 0.99125}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pooledLevels(tc.ls, tc.ns)
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-12 {
					t.Errorf("pooledLevels = %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}

func TestEffectiveSamples(t *testing.T) {
	for _, tc := range []struct {
		name      string
		done, rho float64
		want      float64
	}{
		{"idle: every request", 100, 0, 100},
		{"half busy", 100, 0.5, 100 * 0.25 / 1.5},
		{"saturated: bounded above 0", 100, 1.5, 100 * 0.02 * 0.02 / 1.98},
		{"negative utilisation read as idle", 100, -1, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := effectiveSamples(tc.done, tc.rho); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("effectiveSamples(%g, %g) = %g, want %g", tc.done, tc.rho, got, tc.want)
			}
		})
	}
}

// TestSampledUsageSpread checks the windows' CPU usage against the law of
// the arrivals it counts: one 0.2-core pod at 10 requests/s of 14 ms (ρ =
// 0.7, the real node's app before its load step in rounds twenty-four to
// twenty-six). Sampled, a window's usage is its Poisson arrivals' work: a
// mean of ρ·c and a coefficient of variation of 1/√(λ·15 s) = 0.082, so
// 8–9% of the windows read above 77% utilisation, where an HPA targeting
// 70% scales out (its 10% tolerance). metrics-server's 10-s rates, which the
// real HPA reads, vary a little more (1/√(λ·10 s) = 0.1); bench-real's
// 15-s averages of them a little less (0.04–0.09 over the calm windows
// of rounds twenty-two to twenty-six). Off, every calm window reads ρ·c,
// and no window crosses the tolerance.
func TestSampledUsageSpread(t *testing.T) {
	const (
		cpu, rate, cpuSec = 0.2, 10.0, 0.014
		windows, seeds    = 80, 8
		edge              = 0.77 * cpu
	)
	mean := rate * cpuSec
	for _, tc := range []struct {
		name     string
		sampled  bool
		cv       [2]float64
		overEdge [2]float64
	}{
		{"sampled", true, [2]float64{0.065, 0.10}, [2]float64{0.04, 0.15}},
		{"mean", false, [2]float64{0, 1e-9}, [2]float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var us []float64
			for seed := range uint64(seeds) {
				s := calmSim(t, calmApp(cpu, cpuSec), rate, windows, Config{SampledUsage: tc.sampled, NodeCores: 2}, seed+1)
				for range windows {
					us = append(us, s.Step().Used.CPU)
				}
			}
			checkUsageSpread(t, "windows'", us, mean, edge, tc.cv, tc.overEdge)
		})
	}
}

// checkUsageSpread checks usages against their expected mean (within
// 2%), a coefficient of variation within cv, and a share above edge within
// over.
func checkUsageSpread(t *testing.T, what string, us []float64, mean, edge float64, cv, over [2]float64) {
	t.Helper()
	var sum, sq float64
	var above int
	for _, u := range us {
		sum += u
		sq += u * u
		if u > edge {
			above++
		}
	}
	n := float64(len(us))
	m := sum / n
	sd := math.Sqrt(max(0, sq/n-m*m))
	t.Logf("%s usage: mean %.4f cores, coefficient of variation %.4f, %d of %d above %.3f cores", what, m, sd/m, above, len(us), edge)
	if math.Abs(m-mean) > 0.02*mean {
		t.Errorf("mean %s usage %.4f cores, want %.4f within 2%%", what, m, mean)
	}
	if c := sd / m; c < cv[0] || c > cv[1] {
		t.Errorf("%s usage's coefficient of variation %.4f, want within %v", what, c, cv)
	}
	if share := float64(above) / n; share < over[0] || share > over[1] {
		t.Errorf("%.3f of the %s usages above %.3f cores, want within %v", share, what, edge, over)
	}
}

// calmApp is one pod of the real node's test app at cpu cores (request and
// limit) and cpuSec core-seconds per request, with the CFS quota model.
func calmApp(cpu, cpuSec float64) App {
	return App{
		Name: "testapp", Container: "app", SLO: 0.25, Replicas: 1,
		Requests: workload.Resources{CPU: cpu, Memory: 96 * mib},
		Limits:   workload.Resources{CPU: cpu, Memory: 96 * mib},
		Demand:   Demand{CPUSeconds: cpuSec, CPUBurst: true, BaseMemory: 58 * mib, MemoryPerRequest: mib},
	}
}

// calmSim runs app at a fixed rate for windows windows of 15 s.
func calmSim(t *testing.T, app App, rate float64, windows int, cfg Config, seed uint64) *Simulator {
	t.Helper()
	rates := make([]float64, windows)
	for i := range rates {
		rates[i] = rate
	}
	s, err := New(cfg, app, &Trace{Name: "calm", Step: 15 * time.Second, Rates: rates}, seed)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUsageResolution checks the usage a policy observes when it is a rate
// over 10 s of each 15-s window (metrics-server's resolution on the
// testbed), on the pod of TestSampledUsageSpread: its arrivals over 10 s
// are Poisson of mean λ·10 s, so the observed usage has a coefficient of
// variation of 1/√(λ·10 s) = 0.1, around the same mean, and about 16% of
// the looks read above 77% utilisation (8–9% of 15-s windows). The
// window's own usage, which the cost counts, is the same draw for draw as
// with no resolution: the thinning draws from a stream of its own. A pod
// that ends a window with a backlog was busy all of it, and any 10 s of it
// read the window's usage.
func TestUsageResolution(t *testing.T) {
	const (
		cpu, rate, cpuSec = 0.2, 10.0, 0.014
		windows, seeds    = 80, 8
		edge              = 0.77 * cpu
	)
	observed := func(s *Simulator) float64 { return s.Observation().Containers[0].Usage.CPU }
	t.Run("calm pod: a 10-s rate's spread", func(t *testing.T) {
		var us []float64
		for seed := range uint64(seeds) {
			fine := calmSim(t, calmApp(cpu, cpuSec), rate, windows, Config{SampledUsage: true, UsageResolution: 10 * time.Second, NodeCores: 2}, seed+1)
			whole := calmSim(t, calmApp(cpu, cpuSec), rate, windows, Config{SampledUsage: true, NodeCores: 2}, seed+1)
			for i := range windows {
				m, w := fine.Step(), whole.Step()
				if m.Used != w.Used || m.Latency != w.Latency || m.Completed != w.Completed {
					t.Fatalf("seed %d window %d: the window's usage %+v, p95 %g, completed %g; with no resolution %+v, %g, %g", seed+1, i, m.Used, m.Latency.P95, m.Completed, w.Used, w.Latency.P95, w.Completed)
				}
				if got := observed(whole); got != w.Used.CPU {
					t.Fatalf("with no resolution the observed usage %g is not the window's %g", got, w.Used.CPU)
				}
				us = append(us, observed(fine))
			}
		}
		checkUsageSpread(t, "observed", us, rate*cpuSec, edge, [2]float64{0.09, 0.11}, [2]float64{0.1, 0.22})
	})
	t.Run("overloaded pod: the window's usage", func(t *testing.T) {
		s := calmSim(t, calmApp(cpu, cpuSec), 2*cpu/cpuSec, 20, Config{SampledUsage: true, UsageResolution: 10 * time.Second, NodeCores: 2}, 3)
		for i := range 20 {
			m := s.Step()
			if i > 0 && observed(s) != m.Used.CPU {
				t.Errorf("window %d at ρ = 2: observed usage %g, want the window's %g", i, observed(s), m.Used.CPU)
			}
		}
	})
	t.Run("negative resolution refused", func(t *testing.T) {
		_, err := New(Config{UsageResolution: -time.Second}, calmApp(cpu, cpuSec), &Trace{Name: "calm", Step: 15 * time.Second, Rates: []float64{rate}}, 1)
		if err == nil || !strings.Contains(err.Error(), "usage resolution") {
			t.Errorf("New with a negative usage resolution: %v, want an error naming it", err)
		}
	})
}
