package oracle

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

const (
	steps  = 600
	warmup = 60 // windows to roll out from the user's initial deployment
)

type static struct {
	n   int32
	req workload.Resources
}

func (s static) Name() string { return "static" }

func (s static) Recommend(context.Context, workload.Observation) (workload.Recommendation, error) {
	return workload.Recommendation{Replicas: s.n, Containers: []workload.ContainerRecommendation{{Name: "main", Target: s.req}}}, nil
}

type outcome struct {
	violations, ooms int
	cost             float64
}

// play runs p and measures windows after the warm-up.
func play(t *testing.T, app sim.App, tr *sim.Trace, p workload.Policy) outcome {
	t.Helper()
	s, err := sim.New(sim.Config{}, app, tr, 5)
	if err != nil {
		t.Fatal(err)
	}
	var o outcome
	dt := s.Config().Step.Seconds()
	for i := range steps {
		m := s.Step()
		if i >= warmup {
			if m.Latency.P95 > m.SLO {
				o.violations++
			}
			o.ooms += m.OOMKills
			o.cost += sim.DefaultPrices().Cost(m.Allocated.CPU, m.Allocated.Memory, dt)
		}
		rec, err := p.Recommend(context.Background(), s.Observation())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func TestOracleMeetsSLOAndIsCheapest(t *testing.T) {
	apps, err := sim.GenerateApps(3, 40)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		app  int
		kind sim.TraceKind
	}{
		{0, sim.Steady}, {1, sim.Diurnal}, {2, sim.Ramp}, {3, sim.StepChange}, {5, sim.Diurnal}, {8, sim.Steady}, {13, sim.Ramp},
	} {
		app := apps[tc.app]
		t.Run(fmt.Sprintf("%s %s %v", app.Name, tc.kind, app.Segments), func(t *testing.T) {
			tr, err := sim.GenerateTrace(tc.kind, sim.TraceOptions{Mean: app.BaseRate, Steps: steps, Step: 15 * time.Second, Seed: 9})
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(app, &tr, sim.Config{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Plan().Infeasible != 0 {
				t.Fatalf("plan infeasible in %d windows", p.Plan().Infeasible)
			}
			got := play(t, app, &tr, p)
			if got.ooms != 0 || float64(got.violations) > 0.01*(steps-warmup) {
				t.Errorf("oracle: %d SLO violations, %d OOM kills after warm-up", got.violations, got.ooms)
			}
			// Every static allocation that also meets the SLO costs at least as much.
			var met int
			for _, n := range []int32{1, 2, 3, 4, 6, 8, 12, 16, 24} {
				for _, f := range []float64{0.5, 1, 2, 4} {
					req := workload.Resources{CPU: app.Requests.CPU * f, Memory: p.Plan().Requests.Memory * f}
					o := play(t, app, &tr, static{n, req})
					if o.violations > 0 || o.ooms > 0 {
						continue
					}
					met++
					if o.cost < got.cost {
						t.Errorf("static %d × %+v meets the SLO at cost %.4g, the oracle costs %.4g", n, req, o.cost, got.cost)
					}
				}
			}
			if met == 0 {
				t.Errorf("no static allocation met the SLO: the comparison is vacuous")
			}
		})
	}
}

func TestOracleRejectsUnreachableSLO(t *testing.T) {
	apps, err := sim.GenerateApps(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	app := apps[0]
	app.SLO = app.IOWait / 2
	tr, err := sim.GenerateTrace(sim.Steady, sim.TraceOptions{Mean: 1, Steps: 10, Step: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(app, &tr, sim.Config{}, Options{}); err == nil {
		t.Error("an SLO below the I/O wait was accepted")
	}
}

func TestRecommendFollowsPlan(t *testing.T) {
	apps, err := sim.GenerateApps(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sim.GenerateTrace(sim.Ramp, sim.TraceOptions{Mean: apps[0].BaseRate * 3, Steps: 100, Step: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	p, err := New(apps[0], &tr, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{0, 50, 98, 99, 150} {
		rec, err := p.Recommend(context.Background(), workload.Observation{Time: cfg.Start.Add(time.Duration(k+1) * cfg.Step)})
		if err != nil {
			t.Fatal(err)
		}
		want := p.Plan().Replicas[min(k+1, 99)]
		if rec.Replicas != want || rec.Containers[0].Target != p.Plan().Requests {
			t.Errorf("after window %d: %+v, want %d replicas of %+v", k, rec, want, p.Plan().Requests)
		}
	}
	if p.Plan().Replicas[0] >= p.Plan().Replicas[99] {
		t.Errorf("replicas do not follow a ramp: %d → %d", p.Plan().Replicas[0], p.Plan().Replicas[99])
	}
}

func TestWithinRequests(t *testing.T) {
	apps, err := sim.GenerateApps(3, 40)
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for _, app := range apps {
		r := app.LimitRatio()
		if tested == 3 || r.CPU < 1.5 || r.Memory < 1.25 {
			continue
		}
		tested++
		t.Run(app.Name, func(t *testing.T) {
			tr, err := sim.GenerateTrace(sim.Diurnal, sim.TraceOptions{Mean: app.BaseRate, Steps: steps, Step: 15 * time.Second, Seed: 9})
			if err != nil {
				t.Fatal(err)
			}
			onLimits, err := Compute(app, &tr, sim.Config{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(app, &tr, sim.Config{}, Options{WithinRequests: true})
			if err != nil {
				t.Fatal(err)
			}
			plan := p.Plan()
			if plan.Infeasible != 0 {
				t.Fatalf("plan infeasible in %d windows", plan.Infeasible)
			}
			// The requests alone carry every planned window: n pods of
			// request c serve λ·s with the spare c0 each.
			o := Options{}.withDefaults()
			c0 := math.Log(20) * app.CPUSeconds / (app.SLO*(1-o.SLOMargin) - app.IOWait)
			for i, lam := range tr.Rates {
				if need := lam * app.CPUSeconds; float64(plan.Replicas[i])*(plan.Requests.CPU-c0) < need {
					t.Fatalf("window %d: %d pods of %.3g cores requested cannot serve %.3g cores with spare %.3g each",
						i, plan.Replicas[i], plan.Requests.CPU, need, c0)
				}
			}
			if !(plan.Cost > onLimits.Cost) {
				t.Errorf("planning within requests costs %.4g, planning on limits %g: requests above a limit ratio %v must cost more", plan.Cost, onLimits.Cost, r)
			}
			if got := play(t, app, &tr, p); got.ooms != 0 || float64(got.violations) > 0.01*(steps-warmup) {
				t.Errorf("%d SLO violations, %d OOM kills after warm-up", got.violations, got.ooms)
			}
		})
	}
	if tested == 0 {
		t.Fatal("no generated app has limits above its requests: the test is vacuous")
	}
}

// TestFeasibleFirst: under short bursts far above the mean, the cheapest
// pod size leaves burst windows unserved, and FeasibleFirst picks a size
// that serves them, at a higher cost; on a trace every size can serve, the
// two agree.
func TestFeasibleFirst(t *testing.T) {
	apps, err := sim.GenerateApps(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	app := apps[0]
	cfg := sim.DefaultConfig()
	n := 480
	burst := sim.Trace{Step: cfg.Step, Rates: make([]float64, n)}
	// Two minutes at the rate the app's 30 pods serve at its initial per-pod
	// load, after hours at rest.
	for i := 200; i < 208; i++ {
		burst.Rates[i] = sim.PeakCapacity(app)
	}
	steady := sim.Trace{Step: cfg.Step, Rates: slices.Repeat([]float64{app.BaseRate}, n)}
	for _, tc := range []struct {
		name   string
		trace  *sim.Trace
		differ bool
	}{
		{"short bursts", &burst, true},
		{"steady", &steady, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cheap, err := Compute(app, tc.trace, cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			first, err := Compute(app, tc.trace, cfg, Options{FeasibleFirst: true})
			if err != nil {
				t.Fatal(err)
			}
			if first.Infeasible > cheap.Infeasible || first.Cost < cheap.Cost {
				t.Fatalf("feasible first: %d infeasible windows at cost %g; cheapest: %d at %g", first.Infeasible, first.Cost, cheap.Infeasible, cheap.Cost)
			}
			if tc.differ != (first.Infeasible < cheap.Infeasible) {
				t.Errorf("infeasible windows %d (feasible first) and %d (cheapest), want them to differ: %v", first.Infeasible, cheap.Infeasible, tc.differ)
			}
			if tc.differ && first.Infeasible != 0 {
				t.Errorf("feasible first leaves %d windows unserved", first.Infeasible)
			}
		})
	}
}
