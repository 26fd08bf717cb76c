package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// The CFS quota model (App.CPUBurst): a pod's CPU limit is a quota of
// limit·cfsPeriod CPU-seconds per period, which its requests spend at up
// to one core each while the node has cores, and then wait for the next
// period. No closed form of this queue is known to hold across pod sizes:
// the one it replaced (CPU seconds plus an exponential of mean S·ρ/(1−ρ))
// matched a discrete-event reference at a quota of one or two requests per
// period but overestimated the real node's p95 2.5–3× at three to six
// (docs/real-node-rounds.md, round nineteen), where a period's arrivals rarely
// exceed its quota. So the model is the queue itself: an event-driven
// simulation of one pod in its stationary state, run once per (CPU
// seconds, limit, cores, ρ on a grid) and kept, its p50 and p95 read as a
// shifted exponential the window model carries like any other.

const (
	// cfsPeriod is the kernel's default CFS period.
	cfsPeriod = 0.1
	// cfsGrid is the step of the ρ grid; a ρ between two points reads
	// their quantiles linearly interpolated.
	cfsGrid = 0.02
	// cfsRequests is how many requests one grid point simulates after its
	// warm-up of cfsWarmup, for about 10 ms of CPU a point
	// (BenchmarkCFSPoint). At 0.2 core and ρ = 0.57, six CPU times from
	// 11.30 to 11.50 ms gave p95s within 195–204 ms (with 20,000 requests,
	// 202–211 ms): a few per cent of sampling error. Every point uses the same stream of
	// uniforms (arrival times scale with 1/λ), so the quantiles rise
	// smoothly along the grid.
	cfsRequests = 100000
	cfsWarmup   = 2000
)

// maxCPUSecondsCV bounds App.CPUSecondsCV: beyond 2 a Gamma's mass
// crowds at 0 and a few requests carry the work, which no calibration
// has asked for.
const maxCPUSecondsCV = 2.0

// cfsNode is what the CFS quota model reads of a pod's node: cores ≤ 0
// or +Inf means as many as requests; background is the cores its other
// work keeps busy (Config.NodeBackground); tick is its scheduler tick in
// seconds (Config.NodeTick), 0 for a quota enforced to the instant.
type cfsNode struct{ cores, background, tick float64 }

// cfsIdle is a pod's idle CPU as the CFS quota model takes it: burst
// CPU-seconds of work, one job at a time at one core, every period
// seconds (an exec readiness probe's process, a scrape), which spends the
// pod's quota as its requests do. The zero value is idle CPU spread
// evenly: the model's limit is then the requests' alone (ServingCPU).
type cfsIdle struct{ burst, period float64 }

// share is the cores the bursts take on average.
func (i cfsIdle) share() float64 {
	if !(i.period > 0) {
		return 0
	}
	return i.burst / i.period
}

// cfsKey identifies one grid point.
type cfsKey struct {
	cpuSec, cv, limit float64
	node              cfsNode
	idle              cfsIdle
	rho               int // grid index: ρ = rho·cfsGrid
}

// backgroundSpeed is the share of a core's speed a request of the CFS
// quota model gets beside the node's background work
// (Config.NodeBackground) of background cores among cores: 1/(1 +
// background/cores), the background's share of the cores spread over
// every request. Measured off the cluster (docs/real-node-rounds.md, the
// quota probe), a background of 0.4 and 0.8 core on two cores raised a
// 0.7-core pod's p95 by 1.26x and 1.51x; this gives 1.2x and 1.4x. A rule
// that slowed a share background/cores of the requests to half speed
// instead nearly doubled the p95 as soon as that share passed a
// twentieth.
func backgroundSpeed(background, cores float64) float64 {
	if !(background > 0) || !(cores > 0) || math.IsInf(cores, 1) {
		return 1
	}
	return 1 / (1 + background/cores)
}

// cfsPoint is a grid point's response-time quantiles (seconds).
type cfsPoint struct{ p50, p95 float64 }

// cfsTable holds the grid points computed so far; every simulator of the
// process shares it, and a point, once computed, never changes (its
// simulation is seeded), so runs replay exactly whatever their order.
var cfsTable = struct {
	sync.Mutex
	points map[cfsKey]cfsPoint
}{points: map[cfsKey]cfsPoint{}}

// cfsLatency is the CFS quota model's response time at utilisation rho of
// the limit (capped at rhoMax; the fluid backlog carries the overload) as
// a shifted exponential: a request takes shift plus an exponential of mean
// mean, which gives the simulated queue's p50 and p95. Requests take
// cpuSec of CPU on average, with a coefficient of variation cv, on node.
// With idle bursts, limit is the pod's whole quota and rho the requests'
// utilisation of what the bursts leave of it (limit − idle.share()).
func cfsLatency(cpuSec, cv, limit float64, node cfsNode, idle cfsIdle, rho float64) (shift, mean float64) {
	if node.cores <= 0 || math.IsInf(node.cores, 1) {
		node.cores = math.Inf(1)
	}
	x := math.Min(math.Max(rho, 0), rhoMax) / cfsGrid
	i := int(x)
	lo := cfsAt(cfsKey{cpuSec, cv, limit, node, idle, i})
	p := lo
	if f := x - float64(i); f > 0 {
		hi := cfsAt(cfsKey{cpuSec, cv, limit, node, idle, i + 1})
		p = cfsPoint{lo.p50 + f*(hi.p50-lo.p50), lo.p95 + f*(hi.p95-lo.p95)}
	}
	// p95 = shift + mean·ln 20 and p50 = shift + mean·ln 2.
	mean = math.Max(p.p95-p.p50, 0) / math.Log(10)
	shift = p.p50 - mean*math.Ln2
	if shift < 0 {
		shift, mean = 0, p.p95/p95Factor
	}
	return shift, mean
}

func cfsAt(k cfsKey) cfsPoint {
	cfsTable.Lock()
	p, ok := cfsTable.points[k]
	cfsTable.Unlock()
	if ok {
		return p
	}
	// Computed outside the lock: two simulators may compute the same point
	// at once, and get the same answer.
	rho := math.Min(float64(k.rho)*cfsGrid, rhoMax)
	lats := cfsQueue(k.cpuSec, k.cv, k.limit, k.node, k.idle, math.Max(rho, cfsGrid/4), cfsRequests, cfsWarmup)
	p = cfsPoint{quantileOf(lats, 0.5), quantileOf(lats, 0.95)}
	cfsTable.Lock()
	cfsTable.points[k] = p
	cfsTable.Unlock()
	return p
}

// cfsQueue simulates one pod under a CFS quota, event by event: Poisson
// arrivals at rate rho·limit/cpuSec, each needing cpuSec CPU-seconds (or,
// with cv > 0, cpuSec times a Gamma draw of mean 1 and that coefficient of
// variation, from the arrivals' stream: cv = 0 draws nothing, so its
// points are those of the model without it); the
// n requests in the pod run at min(1, node.cores/n) cores each while the
// period's quota lasts; the quota is refilled to limit·cfsPeriod at every
// period boundary and does not carry over. With node.background > 0
// cores of the node's other work, every request runs at backgroundSpeed
// of that (and spends the quota as fast as it runs).
//
// With node.tick > 0 the kernel finds the quota spent only at its next
// tick (ticks at multiples of node.tick; a CFS period is a whole number of
// them at the usual 250 and 1000 Hz): the requests running when it runs
// out run on until then, and what they overran is owed, taken off the
// next refills (a refill never leaves more than the full quota). A run
// that meets its quota exactly on a tick is throttled at once. With tick
// 0 the quota is enforced to the instant, and the model is the one
// without the tick to the bit.
//
// With idle bursts (idle.period > 0) the pod's idle work joins the
// requests as a job of idle.burst CPU-seconds every idle.period seconds,
// each at a phase within its CFS period drawn from a stream of its own
// (the kubelet's probe timer does not keep step with the period's), and
// the requests arrive at rate rho·(limit − idle.share())/cpuSec. The
// jobs' response times are not returned.
//
// It returns n response times, of the requests completed once warm had
// arrived.
func cfsQueue(cpuSec, cv, limit float64, node cfsNode, idle cfsIdle, rho float64, n, warm int) []float64 {
	lats, _ := cfsSimulate(cpuSec, cv, limit, node, idle, rho, n, warm)
	return lats
}

// cfsUse is the CPU a cfsSimulate run took (seconds) and the time it
// lasted: with or without the tick, used/elapsed never passes the limit
// but by what the last period overran.
type cfsUse struct{ used, elapsed float64 }

// cfsSimulate is cfsQueue, and the CPU its requests took.
func cfsSimulate(cpuSec, cv, limit float64, node cfsNode, idle cfsIdle, rho float64, n, warm int) ([]float64, cfsUse) {
	const eps = 1e-12
	var use cfsUse
	lambda := rho * (limit - idle.share()) / cpuSec
	full := limit * cfsPeriod
	slow := backgroundSpeed(node.background, node.cores)
	rng := rand.New(rand.NewPCG(1, 7))
	// A job of the pod's idle work is a req with idle set.
	type req struct {
		arrived, left float64
		idle          bool
	}
	var in []req
	// nextIdle is the next idle job's time (+Inf without them).
	nextIdle, phases := math.Inf(1), rand.New(rand.NewPCG(3, 11))
	if idle.period > 0 && idle.burst > 0 {
		nextIdle = phases.Float64() * cfsPeriod
	}
	lats := make([]float64, 0, n)
	t, quota, refill := 0.0, full, cfsPeriod
	// overrun is the tick until which the requests running when the
	// quota ran out go on past it (the instant they left, if they all
	// did before); -1 until the quota runs out in a period.
	overrun := -1.0
	next := rng.ExpFloat64() / lambda
	arrivals := 0
	for len(lats) < n {
		running := quota > eps || t < overrun
		if len(in) == 0 || !running {
			// Nothing runs until the next arrival or refill.
			t = min(next, nextIdle, refill)
			if len(in) == 0 {
				t = min(next, nextIdle)
			}
		} else {
			// slow is 1 without a background, and the model is the one
			// without it to the bit.
			speed := math.Min(1, node.cores/float64(len(in))) * slow
			least := in[0].left
			for _, r := range in[1:] {
				least = min(least, r.left)
			}
			budget := quota / (speed * float64(len(in)))
			if quota <= eps {
				budget = overrun - t
			}
			dt := min(least/speed, budget, next-t, nextIdle-t, refill-t)
			dt = math.Max(dt, 0)
			quota -= speed * float64(len(in)) * dt
			use.used += speed * float64(len(in)) * dt
			t += dt
			if node.tick > 0 && quota <= eps && overrun < 0 {
				// Spent now: the kernel sees it at the next tick.
				overrun = math.Ceil(t/node.tick-1e-9) * node.tick
			}
			kept := in[:0]
			for _, r := range in {
				if r.left -= speed * dt; r.left > eps {
					kept = append(kept, r)
				} else if arrivals > warm && !r.idle {
					lats = append(lats, t-r.arrived)
				}
			}
			in = kept
			if len(in) == 0 && overrun > t {
				// Idle past its quota: a request that comes before the
				// refill is throttled as it arrives.
				overrun = t
			}
		}
		if t >= refill {
			// Periods the pod slept through refill nothing more, but
			// each pays off what the ticks let it overrun.
			k := math.Floor((t-refill)/cfsPeriod) + 1
			refill += cfsPeriod * k
			if node.tick > 0 {
				quota = math.Min(full, math.Min(quota, 0)+k*full)
				overrun = -1
			} else {
				quota = full
			}
		}
		for nextIdle <= t {
			in = append(in, req{nextIdle, idle.burst, true})
			// The next job is a period on, at a phase of its own within
			// its CFS period.
			nextIdle += idle.period - math.Mod(nextIdle, cfsPeriod) + phases.Float64()*cfsPeriod
		}
		for next <= t {
			work := cpuSec
			if cv > 0 {
				k := 1 / (cv * cv)
				work = cpuSec * gammaDraw(rng, k) / k
			}
			in = append(in, req{arrived: next, left: work})
			arrivals++
			next += rng.ExpFloat64() / lambda
		}
	}
	use.elapsed = t
	return lats, use
}

// gammaDraw is a draw of Gamma(k, 1), by Marsaglia and Tsang's method
// (ACM TOMS 26(3), 2000), with their boost for k < 1.
func gammaDraw(rng *rand.Rand, k float64) float64 {
	if k < 1 {
		return gammaDraw(rng, k+1) * math.Pow(rng.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		if u := rng.Float64(); math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// quantileOf sorts xs and returns its q-quantile (the nearest rank).
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
