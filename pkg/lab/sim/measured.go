package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// Measured is a real function's per-request demand, as the Azure Functions
// 2019 duration and memory files give it. A zero field means "not
// measured": the generated value stays.
type Measured struct {
	// Duration is the mean execution time of one request (seconds).
	Duration float64
	// IdleMemory and TypicalMemory are the app's allocated memory (bytes) at
	// its 1st and 50th percentile over the day: what a pod holds idle, and
	// at the mean load.
	IdleMemory, TypicalMemory float64
}

const (
	// minMeasuredDuration floors sub-millisecond functions (the durations
	// file records whole milliseconds, so their mean may read 0).
	minMeasuredDuration = 0.001
	// MaxMeasuredDuration is the longest mean execution time a function may
	// have to be used: a third of the simulator's default request timeout,
	// beyond which its SLO could not be met at any size.
	MaxMeasuredDuration = 10.0
	// minMemoryPerRequest keeps a request's memory positive when the memory
	// percentiles are flat.
	minMemoryPerRequest = 64 << 10
)

// WithMeasured returns a copy of a whose per-request demand comes from m and
// whose deployment is sized again by the same random choices (SLO factor,
// initial utilisation, memory headroom and limit ratios), so that only the
// demand differs from the generated app. The execution time is split into
// CPU time and I/O wait in the generated app's proportion (its segments say
// whether it is CPU-bound). Base memory is the idle allocation; each request
// in flight holds the difference between the typical and idle allocations
// over the requests one pod holds on average at the mean load.
func (a App) WithMeasured(m Measured) App {
	if m.Duration > 0 {
		d := math.Max(m.Duration, minMeasuredDuration)
		cpuShare := a.CPUSeconds / (a.CPUSeconds + a.IOWait)
		a.CPUSeconds, a.IOWait = d*cpuShare, d*(1-cpuShare)
	}
	a.size() // the base rate and in-flight count follow the new demand
	if m.IdleMemory > 0 {
		a.BaseMemory = m.IdleMemory
		a.MemoryPerRequest = math.Max((m.TypicalMemory-m.IdleMemory)/math.Max(a.meanInFlight(), 1), minMemoryPerRequest)
		a.size()
	}
	return a
}

// AzureFiles names the files of one day of the Azure Functions 2019 trace.
// Invocations is required when either of the others is set.
type AzureFiles struct {
	// Invocations is invocations_per_function_md.anon.dNN.csv: the load.
	Invocations string
	// Durations is function_durations_percentiles.anon.dNN.csv: each
	// function's execution time.
	Durations string
	// Memory is app_memory_percentiles.anon.dNN.csv: each app's memory.
	Memory string
}

// Empty reports whether no file is named.
func (f AzureFiles) Empty() bool { return f == AzureFiles{} }

// AzureWorkload is one function of the trace: its invocations and what the
// other files measured of it.
type AzureWorkload struct {
	AzureFunction
	Measured Measured
}

// Run returns app under this workload: with the function's measured demand
// and the trace of its invocations scaled to the app's base rate, n windows
// of step from window start (wrapping around the day).
func (w *AzureWorkload) Run(app App, step time.Duration, n, start int) (App, Trace, error) {
	app = app.WithMeasured(w.Measured)
	mean := w.MeanRate()
	if !(mean > 0) {
		return App{}, Trace{}, fmt.Errorf("azure function %s has no invocations", w.Function)
	}
	day, err := w.Trace(step, app.BaseRate/mean)
	if err != nil {
		return App{}, Trace{}, err
	}
	tr := Trace{Name: day.Name, Step: day.Step, Rates: make([]float64, n)}
	for i := range n {
		tr.Rates[i] = day.Rates[(start+i)%len(day.Rates)]
	}
	return app, tr, nil
}

// LoadAzure reads the files f names and returns the functions that have any
// invocations and, for each of the other files given, a usable measurement:
// a duration row (matched by app and function hash) with a mean execution
// time of at most MaxMeasuredDuration, and a memory row (matched by app
// hash). Errors name the file and line. It returns no workload and no error
// when f is empty.
func LoadAzure(f AzureFiles) ([]AzureWorkload, error) {
	if f.Empty() {
		return nil, nil
	}
	if f.Invocations == "" {
		return nil, errors.New("azure: the durations and memory files need the invocations file too")
	}
	fns, err := readAzureFile(f.Invocations, ReadAzureCSV)
	if err != nil {
		return nil, err
	}
	var ws []AzureWorkload
	for _, fn := range fns {
		if slices.ContainsFunc(fn.Counts, func(c float64) bool { return c > 0 }) {
			ws = append(ws, AzureWorkload{AzureFunction: fn})
		}
	}
	if len(ws) == 0 {
		return nil, fmt.Errorf("%s: no function has any invocations", f.Invocations)
	}
	if f.Durations != "" {
		ds, err := readAzureFile(f.Durations, ReadAzureDurations)
		if err != nil {
			return nil, err
		}
		byFn := make(map[[2]string]float64, len(ds))
		for _, d := range ds {
			byFn[[2]string{d.App, d.Function}] = d.Average / 1000
		}
		kept := ws[:0]
		for _, w := range ws {
			if d, ok := byFn[[2]string{w.App, w.Function}]; ok && d <= MaxMeasuredDuration {
				w.Measured.Duration = math.Max(d, minMeasuredDuration)
				kept = append(kept, w)
			}
		}
		ws = kept
		if len(ws) == 0 {
			return nil, fmt.Errorf("%s: no invoked function of %s has a duration row with a mean of at most %gs", f.Durations, f.Invocations, MaxMeasuredDuration)
		}
	}
	if f.Memory != "" {
		ms, err := readAzureFile(f.Memory, ReadAzureMemory)
		if err != nil {
			return nil, err
		}
		byApp := make(map[string]AzureMemory, len(ms))
		for _, m := range ms {
			byApp[m.App] = m
		}
		kept := ws[:0]
		for _, w := range ws {
			if m, ok := byApp[w.App]; ok && m.Percentiles[0] > 0 {
				w.Measured.IdleMemory = m.Percentiles[0] * mib    // 1st percentile
				w.Measured.TypicalMemory = m.Percentiles[3] * mib // median
				kept = append(kept, w)
			}
		}
		ws = kept
		if len(ws) == 0 {
			return nil, fmt.Errorf("%s: no invoked function's app has a memory row with a positive 1st percentile", f.Memory)
		}
	}
	return ws, nil
}

// readAzureFile opens path and parses it with read, naming the file in any
// error.
func readAzureFile[T any](path string, read func(r io.Reader) ([]T, error)) ([]T, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	defer file.Close()
	rows, err := read(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}
