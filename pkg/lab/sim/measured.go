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
func (a App) WithMeasured(m Measured) App { return a.withMeasured(m, 0) }

// WithMeasuredRate is WithMeasured for an app whose mean load is rate
// (requests/s) rather than the generated base rate: it is deployed for it
// (WithRate), and its memory per request is what the function's app holds
// at that load.
func (a App) WithMeasuredRate(m Measured, rate float64) App { return a.withMeasured(m, rate) }

// withMeasured applies m; a rate above 0 replaces the base rate.
func (a App) withMeasured(m Measured, rate float64) App {
	if m.Duration > 0 {
		d := math.Max(m.Duration, minMeasuredDuration)
		cpuShare := a.CPUSeconds / (a.CPUSeconds + a.IOWait)
		a.CPUSeconds, a.IOWait = d*cpuShare, d*(1-cpuShare)
	}
	a.size() // the base rate and in-flight count follow the new demand
	if rate > 0 {
		a = a.WithRate(rate)
	}
	if m.IdleMemory > 0 {
		a.BaseMemory = m.IdleMemory
		a.MemoryPerRequest = math.Max((m.TypicalMemory-m.IdleMemory)/math.Max(a.meanInFlight(), 1), minMemoryPerRequest)
		if rate > 0 {
			a.sizeMemory()
		} else {
			a.size()
		}
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

// AzureRate says how an Azure function's invocations become an app's load.
type AzureRate string

const (
	// AzureRateScaled scales the function's counts by one factor, to the
	// app's base rate, unless its busiest minute would then exceed the
	// app's peak capacity (PeakCapacity): then the factor puts the busiest
	// minute there. The shape is kept exactly, and no minute asks more
	// than the app's largest deployment serves; a sparse function, whose
	// busiest minute is far above its mean, gets a mean below the base
	// rate instead of a burst no deployment of the app could take.
	AzureRateScaled AzureRate = "scaled"
	// AzureRateRecorded replays the function's own counts (requests/s as
	// recorded), and the app is deployed for the function's mean rate
	// (App.WithRate).
	AzureRateRecorded AzureRate = "recorded"
	// AzureRateMean scales the counts to the app's base rate whatever the
	// busiest minute becomes: a function invoked once in eight hours puts
	// the whole run's traffic in that minute. Kept to reproduce runs made
	// before the other modes.
	AzureRateMean AzureRate = "mean"
)

// AzureRates lists the modes, the default first.
func AzureRates() []AzureRate { return []AzureRate{AzureRateScaled, AzureRateRecorded, AzureRateMean} }

// PeakCapacity is the highest rate AzureRateScaled lets a minute ask of
// app: its most replicas (Constraints.MaxReplicas), each at the load one
// pod of the initial deployment carries at the base rate. That load is
// what the user sized a pod's CPU (at the drawn utilisation of its limit)
// and memory (the requests in flight, with headroom) for, so the app
// serves it with its own pods, scaled out only.
func PeakCapacity(app App) float64 {
	return float64(max(app.Constraints.MaxReplicas, 1)) / float64(max(app.Replicas, 1)) * app.BaseRate
}

// ParseAzureRate reads a mode's name; empty is AzureRateScaled.
func ParseAzureRate(s string) (AzureRate, error) {
	if s == "" {
		return AzureRateScaled, nil
	}
	if slices.Contains(AzureRates(), AzureRate(s)) {
		return AzureRate(s), nil
	}
	return "", fmt.Errorf("unknown azure rate mode %q (known: %v)", s, AzureRates())
}

// Windows is how many windows of step the function's minutes cover.
func (f *AzureFunction) Windows(step time.Duration) int {
	if step <= 0 || step > time.Minute {
		return 0
	}
	return len(f.Counts) * int(time.Minute/step)
}

// Scale is the factor mode applies to the function's recorded rates for
// app (already given the function's measured demand).
func (w *AzureWorkload) Scale(app App, mode AzureRate) (float64, error) {
	mean := w.MeanRate()
	if !(mean > 0) {
		return 0, fmt.Errorf("azure function %s has no invocations", w.Function)
	}
	switch mode {
	case AzureRateRecorded:
		return 1, nil
	case AzureRateMean:
		return app.BaseRate / mean, nil
	case AzureRateScaled, "":
		return math.Min(app.BaseRate/mean, PeakCapacity(app)/w.PeakRate()), nil
	}
	return 0, fmt.Errorf("unknown azure rate mode %q (known: %v)", mode, AzureRates())
}

// Run returns app under this workload: with the function's measured demand
// and the trace of its invocations, scaled as mode says, n windows of step
// from window start. The run never goes past the function's minutes: a
// file that holds part of a day gives runs of at most that part.
func (w *AzureWorkload) Run(app App, step time.Duration, n, start int, mode AzureRate) (App, Trace, error) {
	if mode == AzureRateRecorded {
		app = app.WithMeasuredRate(w.Measured, w.MeanRate())
	} else {
		app = app.WithMeasured(w.Measured)
	}
	scale, err := w.Scale(app, mode)
	if err != nil {
		return App{}, Trace{}, err
	}
	all, err := w.Trace(step, scale)
	if err != nil {
		return App{}, Trace{}, err
	}
	if start < 0 || n <= 0 || start+n > len(all.Rates) {
		return App{}, Trace{}, fmt.Errorf("azure function %s: its %d minutes from minute %d cover %d windows of %s, not windows %d to %d",
			w.Function, len(w.Counts), w.FirstMinute, len(all.Rates), step, start, start+n-1)
	}
	all.Rates = all.Rates[start : start+n]
	return app, all, nil
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
