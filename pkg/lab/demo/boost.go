package demo

import (
	"fmt"
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
)

// StartupBoost gives every evaluated app a CPU start-up boost
// (sim.App's container policy's StartupBoost) and a CPU-bound share of its
// start-up delay, so that a demo measures what the boost does to the
// policies' SLO, lost requests and cost. The zero value changes nothing:
// the default table is measured without it.
type StartupBoost struct {
	// Factor multiplies a new pod's CPU request until it is Ready; 0 or 1
	// is no boost.
	Factor float64
	// CPUShare is the share of each app's start-up delay that is CPU-bound
	// and shrinks with the boost (sim.App.StartupCPUShare), in [0, 1].
	CPUShare float64
}

// Validate rejects a factor below 1 (other than 0) and a share outside
// [0, 1].
func (b StartupBoost) Validate() error {
	if b.Factor != 0 && !(b.Factor >= 1 && !math.IsInf(b.Factor, 0)) {
		return fmt.Errorf("start-up boost factor must be 0 (none) or at least 1, got %g", b.Factor)
	}
	if !(b.CPUShare >= 0 && b.CPUShare <= 1) {
		return fmt.Errorf("start-up CPU share must be in [0, 1], got %g", b.CPUShare)
	}
	return nil
}

// apply sets the boost on every run's app, on a copy of its container
// policies (the generated apps share nothing, but a run's app is a value
// whose slices still alias the generator's).
func (b StartupBoost) apply(runs []eval.Run) {
	if b == (StartupBoost{}) {
		return
	}
	for i := range runs {
		a := &runs[i].App
		a.StartupCPUShare = b.CPUShare
		if b.Factor <= 1 {
			continue
		}
		pols := make([]workload.ContainerPolicy, len(a.Constraints.Containers))
		copy(pols, a.Constraints.Containers)
		for k := range pols {
			pols[k].StartupBoost = &workload.CPUBoost{Factor: b.Factor}
		}
		a.Constraints.Containers = pols
	}
}
