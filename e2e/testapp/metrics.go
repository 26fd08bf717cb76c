package testapp

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric names. The duration histogram and the failed-requests counter
// follow the shape the recommender's default SLO queries expect: for
// spec.rl.slo.metric.name aware_testapp_request_duration_seconds it reads
// the histogram's _bucket and _count series and, for the error rate,
// aware_testapp_failed_requests_total (the name with the suffix
// _request_duration_seconds replaced). The in-flight gauge suits a Pods
// goal metric (spec.goals.metrics). Prometheus adds namespace and pod as
// target labels (e.g. from --file-sd), so the series carry none of their own.
const (
	RequestsMetric        = "aware_testapp_requests_total"
	FailedRequestsMetric  = "aware_testapp_failed_requests_total"
	RequestDurationMetric = "aware_testapp_request_duration_seconds"
	InFlightMetric        = "aware_testapp_requests_in_flight"
	CPUMetric             = "aware_testapp_cpu_seconds_total"
	HeldMemoryMetric      = "aware_testapp_memory_held_bytes"
)

// DurationBuckets are the request-duration histogram's upper bounds in
// seconds: dense enough from 5 ms to 10 s that histogram_quantile's linear
// interpolation puts a p95 within about 25% of its bucket.
var DurationBuckets = []float64{
	0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5,
	0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10,
}

type metrics struct {
	requests *prometheus.CounterVec
	failed   prometheus.Counter
	duration prometheus.Histogram
	inFlight prometheus.Gauge
	cpu      prometheus.Counter
	held     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestsMetric,
			Help: "Work requests served, by HTTP status code."}, []string{"code"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: FailedRequestsMetric,
			Help: "Work requests that failed on the server (status 5xx)."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: RequestDurationMetric,
			Help: "Time from a work request's arrival to its response, in seconds.", Buckets: DurationBuckets}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: InFlightMetric,
			Help: "Work requests in flight."}),
		cpu: prometheus.NewCounter(prometheus.CounterOpts{Name: CPUMetric,
			Help: "Thread CPU time burned by work requests, in seconds."}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: HeldMemoryMetric,
			Help: "Memory the app holds on purpose and has made resident: the base plus that of each request in flight whose handler has mapped and touched it, in bytes."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.failed, m.duration, m.inFlight, m.cpu, m.held} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("testapp metrics: %w", err)
		}
	}
	return m, nil
}

// gaugeValue reads a gauge's current value.
func gaugeValue(g prometheus.Gauge) float64 {
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		return 0
	}
	return d.GetGauge().GetValue()
}
