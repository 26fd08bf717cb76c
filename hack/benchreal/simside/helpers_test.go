package simside

import (
	"math"
	"testing"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// The harness's settings for a 10-minute step-change run (main.go's
// defaults).
func settings() map[string]string {
	return map[string]string{"trace": "step-change", "mean": "16", "seed": "1", "duration": "10m0s", "window": "15s", "slo": "250ms"}
}

var policies = []string{"hpa", "vpa", "hpa+vpa", "fused"}

// known is a calibration with the given app parameters, as if measured.
func known(cpu, base, perRequest, startup, ioWait float64) Calibration {
	return Calibration{
		CPUSecondsPerRequest: Estimate{Value: cpu},
		BaseMemory:           Estimate{Value: base},
		MemoryPerRequest:     Estimate{Value: perRequest},
		StartupSeconds:       Estimate{Value: startup},
		Throttling:           Throttling{Resolved: true, IOWait: Estimate{Value: ioWait}},
		Node:                 SimNode{Allocatable: workload.Resources{CPU: DefaultNodeCPU, Memory: DefaultNodeMemory}},
	}
}

// replayAll replays every policy for reps repetitions, in the harness's
// alternating order.
func replayAll(t *testing.T, cal Calibration, set map[string]string, reps int) []result.Run {
	t.Helper()
	var runs []result.Run
	for rep := range reps {
		for _, p := range policies {
			r, err := Replay(cal, set, p, rep)
			if err != nil {
				t.Fatalf("Replay(%s, %d): %v", p, rep, err)
			}
			runs = append(runs, r)
		}
	}
	return runs
}

func within(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6g, want %.6g ± %.3g", name, got, want, tol)
	}
}
