package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// ReasonRecommendationChanged is the reason of the event noteChange
// records.
const ReasonRecommendationChanged = "RecommendationChanged"

// maxEventMessage is the API server's limit on an event's message.
const maxEventMessage = 1024

// noteChange records an event, and logs at level 2, when the recommendation
// written (replicas, or a container's target) differs from the one in
// status before: what changed, who decided (the status's rl.source) and
// why (the default policy's reason, and the advisor's where the agent or
// the safeguard decided). This is the autoscaler's counterpart of the
// HPA's SuccessfulRescale event: a user, or the real-node benchmark, reads
// from it which rule chose a scale-out or a resize. A change is recorded
// once: while the status write fails, every retry measures the same change
// against the same old status, and is not recorded again.
func (c *Controller) noteChange(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, st *state, now *v1alpha1.MultidimPodAutoscalerStatus, defReason string) {
	changes := recommendationChanges(&m.Status, now)
	if changes == "" {
		return
	}
	key := changes
	if t := m.Status.RecommendationTime; t != nil {
		key += " since " + t.UTC().Format(time.RFC3339Nano)
	}
	if key == st.noted {
		return
	}
	st.noted = key
	why := defReason
	if rl := now.RL; rl != nil && rl.Source != v1alpha1.SourceDefault {
		why = fmt.Sprintf("%s (%s); the default's reason: %s", rl.Reason, rl.Message, defReason)
	}
	source := v1alpha1.SourceDefault
	if now.RL != nil {
		source = now.RL.Source
	}
	klog.FromContext(ctx).V(2).Info("Recommendation changed", "mpa", klog.KObj(m), "changes", changes, "source", source, "reason", why)
	if c.recorder == nil {
		return
	}
	msg := fmt.Sprintf("%s; decided by %s: %s", changes, source, why)
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	c.recorder.Event(m, corev1.EventTypeNormal, ReasonRecommendationChanged, msg)
}

// recommendationChanges describes how now's recommendation differs from
// before's ("replicas 1 -> 3; app cpu 200m -> 1"), or "" when it does not.
// A first recommendation lists what it sets.
func recommendationChanges(before, now *v1alpha1.MultidimPodAutoscalerStatus) string {
	first := before.RecommendationTime == nil
	var out []string
	if first {
		out = append(out, fmt.Sprintf("first recommendation: replicas %d", now.DesiredReplicas))
	} else if before.DesiredReplicas != now.DesiredReplicas {
		out = append(out, fmt.Sprintf("replicas %d -> %d", before.DesiredReplicas, now.DesiredReplicas))
	}
	old := map[string]corev1.ResourceList{}
	if before.Recommendation != nil && !first {
		for _, cr := range before.Recommendation.ContainerRecommendations {
			old[cr.ContainerName] = cr.Target
		}
	}
	if now.Recommendation != nil {
		for _, cr := range now.Recommendation.ContainerRecommendations {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				q, ok := cr.Target[r]
				if !ok {
					continue
				}
				p, had := old[cr.ContainerName][r]
				switch {
				case first || !had:
					out = append(out, fmt.Sprintf("%s %s %s", cr.ContainerName, r, q.String()))
				case p.Cmp(q) != 0:
					out = append(out, fmt.Sprintf("%s %s %s -> %s", cr.ContainerName, r, p.String(), q.String()))
				}
			}
		}
	}
	if !first && len(out) == 0 {
		return ""
	}
	return strings.Join(out, "; ")
}
