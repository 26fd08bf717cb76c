package whatif

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ReadResult reads a whatif.json written by Result.WriteJSON.
func ReadResult(r io.Reader) (*Result, error) {
	var res Result
	if err := json.NewDecoder(r).Decode(&res); err != nil {
		return nil, fmt.Errorf("whatif: reading a result: %w", err)
	}
	return &res, nil
}

// Refit returns the workloads of a result read back, each history fitted
// again with the result's fit options: the fit is deterministic, so the
// fits are the recorded ones (a fitted app is not written to JSON). A
// result written before FitOptions.Idle reads it as "" (IdleOff), and so
// replays without idle CPU, as it was made. It fails on a result without
// history (written before whatif.json carried it) or whose refits differ
// from the recorded ones.
func (r *Result) Refit() ([]Workload, error) {
	if len(r.History) == 0 {
		return nil, errors.New("whatif: the result holds no history to replay (written by an older recommender?)")
	}
	var ws []Workload
	for i, s := range r.History {
		if s == nil {
			return nil, fmt.Errorf("whatif: history %d is empty", i)
		}
		f, err := FitApp(s, r.FitOptions)
		if err != nil && !errors.Is(err, ErrTooThin) && !errors.Is(err, ErrPoorFit) && !errors.Is(err, ErrSeries) {
			return nil, err
		}
		if i < len(r.Fits) && (r.Fits[i].Refused != f.Refused || r.Fits[i].CPU.Slope != f.CPU.Slope || r.Fits[i].Idle.Replayed != f.Idle.Replayed) {
			return nil, fmt.Errorf("whatif: %s fits differently from the recorded result (%q, %g CPU seconds per request, idle CPU replayed %v; recorded %q, %g, %v)",
				s.Name, f.Refused, f.CPU.Slope, f.Idle.Replayed, r.Fits[i].Refused, r.Fits[i].CPU.Slope, r.Fits[i].Idle.Replayed)
		}
		ws = append(ws, Workload{Series: s, Fit: f})
	}
	return ws, nil
}

// JSONFile is the result's file in an output folder.
const JSONFile = "whatif.json"

// WriteFiles writes JSONFile and one plot per workload of Plots
// (PlotFile) into dir, creating it, and returns their paths.
func (r *Result) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	var files []string
	write := func(name string, f func(io.Writer) error) error {
		path := filepath.Join(dir, name)
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := f(out); err != nil {
			out.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		files = append(files, path)
		return nil
	}
	if err := write(JSONFile, r.WriteJSON); err != nil {
		return nil, err
	}
	for _, p := range r.Plots {
		if err := write(PlotFile(p.History.Name), p.WriteSVG); err != nil {
			return nil, err
		}
	}
	return files, nil
}
