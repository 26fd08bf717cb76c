package result

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// WhatIf is what recommender whatif predicted from one run's history
// (bench-real --whatif): the workload fitted to the run's own Prometheus
// series (request rate, cAdvisor's CPU and working set, the pods), and
// the run's recorded rate replayed in the simulator for each policy. A
// prediction made from a real HPA run is set beside the real run of the
// predicted policy in the same repetition (WhatIfPairs), which answers
// how far the what-if can be trusted on a real workload.
type WhatIf struct {
	// Dir holds the command's output (whatif.json, the plot, the MPA).
	Dir string `json:"dir"`
	// Refused is why the fit refused to predict; empty when it predicted.
	Refused string `json:"refused,omitempty"`
	// CPUSecondsPerRequest and CPUR2 are the fit's CPU slope and its R².
	CPUSecondsPerRequest float64 `json:"cpuSecondsPerRequest"`
	CPUR2                float64 `json:"cpuR2"`
	// RecordedCost is what ran, as the what-if read it from Prometheus;
	// ReplayCost is its replay in the simulator (the what-if's own error
	// bar, Consistency in pkg/lab/whatif).
	RecordedCost float64 `json:"recordedCost"`
	ReplayCost   float64 `json:"replayCost"`
	// Predicted holds each replayed policy's means over the command's
	// seeds.
	Predicted map[string]Prediction `json:"predicted,omitempty"`
}

// Prediction is one policy's replay in a what-if.
type Prediction struct {
	Cost float64 `json:"cost"`
	// Violations is the share of steps whose p95 broke the SLO.
	Violations float64 `json:"violations"`
}

// WhatIfRow is one prediction beside the real run it predicts.
type WhatIfRow struct {
	Rep int
	// From is the policy whose run's history the what-if read.
	From string
	// FromCost is that run's cost as bench-real measured it; Recorded and
	// Replayed are the what-if's reading and replay of the same run.
	FromCost, Recorded, Replayed float64
	// Predicted and Real are the predicted policy's cost and violating
	// share, replayed and as its real run measured them.
	Predicted, Real         float64
	PredictedViol, RealViol float64
}

// WhatIfPairs pairs every run with a what-if that predicted policy with
// the real run of policy in the same repetition, in repetition order. A
// run whose fit refused, or whose repetition has no real run of policy,
// is left out.
func WhatIfPairs(runs []Run, policy string) ([]WhatIfRow, error) {
	real := map[int]Summary{}
	for _, r := range runs {
		if r.Policy == policy {
			s, err := Summarise(r)
			if err != nil {
				return nil, err
			}
			real[r.Rep] = s
		}
	}
	var out []WhatIfRow
	for _, r := range runs {
		if r.WhatIf == nil || r.WhatIf.Refused != "" {
			continue
		}
		p, ok := r.WhatIf.Predicted[policy]
		s, okReal := real[r.Rep]
		if !ok || !okReal {
			continue
		}
		from, err := Summarise(r)
		if err != nil {
			return nil, err
		}
		out = append(out, WhatIfRow{
			Rep: r.Rep, From: r.Policy, FromCost: from.Cost,
			Recorded: r.WhatIf.RecordedCost, Replayed: r.WhatIf.ReplayCost,
			Predicted: p.Cost, Real: s.Cost, PredictedViol: p.Violations, RealViol: s.Violations,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rep < out[j].Rep })
	return out, nil
}

// WriteWhatIf prints the what-ifs of the runs that have one: each fit (or
// its refusal), the rows of WhatIfPairs for policy, and the mean relative
// cost error of the predictions (predicted/real − 1) and of the replay of
// what ran (replayed/measured − 1), with 95% intervals. Nothing is
// printed when no run has a what-if.
func WriteWhatIf(w io.Writer, runs []Run, policy string) error {
	var with []Run
	for _, r := range runs {
		if r.WhatIf != nil {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nwhat-if (recommender whatif on each run's history):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\trep\tCPU s/request (fit)\tR²\trefused")
	for _, r := range with {
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.3f\t%s\n", r.Policy, r.Rep, r.WhatIf.CPUSecondsPerRequest, r.WhatIf.CPUR2, r.WhatIf.Refused)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rows, err := WhatIfPairs(runs, policy)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "no prediction of %s has a real run of %s in its repetition\n", policy, policy)
		return err
	}
	fmt.Fprintf(w, "\n%s predicted from another policy's run, beside the real %s run of the same repetition:\n", policy, policy)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "rep\tfrom\tits cost\trecorded\treplayed\tpredicted cost\treal cost\terror\tpredicted SLO-viol.\treal SLO-viol.")
	var predErr, replayErr []float64
	for _, r := range rows {
		e := r.Predicted/r.Real - 1
		predErr = append(predErr, e)
		replayErr = append(replayErr, r.Replayed/r.FromCost-1)
		fmt.Fprintf(tw, "%d\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%+.1f%%\t%.1f%%\t%.1f%%\n", r.Rep, r.From, r.FromCost, r.Recorded, r.Replayed,
			r.Predicted, r.Real, 100*e, 100*r.PredictedViol, 100*r.RealViol)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	pe, err := stats.Mean(predErr, 0.95)
	if err != nil {
		return err
	}
	re, err := stats.Mean(replayErr, 0.95)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "cost error of the prediction, mean [95%% interval]: %+.1f%% [%+.1f, %+.1f] over %d; of the replay of what ran against its measured cost: %+.1f%% [%+.1f, %+.1f]\n",
		100*pe.Mean, 100*pe.Lo, 100*pe.Hi, pe.N, 100*re.Mean, 100*re.Lo, 100*re.Hi)
	return err
}
