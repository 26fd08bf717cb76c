package sim

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// testApp is an app with no OOM risk unless the test lowers its memory limit.
func testApp(cpuSec, ioWait float64, replicas int32) App {
	return App{
		Name: "t", Container: "main",
		StartupDelay: 30 * time.Second,
		SLO:          1,
		Replicas:     replicas,
		Requests:     workload.Resources{CPU: 1, Memory: 1 * gib},
		Limits:       workload.Resources{CPU: 1, Memory: 4 * gib},
		Constraints:  workload.Constraints{MinReplicas: 1, MaxReplicas: 100},
		Demand: Demand{
			CPUSeconds:       cpuSec,
			IOWait:           ioWait,
			BaseMemory:       100 * mib,
			MemoryPerRequest: 1 * mib,
		},
	}
}

func steadyTrace(t testing.TB, rate float64, steps int) *Trace {
	t.Helper()
	tr, err := GenerateTrace(Steady, TraceOptions{Mean: rate, Steps: steps, Step: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &tr
}

func newSim(t testing.TB, cfg Config, app App, tr *Trace, seed uint64) *Simulator {
	t.Helper()
	s, err := New(cfg, app, tr, seed)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// warm steps until every pod is Ready.
func warm(t testing.TB, s *Simulator) {
	t.Helper()
	for range 10 {
		if m := s.Step(); m.Ready == m.Replicas && m.Pending == 0 {
			return
		}
	}
	t.Fatal("pods did not become ready")
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g ± %.0f%%", what, got, want, tol*100)
	}
}

// TestQueueingClosedForm checks the pod model against M/G/1-PS results when
// each window holds thousands of requests (so per-window Poisson noise does
// not bias the average): mean response W + S/(1−ρ), utilisation λS, p95
// W + ln(20)·S/(1−ρ) under the exponential assumption, and the working set
// base + perRequest·λ·(W + S/(1−ρ)) by Little's law.
func TestQueueingClosedForm(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rho      float64
		replicas int32
		ioWait   float64
	}{
		{"rho 0.3 one pod", 0.3, 1, 0},
		{"rho 0.6 one pod", 0.6, 1, 0},
		{"rho 0.85 one pod", 0.85, 1, 0},
		{"rho 0.7 four pods", 0.7, 4, 0},
		{"rho 0.5 with io wait", 0.5, 2, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const cpuSec, steps = 0.002, 3000
			perPod := tc.rho / cpuSec // limit is 1 core
			app := testApp(cpuSec, tc.ioWait, tc.replicas)
			s := newSim(t, Config{}, app, steadyTrace(t, perPod*float64(tc.replicas), steps+20), 1)
			warm(t, s)
			var lat, p95, cpu, mem, done float64
			for range steps {
				m := s.Step()
				lat += m.MeanLatency * m.Completed
				done += m.Completed
				p95 += m.Latency.P95
				o := s.Observation()
				cpu += o.Containers[0].Usage.CPU
				mem += o.Containers[0].Usage.Memory
			}
			resp := cpuSec / (1 - tc.rho)
			within(t, "mean response", lat/done, tc.ioWait+resp, 0.05)
			within(t, "p95", p95/steps, tc.ioWait+math.Log(20)*resp, 0.05)
			within(t, "CPU usage per pod", cpu/steps, tc.rho, 0.05)
			within(t, "working set", mem/steps, app.BaseMemory+app.MemoryPerRequest*perPod*(tc.ioWait+resp), 0.05)
		})
	}
}

func TestOverloadTimesOut(t *testing.T) {
	app := testApp(0.01, 0, 1)
	s := newSim(t, Config{}, app, steadyTrace(t, 200, 100), 1) // ρ = 2
	warm(t, s)
	var m StepMetrics
	for range 20 {
		m = s.Step()
	}
	if m.TimedOut <= 0 {
		t.Errorf("no timeouts at ρ=2: %+v", m)
	}
	if want := s.Config().Timeout.Seconds(); m.Latency.P95 != want {
		t.Errorf("p95 = %g, want the timeout %g", m.Latency.P95, want)
	}
	if got, want := m.Used.CPU, 1.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("CPU used = %g, want the limit %g", got, want)
	}
}

func TestOOMKillAndRestart(t *testing.T) {
	app := testApp(0.001, 0.5, 1)
	app.MemoryPerRequest = 10 * mib
	app.Limits.Memory = 300 * mib // 100 MiB base + 50 in flight × 10 MiB = 600 MiB
	app.StartupDelay = 30 * time.Second
	s := newSim(t, Config{}, app, steadyTrace(t, 100, 50), 1)
	// The initial pod is Ready at step 0 and is killed in its first window.
	var m StepMetrics
	if m = s.Step(); m.OOMKills != 1 || m.Restarts != 1 {
		t.Fatalf("OOMKills=%d Restarts=%d, want 1 and 1", m.OOMKills, m.Restarts)
	}
	if m.Failed <= 0 || m.Completed <= 0 {
		t.Errorf("want completed requests and failed in-flight ones: %+v", m)
	}
	if o := s.Observation(); o.ReadyReplicas != 0 || o.Containers[0].OOMKills != 1 || o.Containers[0].Peak.Memory != app.Limits.Memory {
		t.Errorf("observation after OOM: ready=%d container=%+v", o.ReadyReplicas, o.Containers[0])
	}
	// Down for the start-up delay (2 windows), then Ready and killed again.
	for i, wantReady := range []bool{false, false, true} {
		m = s.Step()
		if !wantReady && (m.Failed != m.Arrivals || m.OOMKills != 0) {
			t.Errorf("window %d: %g of %g requests failed, %d kills while the pod restarts", i, m.Failed, m.Arrivals, m.OOMKills)
		}
		if wantReady && m.OOMKills != 1 {
			t.Errorf("window %d: pod not back and killed again: %+v", i, m)
		}
	}
}

func TestStartupDelay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		delay      time.Duration
		within     bool // Config.ReadyWithinWindow
		wantWindow int  // first window, after scaling, at whose end the pod is Ready
	}{
		{"none", 0, false, 0},
		{"one window", 15 * time.Second, false, 1},
		{"rounds up", 40 * time.Second, false, 3},
		{"within: none", 0, true, 0},
		{"within: one window", 15 * time.Second, true, 0},
		{"within: 40s", 40 * time.Second, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(0.01, 0, 1)
			app.StartupDelay = tc.delay
			s := newSim(t, Config{ReadyWithinWindow: tc.within}, app, steadyTrace(t, 10, 50), 1)
			warm(t, s)
			if _, err := s.Apply(workload.Recommendation{Replicas: 2}); err != nil {
				t.Fatal(err)
			}
			for w := 0; w <= tc.wantWindow; w++ {
				m := s.Step()
				if ready := m.Ready == 2; ready != (w == tc.wantWindow) {
					t.Fatalf("window %d: ready=%d, want 2 only from window %d", w, m.Ready, tc.wantWindow)
				}
			}
		})
	}
}

func TestPendingWhenNothingFits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		req         workload.Resources
		replicas    int32
		wantPending int32
	}{
		{"bigger than a node", workload.Resources{CPU: 17, Memory: gib}, 2, 2},
		{"cluster full", workload.Resources{CPU: 9, Memory: gib}, 12, 2}, // one per node, 10 nodes
		{"memory bound", workload.Resources{CPU: 0.1, Memory: 40 * gib}, 11, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(0.01, 0, tc.replicas)
			app.Requests, app.Limits = tc.req, tc.req
			s := newSim(t, Config{}, app, steadyTrace(t, 1, 10), 1)
			var m StepMetrics
			for range 5 {
				m = s.Step()
			}
			if m.Pending != tc.wantPending || m.Ready != tc.replicas-tc.wantPending {
				t.Errorf("pending=%d ready=%d, want %d and %d", m.Pending, m.Ready, tc.wantPending, tc.replicas-tc.wantPending)
			}
			var noMetrics int32
			for _, p := range s.Observation().Pods {
				if !p.HasMetrics {
					noMetrics++
				}
			}
			if noMetrics != tc.wantPending {
				t.Errorf("%d pods without metrics, want %d", noMetrics, tc.wantPending)
			}
		})
	}
}

func TestVerticalChange(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mode         ResizeMode
		wantRestarts int
	}{
		{"restart rolls out a quarter at a time", ResizeRestart, 1},
		{"in place keeps pods", ResizeInPlace, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(0.01, 0, 4)
			app.Limits.CPU = 2 // ratio 2 must be kept
			s := newSim(t, Config{Resize: tc.mode}, app, steadyTrace(t, 10, 50), 1)
			warm(t, s)
			a, err := s.Apply(workload.Recommendation{Containers: []workload.ContainerRecommendation{{
				Name: "main", Target: workload.Resources{CPU: 0.5},
			}}})
			if err != nil || !a.Vertical || a.Horizontal {
				t.Fatalf("actions %+v, err %v", a, err)
			}
			m := s.Step()
			if m.Restarts != tc.wantRestarts {
				t.Errorf("restarts = %d, want %d", m.Restarts, tc.wantRestarts)
			}
			want := workload.Resources{CPU: 1, Memory: 4 * gib}
			if m.Limits != want {
				t.Errorf("limits = %+v, want %+v", m.Limits, want)
			}
			for range 30 {
				m = s.Step()
			}
			for _, p := range s.Observation().Pods {
				if p.Requests.CPU != 0.5 || !p.Ready {
					t.Errorf("pod %s not rolled out: %+v", p.Name, p)
				}
			}
		})
	}
}

// TestResizeDeferred: in place, a resize the node has no room for is
// deferred: the pod keeps its size and reports the deferral, is resized
// once room frees up (here: a replica removed), and is replaced after the
// updater's timeout if none does.
func TestResizeDeferred(t *testing.T) {
	for _, tc := range []struct {
		name string
		// shedAt is the step at which one replica is removed; 0 never.
		shedAt int
	}{
		{"room frees up: resized", 4},
		{"no room: replaced after five minutes", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(0.01, 0, 2)
			app.Requests.CPU, app.Limits.CPU = 0.2, 0.2
			s := newSim(t, Config{Resize: ResizeInPlace, Nodes: 1, NodeCapacity: workload.Resources{CPU: 1.3, Memory: 64 * gib}}, app, steadyTrace(t, 10, 60), 1)
			warm(t, s)
			if _, err := s.Apply(workload.Recommendation{Replicas: 2, Containers: []workload.ContainerRecommendation{{
				Name: "main", Target: workload.Resources{CPU: 0.68},
			}}}); err != nil {
				t.Fatal(err)
			}
			var first time.Time
			for i := 1; i <= 22; i++ {
				if i == tc.shedAt {
					if _, err := s.Apply(workload.Recommendation{Replicas: 1}); err != nil {
						t.Fatal(err)
					}
				}
				m := s.Step()
				var deferred []workload.PodSample
				for _, p := range s.Observation().Pods {
					if !p.ResizeDeferredSince.IsZero() {
						deferred = append(deferred, p)
					}
				}
				switch {
				case i < tc.shedAt || (tc.shedAt == 0 && i <= 20):
					// 0.68 + 0.68 > 1.3: one pod resized, one deferred
					// at 0.2, still serving.
					if len(deferred) != 1 || deferred[0].Requests.CPU != 0.2 || !deferred[0].Ready || m.Restarts != 0 {
						t.Fatalf("step %d: deferred %+v, restarts %d; want one pod deferred at 0.2, serving", i, deferred, m.Restarts)
					}
					if first.IsZero() {
						first = deferred[0].ResizeDeferredSince
					} else if !deferred[0].ResizeDeferredSince.Equal(first) {
						t.Fatalf("step %d: deferred since %v, was %v", i, deferred[0].ResizeDeferredSince, first)
					}
				case tc.shedAt > 0:
					obs := s.Observation()
					if len(deferred) != 0 || len(obs.Pods) != 1 || obs.Pods[0].Requests.CPU != 0.68 {
						t.Fatalf("step %d: pods %+v; want one at 0.68, none deferred", i, obs.Pods)
					}
				case i == 21:
					// Deferred since step 1: replaced at the timeout.
					if m.Restarts != 1 || len(deferred) != 0 {
						t.Fatalf("step %d: restarts %d, deferred %+v; want the deferred pod replaced", i, m.Restarts, deferred)
					}
				}
			}
		})
	}
}

// TestResizeDeferredTimeoutReplacesOnlyItsPod: when one deferral times
// out and its pod is replaced, a younger deferral keeps its pod.
func TestResizeDeferredTimeoutReplacesOnlyItsPod(t *testing.T) {
	app := testApp(0.01, 0, 3)
	app.Requests.CPU, app.Limits.CPU = 0.2, 0.2
	s := newSim(t, Config{Resize: ResizeInPlace, Nodes: 1, NodeCapacity: workload.Resources{CPU: 1, Memory: 64 * gib}, MaxUnavailable: 1}, app, steadyTrace(t, 10, 60), 1)
	warm(t, s)
	if _, err := s.Apply(workload.Recommendation{Replicas: 3, Containers: []workload.ContainerRecommendation{{
		Name: "main", Target: workload.Resources{CPU: 0.6},
	}}}); err != nil {
		t.Fatal(err)
	}
	s.Step() // one pod resized to 0.6; the node defers the other two
	var waiting []*pod
	for i := range s.cluster.pods {
		if s.cluster.pods[i].deferral.waiting {
			waiting = append(waiting, &s.cluster.pods[i])
		}
	}
	if len(waiting) != 2 {
		t.Fatalf("%d deferrals, want 2", len(waiting))
	}
	young := waiting[1]
	young.deferral.since += 120 // deferred two minutes later
	for range 20 {
		s.Step()
	}
	if !young.deferral.waiting || young.req.CPU != 0.2 {
		t.Errorf("the younger deferral's pod was replaced with the older: %+v", young)
	}
	if waiting[0].deferral.waiting {
		t.Error("the older deferral did not time out")
	}
}

func TestBoundsSuppressChange(t *testing.T) {
	s := newSim(t, Config{}, testApp(0.01, 0, 1), steadyTrace(t, 1, 10), 1)
	a, err := s.Apply(workload.Recommendation{Containers: []workload.ContainerRecommendation{{
		Name:       "main",
		Target:     workload.Resources{CPU: 0.9},
		LowerBound: workload.Resources{CPU: 0.8},
		UpperBound: workload.Resources{CPU: 1.2},
	}}})
	if err != nil || a.Vertical {
		t.Errorf("a request within bounds changed: %+v %v", a, err)
	}
}

// TestOutOfBoundsAppliesEveryTarget: once one resource is outside its
// bounds the pod is updated, and every controlled resource takes its
// target, as the updater (updater/logic's assess) and VPA's updater apply
// the whole recommendation. On the real node VPA's 250Mi memory minimum
// put a 96Mi request out of bounds in the first minute, and the CPU,
// within its bounds, went from 400m to its target with it.
func TestOutOfBoundsAppliesEveryTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		memLo   float64
		wantCPU float64
		wantMem float64
	}{
		{"memory below its bounds: CPU within its own follows", 2 * gib, 0.4, 2.5 * gib},
		{"both within their bounds: nothing", 0.5 * gib, 1, 1 * gib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{Resize: ResizeInPlace}, testApp(0.01, 0, 1), steadyTrace(t, 1, 10), 1)
			if _, err := s.Apply(workload.Recommendation{Containers: []workload.ContainerRecommendation{{
				Name:       "main",
				Target:     workload.Resources{CPU: 0.4, Memory: 2.5 * gib},
				LowerBound: workload.Resources{CPU: 0.1, Memory: tc.memLo},
				UpperBound: workload.Resources{CPU: 8, Memory: 8 * gib},
			}}}); err != nil {
				t.Fatal(err)
			}
			m := s.Step()
			if m.Requests.CPU != tc.wantCPU || m.Requests.Memory != tc.wantMem {
				t.Errorf("requests %+v, want CPU %g and memory %g", m.Requests, tc.wantCPU, tc.wantMem)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	run := func(seed uint64) []StepMetrics {
		apps, err := GenerateApps(7, 3)
		if err != nil {
			t.Fatal(err)
		}
		var out []StepMetrics
		for i, app := range apps {
			tr, err := GenerateTrace(TraceKinds()[i], TraceOptions{Mean: app.BaseRate, Steps: 200, Step: 15 * time.Second, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			s := newSim(t, Config{KeepHistory: true}, app, &tr, seed)
			for range 200 {
				s.Step()
			}
			out = append(out, s.History()...)
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different metrics")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("different seeds, same metrics")
	}
}

func TestStepDoesNotAllocate(t *testing.T) {
	app := testApp(0.01, 0.01, 20)
	s := newSim(t, Config{}, app, steadyTrace(t, 500, 10), 1)
	warm(t, s)
	if n := testing.AllocsPerRun(100, func() { s.Step() }); n != 0 {
		t.Errorf("Step allocates %g times", n)
	}
}

func TestGenerateApps(t *testing.T) {
	if got := len(Profiles()); got != 16 {
		t.Fatalf("%d profiles, want 16", got)
	}
	names := map[string]bool{}
	for _, p := range Profiles() {
		names[p.Name] = true
	}
	if len(names) != 16 {
		t.Errorf("profile names are not unique")
	}
	apps, err := GenerateApps(42, 1000)
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := GenerateApps(42, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(prefix, apps[:10]) {
		t.Error("GenerateApps(seed, 10) is not a prefix of GenerateApps(seed, 1000)")
	}
	used := map[string]bool{}
	for _, a := range apps {
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
		if n := len(a.Segments); n < 1 || n > 3 {
			t.Errorf("%s has %d segments", a.Name, n)
		}
		if a.SLO <= a.IOWait {
			t.Errorf("%s: SLO %g unreachable with I/O wait %g", a.Name, a.SLO, a.IOWait)
		}
		for _, seg := range a.Segments {
			used[seg] = true
		}
	}
	if len(used) != 16 {
		t.Errorf("1000 apps use %d of 16 profiles", len(used))
	}
}

func TestGenerateTrace(t *testing.T) {
	const mean, steps = 50.0, 20000
	for _, kind := range TraceKinds() {
		t.Run(string(kind), func(t *testing.T) {
			tr, err := GenerateTrace(kind, TraceOptions{Mean: mean, Steps: steps, Step: 15 * time.Second, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Rates) != steps {
				t.Fatalf("%d rates, want %d", len(tr.Rates), steps)
			}
			lo, hi := tr.Rates[0], tr.Rates[0]
			for _, r := range tr.Rates {
				if r < 0 || math.IsNaN(r) {
					t.Fatalf("bad rate %g", r)
				}
				lo, hi = math.Min(lo, r), math.Max(hi, r)
			}
			if kind != Steady && hi-lo < 0.5*mean {
				t.Errorf("range [%g, %g] too flat for %s", lo, hi, kind)
			}
			if kind == Steady || kind == Diurnal || kind == Bursty || kind == Ramp {
				within(t, "mean", tr.Mean(), mean, 0.1)
			}
		})
	}
	if _, err := GenerateTrace("sawtooth", TraceOptions{Mean: 1, Steps: 1, Step: time.Second}); err == nil {
		t.Error("unknown kind accepted")
	}
}

func azureRow(owner string, counts ...string) string {
	cols := []string{owner, "app", "fn", "http"}
	for i := range AzureMinutes {
		c := "1"
		if i < len(counts) {
			c = counts[i]
		}
		cols = append(cols, c)
	}
	return strings.Join(cols, ",")
}

func azureHeader() string {
	cols := []string{"HashOwner", "HashApp", "HashFunction", "Trigger"}
	for i := 1; i <= AzureMinutes; i++ {
		cols = append(cols, strconv.Itoa(i))
	}
	return strings.Join(cols, ",")
}

func TestReadAzureCSV(t *testing.T) {
	good := azureRow("o1", "60", "0", "120")
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string
		wantN   int
	}{
		{"header and rows", azureHeader() + "\n" + good + "\n" + good + "\n", "", 2},
		{"no header", good + "\n", "", 1},
		{"short row", azureHeader() + "\n" + good + "\no,a,f,http,1,2\n", "line 3: 6 columns", 0},
		{"bad count", good + "\n" + azureRow("o", "1", "x") + "\n", `line 2: minute 2: count "x"`, 0},
		{"negative count", azureRow("o", "-4") + "\n", `line 1: minute 1: count "-4"`, 0},
		{"empty owner", good + "\n" + good + "\n" + azureRow("") + "\n", "line 3: HashOwner is empty", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fns, err := ReadAzureCSV(strings.NewReader(tc.in))
			if !wantError(t, err, tc.wantErr) {
				return
			}
			if len(fns) != tc.wantN {
				t.Fatalf("%d functions, want %d", len(fns), tc.wantN)
			}
			tr, err := fns[0].Trace(15*time.Second, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Rates) != 4*AzureMinutes || tr.Rates[3] != 1 || tr.Rates[4] != 0 || tr.Rates[8] != 2 {
				t.Errorf("rates %v..., want 4 windows of 1/s, 0, then 2/s", tr.Rates[:12])
			}
		})
	}
}

// BenchmarkPodStep steps deployments of several sizes; pod-steps/s is the
// figure of merit (the target is at least 1e6 per core). Small deployments
// pay the per-window costs (arrivals, percentiles) over fewer pods.
func BenchmarkPodStep(b *testing.B) {
	for _, pods := range []int{2, 20, 200} {
		b.Run(strconv.Itoa(pods)+"pods", func(b *testing.B) {
			app := testApp(0.01, 0.02, int32(pods))
			app.Requests.CPU, app.Limits.CPU = 0.5, 1
			tr := steadyTrace(b, 0.6*float64(pods)/0.01, 10)
			s := newSim(b, Config{Nodes: 20}, app, tr, 1)
			warm(b, s)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s.Step()
			}
			b.ReportMetric(float64(b.N)*float64(pods)/b.Elapsed().Seconds(), "pod-steps/s")
		})
	}
}

// TestTenants: other workloads on the nodes take their share of the CPU the
// app's pods did not request, so a pod that wants more than its request gets
// less of its limit, and on packed, busy nodes (1) exactly its request.
// Within its request a pod sees no difference. A starved pod reports CPU
// pressure: the share of the CPU it wanted, up to its limit, that it did
// not get (its backlog grows, so it wants its whole limit).
func TestTenants(t *testing.T) {
	const cpuSec = 0.01
	for _, tc := range []struct {
		name         string
		tenants      float64
		rate         float64 // requests/s to one pod of request 1, limit 2
		wantUsed     float64 // cores
		wantPressure float64
	}{
		{"alone, above the request", 0, 180, 1.8, 0},
		{"packed, above the request", 1, 180, 1, 0.5},
		// 16 cores, the pod requests 1: the others use 14.4 of the 15 left,
		// and leave the pod 1.6.
		{"busy, above the request", 0.96, 195, 1.6, 0.2},
		{"busy, within the free CPU", 0.96, 150, 1.5, 0},
		{"packed, within the request", 1, 60, 0.6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(cpuSec, 0, 1)
			app.Limits.CPU = 2
			app.Limits.Memory = 16 * gib // an overload's backlog is not OOM-killed
			s := newSim(t, Config{Tenants: tc.tenants}, app, steadyTrace(t, tc.rate, 100), 1)
			warm(t, s)
			var used float64
			const n = 40
			for range n {
				used += s.Step().Used.CPU / n
			}
			within(t, "CPU used", used, math.Min(tc.wantUsed, tc.rate*cpuSec), 0.03)
			if got := s.Observation().Containers[0].CPUPressure; math.Abs(got-tc.wantPressure) > 0.01 {
				t.Errorf("CPU pressure %.3f, want %.3f", got, tc.wantPressure)
			}
		})
	}
	if err := (Config{Tenants: 1.5}).WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "tenants") {
		t.Errorf("tenants 1.5: err = %v", err)
	}
}
