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
	// pool is the scratch the pooled quantile reads, reused every window.
	pool []latGroup
}

type rateStep struct {
	groups         [maxGroups]latGroup
	ngroups        int
	arrivals, lost float64
}

func newRateRing(n int) *rateRing {
	return &rateRing{steps: make([]rateStep, n), pool: make([]latGroup, 0, n*maxGroups)}
}

// add records the window just simulated: its latency groups and counts.
func (r *rateRing) add(groups []latGroup, m *StepMetrics) {
	st := &r.steps[r.next]
	st.ngroups = copy(st.groups[:], groups)
	st.arrivals, st.lost = m.Arrivals, m.Failed+m.TimedOut
	r.next++
	if r.next == len(r.steps) {
		r.next, r.full = 0, true
	}
}

// pooled returns the request rate, the error rate and the latency
// percentiles over the recorded windows (all of them until the ring is
// full, as a range query early in a series covers the samples it has).
func (r *rateRing) pooled(dt, timeout float64) (rate, errRate float64, lat workload.Latency) {
	n := r.next
	if r.full {
		n = len(r.steps)
	}
	r.pool = r.pool[:0]
	var arrivals, lost float64
	for i := range n {
		st := &r.steps[i]
		arrivals += st.arrivals
		lost += st.lost
		r.pool = append(r.pool, st.groups[:st.ngroups]...)
	}
	span := float64(n) * dt
	lat = workload.Latency{
		P50: quantile(r.pool, 0.50, lost, timeout),
		P95: quantile(r.pool, 0.95, lost, timeout),
		P99: quantile(r.pool, 0.99, lost, timeout),
	}
	return arrivals / span, lost / span, lat
}
