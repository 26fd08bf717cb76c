package sim

import (
	"math"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// TestOffers checks how a window's arrivals are split among the pods Ready
// in it: evenly among those Ready at each moment, nothing to a pod before
// its readyAt, and the rest unserved.
func TestOffers(t *testing.T) {
	const t0, dt = 30.0, 15.0
	running := pod{phase: podRunning}
	at := func(r float64) pod { return pod{phase: podStarting, readyAt: t0 + r} }
	for _, tc := range []struct {
		name     string
		within   bool
		pods     []pod
		share    []float64 // of the window's arrivals, by pod
		unserved float64
	}{
		{"two Ready", true, []pod{running, running}, []float64{0.5, 0.5}, 0},
		{"none Ready", true, nil, nil, 1},
		{"off: a joining pod waits", false, []pod{running, at(5)}, []float64{1, 0}, 0},
		{"joins a third in", true, []pod{running, at(5)}, []float64{1.0/3 + 2.0/3/2, 2.0 / 3 / 2}, 0},
		{"alone from a third in", true, []pod{at(5)}, []float64{2.0 / 3}, 1.0 / 3},
		{"two join", true, []pod{at(10), running, at(5)}, []float64{1.0 / 3 / 3, 1.0/3 + 1.0/3/2 + 1.0/3/3, 1.0/3/2 + 1.0/3/3}, 0},
		{"ready at the end serves nothing", true, []pod{running, at(dt)}, []float64{1, 0}, 0},
		{"later windows wait", true, []pod{running, at(20)}, []float64{1, 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Simulator{cfg: Config{ReadyWithinWindow: tc.within}, dt: dt, cluster: cluster{pods: tc.pods}}
			var ready int
			for _, p := range tc.pods {
				if p.phase == podRunning {
					ready++
				}
			}
			const rate, arrivals = 20.0, 300.0
			unserved := s.offers(t0, ready, rate, arrivals)
			if math.Abs(unserved-tc.unserved) > 1e-12 {
				t.Errorf("unserved %g, want %g", unserved, tc.unserved)
			}
			sum := unserved
			for i, o := range s.offered {
				sum += o.arrived / arrivals
				if math.Abs(o.arrived/arrivals-tc.share[i]) > 1e-12 {
					t.Errorf("pod %d: share %g, want %g", i, o.arrived/arrivals, tc.share[i])
				}
				if o.arrived > 0 {
					// Its rate is over the part of the window it serves.
					from := max(t0, tc.pods[i].readyAt)
					if math.Abs(o.dt-(t0+dt-from)) > 1e-9 || math.Abs(o.rate*o.dt-rate*dt*tc.share[i]) > 1e-9 {
						t.Errorf("pod %d: serves %gs at %g/s, want %gs and %g requests", i, o.dt, o.rate, t0+dt-from, rate*dt*tc.share[i])
					}
				}
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Errorf("shares and unserved add up to %g, want 1", sum)
			}
		})
	}
}

// TestReadyWithinWindow scales a pod out with a start-up delay shorter
// than the window: with Config.ReadyWithinWindow the new pod serves from
// its readyAt and counts Ready at the window's end; without, it starts at
// the next window.
func TestReadyWithinWindow(t *testing.T) {
	for _, within := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[within], func(t *testing.T) {
			app := testApp(0.01, 0, 1)
			app.StartupDelay = 5 * time.Second
			cfg := Config{ReadyWithinWindow: within, SampledUsage: true}
			s := newSim(t, cfg, app, steadyTrace(t, 40, 20), 1)
			warm(t, s)
			before := s.Step()
			if _, err := s.Apply(workload.Recommendation{Replicas: 2}); err != nil {
				t.Fatal(err)
			}
			m := s.Step()
			if got, want := m.Ready, map[bool]int32{false: 1, true: 2}[within]; got != want {
				t.Errorf("Ready at the window's end %d, want %d", got, want)
			}
			if got := m.Completed + m.TimedOut + m.Failed; math.Abs(got-m.Arrivals) > 1e-6*m.Arrivals {
				t.Errorf("completed+timed out+failed %g, arrivals %g", got, m.Arrivals)
			}
			// Both pods idle in their spare time, so the window's CPU is its
			// arrivals' work, and the idle pod's memory: only the share of
			// the requests each pod held differs.
			if math.Abs(m.Used.CPU-m.Arrivals*app.CPUSeconds/s.dt) > 1e-9 {
				t.Errorf("used %g cores, want the arrivals' work %g", m.Used.CPU, m.Arrivals*app.CPUSeconds/s.dt)
			}
			// The first pod answered alone for a third of the window and
			// half of the rest: 2/3 of the arrivals, against all of them.
			share := map[bool]float64{false: 1, true: 2.0 / 3}[within]
			pods := s.Observation().Pods
			if len(pods) != 2 {
				t.Fatalf("%d pods observed, want 2", len(pods))
			}
			first := pods[0].Usage.CPU / (m.Used.CPU)
			if math.Abs(first-share) > 1e-9 {
				t.Errorf("the first pod used %.4g of the CPU, want %.4g", first, share)
			}
			if within && !(m.InFlight < before.InFlight) {
				t.Errorf("in flight %g, want below the window before's %g (two pods share the load part of the window)", m.InFlight, before.InFlight)
			}
		})
	}
}

// TestReadyWithinWindowUnserved: with no pod Ready at the window's start,
// the arrivals before the first becomes Ready fail.
func TestReadyWithinWindowUnserved(t *testing.T) {
	app := testApp(0.001, 0.5, 1)
	app.MemoryPerRequest = 10 * mib
	app.Limits.Memory = 300 * mib // killed in its first window (TestOOMKillAndRestart)
	app.StartupDelay = 5 * time.Second
	s := newSim(t, Config{ReadyWithinWindow: true}, app, steadyTrace(t, 100, 50), 1)
	if m := s.Step(); m.OOMKills != 1 {
		t.Fatalf("OOMKills=%d, want 1", m.OOMKills)
	}
	// Killed at the window's end (the fluid model), Ready 5 s into the next,
	// whose first third finds no pod.
	m := s.Step()
	if m.Failed < m.Arrivals/3-1e-9 {
		t.Errorf("failed %g of %g, want at least a third", m.Failed, m.Arrivals)
	}
	if !(m.Completed > 0) {
		t.Errorf("the restarted pod answered nothing in the window it became Ready in: %+v", m)
	}
}

func TestStepDoesNotAllocateReadyWithinWindow(t *testing.T) {
	app := testApp(0.01, 0.01, 20)
	app.StartupDelay = 5 * time.Second
	s := newSim(t, Config{ReadyWithinWindow: true}, app, steadyTrace(t, 500, 10), 1)
	warm(t, s)
	if _, err := s.Apply(workload.Recommendation{Replicas: 30}); err != nil {
		t.Fatal(err)
	}
	s.Step() // sizes the scratch for 30 pods, 10 of them joining
	if n := testing.AllocsPerRun(100, func() { s.Step() }); n != 0 {
		t.Errorf("Step allocates %g times", n)
	}
}
