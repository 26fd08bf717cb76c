package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// The validation suite: the simulator against the closed forms it is built
// from and against its own documented model, each within validationTol.
// It checks the code, not the model (below ρmax the model is the closed
// form); the independent reference for the model is the discrete-event
// queue of desref_test.go.
// The rates are low on purpose (a few requests per pod per window, as most
// serverless functions see), where any double counting of the arrivals'
// Poisson noise shows: feeding each window's sampled rate into the
// processor-sharing formula put the mean latency of one pod at ρ = 2/3 at
// 5.2 s where theory says 2.0 s.
const validationTol = 0.05

// runSteady simulates app under a steady rate for warm-up plus steps windows
// and returns the completion-weighted mean latency, the mean p95 of windows
// that completed requests, and the mean CPU usage per Ready pod.
func runSteady(t *testing.T, cfg Config, app App, rate float64, steps int, seed uint64) (mean, p95, cpu float64) {
	t.Helper()
	s := newSim(t, cfg, app, steadyTrace(t, rate, steps+20), seed)
	warm(t, s)
	var lat, done, p95Sum, cpuSum float64
	var p95n int
	for range steps {
		m := s.Step()
		if m.Failed+m.TimedOut > 0 || m.OOMKills > 0 {
			t.Fatalf("window %d lost requests in a stable queue: %+v", m.Step, m)
		}
		lat += m.MeanLatency * m.Completed
		done += m.Completed
		if m.Completed > 0 {
			p95Sum += m.Latency.P95
			p95n++
		}
		cpuSum += m.Used.CPU / float64(m.Ready)
	}
	return lat / done, p95Sum / float64(p95n), cpuSum / float64(steps)
}

// TestValidateMM1PS: n pods behind round-robin load balancing are n
// independent M/M/1-PS queues of rate λ/n each. Mean response time is
// S/(1−ρ) (for PS it holds for any service distribution); the model's p95 is
// ln(20)·S/(1−ρ), the closed form of M/M/1's exponential sojourn time
// (FCFS; PS has the same mean and no elementary p95). CPU use is ρ·c.
func TestValidateMM1PS(t *testing.T) {
	const svc = 1 / 1.5 // seconds of one core per request; the limit is 1 core
	for _, rho := range []float64{0.1, 0.2, 0.3, 0.4, 0.5, 2.0 / 3, 0.7, 0.8, 0.9, 0.95} {
		for _, n := range []int32{1, 2, 4, 8, 16} {
			t.Run(fmt.Sprintf("rho=%.2f/pods=%d", rho, n), func(t *testing.T) {
				app := testApp(svc, 0, n)
				// Enough windows that the realised CPU use, which follows
				// the sampled arrivals, averages within a percent or two.
				steps := int(math.Max(1500, 40000/(rho/svc*15*float64(n))))
				// A timeout past the p95 at ρ = 0.95 (40 s), which would
				// otherwise cap it.
				cfg := Config{Timeout: time.Minute}
				mean, p95, cpu := runSteady(t, cfg, app, rho/svc*float64(n), steps, 1)
				resp := svc / (1 - rho)
				within(t, "mean response", mean, resp, validationTol)
				within(t, "p95", p95, math.Log(20)*resp, validationTol)
				within(t, "CPU per pod", cpu, rho, validationTol)
			})
		}
	}
}

// TestValidateIssueCase is the case that exposed the double counting: one
// pod, 1 req/s, service time 1/1.5 s at a limit that does not bind on the
// node. M/M/1-PS gives 2.0 s; the old model gave 5.2 s.
func TestValidateIssueCase(t *testing.T) {
	app := testApp(1/1.5, 0, 1)
	mean, _, _ := runSteady(t, Config{}, app, 1, 4000, 7)
	within(t, "mean response", mean, 2.0, validationTol)
}

// TestValidateThrottling: a CPU limit below what a request could use
// stretches the service time to cpuSeconds/limit, and a node whose pods
// want more CPU than it has gives each pod its request's share (CFS).
func TestValidateThrottling(t *testing.T) {
	t.Run("limit stretches service time", func(t *testing.T) {
		for _, tc := range []struct {
			limit, cpuSec, rate float64
		}{
			{limit: 0.25, cpuSec: 0.1, rate: 1.5}, // S = 0.4 s, ρ = 0.6
			{limit: 0.5, cpuSec: 0.1, rate: 4},    // S = 0.2 s, ρ = 0.8
			{limit: 2, cpuSec: 0.5, rate: 2},      // S = 0.25 s, ρ = 0.5
		} {
			t.Run(fmt.Sprintf("limit=%g", tc.limit), func(t *testing.T) {
				app := testApp(tc.cpuSec, 0.02, 1)
				app.Limits.CPU = tc.limit
				app.Requests.CPU = math.Min(app.Requests.CPU, tc.limit)
				mean, _, cpu := runSteady(t, Config{}, app, tc.rate, 3000, 3)
				svc := tc.cpuSec / tc.limit
				rho := tc.rate * svc
				within(t, "mean response", mean, 0.02+svc/(1-rho), validationTol)
				within(t, "CPU used", cpu, tc.rate*tc.cpuSec, validationTol)
			})
		}
	})
	t.Run("oversubscribed node divides CPU by requests", func(t *testing.T) {
		// One 4-core node, 8 pods limited to 1 core each, requests 0.5: they
		// want 8 cores, so each gets 4·0.5/4 = 0.5 core and its queue
		// overflows into timeouts.
		app := testApp(0.1, 0, 8)
		app.Requests = workload.Resources{CPU: 0.5, Memory: gib}
		app.Limits = workload.Resources{CPU: 1, Memory: 4 * gib}
		cfg := Config{Nodes: 1, NodeCapacity: workload.Resources{CPU: 4, Memory: 64 * gib}}
		s := newSim(t, cfg, app, steadyTrace(t, 8*9, 60), 1) // 0.9 core wanted per pod
		warm(t, s)
		var m StepMetrics
		for range 40 {
			m = s.Step()
		}
		within(t, "CPU used on the node", m.Used.CPU, 4, 1e-9)
		if m.TimedOut <= 0 {
			t.Errorf("no timeouts on a node at twice its capacity: %+v", m)
		}
	})
}

// TestValidateOOM: a pod is OOM-killed exactly when its peak working set
// passes the memory limit, never below it.
func TestValidateOOM(t *testing.T) {
	app := testApp(0.01, 0.5, 1)
	app.MemoryPerRequest = 10 * mib
	in := PodInput{Rate: 20, Arrived: 300, CPU: 1, Z: 0.7}
	free := app.ServePod(in, 15, 30)
	if free.OOMKilled {
		t.Fatal("killed without a limit")
	}
	peak := app.PeakMemory(free.InFlight, in.Z)
	if free.Peak.Memory != peak {
		t.Fatalf("peak = %g, want PeakMemory = %g", free.Peak.Memory, peak)
	}
	for _, tc := range []struct {
		name  string
		limit float64
		kill  bool
	}{
		{"limit at the peak", peak, false},
		{"limit a byte above", peak + 1, false},
		{"limit a byte below", peak - 1, true},
		{"limit at the mean working set", free.Usage.Memory, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := in
			in.MemoryLimit = tc.limit
			w := app.ServePod(in, 15, 30)
			if w.OOMKilled != tc.kill {
				t.Fatalf("OOMKilled = %v, want %v (peak %g, limit %g)", w.OOMKilled, tc.kill, peak, tc.limit)
			}
			if tc.kill && (w.Failed <= 0 || w.Backlog != 0 || w.Peak.Memory != tc.limit) {
				t.Errorf("a kill must lose the pod's requests and cap the peak at the limit: %+v", w)
			}
			if !tc.kill && w != free {
				t.Errorf("a limit that is not passed changed the window: %+v, want %+v", w, free)
			}
		})
	}
}

// TestValidateStartupDelay: a new pod takes no requests before its start-up
// delay has passed, and the pods already Ready carry the load meanwhile.
func TestValidateStartupDelay(t *testing.T) {
	app := testApp(0.1, 0, 1)
	app.StartupDelay = 45 * time.Second // three windows
	s := newSim(t, Config{}, app, steadyTrace(t, 8, 60), 1)
	warm(t, s)
	if _, err := s.Apply(workload.Recommendation{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	for w := range 5 {
		m := s.Step()
		wantReady := int32(1)
		if w >= 3 {
			wantReady = 2
		}
		if m.Ready != wantReady {
			t.Fatalf("window %d: %d Ready, want %d", w, m.Ready, wantReady)
		}
		// CPU use is the Ready pods' only: one pod at ρ = 0.8 until the new
		// one serves, then two at 0.4.
		within(t, fmt.Sprintf("window %d CPU used", w), m.Used.CPU, 0.8, 0.35)
		if o := s.Observation(); w < 3 {
			for _, p := range o.Pods {
				if !p.Ready && p.Usage.CPU != 0 {
					t.Errorf("window %d: starting pod %s used CPU %g", w, p.Name, p.Usage.CPU)
				}
			}
		}
	}
}

// TestValidateLittle: in every window without an OOM kill, the requests in
// flight (read back from the working set) equal throughput times mean
// response time, through overload, backlog, throttling and scaling; with
// Config.ReadyWithinWindow too, the new pods serving part of a window.
func TestValidateLittle(t *testing.T) {
	for _, within := range []bool{false, true} {
		for _, kind := range TraceKinds() {
			name := string(kind)
			if within {
				name += "/ready within the window"
			}
			t.Run(name, func(t *testing.T) {
				validateLittle(t, kind, within)
			})
		}
	}
}

func validateLittle(t *testing.T, kind TraceKind, within bool) {
	app := testApp(0.05, 0.03, 2)
	app.Limits.CPU = 0.5
	app.Requests.CPU = 0.5
	if within {
		app.StartupDelay = 20 * time.Second // Ready 5 s into a window
	}
	tr, err := GenerateTrace(kind, TraceOptions{Mean: 18, Steps: 400, Step: 15 * time.Second, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, Config{ReadyWithinWindow: within}, app, &tr, 5)
	var checked, backlogged int
	for i := range 400 {
		if i%50 == 25 { // scale now and then, so pods start and stop
			if _, err := s.Apply(workload.Recommendation{Replicas: int32(1 + i%3)}); err != nil {
				t.Fatal(err)
			}
		}
		m := s.Step()
		if m.OOMKills > 0 {
			continue
		}
		pods := float64(m.Ready + m.Replicas - m.Ready - m.Pending) // pods with a working set
		inflight := (m.Used.Memory - pods*app.BaseMemory) / app.MemoryPerRequest
		want := m.Completed / 15 * m.MeanLatency
		if math.Abs(inflight-want) > 1e-6*math.Max(1, want) {
			t.Fatalf("window %d: %g in flight, throughput × latency = %g (%+v)", i, inflight, want, m)
		}
		checked++
		if m.MeanLatency > 0.05/(1-rhoMax) {
			backlogged++
		}
	}
	if checked < 300 {
		t.Errorf("only %d windows checked", checked)
	}
	if kind == FlashCrowd && backlogged == 0 {
		t.Error("the flash crowd never overloaded the pods: the test does not reach the backlog")
	}
}

// TestValidateConservation: ServePod creates and loses no request, keeps CPU
// use within capacity and Little's law, for arbitrary inputs, with or
// without idle CPU (App.BaseCPU, up to more than the limit) and sampled
// usage.
func TestValidateConservation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	app := testApp(0.05, 0.02, 1)
	for i := range 20000 {
		app.BaseCPU = 0
		if i%2 == 1 {
			app.BaseCPU = rng.Float64() * 0.1
		}
		in := PodInput{
			Rate:         rng.Float64() * 60,
			Backlog:      rng.Float64() * 200 * float64(rng.IntN(2)),
			CPU:          0.05 + rng.Float64()*2,
			Z:            rng.NormFloat64(),
			SampledUsage: rng.IntN(2) == 1,
		}
		in.Arrived = float64(rng.IntN(int(in.Rate*15*2) + 1))
		w := app.ServePod(in, 15, 30)
		out := w.Completed + w.TimedOut + w.Failed + w.Backlog
		if math.Abs(out-(in.Arrived+in.Backlog)) > 1e-9*math.Max(1, out) {
			t.Fatalf("case %d %+v: out %g != in %g (%+v)", i, in, out, in.Arrived+in.Backlog, w)
		}
		if w.Completed < 0 || w.TimedOut < 0 || w.Backlog < 0 || w.Usage.CPU > in.CPU+1e-12 || w.Usage.CPU < min(app.BaseCPU, in.CPU)-1e-12 {
			t.Fatalf("case %d %+v: impossible window %+v", i, in, w)
		}
		if l := w.Completed / 15 * w.MeanLatency(&app); math.Abs(w.InFlight-l) > 1e-9*math.Max(1, l) {
			t.Fatalf("case %d: in flight %g, Little gives %g", i, w.InFlight, l)
		}
	}
}

// TestValidateBaseCPU: a pod's idle CPU (App.BaseCPU) is in its usage and
// out of what serves its requests. One 0.2-core pod at 10 requests/s of
// 12.5 ms with 15 millicores idle (the real node's test app, as rounds
// twenty-four to twenty-six measured it) uses 0.14 cores, and its requests
// see the queue of a 0.185-core pod: the same response time as a pod
// without idle CPU at a limit 15 millicores lower.
func TestValidateBaseCPU(t *testing.T) {
	for _, burst := range []bool{false, true} {
		t.Run(fmt.Sprintf("burst %t", burst), func(t *testing.T) {
			idle := App{Demand: Demand{CPUSeconds: 0.0125, CPUBurst: burst, BaseCPU: 0.015}}
			none := App{Demand: Demand{CPUSeconds: 0.0125, CPUBurst: burst}}
			in := PodInput{Rate: 10, Arrived: 150, CPU: 0.2, Cores: 2}
			w := idle.ServePod(in, 15, 30)
			if want := 0.015 + 10*0.0125; math.Abs(w.Usage.CPU-want) > 1e-12 {
				t.Errorf("usage %g cores, want %g", w.Usage.CPU, want)
			}
			in.CPU = 0.185
			ref := none.ServePod(in, 15, 30)
			if w.Stationary != ref.Stationary || w.Own != ref.Own || w.QueueDelay != ref.QueueDelay {
				t.Errorf("latency (own %g, stationary %g, queue %g), want a 0.185-core pod's (%g, %g, %g)",
					w.Own, w.Stationary, w.QueueDelay, ref.Own, ref.Stationary, ref.QueueDelay)
			}
			// A limit the idle CPU fills still serves, at a crawl.
			in.CPU = 0.01
			if full := idle.ServePod(in, 15, 30); !(full.Completed >= 0) || full.Usage.CPU > in.CPU {
				t.Errorf("a pod whose idle CPU fills its limit: %+v", full)
			}
		})
	}
}

func TestValidateRefusesNegativeBaseCPU(t *testing.T) {
	app := testApp(0.05, 0.02, 1)
	app.BaseCPU = -0.01
	if err := app.Validate(); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Validate() = %v, want a negative-parameter error", err)
	}
}
