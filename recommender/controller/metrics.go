package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aware-k8s/aware/pkg/kube/agentclient"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// Metrics are the recommender's Prometheus metrics. They register into an
// injected registry so tests and several controllers in one process do not
// collide.
type Metrics struct {
	loopDuration    prometheus.Histogram
	recommendations *prometheus.CounterVec
	invalidSamples  *prometheus.CounterVec
	statusWrites    *prometheus.CounterVec
	// statusWriteOutages counts status writes that succeeded after failures.
	statusWriteOutages prometheus.Counter
	// apiFailing is how long the current run of failures of an API call
	// has lasted (outage.go).
	apiFailing    *prometheus.GaugeVec
	checkpoints   *prometheus.CounterVec
	autoscalers   prometheus.Gauge
	agentDuration *prometheus.HistogramVec
	agentErrors   *prometheus.CounterVec
	breakerState  prometheus.Gauge
	promQueries   *prometheus.CounterVec
	rlStages      *prometheus.CounterVec
	fits          prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		loopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aware_recommender_loop_duration_seconds",
			Help:    "Duration of one recommender loop over every handled autoscaler, including the metrics read.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		recommendations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_recommender_recommendations_total",
			Help: "Recommendations computed, by the source that was applied (Agent, Default, Safeguard).",
		}, []string{"source"}),
		invalidSamples: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_recommender_invalid_samples_total",
			Help: "Usage and CPU-pressure values dropped because they were NaN, infinite or negative, by reason.",
		}, []string{"reason"}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_recommender_status_writes_total",
			Help: "Writes of autoscaler status through the status subresource, by result (success, conflict, error).",
		}, []string{"result"}),
		statusWriteOutages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aware_recommender_status_write_recoveries_total",
			Help: "Autoscaler statuses written again after one or more failed writes (the API server or etcd was unavailable); each also records a StatusWriteRecovered event.",
		}),
		apiFailing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aware_recommender_api_failing_seconds",
			Help: "How long the current run of failures of an API call (status-write: the longest over the autoscalers; rival-scan: the list of other autoscalers) has lasted; 0 once it succeeds.",
		}, []string{"call"}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_recommender_checkpoint_operations_total",
			Help: "Checkpoint operations (save, delete, restore) by result (success, error).",
		}, []string{"operation", "result"}),
		autoscalers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aware_recommender_autoscalers",
			Help: "Autoscalers handled by this recommender in the last loop.",
		}),
		agentDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aware_recommender_agent_request_duration_seconds",
			Help:    "Latency of calls to the RL agent, by method.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"method"}),
		agentErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_recommender_agent_errors_total",
			Help: "Failed or refused RL agent calls and unusable answers, by method and gRPC code or reason.",
		}, []string{"method", "code"}),
		breakerState: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aware_recommender_agent_circuit_breaker_state",
			Help: "State of the RL agent circuit breaker: 0 closed, 1 half-open, 2 open.",
		}),
		promQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_recommender_prometheus_queries_total",
			Help: "Prometheus queries by template (cpu, memory, cpuPressure, latency, requestRate, errorRate, pods, object, external) and result: success (an answer, possibly empty) or error (unreachable, an error status, a malformed or unexpected answer).",
		}, []string{"query", "result"}),
		rlStages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aware_recommender_rl_stage_transitions_total",
			Help: "Changes of an autoscaler's RL stage (status.rl.stage) as the agent reported it, by previous and new stage: the agent taking control (OnlineTraining, Serving) or retraining starting (Retraining).",
		}, []string{"from", "to"}),
		fits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aware_recommender_node_fits_total",
			Help: "Recommendations lowered to fit the room the nodes have for the autoscaler's pods (--fit-to-nodes): a pod larger than any node's room, or more replicas than the nodes hold at the recommended pod size.",
		}),
	}
	for _, c := range []prometheus.Collector{m.fits, m.loopDuration, m.recommendations, m.invalidSamples, m.statusWrites, m.statusWriteOutages, m.apiFailing,
		m.checkpoints, m.autoscalers, m.agentDuration, m.agentErrors, m.breakerState, m.promQueries, m.rlStages} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Pre-create the common series so dashboards see zeros, not gaps.
	for _, s := range []string{"Agent", "Default", "Safeguard"} {
		m.recommendations.WithLabelValues(s)
	}
	for _, r := range []string{dropNaN, dropInfinite, dropNegative} {
		m.invalidSamples.WithLabelValues(r)
	}
	for _, c := range []string{callStatusWrite, callRivalScan} {
		m.apiFailing.WithLabelValues(c)
	}
	for _, q := range usage.QueryNames() {
		m.promQueries.WithLabelValues(q, "error")
	}
	return m, nil
}

// ObservePrometheusQuery counts one Prometheus query (usage.QueryObserver).
func (m *Metrics) ObservePrometheusQuery(name string, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	m.promQueries.WithLabelValues(name, result).Inc()
}

var _ usage.QueryObserver = (*Metrics)(nil)

// ObserveAgentCall records one RL agent call (agentclient.Observer).
func (m *Metrics) ObserveAgentCall(method string, d time.Duration, code string) {
	m.agentDuration.WithLabelValues(method).Observe(d.Seconds())
	if code != "OK" {
		m.agentErrors.WithLabelValues(method, code).Inc()
	}
}

// ObserveBreaker records the circuit breaker's state (agentclient.Observer).
func (m *Metrics) ObserveBreaker(s agentclient.State) { m.breakerState.Set(float64(s)) }

var _ agentclient.Observer = (*Metrics)(nil)
