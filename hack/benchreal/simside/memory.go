package simside

import (
	"fmt"
	"math"

	"github.com/aware-k8s/aware/hack/benchreal/result"
)

// MemoryFit is which requests in flight the memory fit regresses the pods'
// memory on.
type MemoryFit string

const (
	// MemoryFitAuto is MemoryFitGauge where at least MinFitWindows windows
	// have the gauge, else MemoryFitLittle (files before 2026-12-06).
	MemoryFitAuto MemoryFit = ""
	// MemoryFitGauge regresses on the app's in-flight gauge as the
	// testbed's Prometheus scraped it (result.Window.InFlight), over every
	// window whose pods stayed as they were, at any load (gaugeWindows).
	MemoryFitGauge MemoryFit = "gauge"
	// MemoryFitLittle regresses on Little's law off the p95 (inFlight),
	// over calm windows: the fit before the gauge was recorded. Those
	// windows hold one to three requests, so the base swamps the slope
	// (round forty-one: 1.40 MiB [0.78, 2.03] where the app holds 1 MiB).
	MemoryFitLittle MemoryFit = "little"
)

// ParseMemoryFit reads a --sim-memory-fit value: auto, gauge or little.
func ParseMemoryFit(s string) (MemoryFit, error) {
	switch m := MemoryFit(s); m {
	case "auto":
		return MemoryFitAuto, nil
	case MemoryFitGauge, MemoryFitLittle:
		return m, nil
	}
	return "", fmt.Errorf("memory fit %q: want auto, gauge or little", s)
}

func (m MemoryFit) String() string {
	if m == MemoryFitAuto {
		return "auto"
	}
	return string(m)
}

// inFlight estimates the requests a window's pods held on average. Little's
// law wants the window's mean latency, but the load generator records only
// its percentiles, so the mean is read off the p95 through the simulator's
// own latency model (a shift plus an exponential: mean = shift + (p95 −
// shift)/ln 20; the shift is W, plus the CPU seconds in the burst model).
// The fit therefore gives the memory per request that makes the
// simulator's memory match the real one wherever its latency matches; it
// is an assumption about the shape of the latency, not a measurement of it.
func inFlight(w result.Window, shift float64) float64 {
	if w.OK == 0 || !(w.P95 > 0) {
		return 0
	}
	mean := shift + math.Max(w.P95-shift, 0)/math.Log(20)
	return float64(w.OK) / (w.End - w.Start) * mean
}

// gaugeWindows are the windows the gauge fit reads, as Ready pods,
// requests in flight and memory used: every desired pod Ready and in each
// of the window's gauge answers (a pod whose scrape failed is missing
// from the sum), and nothing scaled, resized, evicted or OOM-killed in the
// window or in the calmBefore windows before it (a new or restarted
// container's memory shows a scrape or two late). Any load: the gauge
// measures the requests held, so unlike Little's law it needs no
// stationary latency, and the loaded windows are where the requests'
// memory stands out of the base.
func gaugeWindows(runs []result.Run) (pods, inflight, used []float64) {
	for _, r := range runs {
		steady := 0 // steady windows in a row before this one
		for _, w := range r.Windows {
			ok := w.Ready > 0 && w.Ready == w.Replicas && w.OOMKills == 0 && w.ReplicaChanges == 0 &&
				w.Resizes == 0 && w.Evictions == 0 && w.End > w.Start
			if ok && steady >= calmBefore && w.MemoryUsed > 0 && w.InFlightPods > 0 &&
				w.InFlight >= 0 && !math.IsInf(w.InFlight, 0) && w.InFlightPods == float64(w.Ready) {
				pods = append(pods, float64(w.Ready))
				inflight = append(inflight, w.InFlight)
				used = append(used, w.MemoryUsed)
			}
			steady++
			if !ok {
				steady = 0
			}
		}
	}
	return pods, inflight, used
}

// fitMemory fits the base memory per Ready pod and the memory per request
// in flight, with the requests in flight m says.
func (c *Calibration) fitMemory(runs []result.Run, m MemoryFit) error {
	if m != MemoryFitLittle {
		pods, inflight, used := gaugeWindows(runs)
		if len(used) >= MinFitWindows || m == MemoryFitGauge {
			const how = "least squares, without intercept, of the windows' memory used (metrics.k8s.io working set) on Ready pods and requests in flight (the app's in-flight gauge as the testbed's Prometheus scraped it, averaged over the window's looks); windows whose pods stayed as they were, at any load"
			return c.memoryFrom(pods, inflight, used, how, "windows with the app's requests in flight and steady pods (every desired pod Ready and scraped, no scaling, resize, eviction or OOM kill, after two such windows)")
		}
	}
	ws, _ := calmWindows(runs, c.cpu())
	shift := c.Throttling.SimIOWait()
	if c.Throttling.Burst {
		shift += c.cpu().CPUSeconds
	}
	var pods, inflight, used []float64
	for _, w := range ws {
		if w.MemoryUsed > 0 {
			pods = append(pods, float64(w.Ready))
			inflight = append(inflight, inFlight(w, shift))
			used = append(used, w.MemoryUsed)
		}
	}
	const how = "least squares, without intercept, of the windows' memory used (metrics.k8s.io working set) on Ready pods and requests in flight (answered rate × mean latency read off the p95); calm windows"
	return c.memoryFrom(pods, inflight, used, how, "calm windows with memory usage (Ready = desired pods, no scaling, resize, eviction, OOM kill or loss, ρ ≤ 0.9, after two calm windows)")
}

// memoryFrom fits used on pods and inflight (method how) and refuses, naming
// the windows it wanted (what), where they are too few or the base is not
// resolved; a negative slope is taken as 0.
func (c *Calibration) memoryFrom(pods, inflight, used []float64, how, what string) error {
	c.MemoryWindows = len(used)
	if len(used) < MinFitWindows {
		return fmt.Errorf("%w: %d %s, want %d", ErrThinData, len(used), what, MinFitWindows)
	}
	f, err := leastSquares([][]float64{pods, inflight}, used)
	if err != nil {
		return fmt.Errorf("%w: memory against Ready pods and requests in flight: %v", ErrThinData, err)
	}
	c.BaseMemory, c.MemoryPerRequest, c.MemoryR2 = f.estimate(0, how), f.estimate(1, how), f.r2
	if !(c.BaseMemory.Value > 0) {
		return fmt.Errorf("%w: the memory fit gives a base of %.0f bytes per pod", ErrThinData, c.BaseMemory.Value)
	}
	if c.MemoryPerRequest.Value < 0 {
		// Noise larger than the signal: the requests in flight held too
		// little memory to be seen beside the base. The simulator gets 0.
		c.MemoryPerRequest.Value = 0
		c.MemoryPerRequest.Method += "; the fit was negative (not resolved beside the base) and is taken as 0"
	}
	return nil
}
