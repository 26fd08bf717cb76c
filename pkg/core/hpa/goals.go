package hpa

import (
	"errors"
	"fmt"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// ErrGoalUnavailable is the cause of a goal metric whose reading is missing
// or invalid (workload.Goal.Problem): the metric counts as invalid, which
// proposes nothing and, as in the HPA, blocks a scale-down.
var ErrGoalUnavailable = errors.New("goal metric unavailable")

// GoalMetric converts one of the observation's goals into the calculator's
// input with autoscaling/v2 semantics:
//
//   - a Resource goal reads the pods' usage of its resource from obs.Pods;
//     a Utilization target measures it against perPodRequest when that is
//     not nil (the fused policy's recommended request) and each pod's
//     current request otherwise, and applies the CPU readiness rule to CPU;
//   - a Pods goal (AverageValue) reads g.PerPod by pod name; a pod without
//     a value is "missing" to the calculator;
//   - an Object or External goal reads g.Value: a Value target scales the
//     ready pods by Value/Target, an AverageValue target asks for
//     Value/Target pods.
//
// A goal with a Problem becomes a metric that fails with
// ErrGoalUnavailable. buf is reused for the per-pod readings.
func GoalMetric(obs *workload.Observation, g *workload.Goal, perPodRequest *float64, buf []PodMetric) Metric {
	m := Metric{Name: g.Name, Target: g.Target, Window: obs.Window}
	if g.Problem != "" {
		m.Err = fmt.Errorf("%w: %s", ErrGoalUnavailable, g.Problem)
		return m
	}
	switch g.Kind {
	case workload.GoalUtilization, workload.GoalAverageValue:
		m.Kind = PodsAverageValue
		if g.Kind == workload.GoalUtilization {
			m.Kind = ResourceUtilization
		}
		if g.Resource != "" {
			m.CPU = g.Resource == workload.CPU
			m.Pods = PodMetrics(obs, g.Resource, perPodRequest, buf)
			return m
		}
		if g.Kind == workload.GoalUtilization {
			m.Err = errors.New("a utilization goal needs a resource")
			return m
		}
		buf = buf[:0]
		for i := range obs.Pods {
			p := &obs.Pods[i]
			v, ok := g.PerPod[p.Name]
			buf = append(buf, PodMetric{Name: p.Name, Ready: p.Ready, ReadySince: p.ReadySince, Started: p.Started, HasValue: ok, Value: v})
		}
		m.Pods = buf
	case workload.GoalValue:
		m.Kind, m.Value, m.ReadyPods = ObjectValue, g.Value, obs.ReadyReplicas
	case workload.GoalTotalAverageValue:
		m.Kind, m.Value = ObjectAverageValue, g.Value
	default:
		m.Err = fmt.Errorf("unknown goal kind %q", g.Kind)
	}
	return m
}
