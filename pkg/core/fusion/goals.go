package fusion

import (
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// cpuTarget is the CPU target utilisation of this observation: the
// policy's own, unless the observation carries a usable Resource CPU goal
// with a Utilization target, whose target replaces it (the lowest, if there
// are several: it asks for the most replicas). The goal does not become a
// second CPU metric: measured against the request the vertical loop sizes
// for another target, it would never be met and would scale out without
// end (the fight of naive HPA+VPA, see the package documentation). With
// Options.TargetOfLimit the policy's own target is of the limit: limitRatio
// (the pods' CPU limit over their request) times it, of the request.
func (f *Fused) cpuTarget(obs *workload.Observation, limitRatio float64) float64 {
	t := f.target
	held := f.opts.PressureHold > 0 && !f.starvedAt.IsZero() && obs.Time.Sub(f.starvedAt) < f.opts.PressureHold
	bursty := f.opts.BurstRatio > 0 && f.burst.ratio() >= f.opts.BurstRatio
	if f.opts.TargetOfLimit && !held && !bursty {
		t *= limitRatio
	}
	found := false
	for i := range obs.Goals {
		if g := &obs.Goals[i]; isCPUUtilization(g) && g.Problem == "" {
			if !found || g.Target < t {
				t, found = g.Target, true
			}
		}
	}
	return t
}

func isCPUUtilization(g *workload.Goal) bool {
	return g.Kind == workload.GoalUtilization && g.Resource == workload.CPU
}

// goalMetrics appends the calculator input of every goal but the usable
// CPU utilisation goals (cpuTarget folded those into the CPU metric). A
// Resource utilisation goal is measured against the recommended request,
// as the CPU metric is (rule 7), so that a vertical change never shows up
// as a utilisation jump.
func (f *Fused) goalMetrics(obs *workload.Observation, containers []workload.ContainerRecommendation, metrics []hpa.Metric) []hpa.Metric {
	for i := range obs.Goals {
		g := &obs.Goals[i]
		if isCPUUtilization(g) && g.Problem == "" {
			continue
		}
		var req *float64
		if g.Kind == workload.GoalUtilization && g.Resource != "" {
			r := recommendedPod(obs, containers, g.Resource)
			req = &r
		}
		metrics = append(metrics, hpa.GoalMetric(obs, g, req, nil))
	}
	return metrics
}
