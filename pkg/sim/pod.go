package sim

import (
	"math"

	"github.com/aware-k8s/aware/pkg/workload"
)

// PodWindow is what one Ready pod did in one window of the model: steps 4
// and 5 of the package documentation.
type PodWindow struct {
	// Completed, TimedOut and Failed count requests; Failed are those an
	// OOM kill lost (in flight or queued).
	Completed, TimedOut, Failed float64
	// Backlog is the fluid backlog B' carried into the next window (0 after
	// an OOM kill).
	Backlog float64
	// QueueDelay is the backlog's mean delay S·(B+B')/2 and Stationary the
	// queueing mean S/(1 − min(ρ, ρmax)): a completed request's response
	// time is IOWait + QueueDelay plus an exponential of mean Stationary.
	QueueDelay, Stationary float64
	// InFlight is N, the mean number of requests the pod holds.
	InFlight float64
	// Usage is the window's mean CPU (cores) and working set (bytes); Peak
	// the peak working set (capped at the limit when OOM-killed).
	Usage, Peak workload.Resources
	// OOMKilled: the peak working set exceeded memoryLimit.
	OOMKilled bool
}

// MeanLatency is the mean response time of the window's completed requests.
func (w *PodWindow) MeanLatency(a *App) float64 {
	return a.IOWait + w.QueueDelay + w.Stationary
}

// LatencyCDF is the fraction of the window's completed requests that took at
// most x seconds, under the model's shifted-exponential response time.
func (w *PodWindow) LatencyCDF(a *App, x float64) float64 {
	shift := a.IOWait + w.QueueDelay
	if x <= shift || !(w.Stationary > 0) {
		if x >= shift {
			return 1
		}
		return 0
	}
	return 1 - math.Exp(-(x-shift)/w.Stationary)
}

// ServePod runs the per-pod model of one window of dt seconds for a Ready
// pod of a: lambda is the pod's arrival rate (requests/s), backlog the B
// the previous window left, cpu the capacity c in cores (its CPU limit, or
// its share of an oversubscribed node), memoryLimit the pod's memory limit
// in bytes (0 means none), timeout when a queued request gives up (seconds),
// and z a standard normal draw for the peak working set. It is the very
// computation Simulator.Step does for each Ready pod, exported so that an
// emulator driving real pods models them identically.
func (a *App) ServePod(lambda, backlog, cpu, memoryLimit, dt, timeout, z float64) PodWindow {
	cpuSec := a.CPUSeconds
	svc := cpuSec / cpu
	mu := 1 / svc
	stat := svc / (1 - math.Min(lambda*svc, rhoMax))
	b0 := backlog
	b1 := math.Max(0, b0+(lambda-mu)*dt)
	var drop float64
	if bmax := timeout * mu; b1 > bmax {
		drop, b1 = b1-bmax, bmax
	}
	done := lambda*dt + b0 - b1 - drop
	if done < 0 {
		// Capacity fell (a throttled node) below the backlog already
		// queued: the backlog drains at the new rate, the excess times out.
		drop, done = drop+done, 0
	}
	w := PodWindow{QueueDelay: (b0 + b1) / 2 * svc, Stationary: stat}
	w.Usage.CPU = math.Min(done*cpuSec/dt, cpu)
	inflight := lambda*(a.IOWait+stat) + b1
	w.InFlight = inflight
	w.Usage.Memory = a.BaseMemory + a.MemoryPerRequest*inflight
	w.Peak = workload.Resources{
		CPU:    w.Usage.CPU,
		Memory: a.BaseMemory + a.MemoryPerRequest*(inflight+(1+math.Abs(z))*math.Sqrt(inflight)),
	}
	if memoryLimit > 0 && w.Peak.Memory > memoryLimit {
		lost := math.Min(done, inflight-b1)
		done -= lost
		w.Failed = lost + b1
		b1 = 0
		w.Peak.Memory = memoryLimit
		w.Usage.Memory = math.Min(w.Usage.Memory, memoryLimit)
		w.OOMKilled = true
	}
	w.Completed, w.TimedOut, w.Backlog = done, drop, b1
	return w
}
