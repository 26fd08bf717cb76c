package hpa

import (
	"errors"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestGoalMetric(t *testing.T) {
	obs := &workload.Observation{
		Time: t0, Window: 30 * time.Second, Replicas: 3, ReadyReplicas: 2,
		Pods: []workload.PodSample{
			{Name: "a", Ready: true, HasMetrics: true, Usage: workload.Resources{CPU: 0.4, Memory: 100}, Requests: workload.Resources{CPU: 1, Memory: 200}},
			{Name: "b", Ready: true, HasMetrics: true, Usage: workload.Resources{CPU: 0.6, Memory: 300}, Requests: workload.Resources{CPU: 1, Memory: 200}},
			{Name: "c"},
		},
	}
	req := 0.5
	for _, tc := range []struct {
		name    string
		g       workload.Goal
		request *float64
		check   func(t *testing.T, m Metric)
	}{
		{"pods goal reads PerPod by name; a pod without a value is missing", workload.Goal{Name: "rps", Kind: workload.GoalAverageValue, Target: 5, PerPod: map[string]float64{"a": 7, "c": 1}},
			nil, func(t *testing.T, m Metric) {
				if m.Kind != PodsAverageValue || m.CPU || len(m.Pods) != 3 || !m.Pods[0].HasValue || m.Pods[0].Value != 7 || m.Pods[1].HasValue || !m.Pods[2].HasValue {
					t.Errorf("got %+v", m)
				}
			}},
		{"resource utilization reads usage against the given request, CPU rule on", workload.Goal{Name: "cpu", Kind: workload.GoalUtilization, Resource: workload.CPU, Target: 0.5},
			&req, func(t *testing.T, m Metric) {
				if m.Kind != ResourceUtilization || !m.CPU || m.Pods[1].Value != 0.6 || m.Pods[1].Request != 0.5 {
					t.Errorf("got %+v", m)
				}
			}},
		{"memory utilization against current requests", workload.Goal{Name: "memory", Kind: workload.GoalUtilization, Resource: workload.Memory, Target: 0.5},
			nil, func(t *testing.T, m Metric) {
				if m.CPU || m.Pods[1].Value != 300 || m.Pods[1].Request != 200 {
					t.Errorf("got %+v", m)
				}
			}},
		{"object value scales ready pods", workload.Goal{Name: "q", Kind: workload.GoalValue, Target: 10, Value: 30},
			nil, func(t *testing.T, m Metric) {
				if m.Kind != ObjectValue || m.Value != 30 || m.ReadyPods != 2 || m.Target != 10 {
					t.Errorf("got %+v", m)
				}
			}},
		{"object average value", workload.Goal{Name: "q", Kind: workload.GoalTotalAverageValue, Target: 10, Value: 30},
			nil, func(t *testing.T, m Metric) {
				if m.Kind != ObjectAverageValue || m.Value != 30 {
					t.Errorf("got %+v", m)
				}
			}},
		{"a problem makes the metric fail", workload.Goal{Name: "q", Kind: workload.GoalValue, Target: 10, Value: 30, Problem: "nan"},
			nil, func(t *testing.T, m Metric) {
				if !errors.Is(m.Err, ErrGoalUnavailable) {
					t.Errorf("err %v", m.Err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, GoalMetric(obs, &tc.g, tc.request, nil)) })
	}
}

// TestFailedMetricBlocksScaleDownOnly: a metric with Err is invalid, as
// an unreadable metric is in the HPA.
func TestFailedMetricBlocksScaleDownOnly(t *testing.T) {
	zero := time.Duration(0)
	d, _ := NewDecider(workload.Constraints{MaxReplicas: 100, Behavior: &workload.Behavior{ScaleDown: &workload.ScalingRules{StabilizationWindow: &zero}}}, DefaultCalculator())
	bad := Metric{Name: "gone", Err: errors.New("no data")}
	if dec, err := d.Decide(t0, 4, []Metric{{Name: "a", Kind: ObjectAverageValue, Target: 1, Value: 6}, bad}); err != nil || dec.Replicas != 6 {
		t.Errorf("scale-up with a failed metric: %d, %v; want 6", dec.Replicas, err)
	}
	if dec, err := d.Decide(t0.Add(time.Minute), 6, []Metric{{Name: "a", Kind: ObjectAverageValue, Target: 1, Value: 2}, bad}); err == nil || dec.Replicas != 6 || dec.Errors[1] == nil {
		t.Errorf("scale-down with a failed metric: %d, %v; want 6 and the error", dec.Replicas, err)
	}
	if dec, err := d.Decide(t0.Add(2*time.Minute), 6, []Metric{{Name: "a", Kind: ObjectAverageValue, Target: 1, Value: 2}}); err != nil || dec.Replicas != 2 {
		t.Errorf("scale-down without it: %d, %v; want 2", dec.Replicas, err)
	}
}
