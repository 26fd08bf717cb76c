//go:build benchreal

package main

import (
	"os"
	"testing"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/simside"
)

// TestCalibrateReplayModel: the replay model the flags choose reaches the
// replayed app, the idle period (fitted and replayed) among them, on a
// real round's runs (round forty-seven: the CPU fit resolves an idle CPU).
func TestCalibrateReplayModel(t *testing.T) {
	f, err := os.Open("../../docs/results/real-node/round47/hpa-fused-whatif-reps80-82.json")
	if err != nil {
		t.Fatal(err)
	}
	rf, err := simside.ReadFile(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		period, burst time.Duration
	}{
		{"idle CPU spread evenly", 0, 0},
		{"idle CPU every 2s", 2 * time.Second, 0},
		{"9 ms of it every 2s", 2 * time.Second, 9 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options{}
			o.sim.nodeCPU, o.sim.nodeMemory, o.sim.tick = 1.3, 23, DefaultSimTick
			o.sim.model.ServesTimedOut, o.sim.model.ReadyWithinWindow = true, true
			o.sim.idlePeriod, o.sim.idleBurst = tc.period, tc.burst
			cal, err := calibrate(o, rf.Runs)
			if err != nil {
				t.Fatal(err)
			}
			d := cal.App(0.25, 0.2).Demand
			if !(d.BaseCPU > 0) {
				t.Fatalf("the replayed app has no idle CPU (%s)", cal.CPUFitReason)
			}
			if d.IdlePeriod != tc.period.Seconds() || d.IdleBurst != tc.burst.Seconds() || !d.ServesTimedOut || !cal.ReadyWithinWindow {
				t.Errorf("replayed app: idle period %gs, burst %gs, serves timed out %v, ready within the window %v; want %gs, %gs, true, true", d.IdlePeriod, d.IdleBurst, d.ServesTimedOut, cal.ReadyWithinWindow, tc.period.Seconds(), tc.burst.Seconds())
			}
		})
	}
}
