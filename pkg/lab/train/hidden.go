package train

import (
	"math"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// HiddenParamNames names HiddenParams' entries.
var HiddenParamNames = []string{"log CPU/request", "log memory/request", "start-up delay", "I/O share"}

// HiddenParams returns the app's parameters the agent never observes
// directly: ln CPU seconds per request, ln bytes of memory per request
// (at least 1), the pod start-up delay in seconds, and the I/O share,
// IOWait / (IOWait + CPUSeconds). The logarithms make the first two
// scale-free: they span orders of magnitude across the profiles.
func HiddenParams(a sim.App) []float64 {
	io := 0.0
	if t := a.IOWait + a.CPUSeconds; t > 0 {
		io = a.IOWait / t
	}
	return []float64{math.Log(a.CPUSeconds), math.Log(math.Max(a.MemoryPerRequest, 1)), a.StartupDelay.Seconds(), io}
}

// auxScale centres and scales each of HiddenParams to within about
// [-2.5, 2.5], with a mean magnitude below 1, over the generated apps (CPU
// time per request ~0.5 ms to 0.75 s, memory per request ~0.5 to 150 MiB,
// start-up delay 5 to 40 s, I/O share 0 to 1), so that no parameter
// dominates the auxiliary loss: target = (x − c) / s.
var auxScale = [][2]float64{{-3, 2}, {15.5, 1.5}, {22.5, 10}, {0.5, 0.5}}

// AuxTarget is what Meta-PPO's auxiliary head learns to predict from the
// embedding of the app's trajectory (Options.AuxWeight): HiddenParams,
// each scaled by auxScale.
func AuxTarget(a sim.App) []float64 {
	p := HiddenParams(a)
	for k := range p {
		p[k] = (p[k] - auxScale[k][0]) / auxScale[k][1]
	}
	return p
}
