package controller

import (
	"context"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// applyGoals sets obs.Goals from m's spec.goals.metrics and this loop's
// Prometheus readings, so that they drive the replica count with HPA
// semantics (pkg/core/fusion rule 10). A goal without a usable reading (not
// read, query failed, no data, NaN, infinite or negative values, an
// invalid target) is kept with its Problem: it proposes nothing and blocks
// scale-downs, as a failing metric does in the HPA. Goals AWARE cannot
// scale on (ContainerResource, resources other than cpu and memory) are
// left out. Every such goal is logged and described in the returned text
// for the ScalingActive condition ("" when all goals are usable); the text
// depends on the problems only, not on values, so it changes only when a
// problem does.
func (c *Controller) applyGoals(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, obs *workload.Observation, e *external) string {
	if m.Spec.Goals == nil || len(m.Spec.Goals.Metrics) == 0 {
		return ""
	}
	logger := klog.FromContext(ctx)
	var missing, unsupported []string
	for i, spec := range m.Spec.Goals.Metrics {
		var r *usage.GoalReading
		var err error
		if e != nil && i < len(e.goals) {
			r, err = e.goals[i], e.goalErrs[i]
		}
		g := usage.ToGoal(spec, r, err)
		if g.Problem == "" {
			obs.Goals = append(obs.Goals, g)
			continue
		}
		what := fmt.Sprintf("goals.metrics[%d] %s %q: %s", i, spec.Type, g.Name, describeGoalProblem(g.Problem, spec.Type))
		logger.V(2).Info("Goal metric not used for scaling", "mpa", klog.KObj(m), "index", i, "type", spec.Type, "name", g.Name, "problem", g.Problem, "err", err)
		if g.Problem == usage.GoalUnsupported {
			unsupported = append(unsupported, what)
			continue
		}
		obs.Goals = append(obs.Goals, g)
		missing = append(missing, what)
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "without a usable reading, so not scaling and blocking scale-downs: "+strings.Join(missing, ", "))
	}
	if len(unsupported) > 0 {
		parts = append(parts, "ignored: "+strings.Join(unsupported, ", "))
	}
	return strings.Join(parts, "; ")
}

func describeGoalProblem(problem string, t autoscalingv2.MetricSourceType) string {
	switch problem {
	case usage.GoalNotRead:
		return "no --prometheus-address is configured"
	case usage.GoalQueryFailed:
		return "the Prometheus query failed"
	case usage.GoalInvalidSpec:
		return "the target is missing, not positive or not valid for a " + string(t) + " metric"
	case usage.GoalUnsupported:
		return "not supported (Resource cpu or memory, Pods, Object and External are)"
	case usage.NoData:
		return "Prometheus returned no data"
	}
	return "every value was " + problem
}

// ReasonMetricSourceNotConfigured marks an autoscaler whose spec needs
// Prometheus while the recommender has no --prometheus-address.
const ReasonMetricSourceNotConfigured = "MetricSourceNotConfigured"

// unconfiguredSources returns the ConfigUnsupported message for an
// autoscaler whose goals or SLO need Prometheus while none is configured,
// or "". It names each such field and says what the operator can do, and
// depends on the spec only, so it changes only with the spec.
func (c *Controller) unconfiguredSources(m *v1alpha1.MultidimPodAutoscaler) string {
	var needs []string
	goals := false
	if c.sources.goals == nil && m.Spec.Goals != nil {
		for i, spec := range m.Spec.Goals.Metrics {
			switch spec.Type {
			case autoscalingv2.PodsMetricSourceType, autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType:
				needs = append(needs, fmt.Sprintf("goals.metrics[%d] (%s %q)", i, spec.Type, usage.ToGoal(spec, nil, nil).Name))
				goals = true
			}
		}
	}
	slo := c.sources.slo == nil && m.Spec.RL != nil && m.Spec.RL.SLO != nil
	if slo {
		needs = append(needs, "spec.rl.slo")
	}
	if len(needs) == 0 {
		return ""
	}
	var effects []string
	if goals {
		effects = append(effects, "these goals cannot be read and block scale-downs")
	}
	if slo {
		effects = append(effects, "latency is not measured")
	}
	return fmt.Sprintf("%s need Prometheus, but this recommender has no Prometheus address: set prometheus-address in deploy/kustomization.yaml "+
		"(the recommender's --prometheus-address), or remove them; until then %s",
		strings.Join(needs, " and "), strings.Join(effects, " and "))
}
