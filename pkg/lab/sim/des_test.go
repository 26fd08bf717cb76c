package sim

import (
	"math"
	"math/rand/v2"
	"slices"
)

// A discrete-event processor-sharing queue: the independent reference the
// simulator's fluid per-window model is compared with (desref_test.go). It
// follows every request: Poisson arrivals (the simulator's own per-window
// counts, spread uniformly over the window, which is what a Poisson process
// is given its count), a CPU demand drawn per request from a chosen
// distribution, the pod's CPU limit c shared equally by the n requests in
// the pod (each is served at c/n cores; one request alone may use all c),
// no I/O wait (the simulator adds it as a constant), and a client timeout:
// a request still in the pod Timeout seconds after it arrived gives up and
// leaves, and the CPU it had used is lost with it (the server cancels it).
//
// It is written for clarity over speed, but is O(log n) per event: the pod's
// virtual time V (the CPU seconds each request present has received) grows
// at c/n, so a request arriving at virtual time V with demand w leaves at
// virtual time V + w, whatever arrives later; a min-heap on that finish
// time gives the next departure. Timeouts fall in arrival order, so the
// oldest request still present is the next to time out.

// serviceDist draws a request's CPU demand with mean m (CPU-seconds).
type serviceDist struct {
	name string
	// cv2 is the squared coefficient of variation, for the record.
	cv2  float64
	draw func(rng *rand.Rand, m float64) float64
}

// h2Balanced is the two-phase hyper-exponential of mean m and squared
// coefficient of variation cv2 > 1 with balanced means (p1/μ1 = p2/μ2).
func h2Balanced(cv2 float64) func(*rand.Rand, float64) float64 {
	p1 := (1 + math.Sqrt((cv2-1)/(cv2+1))) / 2
	return func(rng *rand.Rand, m float64) float64 {
		if rng.Float64() < p1 {
			return rng.ExpFloat64() * m / (2 * p1)
		}
		return rng.ExpFloat64() * m / (2 * (1 - p1))
	}
}

var (
	distExp = serviceDist{"exponential", 1, func(rng *rand.Rand, m float64) float64 { return m * rng.ExpFloat64() }}
	distDet = serviceDist{"deterministic", 0, func(_ *rand.Rand, m float64) float64 { return m }}
	distH2  = serviceDist{"hyper-exp. CV²=4", 4, h2Balanced(4)}
)

// desWindow is what the reference measured in one window: requests are
// counted in the window they completed or timed out in, as the simulator
// counts them.
type desWindow struct {
	Completed, TimedOut float64
	// sumLat is the total response time of the completed requests; lats
	// their response times, then the timed-out ones at the timeout.
	sumLat float64
	lats   []float64
	// InFlight is the time-average number of requests in the pods.
	InFlight float64
}

// MeanLatency is the mean response time of the window's completed requests.
func (w *desWindow) MeanLatency() float64 {
	if w.Completed == 0 {
		return 0
	}
	return w.sumLat / w.Completed
}

// P95 is the window's p95 with timed-out requests counted at the timeout,
// as the simulator counts them (0 with no request).
func (w *desWindow) P95() float64 { return quantileOf(w.lats, 0.95) }

// desPod is one processor-sharing pod.
type desPod struct {
	cpu float64
	// finishV and state are per request, in arrival order: the virtual
	// time it leaves at, and 0 not arrived, 1 in the pod, 2 gone.
	finishV []float64
	state   []uint8
	heap    []int32 // requests in the pod, by finishV
	oldest  int     // no request before it is in the pod
	n       int
	t, v    float64
}

func (p *desPod) push(i int32) {
	h := append(p.heap, i)
	for j := len(h) - 1; j > 0; {
		k := (j - 1) / 2
		if p.finishV[h[k]] <= p.finishV[h[j]] {
			break
		}
		h[j], h[k] = h[k], h[j]
		j = k
	}
	p.heap = h
}

func (p *desPod) pop() {
	h := p.heap
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for j := 0; ; {
		k := 2*j + 1
		if k >= len(h) {
			break
		}
		if k+1 < len(h) && p.finishV[h[k+1]] < p.finishV[h[k]] {
			k++
		}
		if p.finishV[h[j]] <= p.finishV[h[k]] {
			break
		}
		h[j], h[k] = h[k], h[j]
		j = k
	}
	p.heap = h
}

// runDES serves the arrivals (times in seconds, sorted) with their CPU
// demands on one pod and adds what happened in each window of dt seconds to
// out (len(out) windows; events after the last window are not simulated).
func runDES(out []desWindow, arrivals, demands []float64, cpu, timeout, dt float64) {
	runDESServing(out, arrivals, demands, cpu, timeout, dt, true)
}

// runDESServing is runDES; with cancel false a request that times out is
// lost to its client (counted then, at the timeout) but stays in the pod,
// taking its share of the CPU, until its work is done (App.ServesTimedOut).
func runDESServing(out []desWindow, arrivals, demands []float64, cpu, timeout, dt float64, cancel bool) {
	p := desPod{cpu: cpu, finishV: make([]float64, len(arrivals)), state: make([]uint8, len(arrivals))}
	horizon := float64(len(out)) * dt
	next := 0
	for {
		// The heap's top may have timed out: drop it lazily.
		for len(p.heap) > 0 && p.state[p.heap[0]] == 2 {
			p.pop()
		}
		// State 3: timed out, still served (cancel false).
		for p.oldest < next && p.state[p.oldest] >= 2 {
			p.oldest++
		}
		tA, tD, tT := math.Inf(1), math.Inf(1), math.Inf(1)
		if next < len(arrivals) {
			tA = arrivals[next]
		}
		if p.n > 0 {
			tD = p.t + (p.finishV[p.heap[0]]-p.v)*float64(p.n)/p.cpu
		}
		if p.oldest < next {
			tT = arrivals[p.oldest] + timeout
		}
		tn := min(tA, tD, tT)
		if tn >= horizon {
			p.advance(out, horizon, dt)
			return
		}
		p.advance(out, tn, dt)
		w := &out[min(int(tn/dt), len(out)-1)]
		switch tn {
		case tD:
			i := p.heap[0]
			p.pop()
			zombie := p.state[i] == 3
			p.state[i] = 2
			p.n--
			if zombie {
				continue
			}
			lat := tn - arrivals[i]
			w.Completed++
			w.sumLat += lat
			w.lats = append(w.lats, lat)
		case tT:
			if cancel {
				p.state[p.oldest] = 2
				p.n--
			} else {
				p.state[p.oldest] = 3
			}
			w.TimedOut++
			w.lats = append(w.lats, timeout)
		default:
			p.finishV[next] = p.v + demands[next]
			p.state[next] = 1
			p.push(int32(next))
			p.n++
			next++
		}
	}
}

// advance moves the pod's clock to t, adding the time-average of the
// requests in the pod to the windows it crosses.
func (p *desPod) advance(out []desWindow, t, dt float64) {
	for p.t < t {
		wi := min(int(p.t/dt), len(out)-1)
		end := math.Min(t, float64(wi+1)*dt)
		if end <= p.t { // rounding at a window's edge
			end = t
		}
		out[wi].InFlight += float64(p.n) * (end - p.t) / dt
		if p.n > 0 {
			p.v += (end - p.t) * p.cpu / float64(p.n)
		}
		p.t = end
	}
}

// desSplit says how the arrivals are split over the pods.
type desSplit int

const (
	// splitRandom sends each request to a pod drawn uniformly: each pod's
	// arrivals are then Poisson of rate λ/pods, the simulator's assumption.
	splitRandom desSplit = iota
	// splitRoundRobin sends them in turn, as a round-robin balancer
	// would: each pod's inter-arrival times are Erlang, less variable.
	splitRoundRobin
)

// desRun is one reference run: per-window arrival counts (the simulator's),
// served on pods of cpu cores each.
type desRun struct {
	counts  []float64
	pods    int
	split   desSplit
	dist    serviceDist
	cpuSec  float64
	cpu     float64
	timeout float64
	dt      float64
	seed    uint64
}

// run returns the reference's windows, the pods' measurements summed (and
// their response times pooled) per window.
func (r desRun) run() []desWindow {
	rng := rand.New(rand.NewPCG(r.seed, 0x646573))
	perPod := make([][]float64, r.pods)
	sent := 0
	for wi, c := range r.counts {
		times := make([]float64, int(c))
		for k := range times {
			times[k] = (float64(wi) + rng.Float64()) * r.dt
		}
		slices.Sort(times)
		for _, t := range times {
			pi := sent % r.pods
			if r.split == splitRandom {
				pi = rng.IntN(r.pods)
			}
			perPod[pi] = append(perPod[pi], t)
			sent++
		}
	}
	out := make([]desWindow, len(r.counts))
	for _, arr := range perPod {
		demands := make([]float64, len(arr))
		for i := range demands {
			demands[i] = r.dist.draw(rng, r.cpuSec)
		}
		runDES(out, arr, demands, r.cpu, r.timeout, r.dt)
	}
	return out
}
