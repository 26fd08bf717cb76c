//go:build benchreal

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/simside"
)

func TestValidateTiming(t *testing.T) {
	base := options{policies: []string{"fused"}, repeat: 1, duration: 8 * time.Minute, bin: binOptions{loadgen: "loadgen"}}
	for _, tc := range []struct {
		name    string
		edit    func(*options)
		wantErr string
	}{
		{"defaults", func(*options) {}, ""},
		{"autoscaler after 45s", func(o *options) { o.mpa.autoscalerAfter = 45 * time.Second }, ""},
		{"autoscaler after a negative time", func(o *options) { o.mpa.autoscalerAfter = -time.Second }, "--autoscaler-after"},
		{"autoscaler after the load", func(o *options) { o.mpa.autoscalerAfter = 8 * time.Minute }, "--autoscaler-after"},
		{"load phase", func(o *options) { o.mpa.loadPhase = 500 * time.Millisecond }, ""},
		{"load phase past a loop", func(o *options) { o.mpa.loadPhase = 15 * time.Second }, "--load-phase"},
		{"load phase and a late autoscaler", func(o *options) { o.mpa.loadPhase, o.mpa.autoscalerAfter = time.Second, 45*time.Second }, ""},
		{"what-if", func(o *options) { o.mpa.whatif, o.bin.recommender, o.mpa.sloMetrics = true, "bin/recommender", true }, ""},
		{"what-if without the recommender", func(o *options) { o.mpa.whatif, o.mpa.sloMetrics = true, true }, "--whatif needs"},
		{"simulated with five draws", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
		}, ""},
		{"simulated with no draw", func(o *options) { o.simulate, o.sim.nodeCPU, o.sim.nodeMemory = true, 1.3, 23 }, "--sim-draws"},
		{"simulated with a lag of one window", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws, o.sim.model.Timing.Lag = true, 1.3, 23, 5, 1
		}, ""},
		{"simulated with a negative lag", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws, o.sim.model.Timing.Lag = true, 1.3, 23, 5, -1
		}, "--sim-lag"},
		{"simulated with a lag of five windows", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws, o.sim.model.Timing.Lag = true, 1.3, 23, 5, 5
		}, "--sim-lag"},
		{"simulated at the node's timing", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.model.Timing = simside.Timing{Step: 5 * time.Second, Look: 10 * time.Second, Act: 14 * time.Second}
		}, ""},
		{"simulated with a look and no step", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.model.Timing.Look = 10 * time.Second
		}, "--sim-look"},
		{"simulated with the HPA's phases and no step", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.model.Timing.HPAPhases = true
		}, "--sim-hpa-phases"},
		{"simulated with a negative step", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.model.Timing.Step = -time.Second
		}, "--sim-step"},
		{"simulated with an act past two minutes", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.model.Timing.Act = 3 * time.Minute
		}, "--sim-act"},
		{"simulated in turns of 5 ms", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.model.ServesTimedOut, o.sim.heldQuantum = true, 5*time.Millisecond
		}, ""},
		{"simulated in negative turns", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.model.ServesTimedOut, o.sim.heldQuantum = true, -time.Millisecond
		}, "--sim-held-quantum -1ms must be >= 0"},
		{"simulated in turns without the held queue", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.heldQuantum = 5 * time.Millisecond
		}, "--sim-held-quantum orders"},
		{"simulated with the idle CPU every 2s", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.idlePeriod = 2 * time.Second
		}, ""},
		{"simulated with the idle CPU every 50ms", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.idlePeriod = 50 * time.Millisecond
		}, "--sim-idle-period 50ms must be 0"},
		{"simulated with 9-ms bursts without their period", func(o *options) {
			o.simulate, o.sim.nodeCPU, o.sim.nodeMemory, o.sim.draws = true, 1.3, 23, 5
			o.sim.idleBurst = 9 * time.Millisecond
		}, "--sim-idle-burst 9ms must be >= 0, and set only with --sim-idle-period"},
		{"what-if without the SLO metrics", func(o *options) { o.mpa.whatif, o.bin.recommender, o.mpa.sloMetrics = true, "bin/recommender", false }, "--whatif needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			err := o.validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("validate = %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
}
