package simside

import (
	"fmt"
	"io"
	"math"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// MinSpreadWindows is the fewest calm windows a stationary state needs for
// its spread to count.
const MinSpreadWindows = 5

// Spread is how much the p95 of a run's windows varies while nothing
// changes: within each stationary state (the same desired and Ready pods,
// CPU requested and expected requests, no loss and no change of the pods,
// after calmBefore such windows), the standard deviation of the windows'
// log p95; SD is its median over the states with at least
// MinSpreadWindows windows, with the interquartile range. A p95 near the
// SLO breaks it in a share of the windows that grows with the spread, so
// the simulator's windows must spread as the real ones do for its
// violating windows to match (sim.Config.SampledLatency).
type Spread struct {
	States  int      `json:"states"`
	Windows int      `json:"windows"`
	SD      Estimate `json:"sd"`
	// Exponential is, over the same states, the median sd a p95 would
	// have from sampling alone if the latency's tail were exponential
	// (ExponentialSpread of each state's requests per window and CPU used
	// over requested): the yardstick that tells a spread a sample of the
	// requests explains from one it does not.
	Exponential Estimate `json:"exponential"`
}

// ExponentialSpread is the sd of the log of a window's p95 from sampling
// alone, for an exponential latency of n requests at utilisation rho: the
// empirical 0.95-quantile of m independent draws has the sd
// √(0.95·0.05/m)/f(x), so its log has √(0.0475/m)/(f(x)·x), and
// f(x)·x = 0.05·ln 20 at an exponential's p95. The requests count for
// m = n(1−ρ)²/(1+ρ), as the simulator's sampled windows count them
// (sim.Config.SampledLatency): a queue's delays are correlated.
func ExponentialSpread(n, rho float64) float64 {
	rho = min(max(rho, 0), 0.98)
	m := n * (1 - rho) * (1 - rho) / (1 + rho)
	if !(m > 0) {
		return math.NaN()
	}
	return math.Sqrt(0.95*0.05/m) / (0.05 * math.Log(20))
}

// stateKey identifies a stationary state within one run.
type stateKey struct {
	replicas, ready int
	cpu, expected   float64
}

// MeasureSpread is the Spread of runs' windows.
func MeasureSpread(runs []result.Run) Spread {
	var sds, exps []float64
	var sp Spread
	for _, r := range runs {
		var logs []float64
		var n, used, requested float64
		var key stateKey
		calm := 0
		flush := func() {
			if len(logs) >= MinSpreadWindows {
				if iv, err := stats.Mean(logs, 0.95); err == nil {
					sds = append(sds, iv.StdDev)
					sp.Windows += len(logs)
					rho := 0.0
					if requested > 0 {
						rho = used / requested
					}
					if e := ExponentialSpread(n/float64(len(logs)), rho); !math.IsNaN(e) {
						exps = append(exps, e)
					}
				}
			}
			logs = logs[:0]
			n, used, requested = 0, 0, 0
		}
		for _, w := range r.Windows {
			k := stateKey{w.Replicas, w.Ready, w.CPURequested, w.Expected}
			ok := w.Ready > 0 && w.Ready == w.Replicas && w.OOMKills == 0 && w.ReplicaChanges == 0 &&
				w.Resizes == 0 && w.Evictions == 0 && w.Lost == 0 && w.OK > 0 && w.P95 > 0
			if !ok || k != key {
				flush()
				calm = 0
			}
			key = k
			if ok {
				if calm >= calmBefore {
					logs = append(logs, math.Log(w.P95))
					n += float64(w.OK)
					used += w.CPUUsed
					requested += w.CPURequested
				}
				calm++
			}
		}
		flush()
	}
	sp.States = len(sds)
	if len(sds) > 0 {
		sp.SD = median(sds, fmt.Sprintf("median over the stationary states (at least %d calm windows: same pods, CPU and expected requests, no loss or change, after %d calm windows) of the sd of the windows' log p95; the range is the interquartile range", MinSpreadWindows, calmBefore))
	}
	if len(exps) > 0 {
		sp.Exponential = median(exps, "median over the same states of ExponentialSpread at the state's requests answered per window and CPU used over requested; the range is the interquartile range")
	}
	return sp
}

// WriteSpread prints the real and simulated windows' spread.
func WriteSpread(w io.Writer, real, simulated []result.Run) error {
	line := func(s Spread) string {
		if s.States == 0 {
			return "no stationary state"
		}
		l := fmt.Sprintf("%.3f [%.3f, %.3f] over %d states (%d windows)", s.SD.Value, s.SD.Lo, s.SD.Hi, s.States, s.Windows)
		if s.Exponential.N > 0 {
			l += fmt.Sprintf(", an exponential tail's sampling noise there %.3f", s.Exponential.Value)
		}
		return l
	}
	_, err := fmt.Fprintf(w, "windows' p95 spread within a stationary state (sd of log p95, median [interquartile range]): real %s; simulated %s\n",
		line(MeasureSpread(real)), line(MeasureSpread(simulated)))
	return err
}
