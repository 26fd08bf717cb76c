package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Result label values.
const (
	resultSuccess      = "success"
	resultError        = "error"
	resultDryRun       = "dry_run"
	resultBlockedByPDB = "blocked_by_pdb"
	// resultPodGone: the pod was deleted before the write reached it.
	resultPodGone = "pod_gone"
)

// Metrics are the updater's Prometheus metrics, registered on an injected
// registry so tests (and serve.LintMetrics) see exactly these.
type Metrics struct {
	scaleOperations *prometheus.CounterVec
	evictions       *prometheus.CounterVec
	resizes         *prometheus.CounterVec
	skips           *prometheus.CounterVec
	loopDuration    prometheus.Histogram
	admissionFresh  prometheus.Gauge
	// staleRecommendations is how many autoscalers the last loop found
	// with a recommendation too old to apply.
	staleRecommendations prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		scaleOperations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_updater_scale_operations_total",
			Help: "Replica count changes through the scale subresource, by direction (up, down) and result (success, error, dry_run).",
		}, []string{"direction", "result"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_updater_evictions_total",
			Help: "Pod evictions through the Eviction API, by reason (OutsideBounds, OOMKilled, Drift, ResizeInfeasible, ResizeDeferred) and result (success, blocked_by_pdb, error, dry_run).",
		}, []string{"reason", "result"}),
		resizes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_updater_in_place_resizes_total",
			Help: "In-place pod resizes through the pods/resize subresource, by reason and result (success, error, pod_gone: the pod was deleted first, dry_run).",
		}, []string{"reason", "result"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_updater_skips_total",
			Help: "Updates not done in a loop, by reason (e.g. StaleRecommendation, AdmissionHeartbeatStale, MinReplicas, GlobalRateLimit, WorkloadRateLimit, ResizeRateLimit, ResizePending, AmbiguousTarget, Unschedulable).",
		}, []string{"reason"}),
		loopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aware_updater_loop_duration_seconds",
			Help:    "Duration of one update loop over all MultidimPodAutoscalers.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		admissionFresh: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aware_updater_admission_heartbeat_fresh",
			Help: "1 when the admission controller's heartbeat Lease was fresh at the last loop (evictions allowed), else 0.",
		}),
		staleRecommendations: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aware_updater_stale_recommendations",
			Help: "MultidimPodAutoscalers whose recommendation was older than --max-recommendation-age (or had no time) at the last loop, and so was not applied. A StaleRecommendation Warning event is posted when one becomes stale, not on every loop.",
		}),
	}
	for _, c := range []prometheus.Collector{m.scaleOperations, m.evictions, m.resizes, m.skips, m.loopDuration, m.admissionFresh, m.staleRecommendations} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
