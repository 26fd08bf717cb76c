package whatif

import (
	"fmt"
	"io"
	"strings"

	"github.com/aware-k8s/aware/pkg/lab/chart"
	"github.com/aware-k8s/aware/pkg/lab/eval"
)

// Plot is one workload's history and every replayed policy's run on it
// (the first seed), as ReplayOptions.Plot keeps them.
type Plot struct {
	History  *Series
	Replayed *eval.SeriesSet
}

// PlotFile is the name of a workload's plot in the output folder:
// "plot-<namespace>-<name>.svg".
func PlotFile(workload string) string {
	return "plot-" + strings.ReplaceAll(workload, "/", "-") + ".svg"
}

// recordedName is the legend's name of the history itself, drawn in black
// and thicker than the policies; "actual" is its replay on the fitted app.
const recordedName = "recorded"

// WriteSVG plots, against hours since the history's start: the recorded
// request rate; the replicas; the CPU requested by all pods (replicas ×
// per-pod request); and the per-pod CPU request. Each panel has the
// recorded history (black) and one line per replayed policy (desired
// replicas, and their requests), in the demo's colours.
func (p Plot) WriteSVG(w io.Writer) error {
	s := p.History
	if s == nil || p.Replayed == nil || len(p.Replayed.Series) == 0 {
		return fmt.Errorf("whatif: plot without a history or a replay")
	}
	dt := s.Step.Hours()
	hx := make([]float64, len(s.Rate))
	total := make([]float64, len(s.Rate))
	for i := range hx {
		// The i-th window ends at (i+1)·step, as the replay's points do.
		hx[i] = float64(i+1) * dt
		total[i] = at(s.Replicas, i) * at(s.RequestCPU, i)
	}
	const black = "#000000"
	// The history is drawn first and wide, under the policies: a policy
	// that follows it (the replay of what ran, often the HPA) shows as a
	// coloured line inside a black one rather than hiding it.
	rec := func(y []float64) chart.Line {
		return chart.Line{Name: recordedName, X: hx, Y: y, Colour: black, Width: 4}
	}
	panels := []chart.Panel{
		{Title: "Request rate (recorded) — " + s.Name, YLabel: "requests/s", Lines: []chart.Line{rec(s.Rate)}},
		{Title: "Replicas (recorded; replayed: desired)", YLabel: "replicas", Lines: []chart.Line{rec(s.Replicas)}},
		{Title: "CPU requested by all pods", YLabel: "cores", Lines: []chart.Line{rec(total)}},
		{Title: "CPU request per pod", YLabel: "cores", Lines: []chart.Line{rec(s.RequestCPU)}},
	}
	legend := []chart.LegendEntry{{Name: recordedName, Colour: black}}
	for i, r := range p.Replayed.Series {
		c := chart.TimeSeriesColour(i)
		name := r.Policy
		if name == PolicyActual {
			name += " (replayed)"
		}
		legend = append(legend, chart.LegendEntry{Name: name, Colour: c})
		x := make([]float64, len(r.Points))
		reps, tot, per := make([]float64, len(r.Points)), make([]float64, len(r.Points)), make([]float64, len(r.Points))
		for k, pt := range r.Points {
			x[k] = pt.Seconds / 3600
			reps[k], per[k] = float64(pt.Replicas), pt.CPU
			tot[k] = float64(pt.Replicas) * pt.CPU
		}
		for k, y := range [][]float64{reps, tot, per} {
			panels[k+1].Lines = append(panels[k+1].Lines, chart.Line{Name: name, X: x, Y: y, Colour: c})
		}
	}
	return chart.TimeSeries{XLabel: "hours since " + s.Start.UTC().Format("2006-01-02 15:04 MST"), Panels: panels, Legend: legend}.WriteSVG(w)
}
