package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A rate series file is a CSV of rows "time,value": a request-rate export
// of the user's own service, or a public HTTP trace binned by time. Each
// row's value holds from its time to the next row's; the rows must be
// evenly spaced, and that spacing is the series' interval. The time is, in
// the whole file alike, an RFC 3339 timestamp, "YYYY-MM-DD HH:MM:SS" (UTC),
// or seconds from the start. The value is a rate in requests per second,
// or the requests counted in the interval when a header names its column
// count, requests or invocations. A first row whose value does not read as
// a number is that header.

// RateSeries is a rate series as read from a file.
type RateSeries struct {
	// Interval is the spacing of the rows.
	Interval time.Duration
	// Rates holds the mean rate (requests/s) of each interval, in order.
	Rates []float64
}

// seriesTime is how a file writes its times.
type seriesTime int

const (
	timeSeconds seriesTime = iota + 1
	timeRFC3339
	timeDateTime
)

func (k seriesTime) String() string {
	return [...]string{"", "seconds from the start", "RFC 3339 timestamps", "YYYY-MM-DD HH:MM:SS"}[k]
}

// parseSeriesTime reads s as seconds from an arbitrary origin, and says
// which of the formats it is in.
func parseSeriesTime(s string) (float64, seriesTime, error) {
	s = strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, 0, fmt.Errorf("time %q is not finite", s)
		}
		return v, timeSeconds, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return seriesSeconds(t), timeRFC3339, nil
	}
	if t, err := time.Parse(time.DateTime, s); err == nil {
		return seriesSeconds(t), timeDateTime, nil
	}
	return 0, 0, fmt.Errorf("time %q is neither seconds, an RFC 3339 timestamp nor YYYY-MM-DD HH:MM:SS", s)
}

// seriesSeconds is t in seconds since the Unix epoch, exact to the
// microsecond over the years a series can span.
func seriesSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// isCountColumn reports whether a header's value column holds counts per
// interval rather than rates.
func isCountColumn(name string) bool {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, c := range []string{"count", "requests", "invocations"} {
		if strings.HasPrefix(name, c) {
			return true
		}
	}
	return false
}

// maxSpan is the longest series a replay can measure: the largest
// time.Duration.
const maxSpan = time.Duration(math.MaxInt64)

// intervalTolerance is how far a row's spacing may be from the interval
// (relative) and still count as equal: seconds written with a few decimals
// round.
const intervalTolerance = 1e-6

// ReadRateCSV parses a rate series (see the file's description above).
// Every malformed row is an error naming its line: not two columns, a time
// in another format than the first row's or not after the row before, a
// spacing other than the interval the first two rows set, a value that is
// not a finite non-negative number. A series needs two rows at least.
func ReadRateCSV(r io.Reader) (RateSeries, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	var (
		s       RateSeries
		kind    seriesTime
		counts  bool
		times   []float64
		prev    float64
		prevRow int
		step    float64
	)
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return RateSeries{}, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != 2 {
			return RateSeries{}, fmt.Errorf("line %d: %d columns, want 2 (time,rate or time,count)", line, len(rec))
		}
		value := strings.TrimSpace(rec[1])
		if first {
			if _, err := strconv.ParseFloat(value, 64); err != nil {
				counts = isCountColumn(value)
				continue
			}
		}
		t, k, err := parseSeriesTime(rec[0])
		if err != nil {
			return RateSeries{}, fmt.Errorf("line %d: %w", line, err)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || !(v >= 0) || math.IsInf(v, 0) {
			return RateSeries{}, fmt.Errorf("line %d: value %q is not a finite non-negative number", line, value)
		}
		switch n := len(times); {
		case n == 0:
			kind = k
		case k != kind:
			return RateSeries{}, fmt.Errorf("line %d: time %q is in %s, the first row's in %s", line, rec[0], k, kind)
		case !(t > prev):
			return RateSeries{}, fmt.Errorf("line %d: time %q is not after line %d's", line, rec[0], prevRow)
		case n == 1:
			step = t - prev
		case math.Abs(t-prev-step) > intervalTolerance*step:
			return RateSeries{}, fmt.Errorf("line %d: %gs after line %d, but the rows before are %gs apart: the rows must be evenly spaced (fill gaps, or resample the series, before replaying it)",
				line, t-prev, prevRow, step)
		}
		times, prev, prevRow = append(times, t), t, line
		s.Rates = append(s.Rates, v)
	}
	if len(times) < 2 {
		return RateSeries{}, fmt.Errorf("%d rows: a series needs two at least, to set its interval", len(times))
	}
	s.Interval = time.Duration(math.Round(step * float64(time.Second)))
	if s.Interval <= 0 {
		return RateSeries{}, fmt.Errorf("interval %gs is below a nanosecond", step)
	}
	// Resample and replays measure the span as a time.Duration.
	if span := float64(len(s.Rates)) * step; span > maxSpan.Seconds() {
		return RateSeries{}, fmt.Errorf("%d rows of %gs span %.3g s, more than the %.3g s (292 years) a replay can measure", len(s.Rates), step, span, maxSpan.Seconds())
	}
	if counts {
		for i := range s.Rates {
			s.Rates[i] /= s.Interval.Seconds()
		}
	}
	return s, nil
}

// Resample returns the series' mean rate over each window of step, from
// the first row's time: a window takes the time-weighted mean of the
// intervals it overlaps, so the requests of the series are kept. There are
// as many windows as fit whole in the series; none when step is longer
// than the series.
func (s *RateSeries) Resample(step time.Duration) []float64 {
	if step <= 0 || s.Interval <= 0 {
		return nil
	}
	total := time.Duration(len(s.Rates)) * s.Interval
	n := int(total / step)
	out := make([]float64, n)
	iv := s.Interval.Seconds()
	for w := range out {
		// The window [a, b) in seconds, and the intervals it overlaps.
		a, b := float64(w)*step.Seconds(), float64(w+1)*step.Seconds()
		var sum float64
		for k := int(a / iv); k < len(s.Rates) && float64(k)*iv < b; k++ {
			lo, hi := math.Max(a, float64(k)*iv), math.Min(b, float64(k+1)*iv)
			if hi > lo {
				sum += s.Rates[k] * (hi - lo)
			}
		}
		out[w] = sum / (b - a)
	}
	return out
}

// Mean is the series' mean rate (requests/s).
func (s *RateSeries) Mean() float64 {
	var sum float64
	for _, r := range s.Rates {
		sum += r
	}
	return sum / float64(max(len(s.Rates), 1))
}

// SeriesFile names a rate series file and the demand of the app that
// replays it; a zero demand field keeps the generated app's.
type SeriesFile struct {
	Path string
	// CPUSeconds is the CPU time of one request (core-seconds).
	CPUSeconds float64
	// IOWait is the time a request waits without CPU (seconds).
	IOWait float64
	// BaseMemory is what an idle pod holds, MemoryPerRequest what each
	// request in flight adds (bytes).
	BaseMemory, MemoryPerRequest float64
}

// Validate rejects demand that is negative or not finite, and demand
// without a file.
func (f *SeriesFile) Validate() error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"CPU seconds per request", f.CPUSeconds}, {"I/O wait per request", f.IOWait}, {"base memory", f.BaseMemory}, {"memory per request", f.MemoryPerRequest}} {
		if !(v.v >= 0) || math.IsInf(v.v, 0) {
			return fmt.Errorf("rate series: %s must be finite and >= 0, got %g", v.name, v.v)
		}
	}
	if f.Path == "" && (*f != SeriesFile{}) {
		return errors.New("rate series: the app's demand is set but no series file is named")
	}
	return nil
}

// SeriesWorkload is a series resampled to a window, and the demand of the
// app that replays it.
type SeriesWorkload struct {
	File SeriesFile
	Name string
	Step time.Duration
	// Rates is the series resampled to Step.
	Rates []float64
	mean  float64
}

// Load reads f's series and resamples it to step; nil without a path.
// Errors name the file and the line.
func (f SeriesFile) Load(step time.Duration) (*SeriesWorkload, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.Path == "" {
		return nil, nil
	}
	file, err := os.Open(f.Path)
	if err != nil {
		return nil, fmt.Errorf("rate series: %w", err)
	}
	defer file.Close()
	s, err := ReadRateCSV(file)
	if err != nil {
		return nil, fmt.Errorf("%s: rate series: %w", f.Path, err)
	}
	rates := s.Resample(step)
	if len(rates) == 0 {
		return nil, fmt.Errorf("%s: rate series of %d rows of %s is shorter than one window of %s", f.Path, len(s.Rates), s.Interval, step)
	}
	w := &SeriesWorkload{File: f, Name: "csv:" + filepath.Base(f.Path), Step: step, Rates: rates}
	w.mean = (&Trace{Rates: rates}).Mean()
	if !(w.mean > 0) {
		return nil, fmt.Errorf("%s: rate series has no requests", f.Path)
	}
	return w, nil
}

// Run returns app with the file's demand (the generated app's where the
// file gives none), deployed for the series' mean rate (App.WithRate),
// under windows start to start+n-1 of the series at its recorded rates.
func (w *SeriesWorkload) Run(app App, n, start int) (App, Trace, error) {
	if start < 0 || n <= 0 || start+n > len(w.Rates) {
		return App{}, Trace{}, fmt.Errorf("%s: the series covers %d windows of %s, not windows %d to %d", w.File.Path, len(w.Rates), w.Step, start, start+n-1)
	}
	if w.File.CPUSeconds > 0 {
		app.CPUSeconds = w.File.CPUSeconds
	}
	if w.File.IOWait > 0 {
		app.IOWait = w.File.IOWait
	}
	if w.File.BaseMemory > 0 {
		app.BaseMemory = w.File.BaseMemory
	}
	if w.File.MemoryPerRequest > 0 {
		app.MemoryPerRequest = w.File.MemoryPerRequest
	}
	app.size() // the SLO follows the demand
	app = app.WithRate(w.mean)
	return app, Trace{Name: w.Name, Step: w.Step, Rates: w.Rates[start : start+n]}, nil
}
