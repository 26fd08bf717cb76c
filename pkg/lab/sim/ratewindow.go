package sim

import "github.com/aware-k8s/aware/pkg/core/workload"

// rateRing keeps the last windows an observation pools when the policy's
// rates and percentiles cover more than one window (Config.RateWindow), as
// a Prometheus rate() over a range and a histogram_quantile of the
// range's pooled buckets do: the pooled p95 is the quantile of every
// request of those windows, not a mean of the windows' p95s.
type rateRing struct {
	steps []rateStep
	next  int
	full  bool
	// pool, levels and weights are the scratch the pooled quantile reads,
	// reused every window.
	pool    []latGroup
	levels  []levels
	weights []float64
}

type rateStep struct {
	groups         [maxGroups]latGroup
	ngroups        int
	arrivals, lost float64
	// effective is the window's requests' worth as independent samples
	// (effectiveSamples), levels where its percentiles were read.
	effective float64
	levels    levels
}

func newRateRing(n int) *rateRing {
	return &rateRing{steps: make([]rateStep, n), pool: make([]latGroup, 0, n*maxGroups),
		levels: make([]levels, 0, n), weights: make([]float64, 0, n)}
}

// add records the window just simulated: its latency groups and counts.
func (r *rateRing) add(groups []latGroup, effective float64, l levels, m *StepMetrics) {
	st := &r.steps[r.next]
	st.ngroups = copy(st.groups[:], groups)
	st.arrivals, st.lost, st.effective, st.levels = m.Arrivals, m.Failed+m.TimedOut, effective, l
	r.next++
	if r.next == len(r.steps) {
		r.next, r.full = 0, true
	}
}

// pooled returns the request rate, the error rate and the latency
// percentiles of read over the recorded windows (all of them until the
// ring is full, as a range query early in a series covers the samples it
// has): the quantiles of their latency groups pooled, read at their
// levels pooled (pooledLevels; the model's when the windows' are). The
// percentiles outside read are 0 and cost nothing.
func (r *rateRing) pooled(dt, timeout float64, read workload.Percentiles) (rate, errRate float64, lat workload.Latency) {
	n := r.next
	if r.full {
		n = len(r.steps)
	}
	var arrivals, lost float64
	for i := range n {
		arrivals += r.steps[i].arrivals
		lost += r.steps[i].lost
	}
	span := float64(n) * dt
	if read == workload.NoPercentiles {
		return arrivals / span, lost / span, workload.Latency{}
	}
	r.pool, r.levels, r.weights = r.pool[:0], r.levels[:0], r.weights[:0]
	for i := range n {
		st := &r.steps[i]
		r.pool = append(r.pool, st.groups[:st.ngroups]...)
		r.levels = append(r.levels, st.levels)
		r.weights = append(r.weights, st.effective)
	}
	return arrivals / span, lost / span, latencyAt(r.pool, lost, timeout, pooledLevels(r.levels, r.weights), read)
}

// WindowPool reads several consecutive steps as one window: the quantiles
// of all their requests pooled, as a histogram over the longer window
// gives them. A replay that simulates at a step finer than the windows it
// reports (hack/benchreal's decision timing) adds each step of a window
// and reads the window's percentiles at its end. Its zero value is not
// usable; NewWindowPool makes one.
type WindowPool struct {
	ring    *rateRing
	timeout float64
}

// NewWindowPool pools up to steps steps of s's (steps >= 1); s's Timeout
// counts the lost requests.
func NewWindowPool(s *Simulator, steps int) *WindowPool {
	return &WindowPool{ring: newRateRing(max(steps, 1)), timeout: s.timeout}
}

// Add records the step s simulated last (call it after s.Step). Past the
// pool's size the oldest step makes room.
func (p *WindowPool) Add(s *Simulator) {
	p.ring.add(s.lat.groups[:s.lat.ngroups], s.lat.effective, s.lat.levels, &s.out.last)
}

// Latency returns the percentiles of every request of the steps added
// since the last Reset (failed and timed-out ones at the timeout), read at
// the steps' levels pooled.
func (p *WindowPool) Latency() workload.Latency {
	if p.ring.next == 0 && !p.ring.full {
		return workload.Latency{}
	}
	_, _, lat := p.ring.pooled(1, p.timeout, workload.AllPercentiles)
	return lat
}

// Reset empties the pool for the next window.
func (p *WindowPool) Reset() { p.ring.next, p.ring.full = 0, false }
