package learn

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

const mi = 1 << 20

func obs() workload.Observation {
	return workload.Observation{
		Time: time.Unix(1000, 0), Window: time.Minute, Replicas: 3, ReadyReplicas: 3,
		RequestRate: 90, Latency: workload.Latency{P50: 0.05, P95: 0.1, P99: 0.2}, SLO: 0.2,
		Containers: []workload.ContainerObservation{
			{Name: "app", Requests: workload.Resources{CPU: 1, Memory: 512 * mi}, Usage: workload.Resources{CPU: 0.5, Memory: 256 * mi}, Peak: workload.Resources{CPU: 0.7, Memory: 300 * mi}},
			{Name: "sidecar", Requests: workload.Resources{CPU: 0.1, Memory: 64 * mi}, Usage: workload.Resources{CPU: 0.05, Memory: 32 * mi}, Peak: workload.Resources{CPU: 0.06, Memory: 40 * mi}},
		},
	}
}

func cons() workload.Constraints {
	return workload.Constraints{MinReplicas: 2, MaxReplicas: 5, Containers: []workload.ContainerPolicy{
		{Name: "app", Mode: workload.ContainerModeAuto},
		{Name: "sidecar", Mode: workload.ContainerModeOff},
	}}
}

func TestMask(t *testing.T) {
	all := []bool{true, true, true, true, true, true, true}
	for _, tc := range []struct {
		name string
		obs  func(*workload.Observation)
		cons func(*workload.Constraints)
		want []bool
	}{
		{"everything legal", nil, nil, all},
		{"at max replicas", func(o *workload.Observation) { o.Replicas = 5 }, nil, []bool{true, false, true, true, true, true, true}},
		{"at min replicas", func(o *workload.Observation) { o.Replicas = 2 }, nil, []bool{true, true, false, true, true, true, true}},
		{"min 0 still keeps one replica", func(o *workload.Observation) { o.Replicas = 1 }, func(c *workload.Constraints) { c.MinReplicas = 0 }, []bool{true, true, false, true, true, true, true}},
		{"unbounded max", func(o *workload.Observation) { o.Replicas = 500 }, func(c *workload.Constraints) { c.MaxReplicas = 0 }, all},
		{"only memory controlled", nil, func(c *workload.Constraints) {
			c.Containers[0].ControlledResources = []workload.Resource{workload.Memory}
		}, []bool{true, true, true, false, false, true, true}},
		{"container mode Off", nil, func(c *workload.Constraints) { c.Containers[0].Mode = workload.ContainerModeOff }, []bool{true, true, true, false, false, false, false}},
		{"at maxAllowed CPU", nil, func(c *workload.Constraints) { c.Containers[0].MaxAllowed = workload.Resources{CPU: 1} }, []bool{true, true, true, false, true, true, true}},
		{"at minAllowed memory", nil, func(c *workload.Constraints) { c.Containers[0].MinAllowed = workload.Resources{Memory: 512 * mi} }, []bool{true, true, true, true, true, true, false}},
		{"at the CPU floor", func(o *workload.Observation) { o.Containers[0].Requests.CPU = MinCPUCores }, nil, []bool{true, true, true, true, false, true, true}},
		{"no CPU request to step from", func(o *workload.Observation) { o.Containers[0].Requests.CPU = 0 }, nil, []bool{true, true, true, false, false, true, true}},
		{"wildcard policy Off", nil, func(c *workload.Constraints) {
			c.Containers = []workload.ContainerPolicy{{Name: "*", Mode: workload.ContainerModeOff}}
		}, []bool{true, true, true, false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, c := obs(), cons()
			if tc.obs != nil {
				tc.obs(&o)
			}
			if tc.cons != nil {
				tc.cons(&c)
			}
			got := Mask(&o, &c, DefaultSteps())
			for a := range NumActions {
				if got[a] != tc.want[a] {
					t.Errorf("%v legal = %v, want %v", a, got[a], tc.want[a])
				}
			}
		})
	}
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name      string
		a         Action
		cons      func(*workload.Constraints)
		replicas  int32
		app       workload.Resources
		sidecarCP float64
	}{
		{"no-op keeps the allocation", NoOp, nil, 3, workload.Resources{CPU: 1, Memory: 512 * mi}, 0.1},
		{"add replica", AddReplica, nil, 4, workload.Resources{CPU: 1, Memory: 512 * mi}, 0.1},
		{"remove replica", RemoveReplica, nil, 2, workload.Resources{CPU: 1, Memory: 512 * mi}, 0.1},
		{"raise CPU 10%, Off sidecar untouched", RaiseCPU, nil, 3, workload.Resources{CPU: 1.1, Memory: 512 * mi}, 0.1},
		{"lower memory 10%", LowerMemory, nil, 3, workload.Resources{CPU: 1, Memory: 0.9 * 512 * mi}, 0.1},
		{"raise CPU clamped to maxAllowed", RaiseCPU, func(c *workload.Constraints) { c.Containers[0].MaxAllowed.CPU = 1.05 }, 3, workload.Resources{CPU: 1.05, Memory: 512 * mi}, 0.1},
		{"lower CPU clamped to minAllowed", LowerCPU, func(c *workload.Constraints) { c.Containers[0].MinAllowed.CPU = 0.95 }, 3, workload.Resources{CPU: 0.95, Memory: 512 * mi}, 0.1},
		{"uncontrolled resource untouched", RaiseCPU, func(c *workload.Constraints) {
			c.Containers[0].ControlledResources = []workload.Resource{workload.Memory}
		}, 3, workload.Resources{CPU: 1, Memory: 512 * mi}, 0.1},
		{"current request below a new minAllowed moves in", NoOp, func(c *workload.Constraints) { c.Containers[0].MinAllowed.Memory = 600 * mi }, 3, workload.Resources{CPU: 1, Memory: 600 * mi}, 0.1},
		{"current request above maxAllowed moves in on any action", AddReplica, func(c *workload.Constraints) { c.Containers[0].MaxAllowed.CPU = 0.8 }, 4, workload.Resources{CPU: 0.8, Memory: 512 * mi}, 0.1},
		{"both containers when both are Auto", RaiseCPU, func(c *workload.Constraints) { c.Containers[1].Mode = workload.ContainerModeAuto }, 3, workload.Resources{CPU: 1.1, Memory: 512 * mi}, 0.11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, c := obs(), cons()
			if tc.cons != nil {
				tc.cons(&c)
			}
			r := Apply(&o, &c, tc.a, DefaultSteps())
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
			app, _ := r.Container("app")
			side, _ := r.Container("sidecar")
			if r.Replicas != tc.replicas || !near(app.Target.CPU, tc.app.CPU) || !near(app.Target.Memory, tc.app.Memory) || !near(side.Target.CPU, tc.sidecarCP) {
				t.Errorf("got replicas %d app %+v sidecar %+v", r.Replicas, app.Target, side.Target)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestNearestAction(t *testing.T) {
	o, c := obs(), cons()
	steps := DefaultSteps()
	// Every action's own result maps back to the action.
	for a := range NumActions {
		if got := NearestAction(&o, &c, Apply(&o, &c, a, steps), steps, nil); got != a {
			t.Errorf("NearestAction(Apply(%v)) = %v", a, got)
		}
	}
	rec := func(replicas int32, cpu, mem float64) workload.Recommendation {
		return workload.Recommendation{Replicas: replicas, Containers: []workload.ContainerRecommendation{{Name: "app", Target: workload.Resources{CPU: cpu, Memory: mem}}}}
	}
	full := Mask(&o, &c, steps)
	atMax := append([]bool(nil), full...)
	atMax[AddReplica] = false
	for _, tc := range []struct {
		name string
		rec  workload.Recommendation
		mask []bool
		want Action
	}{
		{"small vertical change is a no-op", rec(3, 1.04, 512*mi), full, NoOp},
		{"large CPU cut", rec(3, 0.5, 512*mi), full, LowerCPU},
		{"memory change dominates a replica", rec(4, 1, 1024*mi), full, RaiseMemory},
		{"replica dominates a small memory change", rec(5, 1, 560*mi), full, AddReplica},
		{"masked replica falls back to the next best", rec(5, 1, 560*mi), atMax, RaiseMemory},
		{"missing container counts as unchanged", workload.Recommendation{Replicas: 3}, full, NoOp},
		{"replicas 0 means unset", rec(0, 1, 512*mi), full, NoOp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NearestAction(&o, &c, tc.rec, steps, tc.mask); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSafeguard(t *testing.T) {
	o, c := obs(), cons()
	if SafeguardRefuses(&o, &c, LowerCPU) {
		t.Error("peak 70% of request: a downward step must be allowed")
	}
	o.Containers[0].Peak.CPU = 0.9
	for a, want := range map[Action]bool{LowerCPU: true, LowerMemory: false, RaiseCPU: false, RemoveReplica: false, NoOp: false} {
		if got := SafeguardRefuses(&o, &c, a); got != want {
			t.Errorf("peak 90%%: SafeguardRefuses(%v) = %v, want %v", a, got, want)
		}
	}
	// A container the autoscaler does not control does not trip it.
	o = obs()
	o.Containers[1].Peak.Memory = 64 * mi
	if SafeguardRefuses(&o, &c, LowerMemory) {
		t.Error("the Off sidecar's peak tripped the safeguard")
	}
}

func TestEncodeBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := func() float64 { return math.Exp(rng.Float64()*60 - 30) }
	for i := range 2000 {
		o := obs()
		o.RequestRate, o.ErrorRate, o.SLO, o.Latency.P95 = big(), big(), big(), big()
		o.Replicas, o.ReadyReplicas = int32(rng.IntN(1000)), int32(rng.IntN(1000))
		for j := range o.Containers {
			o.Containers[j].Requests = workload.Resources{CPU: big(), Memory: big()}
			o.Containers[j].Usage = workload.Resources{CPU: big(), Memory: big()}
			o.Containers[j].OOMKills = rng.IntN(10)
		}
		if i%3 == 0 {
			o.Containers[0].Requests = workload.Resources{}
		}
		c := cons()
		c.MaxReplicas = int32(rng.IntN(10))
		def := workload.Recommendation{Replicas: int32(rng.IntN(2000)), Containers: []workload.ContainerRecommendation{{Name: "app", Target: workload.Resources{CPU: big(), Memory: big()}}}}
		var rates []float64
		for range rng.IntN(2 * RateHistoryLen) {
			rates = append(rates, big())
		}
		s := Encode(Input{Observation: o, Constraints: c, Default: def, Rates: rates})
		if len(s) != StateDim {
			t.Fatalf("state of length %d", len(s))
		}
		for k, v := range s {
			if math.IsNaN(v) || v < -1 || v > 2 {
				t.Fatalf("feature %d = %v for %+v", k, v, o)
			}
		}
	}
	o := obs()
	s := Encode(Input{Observation: o, Constraints: cons()})
	if !near(s[FeatCPUUtil], 0.55/1.1) || !near(s[FeatLatencyVsSLO], 0.25) || !near(s[FeatReplicaPosition], 1.0/3) {
		t.Errorf("state %v", s)
	}
}

func TestReward(t *testing.T) {
	o := obs()
	r, err := Reward(&o, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	// RU = (0.55/1.1 + 288/576)/2 = 0.5; SP = 1 (p95 under SLO).
	if !near(r.Reward, 0.75) {
		t.Errorf("reward %+v, want 0.75", r)
	}
	o.Containers[0].OOMKills = 1
	if r, _ := Reward(&o, 0.5); r.Reward >= 0 {
		t.Errorf("an OOM kill gave reward %v; penalties must be negative", r.Reward)
	}
}

func newLearner(t testing.TB) nn.DiscreteLearner {
	t.Helper()
	cfg := nn.DefaultConfig(StateDim, int(NumActions))
	cfg.Hidden = []int{32}
	cfg.MinibatchSize = 16
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentBootstrapsThenActs drives one workload through Recommend and
// ReportOutcome calls with a good default: the agent defers and records
// demonstrations while bootstrapping, trains at episode ends, passes the
// gate, and then acts itself.
func TestAgentBootstrapsThenActs(t *testing.T) {
	l := newLearner(t)
	cfg := DefaultConfig()
	cfg.Gates.Window, cfg.Gates.EpisodeSteps = 3, 4
	now := time.Unix(0, 0)
	a, err := NewAgent("ns/app", cfg.Gates, DefaultSteps(), now)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	o, c := obs(), cons()
	// Utilisation 0.9 and latency within the SLO: reward 0.5·0.9+0.5 = 0.95.
	o.Containers[0].Usage = workload.Resources{CPU: 0.9, Memory: 460 * mi}
	o.Containers[1].Usage = workload.Resources{CPU: 0.09, Memory: 58 * mi}
	def := Apply(&o, &c, NoOp, DefaultSteps())
	var trained, sawAgent int
	for step := range 40 {
		o.Time = now
		p, err := a.Prepare(o, c, def, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var d *nn.Decision
		if p.NeedsPolicy {
			dd, err := l.Act(p.State, p.Mask, p.Greedy, rng)
			if err != nil {
				t.Fatal(err)
			}
			d = &dd
		}
		res, err := a.Decide(p, d)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stage == lifecycle.Bootstrapping && res.Recommendation.Source != workload.SourceDefault {
			t.Fatalf("step %d: bootstrapping agent acted: %+v", step, res.Recommendation)
		}
		if res.Recommendation.Source == workload.SourceAgent {
			sawAgent++
		}
		now = now.Add(time.Minute)
		next := o
		next.Time = now
		out, err := a.Outcome(Outcome{Observation: o, Applied: res.Recommendation, AppliedSource: res.Recommendation.Source, Next: next, Config: cfg}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := out.EpisodeComplete, (step+1)%4 == 0; got != want {
			t.Fatalf("step %d: episode complete %v, want %v", step, got, want)
		}
		if out.Train != nil {
			if err := out.Train.Run(l); err != nil {
				t.Fatal(err)
			}
			trained++
		}
		if out.Transition != nil && out.Transition.From == lifecycle.Bootstrapping {
			if step != 11 {
				t.Errorf("left bootstrapping at step %d, want 11 (3 episodes of 4)", step)
			}
		}
	}
	st := a.Status()
	if st.Stage == lifecycle.Bootstrapping || sawAgent == 0 || trained == 0 {
		t.Fatalf("status %+v, agent decisions %d, training jobs %d", st, sawAgent, trained)
	}
	if st.Episodes != 10 || st.Transitions != 40 {
		t.Errorf("status %+v, want 10 episodes, 40 transitions", st)
	}
	// The state survives a round trip.
	b, err := RestoreAgent(a.State(), DefaultSteps())
	if err != nil {
		t.Fatal(err)
	}
	if b.Status() != st {
		t.Errorf("restored status %+v, want %+v", b.Status(), st)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]Config{
		"bad mode":  {Mode: "Sometimes", Alpha: 0.5, Gates: lifecycle.DefaultGates()},
		"NaN alpha": {Mode: ModeOn, Alpha: math.NaN(), Gates: lifecycle.DefaultGates()},
		"alpha > 1": {Mode: ModeOn, Alpha: 1.5, Gates: lifecycle.DefaultGates()},
		"bad gates": {Mode: ModeOn, Alpha: 0.5, Gates: lifecycle.Gates{}},
	} {
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}
