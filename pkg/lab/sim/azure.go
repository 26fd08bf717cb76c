package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// AzureMinutes is the number of per-minute count columns in one day of the
// Azure Functions 2019 invocation trace.
const AzureMinutes = 1440

// The fixed columns of the three Azure Functions 2019 files this package
// reads (one day each: invocations_per_function_md.anon.dNN.csv,
// function_durations_percentiles.anon.dNN.csv and
// app_memory_percentiles.anon.dNN.csv).
var (
	azureInvocationColumns = []string{"HashOwner", "HashApp", "HashFunction", "Trigger"}
	azureDurationColumns   = []string{"HashOwner", "HashApp", "HashFunction", "Average", "Count", "Minimum", "Maximum",
		"percentile_Average_0", "percentile_Average_1", "percentile_Average_25", "percentile_Average_50",
		"percentile_Average_75", "percentile_Average_99", "percentile_Average_100"}
	azureMemoryColumns = []string{"HashOwner", "HashApp", "SampleCount", "AverageAllocatedMb",
		"AverageAllocatedMb_pct1", "AverageAllocatedMb_pct5", "AverageAllocatedMb_pct25", "AverageAllocatedMb_pct50",
		"AverageAllocatedMb_pct75", "AverageAllocatedMb_pct95", "AverageAllocatedMb_pct99", "AverageAllocatedMb_pct100"}
)

// AzureFunction is one row of an Azure Functions 2019 invocation file:
// HashOwner,HashApp,HashFunction,Trigger,1..1440.
type AzureFunction struct {
	Owner, App, Function, Trigger string
	// Counts holds invocations per minute of the day.
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

// readAzureRows reads one Azure CSV file whose rows have the given named
// columns, then extra unnamed ones (the invocation file's minutes), of
// which hashes leading string columns must not be empty and the rest are
// non-negative numbers. A first row starting with columns[0] is the header
// and must name every column. row gets each data row's fields (reused
// between calls) and its line number. Every malformed row is an error
// naming its line.
func readAzureRows(r io.Reader, columns []string, extra, hashes int, integral bool, row func(line int, strs []string, nums []float64) error) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	want := len(columns) + extra
	nums := make([]float64, want-hashes)
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		line, _ := cr.FieldPos(0)
		if first && len(rec) > 0 && rec[0] == columns[0] {
			if len(rec) != want {
				return fmt.Errorf("line %d: header has %d columns, want %d", line, len(rec), want)
			}
			for i, c := range columns {
				if rec[i] != c {
					return fmt.Errorf("line %d: header column %d is %q, want %q", line, i+1, rec[i], c)
				}
			}
			continue
		}
		if len(rec) != want {
			return fmt.Errorf("line %d: %d columns, want %d (%s)", line, len(rec), want, azureColumnList(columns, extra))
		}
		for i := range hashes {
			if rec[i] == "" {
				return fmt.Errorf("line %d: %s is empty", line, columns[i])
			}
		}
		for i := hashes; i < want; i++ {
			s := rec[i]
			name := "minute " + strconv.Itoa(i-len(columns)+1)
			if i < len(columns) {
				name = columns[i]
			}
			v, err := parseAzureNumber(s, integral)
			if err != nil {
				return fmt.Errorf("line %d: %s: %w", line, name, err)
			}
			nums[i-hashes] = v
		}
		if err := row(line, rec[:hashes], nums); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
}

func azureColumnList(columns []string, extra int) string {
	s := strings.Join(columns, ",")
	if extra > 0 {
		s += ",1.." + strconv.Itoa(extra)
	}
	return s
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

// ReadAzureCSV parses an invocations_per_function file. A header row starting
// with HashOwner is skipped. Every malformed row is an error naming its line:
// a wrong column count, an empty hash, or a count that is not a non-negative
// integer.
func ReadAzureCSV(r io.Reader) ([]AzureFunction, error) {
	var out []AzureFunction
	err := readAzureRows(r, azureInvocationColumns, AzureMinutes, 4, true, func(_ int, s []string, n []float64) error {
		out = append(out, AzureFunction{Owner: s[0], App: s[1], Function: s[2], Trigger: s[3], Counts: append([]float64(nil), n...)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("azure invocations: %w", err)
	}
	return out, nil
}

// ReadAzureDurations parses a function_durations_percentiles file. A header
// row starting with HashOwner is checked and skipped. Every malformed row is
// an error naming its line: a wrong column count, an empty hash, a value
// that is not a finite non-negative number, or percentiles out of order.
func ReadAzureDurations(r io.Reader) ([]AzureDuration, error) {
	var out []AzureDuration
	err := readAzureRows(r, azureDurationColumns, 0, 3, false, func(_ int, s []string, n []float64) error {
		d := AzureDuration{Owner: s[0], App: s[1], Function: s[2], Average: n[0], Count: n[1], Minimum: n[2], Maximum: n[3]}
		copy(d.Percentiles[:], n[4:])
		if err := ascending("duration percentiles", d.Percentiles[:]); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("azure durations: %w", err)
	}
	return out, nil
}

// ReadAzureMemory parses an app_memory_percentiles file, with the same
// checks as ReadAzureDurations.
func ReadAzureMemory(r io.Reader) ([]AzureMemory, error) {
	var out []AzureMemory
	err := readAzureRows(r, azureMemoryColumns, 0, 2, false, func(_ int, s []string, n []float64) error {
		m := AzureMemory{Owner: s[0], App: s[1], SampleCount: n[0], Average: n[1]}
		copy(m.Percentiles[:], n[2:])
		if err := ascending("memory percentiles", m.Percentiles[:]); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("azure memory: %w", err)
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

// MeanRate is the function's mean invocation rate over the day (1/s).
func (f *AzureFunction) MeanRate() float64 {
	var total float64
	for _, c := range f.Counts {
		total += c
	}
	return total / float64(max(len(f.Counts), 1)) / 60
}
