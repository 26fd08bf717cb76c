package webhook

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the admission controller's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Histogram
	// byResult holds the counter of each result, resolved once rather
	// than by label lookup on every answer.
	byResult map[string]prometheus.Counter
}

// NewMetrics registers the metrics on reg. Every result label is created
// at zero so that rate() and alerts see the series before the first event.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_admission_requests_total",
			Help: "Admission requests answered, by result: patched, unchanged, skipped, invalid, error, timeout. Every answer allows the pod.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "aware_admission_request_duration_seconds",
			Help: "Time from receiving an admission request to answering it.",
			// Sub-millisecond resolution: the budget is 2 ms at p99.
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register admission metrics: %w", err)
		}
	}
	m.byResult = make(map[string]prometheus.Counter, len(Results))
	for _, r := range Results {
		m.byResult[r] = m.requests.WithLabelValues(r)
	}
	return m, nil
}

// observe records one answer; a nil Metrics records nothing.
func (m *Metrics) observe(result string, start time.Time) {
	if m == nil {
		return
	}
	c, ok := m.byResult[result]
	if !ok {
		c = m.requests.WithLabelValues(result)
	}
	c.Inc()
	m.duration.Observe(time.Since(start).Seconds())
}
