package soak

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Record is a soak as report.json holds it: the report and every sample,
// enough to judge it again (Rejudge) without a testbed. Its JSON is what
// the harness has written since the first soak of record, so old files
// read; SpanSeconds is newer and may be absent.
type Record struct {
	Report Report `json:"report"`
	// Warmup is the warm-up, in seconds, the soak was run with (the
	// within-segment fit's).
	Warmup float64 `json:"warmupSeconds"`
	// SpanSeconds is how long the soak proper ran, from its start to the
	// report: the plot's time axis. 0 in older records: Span falls back
	// to the last sample.
	SpanSeconds float64                       `json:"spanSeconds,omitempty"`
	Samples     map[string]map[string][]Point `json:"samples"`
	Finished    time.Time                     `json:"finished"`
}

// Span is the plot's time axis: SpanSeconds, or, when the record lacks
// it, the time of its last sample.
func (rec Record) Span() float64 {
	if rec.SpanSeconds > 0 {
		return rec.SpanSeconds
	}
	span := 0.0
	for _, m := range rec.Samples {
		for _, pts := range m {
			for _, p := range pts {
				span = max(span, p.T)
			}
		}
	}
	return span
}

// ReadRecord decodes a report.json. A record without samples, or without
// a confidence level, cannot be judged and is an error.
func ReadRecord(r io.Reader) (Record, error) {
	var rec Record
	if err := json.NewDecoder(r).Decode(&rec); err != nil {
		return Record{}, fmt.Errorf("decode the soak's record: %w", err)
	}
	if len(rec.Samples) == 0 {
		return Record{}, errors.New("the soak's record has no samples")
	}
	if !(rec.Report.Level > 0 && rec.Report.Level < 1) {
		return Record{}, fmt.Errorf("the soak's record has confidence level %g, want one in (0, 1)", rec.Report.Level)
	}
	return rec, nil
}

// Rejudge reads a soak's report.json from in, judges its samples again
// with the default tolerances, settled share settle (DefaultSettle if 0)
// and warm-up warmup seconds (the record's if 0), keeping its title,
// figures, restarts and checks, and writes the three files to out: a
// recorded soak judged as today's code judges. It returns the new report.
func Rejudge(in io.Reader, out Outputs, settle, warmup float64) (Report, error) {
	rec, err := ReadRecord(in)
	if err != nil {
		return Report{}, err
	}
	if settle == 0 {
		settle = DefaultSettle
	}
	if !(settle > 0 && settle <= 1) {
		return Report{}, fmt.Errorf("settled share %g: want one in (0, 1]", settle)
	}
	if warmup == 0 {
		warmup = rec.Warmup
	}
	rec.Warmup = warmup
	rec.Report.Judge(rec.Samples, Judgement{Settle: settle, Warmup: warmup, Tolerances: DefaultTolerances})
	return rec.Report, rec.Write(out)
}

// Outputs are the writers of a soak's three files.
type Outputs struct {
	Markdown, JSON, SVG io.Writer
}

// Write writes rec as report.md, report.json (indented, every sample)
// and soak.svg to out. The harness writes a finished soak so, and
// cmd/soakjudge a re-judged one. Each is written even if another fails,
// so that a plot that cannot be drawn does not cost the figures.
func (rec Record) Write(out Outputs) error {
	var errs []error
	if err := WriteMarkdown(out.Markdown, rec.Report); err != nil {
		errs = append(errs, fmt.Errorf("report.md: %w", err))
	}
	enc := json.NewEncoder(out.JSON)
	enc.SetIndent("", " ")
	if err := enc.Encode(rec); err != nil {
		errs = append(errs, fmt.Errorf("report.json: %w", err))
	}
	if err := WriteSVG(out.SVG, rec.Report.Title, Plot(rec.Samples, rec.Report.Restarts), rec.Report.Restarts, rec.Span()); err != nil {
		errs = append(errs, fmt.Errorf("soak.svg: %w", err))
	}
	return errors.Join(errs...)
}
