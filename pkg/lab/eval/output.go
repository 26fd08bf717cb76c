package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
)

// WriteTable prints one line per policy.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "POLICY\tRUNS\tSLO VIOL\tVIOL WINDOWS\tLOST REQ\tCPU UTIL\tMEM UTIL\tCORE-H\tGIB-H\tCOST\tOOM\tSCALE H/V\tREWARD\t")
	for _, s := range r.Summaries {
		fmt.Fprintf(tw, "%s\t%d\t%.2f%%\t%d\t%.3f%%\t%.1f%%\t%.1f%%\t%.1f\t%.1f\t%.1f\t%d\t%d/%d\t%.3f\t\n",
			s.Policy, s.Runs, 100*s.SLOViolationRate, s.SLOViolations, 100*s.LostRate,
			100*s.CPUUtilization, 100*s.MemUtilization, s.CoreHours, s.GiBHours, s.Cost,
			s.OOMKills, s.HorizontalScales, s.VerticalScales, s.MeanReward)
	}
	return tw.Flush()
}

// WriteJSON writes the whole report, indented; equal reports give equal bytes.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Files written by WriteFiles.
const (
	JSONFile       = "report.json"
	ScatterFile    = "cost-vs-slo.svg"
	TimeSeriesFile = "timeseries.svg"
)

// WriteFiles writes report.json and the plots into dir, creating it, and
// returns the paths written.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	var paths []string
	write := func(name string, f func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		out, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := f(out); err != nil {
			out.Close()
			return fmt.Errorf("writing %s: %w", p, err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		paths = append(paths, p)
		return nil
	}
	if err := write(JSONFile, r.WriteJSON); err != nil {
		return paths, err
	}
	if err := write(ScatterFile, r.WriteScatterSVG); err != nil {
		return paths, err
	}
	if r.Series != nil {
		if err := write(TimeSeriesFile, r.WriteTimeSeriesSVG); err != nil {
			return paths, err
		}
	}
	return paths, nil
}
