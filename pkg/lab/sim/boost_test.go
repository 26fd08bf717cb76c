package sim

import (
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// TestStartupBoost: scaling 1 → 3 replicas of an app whose 60-s start-up
// is 75% CPU-bound. A 3x CPU start-up boost makes the new pods Ready in
// 60 × (0.25 + 0.75/3) = 30 s instead of 60 s, and costs more CPU while
// they start (3 cores each instead of 1); once they are Ready the boost
// ends and the allocation is the unboosted one. Without a CPU-bound share
// the boost only costs; on nodes too small for the boosted request the
// new pods stay Pending, as the scheduler would keep them.
func TestStartupBoost(t *testing.T) {
	boost := &workload.CPUBoost{Factor: 3}
	for _, tc := range []struct {
		name      string
		boost     *workload.CPUBoost
		share     float64
		nodeCPU   float64
		wantReady int     // first window after the scale-up with 3 Ready pods; -1: never within 8
		wantPeak  float64 // CPU allocated in the first window after the scale-up
	}{
		{name: "no boost (the default)", share: 0.75, wantReady: 4, wantPeak: 3},
		{name: "3x boost, 75% CPU-bound", boost: boost, share: 0.75, wantReady: 2, wantPeak: 7},
		{name: "3x boost, held 30 s after Ready", boost: &workload.CPUBoost{Factor: 3, For: 30 * time.Second}, share: 0.75, wantReady: 2, wantPeak: 7},
		{name: "3x boost, not CPU-bound: costs only", boost: boost, share: 0, wantReady: 4, wantPeak: 7},
		{name: "3x boost on 2-core nodes: Pending", boost: boost, share: 0.75, nodeCPU: 2, wantReady: -1, wantPeak: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(0.01, 0, 1)
			app.StartupDelay, app.StartupCPUShare = 60*time.Second, tc.share
			app.Constraints.Containers = []workload.ContainerPolicy{{Name: "*", Mode: workload.ContainerModeAuto, StartupBoost: tc.boost}}
			cfg := Config{}
			if tc.nodeCPU > 0 {
				cfg.NodeCapacity = workload.Resources{CPU: tc.nodeCPU, Memory: 64 * gib}
			}
			s := newSim(t, cfg, app, steadyTrace(t, 10, 50), 1)
			if m := s.Step(); m.Allocated.CPU != 1 {
				t.Fatalf("the running pod's boost is over at the start: allocated %g CPU", m.Allocated.CPU)
			}
			if _, err := s.Apply(workload.Recommendation{Replicas: 3}); err != nil {
				t.Fatal(err)
			}
			ready := -1
			var first StepMetrics
			for w := range 8 {
				m := s.Step()
				if w == 0 {
					first = m
				}
				if m.Ready == 3 && ready < 0 {
					ready = w
				}
			}
			if ready != tc.wantReady {
				t.Errorf("3 pods Ready from window %d, want %d", ready, tc.wantReady)
			}
			if first.Allocated.CPU != tc.wantPeak {
				t.Errorf("CPU allocated while starting = %g, want %g", first.Allocated.CPU, tc.wantPeak)
			}
			// Long after, every boost has ended.
			for range 4 {
				s.Step()
			}
			if m := s.Step(); tc.wantReady >= 0 && m.Allocated.CPU != 3 {
				t.Errorf("CPU allocated once the boosts ended = %g, want 3", m.Allocated.CPU)
			}
		})
	}
}

// TestStartupBoostHeld: with a duration, the boost outlasts readiness by
// that long, and is paid for.
func TestStartupBoostHeld(t *testing.T) {
	app := testApp(0.01, 0, 1)
	app.StartupDelay, app.StartupCPUShare = 30*time.Second, 1
	app.Constraints.Containers = []workload.ContainerPolicy{{Name: "*", StartupBoost: &workload.CPUBoost{Value: 2, For: 30 * time.Second}}}
	s := newSim(t, Config{}, app, steadyTrace(t, 10, 50), 1)
	s.Step()
	if _, err := s.Apply(workload.Recommendation{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	// 2 cores instead of 1, fully CPU-bound: Ready after 15 s (window 1),
	// boosted until 30 s later (windows 1-2 at 3 cores), then 2.
	var got []float64
	for range 5 {
		got = append(got, s.Step().Allocated.CPU)
	}
	want := []float64{3, 3, 3, 2, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("allocated CPU per window = %v, want %v", got, want)
		}
	}
}

func TestStartupCPUShareValidated(t *testing.T) {
	app := testApp(0.01, 0, 1)
	app.StartupCPUShare = 1.5
	if err := app.Validate(); err == nil {
		t.Error("a CPU-bound share above 1 was accepted")
	}
}
