package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AzureMinutes is the number of minutes in one day of the Azure Functions
// 2019 invocation trace: a full day's file has minute columns 1 to 1440.
const AzureMinutes = 1440

// The named columns of the three Azure Functions 2019 files this package
// reads (one day each: invocations_per_function_md.anon.dNN.csv,
// function_durations_percentiles.anon.dNN.csv and
// app_memory_percentiles.anon.dNN.csv), in the order a file without a
// header must have them. A file with a header may have them in any order,
// among other columns, which are ignored.
var (
	azureInvocations = azureFormat{name: "azure invocations", hashes: 4, integral: true, minutes: true,
		columns: []string{"HashOwner", "HashApp", "HashFunction", "Trigger"}}
	azureDurations = azureFormat{name: "azure durations", hashes: 3,
		columns: []string{"HashOwner", "HashApp", "HashFunction", "Average", "Count", "Minimum", "Maximum",
			"percentile_Average_0", "percentile_Average_1", "percentile_Average_25", "percentile_Average_50",
			"percentile_Average_75", "percentile_Average_99", "percentile_Average_100"}}
	azureMemory = azureFormat{name: "azure memory", hashes: 2,
		columns: []string{"HashOwner", "HashApp", "SampleCount", "AverageAllocatedMb",
			"AverageAllocatedMb_pct1", "AverageAllocatedMb_pct5", "AverageAllocatedMb_pct25", "AverageAllocatedMb_pct50",
			"AverageAllocatedMb_pct75", "AverageAllocatedMb_pct95", "AverageAllocatedMb_pct99", "AverageAllocatedMb_pct100"}}
)

// AzureFunction is one row of an Azure Functions 2019 invocation file:
// HashOwner,HashApp,HashFunction,Trigger and the counts of a run of
// consecutive minutes of the day (1..1440 in a full day's file, a window
// such as 480..959 in a sample).
type AzureFunction struct {
	Owner, App, Function, Trigger string
	// FirstMinute is the minute of the day (1-based, as the file's header
	// numbers it) of Counts[0].
	FirstMinute int
	// Counts holds invocations per minute, from FirstMinute on.
	Counts []float64
}

// AzureDuration is one row of a function_durations_percentiles file: a
// function's execution time over the day, in milliseconds.
type AzureDuration struct {
	Owner, App, Function string
	// Average is the mean execution time (ms) over Count executions.
	Average, Count, Minimum, Maximum float64
	// Percentiles are the 0th, 1st, 25th, 50th, 75th, 99th and 100th
	// weighted percentiles of the execution time (ms).
	Percentiles [7]float64
}

// AzureMemory is one row of an app_memory_percentiles file: an app's
// allocated memory over the day's samples, in MB.
type AzureMemory struct {
	Owner, App string
	// SampleCount samples averaged to Average (MB).
	SampleCount, Average float64
	// Percentiles are the 1st, 5th, 25th, 50th, 75th, 95th, 99th and 100th
	// percentiles of the allocated memory (MB).
	Percentiles [8]float64
}

// azureFormat is one of the three files' columns: named ones, of which
// the first hashes are non-empty strings and the rest non-negative numbers
// (integers when integral), then, with minutes, numbered minute columns of
// counts.
type azureFormat struct {
	name     string
	columns  []string
	hashes   int
	integral bool
	minutes  bool
}

// azureLayout is where a file holds a format's columns: pos[i] is the
// field of columns[i], then minutes fields of consecutive minutes from
// firstMinute start at field minutePos; every row has width fields.
type azureLayout struct {
	width, minutePos, minutes, firstMinute int
	pos                                    []int
}

// layout reads the header rec (fields of the first row) or, when the first
// row names none of the format's columns, takes the file to have no header
// and the classic order, with as many minutes as the first row has fields
// past the named columns. It reports whether rec was a header.
func (f *azureFormat) layout(rec []string) (azureLayout, bool, error) {
	var l azureLayout
	byName := make(map[string]int, len(rec))
	for i, name := range rec {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff") // a byte-order mark
		}
		if _, dup := byName[name]; dup && slices.Contains(f.columns, name) {
			return l, true, fmt.Errorf("header names column %s twice", name)
		}
		byName[name] = i
	}
	header := slices.ContainsFunc(f.columns, func(c string) bool { _, ok := byName[c]; return ok })
	if !header {
		l.width, l.pos = len(f.columns), make([]int, len(f.columns))
		for i := range l.pos {
			l.pos[i] = i
		}
		if f.minutes {
			l.minutePos, l.minutes, l.firstMinute = len(f.columns), len(rec)-len(f.columns), 1
			if l.minutes < 1 || l.minutes > AzureMinutes {
				return l, false, fmt.Errorf("%d columns, want %d to %d (%s,1..N) without a header", len(rec), len(f.columns)+1, len(f.columns)+AzureMinutes, strings.Join(f.columns, ","))
			}
			l.width += l.minutes
		}
		return l, false, nil
	}
	l.width = len(rec)
	for _, c := range f.columns {
		i, ok := byName[c]
		if !ok {
			return l, true, fmt.Errorf("header has no column %s (it needs %s)", c, strings.Join(f.columns, ","))
		}
		l.pos = append(l.pos, i)
	}
	if !f.minutes {
		return l, true, nil
	}
	// The minute columns: every column named by a number, consecutive
	// minutes of the day in order, so that a run is a stretch of time with
	// no gap the simulator would have to fill.
	for i, name := range rec {
		m, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		switch {
		case m < 1 || m > AzureMinutes:
			return l, true, fmt.Errorf("header column %d: minute %d is not in 1..%d", i+1, m, AzureMinutes)
		case l.minutes == 0:
			l.minutePos, l.firstMinute = i, m
		case i != l.minutePos+l.minutes:
			return l, true, fmt.Errorf("header column %d: minute %d is apart from the minute columns before it (they must be adjacent)", i+1, m)
		case m != l.firstMinute+l.minutes:
			return l, true, fmt.Errorf("header column %d: minute %d follows minute %d (the minutes must be consecutive and in order)", i+1, m, l.firstMinute+l.minutes-1)
		}
		l.minutes++
	}
	if l.minutes == 0 {
		return l, true, errors.New("header names no minute column (1..1440)")
	}
	return l, true, nil
}

// readAzureRows reads one Azure CSV file of format f, locating its columns
// by the header (or the classic order without one). row gets each data
// row's hash fields and numbers (named columns, then minutes; both reused
// between calls) and the layout. Every malformed row is an error naming its
// line and column.
func readAzureRows(r io.Reader, f azureFormat, row func(strs []string, nums []float64, l *azureLayout) error) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var l azureLayout
	var strs []string
	var nums []float64
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		line, _ := cr.FieldPos(0)
		if first {
			var header bool
			if l, header, err = f.layout(rec); err != nil {
				return fmt.Errorf("line %d: %w", line, err)
			}
			strs, nums = make([]string, f.hashes), make([]float64, len(f.columns)-f.hashes+l.minutes)
			if header {
				continue
			}
		}
		if len(rec) != l.width {
			return fmt.Errorf("line %d: %d columns, want %d", line, len(rec), l.width)
		}
		for i := range f.hashes {
			if strs[i] = rec[l.pos[i]]; strs[i] == "" {
				return fmt.Errorf("line %d: %s is empty", line, f.columns[i])
			}
		}
		for i := f.hashes; i < len(f.columns); i++ {
			v, err := parseAzureNumber(rec[l.pos[i]], f.integral)
			if err != nil {
				return fmt.Errorf("line %d: %s: %w", line, f.columns[i], err)
			}
			nums[i-f.hashes] = v
		}
		base := len(f.columns) - f.hashes
		for k := range l.minutes {
			v, err := parseAzureNumber(rec[l.minutePos+k], true)
			if err != nil {
				return fmt.Errorf("line %d: minute %d: %w", line, l.firstMinute+k, err)
			}
			nums[base+k] = v
		}
		if err := row(strs, nums, &l); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
}

func parseAzureNumber(s string, integral bool) (float64, error) {
	if integral {
		c, err := strconv.ParseUint(s, 10, 53)
		if err != nil {
			return 0, fmt.Errorf("count %q is not a non-negative integer", s)
		}
		return float64(c), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("value %q is not a finite non-negative number", s)
	}
	return v, nil
}

// ReadAzureCSV parses an invocations_per_function file. With a header (a
// first row naming HashOwner, HashApp, HashFunction and Trigger, in any
// order) the minute columns are those named by a number: consecutive
// minutes of the day, in order, as many as the file has (a sample may hold
// minutes 480 to 959 only); other columns are ignored. Without one, the
// rows are HashOwner,HashApp,HashFunction,Trigger and minutes 1..N. Every
// malformed row is an error naming its line: a wrong column count, an
// empty hash, or a count that is not a non-negative integer.
func ReadAzureCSV(r io.Reader) ([]AzureFunction, error) {
	var out []AzureFunction
	err := readAzureRows(r, azureInvocations, func(s []string, n []float64, l *azureLayout) error {
		out = append(out, AzureFunction{Owner: s[0], App: s[1], Function: s[2], Trigger: s[3],
			FirstMinute: l.firstMinute, Counts: slices.Clone(n)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", azureInvocations.name, err)
	}
	return out, nil
}

// ReadAzureDurations parses a function_durations_percentiles file. A header
// may hold the columns in any order, among others, which are ignored.
// Every malformed row is an error naming its line: a wrong column count,
// an empty hash, a value that is not a finite non-negative number, or
// percentiles out of order.
func ReadAzureDurations(r io.Reader) ([]AzureDuration, error) {
	var out []AzureDuration
	err := readAzureRows(r, azureDurations, func(s []string, n []float64, _ *azureLayout) error {
		d := AzureDuration{Owner: s[0], App: s[1], Function: s[2], Average: n[0], Count: n[1], Minimum: n[2], Maximum: n[3]}
		copy(d.Percentiles[:], n[4:])
		if err := ascending("duration percentiles", d.Percentiles[:]); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", azureDurations.name, err)
	}
	return out, nil
}

// ReadAzureMemory parses an app_memory_percentiles file, with the same
// checks as ReadAzureDurations (a sample's extra HashFunction column, for
// instance, is ignored).
func ReadAzureMemory(r io.Reader) ([]AzureMemory, error) {
	var out []AzureMemory
	err := readAzureRows(r, azureMemory, func(s []string, n []float64, _ *azureLayout) error {
		m := AzureMemory{Owner: s[0], App: s[1], SampleCount: n[0], Average: n[1]}
		copy(m.Percentiles[:], n[2:])
		if err := ascending("memory percentiles", m.Percentiles[:]); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", azureMemory.name, err)
	}
	return out, nil
}

func ascending(what string, v []float64) error {
	for i := 1; i < len(v); i++ {
		if v[i] < v[i-1] {
			return fmt.Errorf("%s decrease (%g then %g)", what, v[i-1], v[i])
		}
	}
	return nil
}

// Trace converts per-minute counts into a trace of rates with the given
// window, holding each minute's rate over the windows it spans. The rate is
// scaled by scale (1 keeps the recorded load).
func (f *AzureFunction) Trace(step time.Duration, scale float64) (Trace, error) {
	if step <= 0 || step > time.Minute || time.Minute%step != 0 {
		return Trace{}, fmt.Errorf("azure trace: step %s must divide one minute", step)
	}
	if !(scale >= 0) || math.IsInf(scale, 0) {
		return Trace{}, fmt.Errorf("azure trace: scale must be finite and >= 0, got %g", scale)
	}
	per := int(time.Minute / step)
	rates := make([]float64, 0, len(f.Counts)*per)
	for _, c := range f.Counts {
		for range per {
			rates = append(rates, c/60*scale)
		}
	}
	return Trace{Name: "azure:" + f.Function, Step: step, Rates: rates}, nil
}

// PeakRate is the function's rate in its busiest minute (1/s).
func (f *AzureFunction) PeakRate() float64 {
	return slices.Max(append([]float64{0}, f.Counts...)) / 60
}

// MeanRate is the function's mean invocation rate over its minutes (1/s).
func (f *AzureFunction) MeanRate() float64 {
	var total float64
	for _, c := range f.Counts {
		total += c
	}
	return total / float64(max(len(f.Counts), 1)) / 60
}
