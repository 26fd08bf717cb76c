package sim

import (
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// minServingShare is the least share of a pod's CPU its requests get when
// App.BaseCPU takes (nearly) all of it, so that its service time stays
// finite.
const minServingShare = 0.01

// ServingCPU is what a pod of CPU limit limit serves requests with: the
// limit less its idle CPU (BaseCPU), at least minServingShare of it.
func (d Demand) ServingCPU(limit float64) float64 {
	return max(limit-min(d.BaseCPU, limit), minServingShare*limit)
}

// IdleBurstCPU is the CPU-seconds of each of the pod's idle bursts:
// IdleBurst where it is set (at most BaseCPU·IdlePeriod), else all of
// BaseCPU·IdlePeriod; 0 without IdlePeriod.
func (d Demand) IdleBurstCPU() float64 {
	if !(d.IdlePeriod > 0) || !(d.BaseCPU > 0) {
		return 0
	}
	burst := d.BaseCPU * d.IdlePeriod
	if d.IdleBurst > 0 {
		burst = min(d.IdleBurst, burst)
	}
	return burst
}

// idleBursts is the pod's idle CPU as the CFS quota model takes it at
// CPU limit limit: the bursts every IdlePeriod (IdleBurstCPU each) and
// the quota they and the requests share, the limit less the idle CPU
// spread evenly. Without IdlePeriod, or where the bursts would leave the
// requests no more than minServingShare of the limit, all of the idle
// CPU is spread evenly: the zero cfsIdle and ServingCPU.
func (d Demand) idleBursts(limit float64) (cfsIdle, float64) {
	burst := d.IdleBurstCPU()
	if burst == 0 || d.BaseCPU >= (1-minServingShare)*limit {
		return cfsIdle{}, d.ServingCPU(limit)
	}
	return cfsIdle{burst: burst, period: d.IdlePeriod}, limit - (d.BaseCPU - burst/d.IdlePeriod)
}

// PodInput is what one window offers one Ready pod of the model.
type PodInput struct {
	// Rate is the pod's Poisson arrival rate λi (requests/s), the mean the
	// window's arrivals are drawn around. The queue's stationary state, and
	// so its response time, follows Rate: the processor-sharing formula
	// already accounts for Poisson noise, so the realised arrivals must not
	// be fed into it a second time.
	Rate float64
	// Arrived is how many requests reached the pod in the window (Rate·dt in
	// expectation): completions and losses are counted from it.
	Arrived float64
	// Backlog is the fluid backlog B the previous window left.
	Backlog float64
	// Held is the pod's held queue, which App.ServesTimedOut serves and
	// updates in place (nil: the fluid backlog whatever the app).
	Held *HeldQueue
	// CPU is the capacity c in cores: the CPU limit, or the pod's share of an
	// oversubscribed node.
	CPU float64
	// Cores is how many cores the pod's requests may run on at once (its
	// node's), which only the CFS quota model (App.CPUBurst) reads; 0
	// means one per request. Background is how many of them the node's
	// other work keeps busy (Config.NodeBackground), and Tick the node's
	// scheduler tick in seconds (Config.NodeTick), which only that model
	// reads too.
	Cores, Background, Tick float64
	// MemoryLimit is the pod's memory limit in bytes (0 means none).
	MemoryLimit float64
	// Z is a standard normal draw for the peak working set.
	Z float64
	// SampledUsage counts the CPU the realised arrivals took below ρmax
	// too, as a rate over the window measures it (metrics-server's), so
	// that it varies from window to window with the Poisson arrivals; off,
	// the mean ρ·c of every calm window.
	SampledUsage bool
	// MeasuredShare, with SampledUsage, is the share of the window, in
	// (0, 1), that the usage's rate covers (Config.UsageResolution): the
	// observed usage (PodWindow.MeasuredCPU) counts the arrivals of that
	// share alone, Arrived thinned by ZMeasured, a standard normal draw. 0:
	// the observed usage is the window's.
	MeasuredShare, ZMeasured float64
}

// PodWindow is what one Ready pod did in one window of the model: steps 4
// and 5 of the package documentation.
type PodWindow struct {
	// Completed, TimedOut and Failed count requests; Failed are those an
	// OOM kill lost (in flight or queued).
	Completed, TimedOut, Failed float64
	// Backlog is the fluid backlog B' carried into the next window (0 after
	// an OOM kill).
	Backlog float64
	// Zombies are the requests the pod holds at the window's end whose
	// clients have given up (App.ServesTimedOut; 0 otherwise).
	Zombies float64
	// QueueDelay is the backlog's mean delay S·(B+B')/2 and Stationary the
	// queueing mean S/(1 − min(ρ, ρmax)): a completed request's response
	// time is IOWait + Own + QueueDelay plus an exponential of mean
	// Stationary. With App.CPUBurst, Own and Stationary are instead the
	// shift and mean that give the CFS quota queue's p50 and p95 at ρ (at
	// most ρmax; cfs.go); Own is 0 otherwise.
	QueueDelay, Stationary, Own float64
	// InFlight is N, the mean number of requests the pod holds: by Little's
	// law the window's throughput times its mean response time.
	InFlight float64
	// Usage is the window's mean CPU (cores) and working set (bytes); Peak
	// the peak working set (capped at the limit when OOM-killed).
	Usage, Peak workload.Resources
	// MeasuredCPU is the CPU usage the pod's metrics show: Usage.CPU, or
	// with PodInput.MeasuredShare the rate over that part of the window.
	MeasuredCPU float64
	// OOMKilled: the peak working set exceeded the memory limit, KilledAt
	// seconds into the window (the window's end, but in the held queue).
	OOMKilled bool
	KilledAt  float64
}

// MeanLatency is the mean response time of the window's completed requests.
func (w *PodWindow) MeanLatency(a *App) float64 {
	return a.IOWait + w.Own + w.QueueDelay + w.Stationary
}

// LatencyCDF is the fraction of the window's completed requests that took at
// most x seconds, under the model's shifted-exponential response time.
func (w *PodWindow) LatencyCDF(a *App, x float64) float64 {
	shift := a.IOWait + w.Own + w.QueueDelay
	if x <= shift || !(w.Stationary > 0) {
		if x >= shift {
			return 1
		}
		return 0
	}
	return 1 - math.Exp(-(x-shift)/w.Stationary)
}

// PeakMemory is the peak working set of a pod holding n requests in flight
// on average, for a standard normal draw z: base + perRequest·(n +
// (1+|z|)·√n). A pod is OOM-killed exactly when it exceeds the memory limit.
func (a *App) PeakMemory(n, z float64) float64 {
	return peakMemory(a.BaseMemory, a.MemoryPerRequest, n, z)
}

// peakMemory is PeakMemory for a memory per request m.
func peakMemory(base, m, n, z float64) float64 {
	return base + m*(n+(1+math.Abs(z))*math.Sqrt(n))
}

// ServePod runs the per-pod model of one window of dt seconds for a Ready
// pod of a; timeout is when a queued request gives up (seconds). It is the
// very computation Simulator.Step does for each Ready pod, exported so that
// an emulator driving real pods models them identically.
//
// Invariants: Completed + TimedOut + Failed + B' = Arrived + B (no request
// is created or lost), Usage.CPU ≤ CPU, and InFlight = Completed/dt ·
// MeanLatency (Little's law).
func (a *App) ServePod(in PodInput, dt, timeout float64) PodWindow {
	cpuSec := a.CPUSeconds
	// The pod's own idle work comes first; requests get the rest of its
	// CPU (a pod whose limit it fills serves at a crawl, not at all).
	base := min(a.BaseCPU, in.CPU)
	serving := a.ServingCPU(in.CPU)
	svc := cpuSec / serving
	mu := 1 / svc
	rho := in.Rate * svc
	stat := svc / (1 - min(rho, rhoMax))
	own := 0.0
	if a.CPUBurst {
		// With idle bursts the queue spends the quota the idle CPU spread
		// evenly leaves, the bursts' and the requests'; all spread
		// evenly, the requests have the rest.
		idle, q := a.idleBursts(in.CPU)
		own, stat = cfsLatency(cpuSec, a.CPUSecondsCV, q, cfsNode{in.Cores, in.Background, in.Tick}, idle, rho)
	}
	if a.ServesTimedOut && in.Held != nil && (rho > rhoMax || in.Held.Len() > 0) {
		return a.serveHeld(in, dt, timeout, base, serving, svc)
	}
	b0 := in.Backlog
	// Below ρmax the stationary queue holds the window's Poisson surplus, so
	// the fluid backlog only drains (at the expected spare capacity). At or
	// beyond ρmax, capacity runs out: the realised arrivals beyond it queue
	// as backlog, whose random walk carries the near-critical and overloaded
	// queue.
	offered := in.Rate * dt
	if rho > rhoMax {
		offered = in.Arrived
	}
	b1 := max(0, b0+offered-mu*dt)
	var drop float64
	if bmax := timeout * mu; b1 > bmax {
		drop, b1 = b1-bmax, bmax
	}
	done := in.Arrived + b0 - b1 - drop
	if done < 0 {
		// The outflow counted more requests than there are: capacity fell
		// (a throttled node) below a backlog already queued, or fewer
		// requests arrived than the backlog's drain assumed. Take the
		// excess back from the drops first, then from the backlog.
		r := min(-done, drop)
		drop, done = drop-r, done+r
		b1, done = b1+done, 0
	}
	w := PodWindow{QueueDelay: (b0 + b1) / 2 * svc, Stationary: stat, Own: own}
	// CPU follows the queue's input, like its state: the mean rate below
	// ρmax (a window's Poisson surplus is served from the stationary queue,
	// within capacity, so the long-run use is exactly ρ·c), the realised
	// arrivals beyond it. Sampled, the realised arrivals below ρmax too: a
	// window's surplus is served in it, as the stationary queue relaxes in
	// well under a window, so the mean stays ρ·c and each window's use is
	// its arrivals' work. A utilisation near an HPA's tolerance then
	// crosses it in some windows, as the real node's does (docs/simulator.md).
	work := offered
	if in.SampledUsage {
		work = in.Arrived
	}
	w.Usage.CPU = min(base+max(0, work+b0-b1-drop)*cpuSec/dt, in.CPU)
	w.MeasuredCPU = w.Usage.CPU
	if q := in.MeasuredShare; in.SampledUsage && q > 0 && q < 1 && b1 == 0 && drop == 0 {
		// A pod that ends the window with a backlog was busy all of it,
		// and any part of it measures what the whole does.
		n := in.Arrived
		part := min(max(n*q+math.Sqrt(n*q*(1-q))*in.ZMeasured, 0), n)
		w.MeasuredCPU = min(base+(part/q+b0)*cpuSec/dt, in.CPU)
	}
	inflight := done / dt * (a.IOWait + own + w.QueueDelay + stat)
	w.InFlight = inflight
	w.Usage.Memory = a.BaseMemory + a.MemoryPerRequest*inflight
	w.Peak = workload.Resources{CPU: w.Usage.CPU, Memory: a.PeakMemory(inflight, in.Z)}
	if in.MemoryLimit > 0 && w.Peak.Memory > in.MemoryLimit {
		// The kill loses the requests in the pod (in service or waiting in
		// the stationary queue) and the backlog behind them.
		lost := min(done, done/dt*(a.IOWait+own+stat))
		done -= lost
		w.Failed = lost + b1
		b1 = 0
		w.Peak.Memory = in.MemoryLimit
		w.Usage.Memory = min(w.Usage.Memory, in.MemoryLimit)
		w.OOMKilled, w.KilledAt = true, dt
	}
	w.Completed, w.TimedOut, w.Backlog = done, drop, b1
	return w
}

// serveHeld is ServePod for an App.ServesTimedOut pod that is overloaded or
// still holds requests: every arrival joins the held queue. Invariant:
// Completed + TimedOut + Failed + Backlog = Arrived + in.Backlog, Backlog
// being the live requests held (the zombies were counted timed out).
func (a *App) serveHeld(in PodInput, dt, timeout, base, serving, svc float64) PodWindow {
	q := in.Held
	if in.Backlog > 0 && q.Len() == 0 {
		// A fluid backlog the pod had before it was overloaded joins as
		// one cohort, its clients' clocks starting now. (Once the queue
		// holds requests, in.Backlog is its own live ones.)
		q.push(cohort{count: in.Backlog, finish: q.v + a.CPUSeconds, born: q.now})
	}
	m := a.MemoryPerRequest
	if a.HeldMemoryPerRequest > 0 {
		m = a.HeldMemoryPerRequest
	}
	// The pod dies once peakMemory passes its limit: x = √n solves
	// m·x² + m·(1+|z|)·x + base − limit = 0.
	kill := math.Inf(1)
	if in.MemoryLimit > 0 && m > 0 {
		b := m * (1 + math.Abs(in.Z))
		x := (-b + math.Sqrt(b*b+4*m*max(in.MemoryLimit-a.BaseMemory, 0))) / (2 * m)
		kill = x * x
	}
	hw := q.serve(in.Arrived, a.CPUSeconds, serving, dt, timeout, kill, a.HeldQuantum)
	live, lost := q.counts()
	// The completed requests' mean time in the queue, as a shift and the
	// service alone: the model's latency is a shifted exponential.
	w := PodWindow{Stationary: svc}
	if hw.Completed > 0 {
		w.QueueDelay = max(hw.Sojourn/hw.Completed-svc, 0)
	}
	w.Usage.CPU = min(base+hw.Work/dt, in.CPU)
	w.MeasuredCPU = w.Usage.CPU
	w.InFlight = hw.Mean
	w.Usage.Memory = a.BaseMemory + m*hw.Mean
	w.Peak = workload.Resources{CPU: w.Usage.CPU, Memory: peakMemory(a.BaseMemory, m, hw.Peak, in.Z)}
	if hw.KilledAt >= 0 {
		// The kill loses the live requests held and the arrivals after
		// it; the zombies die too, and were counted lost already.
		w.Failed, live, lost = live+hw.Unserved, 0, 0
		q.reset()
		w.Peak.Memory = in.MemoryLimit
		w.Usage.Memory = min(w.Usage.Memory, in.MemoryLimit)
		w.OOMKilled, w.KilledAt = true, hw.KilledAt
	}
	w.Completed, w.TimedOut, w.Backlog, w.Zombies = hw.Completed, hw.TimedOut, live, lost
	return w
}
