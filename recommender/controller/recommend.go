package controller

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/rival"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// recommend computes the new status of m. fresh is true when a new
// recommendation was made this loop (only then may recommendationTime
// advance: a recommendation kept while metrics are missing must age so the
// updater's staleness guard can act).
func (c *Controller) recommend(ctx context.Context, key string, m *v1alpha1.MultidimPodAutoscaler, now time.Time,
	use map[string]*usage.PodUsage, useErr error, pressure map[usage.ContainerKey]float64, ext *external, rivals []rival.Rival, dropped map[string]int) (*v1alpha1.MultidimPodAutoscalerStatus, bool) {
	s := m.Status.DeepCopy()
	s.ObservedGeneration = m.Generation
	st := c.stateFor(ctx, key, m)

	setHistoryCondition(s, st, now)

	if st.configErr != nil {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "InvalidConfiguration", st.configErr.Error(), now)
		setCondition(s, v1alpha1.RecommendationProvided, corev1.ConditionFalse, "InvalidConfiguration", "the configuration cannot be acted on", now)
		return s, false
	}
	// Bounded as the loop's other API reads (RunOnce).
	tctx, cancel := context.WithTimeout(ctx, c.cfg.Interval/2)
	tgt, err := c.sources.targets.Target(tctx, m.Namespace, m.Spec.ScaleTargetRef)
	cancel()
	if err != nil {
		switch {
		case errors.Is(err, ErrTargetNotFound):
			setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "TargetNotFound", err.Error(), now)
		case errors.Is(err, ErrTargetUnsupported):
			setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "TargetUnsupported", err.Error(), now)
		default:
			klog.FromContext(ctx).Error(err, "Resolving scale target", "mpa", klog.KObj(m))
		}
		setCondition(s, v1alpha1.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the scale target cannot be read", now)
		return s, false
	}
	if len(rivals) > 0 {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, ReasonConflictingAutoscaler, rivalMessage(m, rivals), now)
	} else if msg := c.unconfiguredSources(m); msg != "" {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, ReasonMetricSourceNotConfigured, msg, now)
	} else {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported", "", now)
	}
	setCondition(s, v1alpha1.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the scale target was read", now)

	all, err := c.caches.pods.List(m.Namespace, tgt.Selector)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing pods from cache", "mpa", klog.KObj(m))
		return s, false
	}
	pods := activePods(all)
	if len(pods) == 0 {
		setCondition(s, v1alpha1.NoPodsMatched, corev1.ConditionTrue, "NoPodsMatched", "the target's selector matches no running pods", now)
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "NoPodsMatched", "no pods to measure", now)
		return s, false
	}
	setCondition(s, v1alpha1.NoPodsMatched, corev1.ConditionFalse, "PodsMatched", "", now)
	if st.history.pending {
		if !c.loadHistory(ctx, m, st, pods, dropped) {
			setCondition(s, v1alpha1.FetchingHistory, corev1.ConditionTrue, "FetchingHistory", "loading usage history from Prometheus; the first recommendation waits for it", now)
			return s, false
		}
		setHistoryCondition(s, st, now)
	}
	if useErr != nil {
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", "the metrics source failed; the last recommendation is kept", now)
		return s, false
	}
	since := st.lastObs
	if since.IsZero() {
		since = now.Add(-c.cfg.Interval)
	}
	obs := observation(now, c.cfg.Interval, since, pods, use, pressure, dropped)
	// The current scale is the target's, as for the HPA; the pods only
	// give the per-pod values.
	obs.Replicas = tgt.Replicas
	sloReason, sloMsg := c.applySLO(ctx, m, &obs, ext)
	goalProblems := c.applyGoals(ctx, m, &obs, ext)
	// Without usage the last recommendation is kept, unless a container
	// was OOM-killed: one killed at start (CrashLoopBackOff) never reports
	// usage, and would otherwise never get more memory. The policy records
	// the kill (the memory at the kill, bumped, as VPA does) and keeps the
	// replica count, which nothing measures.
	oomOnly := obs.Samples == 0 && anyOOMKill(&obs)
	if obs.Samples == 0 && !oomOnly {
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "MetricsMissing", "no valid usage for any matched pod; the last recommendation is kept", now)
		return s, false
	}
	def, err := st.policy.Recommend(ctx, obs)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Computing recommendation", "mpa", klog.KObj(m))
		setCondition(s, v1alpha1.RecommendationProvided, corev1.ConditionFalse, "RecommendationFailed", "the default policy could not use the observation", now)
		return s, false
	}
	st.lastObs = now
	st.containers = st.containers[:0]
	for _, co := range obs.Containers {
		st.containers = append(st.containers, co.Name)
	}

	rec := def
	rl := &v1alpha1.RLStatus{Source: v1alpha1.SourceDefault, Reason: "RLOff", Message: "spec.rl.mode is Off: the fused default decides"}
	if m.Spec.RL != nil && m.Spec.RL.Mode != "" && m.Spec.RL.Mode != v1alpha1.RLModeOff {
		if c.advisor != nil {
			st.agent.asked = true
			rec, rl = c.advisor.Advise(ctx, m, &obs, &st.constraints, def)
		} else {
			rl = &v1alpha1.RLStatus{Source: v1alpha1.SourceDefault, Reason: "NoAgentEndpoint", Message: "no --rl-agent-endpoint is configured: the fused default decides"}
		}
	}
	reason := def.Reason
	if c.loop.roomSnap != nil {
		// Whoever decided, nothing is asked that the nodes cannot place.
		if fitted, note := workload.Fit(rec, c.loop.roomSnap.For(all), &st.constraints, obs.Containers); note != "" {
			rec, reason = fitted, reason+"; "+note
			c.metrics.fits.Inc()
		}
	}
	c.metrics.recommendations.WithLabelValues(string(rl.Source)).Inc()
	c.noteStage(m, st, rl.Stage)

	s.RecommendationTime = &metav1.Time{Time: now}
	s.CurrentReplicas = obs.Replicas
	s.DesiredReplicas = rec.Replicas
	s.Recommendation = mpa.RecommendedPodResources(rec)
	s.CurrentMetrics = append(currentMetrics(&obs), goalStatuses(ctx, m, ext, pods)...)
	s.RL = rl
	c.noteChange(ctx, m, st, s, reason)
	setCondition(s, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided", "", now)
	from := "the replica count was computed from CPU utilization"
	if len(obs.Goals) > 0 {
		from += " and goals.metrics"
	}
	if goalProblems != "" {
		from += "; " + goalProblems
	}
	switch {
	case oomOnly:
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "MetricsMissing", "no valid usage for any matched pod; memory was raised after an OOM kill and the replica count is kept", now)
	case strings.Contains(def.Reason, "FailedGetGoalMetric"):
		msg := "the other metrics would scale down, which a goal without a reading prevents (as in the HPA): the replica count is kept"
		if goalProblems != "" {
			msg += "; " + goalProblems
		}
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetGoalMetric", msg, now)
	case strings.Contains(def.Reason, "FailedGetResourceMetric"):
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", "CPU utilization could not be computed (are requests set?)", now)
	case sloReason != "":
		// Scaling goes on from CPU; the reason says the SLO input is missing.
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionTrue, sloReason, from+"; "+sloMsg, now)
	default:
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", from, now)
	}
	setLimitedCondition(s, m, &st.constraints, def.Reason, now)
	if h, ok := st.policy.(histograms); ok {
		low := false
		for _, name := range st.containers {
			if st.constraints.ContainerPolicy(name).Mode != workload.ContainerModeOff && h.Recommender().State(name).Confidence() < c.cfg.LowConfidenceDays {
				low = true
			}
		}
		if low {
			setCondition(s, v1alpha1.LowConfidence, corev1.ConditionTrue, "InsufficientHistory", "some container has less usage history than --low-confidence-history", now)
		} else {
			setCondition(s, v1alpha1.LowConfidence, corev1.ConditionFalse, "EnoughHistory", "", now)
		}
	}
	return s, true
}
