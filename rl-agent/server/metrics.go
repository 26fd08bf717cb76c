package server

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	batchSize     prometheus.Histogram
	transitions   *prometheus.CounterVec
	workloads     *prometheus.GaugeVec
	training      *prometheus.CounterVec
	persist       *prometheus.CounterVec
	policyVersion prometheus.Gauge
	// frozenPolicies and frozenCapShares follow the frozen copies Serving
	// workloads act with (frozen.go).
	frozenPolicies  prometheus.Gauge
	frozenCapShares prometheus.Counter
	// capacity and forgotten follow how full the agent is (forget.go).
	capacity  prometheus.Gauge
	forgotten *prometheus.CounterVec
	// variantMismatches counts requests refused with ErrVariantMismatch.
	variantMismatches *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	const ns, sub = "aware", "rlagent"
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "gRPC requests handled, by method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "request_duration_seconds",
			Help:    "Time to handle a gRPC request, by method.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16), // 25µs .. ~0.8s
		}, []string{"method"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "forward_batch_decisions",
			Help:    "Decisions answered by one forward pass of the policy.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 .. 512
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "stage_transitions_total",
			Help: "Lifecycle stage transitions of workloads, by source and destination stage.",
		}, []string{"from", "to"}),
		workloads: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "workloads",
			Help: "Workloads known to the agent, by lifecycle stage.",
		}, []string{"stage"}),
		training: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "training_jobs_total",
			Help: "Training jobs (one per completed learning episode), by result: ok, failed or dropped (trainer busy).",
		}, []string{"result"}),
		persist: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "persist_operations_total",
			Help: "Writes of experience and checkpoints to the state directory, by kind and result.",
		}, []string{"kind", "result"}),
		policyVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "policy_version",
			Help: "Number of training jobs applied to the shared policy.",
		}),
		frozenPolicies: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "frozen_policies",
			Help: "Frozen copies of the policy that Serving workloads act with, one per version pinned.",
		}),
		frozenCapShares: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "frozen_policy_cap_shares_total",
			Help: "Promotions to Serving made while the frozen-policy limit was reached, pinned to the newest frozen copy instead of the current policy.",
		}),
		capacity: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "workload_capacity_ratio",
			Help: "Workloads the agent tracks as a fraction of --max-workloads; at 1, new workloads are refused with RESOURCE_EXHAUSTED.",
		}),
		forgotten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "workloads_forgotten_total",
			Help: "Workloads whose state the agent dropped, by reason: removed (ForgetWorkload, the autoscaler was deleted) or expired (no call for --workload-ttl).",
		}, []string{"reason"}),
		variantMismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "default_variant_mismatches_total",
			Help: "Requests refused with FAILED_PRECONDITION because their config.default_variant (the recommender's --default-variant) is not the variant of the fused default the policy was trained beside, by method.",
		}, []string{"method"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.batchSize, m.transitions, m.workloads, m.training, m.persist, m.policyVersion, m.frozenPolicies, m.frozenCapShares, m.capacity, m.forgotten, m.variantMismatches} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// methodName turns "/aware.rlagent.v1.AgentService/Recommend" into
// "Recommend", keeping label values short and bounded.
func methodName(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}
