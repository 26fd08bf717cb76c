package train

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// An agent's replica count goes through the updater's decision
// (hpa.Horizontal), as in a cluster: a scale-down the learner asks for
// every window waits out the behaviour's stabilisation window (300 s by
// default, seeded with the count at start) before it takes effect. The
// window holds capacity in the recommendation's per-pod CPU: as the
// default grows the pods it holds the start's CPU, ceil(8·first/now) pods
// of the size now (at one size, the count: hpa's TestHorizontalHoldsCapacity).
func TestAgentCountsHeldToTheUpdater(t *testing.T) {
	base, err := NewLearner(residualOptions())
	if err != nil {
		t.Fatal(err)
	}
	// Two replicas fewer than the default, every window.
	l := fixedLearner{Learner: base, choice: []int{2, 0, 0}}
	apps, err := sim.GenerateApps(7, 40)
	if err != nil {
		t.Fatal(err)
	}
	const window = 300 * time.Second
	for _, app := range apps {
		// Eight pods at start, which the default keeps for the window.
		app.Replicas, app.Constraints.MinReplicas = 8, 1
		if app.Constraints.MaxReplicas < 8 {
			continue
		}
		heldThenScaled(t, l, app, window)
		return
	}
	t.Fatal("no generated app allows 8 pods: the test exercises nothing")
}

// heldThenScaled runs app under the learner for a steady 15-minute trace
// and checks that no scale-down inside window goes below the capacity the
// first recommendation's 8 pods held, and that one happens after it.
func heldThenScaled(t *testing.T, l Learner, app sim.App, window time.Duration) {
	t.Helper()
	tr, err := sim.GenerateTrace(sim.Steady, sim.TraceOptions{Mean: app.BaseRate, Steps: 60, Step: 15 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.DefaultConfig(), app, &tr, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAgent(l, app.Constraints, AgentOptions{Greedy: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Step()
	start := s.Observation()
	var first float64 // the first recommendation's per-pod CPU
	scaledDown := false
	for i := range len(tr.Rates) - 1 {
		obs := s.Observation()
		rec, err := a.Recommend(context.Background(), obs)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Source != workload.SourceAgent {
			t.Fatalf("window %d: source %q, want the agent's", i, rec.Source)
		}
		if i == 0 {
			first = rec.TargetCPU()
		}
		if rec.Replicas < obs.Replicas {
			held := int32(8)
			if r := first / rec.TargetCPU(); r < 1/1.1 || r > 1.1 {
				held = int32(math.Ceil(8*r - 1e-9))
			}
			if obs.Time.Sub(start.Time) < window && rec.Replicas < min(held, obs.Replicas) {
				t.Fatalf("%s window %d (%v after start): scaled down %d -> %d inside the stabilisation window, below the %d pods of %.3g cores that hold its capacity",
					app.Name, i, obs.Time.Sub(start.Time), obs.Replicas, rec.Replicas, held, rec.TargetCPU())
			}
			if obs.Time.Sub(start.Time) >= window {
				scaledDown = true
			}
		}
		if _, err := s.Apply(rec); err != nil {
			t.Fatal(err)
		}
		s.Step()
	}
	if !scaledDown {
		t.Errorf("%s: the agent's scale-down never took effect after the window in %d windows", app.Name, len(tr.Rates))
	}
}
