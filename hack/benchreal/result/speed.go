package result

import (
	"fmt"

	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// DefaultMaxSpeedRatio is how far apart two invocations' CPU per request
// may be before their runs stop being comparable. A run's CPU per request
// is its container's CPU usage over the requests answered: the app's fixed
// thread-CPU burn plus what serving a request costs around it, and that
// moves with the machine (measured: 0.0167 s on the machine of
// 2026-11-29's afternoon, 0.0113 s on the one of its evening, for the same
// 10-ms setting, while the control plane and the load generator also took
// 1.5-1.8 times the CPU-seconds for the same work; within one invocation
// runs agree within about 3%). Where a request costs more, the same pod is
// nearer saturation and the same policy breaks the SLO in more windows, so
// pairs across the two compare machines as much as policies.
const DefaultMaxSpeedRatio = 1.15

// Group is the runs of one results file (one invocation, one machine).
type Group struct {
	Name string
	Runs []Run
}

// MedianCPUPerRequest is the median CPU seconds per request the runs
// measured, and false when none did.
func MedianCPUPerRequest(runs []Run) (float64, bool) {
	var v []float64
	for _, r := range runs {
		if r.CPUSecondsPerRequest > 0 {
			v = append(v, r.CPUSecondsPerRequest)
		}
	}
	return stats.Median(v)
}

// SpeedMismatch compares the groups' median CPU per request and returns,
// when the largest is more than maxRatio times the smallest, a sentence
// naming both (empty otherwise, or when fewer than two groups measured it).
func SpeedMismatch(groups []Group, maxRatio float64) string {
	var lo, hi Group
	var loV, hiV float64
	for _, g := range groups {
		v, ok := MedianCPUPerRequest(g.Runs)
		if !ok {
			continue
		}
		if loV == 0 || v < loV {
			lo, loV = g, v
		}
		if v > hiV {
			hi, hiV = g, v
		}
	}
	if loV == 0 || !(hiV > maxRatio*loV) {
		return ""
	}
	return fmt.Sprintf("the runs of %s measured %.4f CPU-seconds per request and those of %s %.4f (×%.2f, more than ×%.2f): they ran on machines of different speed, and pairs across them compare the machines as much as the policies",
		hi.Name, hiV, lo.Name, loV, hiV/loV, maxRatio)
}
