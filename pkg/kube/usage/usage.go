// Package usage reads the resource usage of pods from a metrics source.
//
// Every source sits behind Source so the recommender's loop does not care
// where numbers come from. Sources report what they read, unvalidated: a
// negative or NaN value is passed through and the consumer decides (the
// recommender drops and counts it), so a misbehaving metrics pipeline is
// visible instead of silently "fixed" in one place and not another.
//
// Two sources exist: MetricsAPI reads metrics.k8s.io (metrics-server),
// the recommender's current-usage source. Prometheus reads the Prometheus
// HTTP API with configurable PromQL templates: current usage (it also
// implements Source), usage history (range queries, for autoscalers
// without a checkpoint), a workload's whole history for the what-if replay
// (WorkloadHistory: request rate, latency, per-pod usage, replicas,
// requests and limits, in chunked range queries), containers' CPU
// pressure (PSI), the request rate,
// error rate and latency percentiles of the SLO histogram, and
// goals.metrics of type Pods, Object and External, with ToGoal converting a
// goal and its reading into a policy's input (workload.Goal). Prometheus
// drops NaN, infinite and negative values of the SLO, goal, pressure and
// history readings itself (counting them by reason) because it aggregates
// them; PodUsage passes them through like MetricsAPI.
package usage

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
)

// ContainerUsage is one container's usage: CPU in cores averaged over the
// window, memory working set in bytes.
type ContainerUsage struct {
	Name   string
	CPU    float64
	Memory float64
}

// PodUsage is the latest usage of one pod.
type PodUsage struct {
	Namespace string
	Name      string
	// Timestamp is the end of the window the sample covers.
	Timestamp time.Time
	// Window is the length of that window.
	Window     time.Duration
	Containers []ContainerUsage
}

// Source returns the latest usage of every pod in a namespace ("" means
// all namespaces) in one call, so one loop over thousands of autoscalers
// costs one request, not one per autoscaler.
type Source interface {
	PodUsage(ctx context.Context, namespace string) ([]PodUsage, error)
}

// MetricsAPI reads usage from the resource metrics API (metrics.k8s.io).
type MetricsAPI struct {
	client metricsv1beta1.PodMetricsesGetter
}

var _ Source = (*MetricsAPI)(nil)

// NewMetricsAPI returns a source backed by a metrics.k8s.io client.
func NewMetricsAPI(c metricsv1beta1.PodMetricsesGetter) *MetricsAPI {
	return &MetricsAPI{client: c}
}

// PodUsage implements Source.
func (m *MetricsAPI) PodUsage(ctx context.Context, namespace string) ([]PodUsage, error) {
	list, err := m.client.PodMetricses(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pod metrics in %q from metrics.k8s.io: %w", namespace, err)
	}
	out := make([]PodUsage, 0, len(list.Items))
	for i := range list.Items {
		pm := &list.Items[i]
		pu := PodUsage{
			Namespace:  pm.Namespace,
			Name:       pm.Name,
			Timestamp:  pm.Timestamp.Time,
			Window:     pm.Window.Duration,
			Containers: make([]ContainerUsage, 0, len(pm.Containers)),
		}
		for _, c := range pm.Containers {
			cu := ContainerUsage{Name: c.Name}
			if q, ok := c.Usage["cpu"]; ok {
				cu.CPU = q.AsApproximateFloat64()
			}
			if q, ok := c.Usage["memory"]; ok {
				cu.Memory = q.AsApproximateFloat64()
			}
			pu.Containers = append(pu.Containers, cu)
		}
		out = append(out, pu)
	}
	return out, nil
}
