package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// AzureMinutes is the number of per-minute count columns in one day of the
// Azure Functions 2019 invocation trace.
const AzureMinutes = 1440

const azureFixedColumns = 4

// AzureFunction is one row of an Azure Functions 2019 invocation file:
// HashOwner,HashApp,HashFunction,Trigger,1..1440.
type AzureFunction struct {
	Owner, App, Function, Trigger string
	// Counts holds invocations per minute of the day.
	Counts []float64
}

// ReadAzureCSV parses an invocations_per_function file. A header row starting
// with HashOwner is skipped. Every malformed row is an error naming its line:
// a wrong column count, an empty hash, or a count that is not a non-negative
// integer.
func ReadAzureCSV(r io.Reader) ([]AzureFunction, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var out []AzureFunction
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("azure trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if first && len(rec) > 0 && rec[0] == "HashOwner" {
			if len(rec) != azureFixedColumns+AzureMinutes {
				return nil, fmt.Errorf("azure trace: line %d: header has %d columns, want %d", line, len(rec), azureFixedColumns+AzureMinutes)
			}
			continue
		}
		if len(rec) != azureFixedColumns+AzureMinutes {
			return nil, fmt.Errorf("azure trace: line %d: %d columns, want %d (HashOwner,HashApp,HashFunction,Trigger,1..%d)", line, len(rec), azureFixedColumns+AzureMinutes, AzureMinutes)
		}
		f := AzureFunction{Owner: rec[0], App: rec[1], Function: rec[2], Trigger: rec[3], Counts: make([]float64, AzureMinutes)}
		for i, name := range []string{"HashOwner", "HashApp", "HashFunction", "Trigger"} {
			if rec[i] == "" {
				return nil, fmt.Errorf("azure trace: line %d: %s is empty", line, name)
			}
		}
		for m := range AzureMinutes {
			s := rec[azureFixedColumns+m]
			c, err := strconv.ParseUint(s, 10, 53)
			if err != nil {
				return nil, fmt.Errorf("azure trace: line %d: minute %d: count %q is not a non-negative integer", line, m+1, s)
			}
			f.Counts[m] = float64(c)
		}
		out = append(out, f)
	}
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
