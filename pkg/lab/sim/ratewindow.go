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
