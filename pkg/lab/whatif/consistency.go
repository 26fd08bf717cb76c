package whatif

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// Consistency compares the replay of what actually ran with the history:
// the simulator given the recorded rate, replicas and requests must give
// back the recorded cost, CPU, memory and (where latency was measured)
// SLO-violating windows. Its errors are the what-if's error bar: a
// policy's predicted cost is no better known than CostError.
type Consistency struct {
	Workload string `json:"workload"`
	Steps    int    `json:"steps"`
	// RecordedCost is what the recorded pods' requests cost; ReplayCost
	// what the replay's scheduled pods' requests cost (sim.Prices).
	RecordedCost float64 `json:"recordedCost"`
	ReplayCost   float64 `json:"replayCost"`
	// CostError is ReplayCost/RecordedCost − 1.
	CostError float64 `json:"costError"`
	// ReplicasMAE is the mean absolute difference between the replay's
	// Ready pods and the recorded replicas.
	ReplicasMAE float64 `json:"replicasMAE"`
	// CPUError and MemoryError are the replay's total usage over the
	// recorded total, minus one, over the steps where both are known.
	CPUError    float64 `json:"cpuError"`
	MemoryError float64 `json:"memoryError"`
	// LatencyMeasured says whether the SLO fields are set: a p95 series
	// and an SLO were given.
	LatencyMeasured bool `json:"latencyMeasured"`
	// MeasuredViolations and ReplayViolations are the shares of steps
	// whose p95 exceeds the SLO, measured and replayed, over the steps with
	// a measured p95; SLOError is their difference (replay − measured).
	MeasuredViolations float64 `json:"measuredViolations,omitempty"`
	ReplayViolations   float64 `json:"replayViolations,omitempty"`
	SLOError           float64 `json:"sloError,omitempty"`
	// Spread is the same replay with the app's CPU seconds per request at
	// the two ends of the fit's 95% interval: how far the fit's own
	// uncertainty moves the cost and the SLO-violating steps. Absent when
	// the fit has no interval.
	Spread *Spread `json:"spread,omitempty"`
}

// Spread holds a replay at the low and the high end of the fit's CPU
// seconds per request.
type Spread struct {
	CPUSeconds       [2]float64 `json:"cpuSeconds"`
	CostError        [2]float64 `json:"costError"`
	ReplayViolations [2]float64 `json:"replayViolations,omitempty"`
}

// Check replays what actually ran on f's app with one seed and compares
// it with s, then again at the ends of f's CPU interval (Spread).
func Check(s *Series, f Fit, cfg sim.Config, prices sim.Prices, seed uint64) (Consistency, error) {
	c, err := check(s, f.App, cfg, prices, seed)
	if err != nil {
		return c, err
	}
	lo, hi := f.CPU.SlopeInterval()
	lo = max(lo, 0.01*f.App.CPUSeconds) // a request costs something
	if !(hi > lo) || f.App.CPUSeconds <= 0 {
		return c, nil
	}
	sp := &Spread{CPUSeconds: [2]float64{lo, hi}}
	for k, cpu := range sp.CPUSeconds {
		app := f.App
		app.CPUSeconds = cpu
		e, err := check(s, app, cfg, prices, seed)
		if err != nil {
			return c, err
		}
		sp.CostError[k], sp.ReplayViolations[k] = e.CostError, e.ReplayViolations
	}
	c.Spread = sp
	return c, nil
}

// check replays what actually ran on app with one seed and compares it
// with s.
func check(s *Series, app sim.App, cfg sim.Config, prices sim.Prices, seed uint64) (Consistency, error) {
	c := Consistency{Workload: s.Name, Steps: len(s.Rate)}
	rates, _ := filled(s.Rate)
	pol, err := newRecorded(s)
	if err != nil {
		return c, err
	}
	cfg.Step = s.Step
	cfg.Unread = workload.Unread(pol)
	sm, err := sim.New(cfg, app, &sim.Trace{Name: "recorded", Step: s.Step, Rates: rates}, seed)
	if err != nil {
		return c, fmt.Errorf("whatif: %s: %w", s.Name, err)
	}
	dt := s.Step.Seconds()
	var absRep, nRep, cpuRep, cpuRec, memRep, memRec float64
	var latSteps, measViol, repViol int
	c.LatencyMeasured = len(s.P95) > 0 && s.SLO > 0
	for i := range s.Rate {
		m := sm.Step()
		c.ReplayCost += prices.Cost(m.Allocated.CPU, m.Allocated.Memory, dt)
		n := pol.replicas[i]
		c.RecordedCost += prices.Cost(n*pol.cpu[i], n*pol.mem[i], dt)
		if r := s.Replicas[i]; ok(r) {
			absRep += math.Abs(float64(m.Ready) - r)
			nRep++
		}
		if r, u := s.Replicas[i], s.CPU[i]; ok(r, u) {
			cpuRep += m.Used.CPU
			cpuRec += r * u
		}
		if r, u := s.Replicas[i], s.Memory[i]; ok(r, u) {
			memRep += m.Used.Memory
			memRec += r * u
		}
		if c.LatencyMeasured && ok(s.P95[i]) {
			latSteps++
			if s.P95[i] > s.SLO {
				measViol++
			}
			if m.Latency.P95 > s.SLO {
				repViol++
			}
		}
		rec, err := pol.Recommend(context.Background(), sm.Observation())
		if err != nil {
			return c, err
		}
		if _, err := sm.Apply(rec); err != nil {
			return c, fmt.Errorf("whatif: %s: replaying step %d: %w", s.Name, i, err)
		}
	}
	c.CostError = rel(c.ReplayCost, c.RecordedCost)
	c.ReplicasMAE = ratio(absRep, nRep)
	c.CPUError = rel(cpuRep, cpuRec)
	c.MemoryError = rel(memRep, memRec)
	if latSteps > 0 {
		c.MeasuredViolations = float64(measViol) / float64(latSteps)
		c.ReplayViolations = float64(repViol) / float64(latSteps)
		c.SLOError = c.ReplayViolations - c.MeasuredViolations
	} else {
		c.LatencyMeasured = false
	}
	return c, nil
}

func rel(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a/b - 1
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// WriteConsistency prints one line per workload.
func WriteConsistency(w io.Writer, cs []Consistency) error {
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nReplay of what actually ran against the history (the what-if's error bar):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORKLOAD\tSTEPS\tRECORDED COST\tREPLAY COST\tCOST ERR\tREPLICAS MAE\tCPU ERR\tMEM ERR\tSLO VIOL MEAS/REPLAY\t")
	var spread bool
	for _, c := range cs {
		slo := "not measured"
		if c.LatencyMeasured {
			slo = fmt.Sprintf("%.2f%%/%.2f%%", 100*c.MeasuredViolations, 100*c.ReplayViolations)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%+.1f%%\t%.2f\t%+.1f%%\t%+.1f%%\t%s\t\n", c.Workload, c.Steps, c.RecordedCost, c.ReplayCost,
			100*c.CostError, c.ReplicasMAE, 100*c.CPUError, 100*c.MemoryError, slo)
		spread = spread || c.Spread != nil
	}
	if err := tw.Flush(); err != nil || !spread {
		return err
	}
	fmt.Fprintln(w, "\nThe same replay at the ends of the fit's 95% interval of CPU seconds per request (low / high):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORKLOAD\tCPU S/REQUEST\tCOST ERR\tSLO VIOL REPLAY\t")
	for _, c := range cs {
		sp := c.Spread
		if sp == nil {
			continue
		}
		slo := "not measured"
		if c.LatencyMeasured {
			slo = fmt.Sprintf("%.2f%% / %.2f%%", 100*sp.ReplayViolations[0], 100*sp.ReplayViolations[1])
		}
		fmt.Fprintf(tw, "%s\t%.4g / %.4g\t%+.1f%% / %+.1f%%\t%s\t\n", c.Workload, sp.CPUSeconds[0], sp.CPUSeconds[1],
			100*sp.CostError[0], 100*sp.CostError[1], slo)
	}
	return tw.Flush()
}
