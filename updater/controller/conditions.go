package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/updater/logic"
)

// Reasons of the ResizeInfeasible condition, which the updater owns (the
// recommender keeps conditions it does not own when it writes status).
const (
	ReasonInfeasible         = "Infeasible"
	ReasonNoInfeasibleResize = "NoInfeasibleResize"
	// EventResizeInfeasible is the Warning posted when the condition
	// becomes True.
	EventResizeInfeasible = "ResizeInfeasible"
)

// maxInfeasibleListed bounds the pods the condition's message names, so a
// large workload on a full node does not write a huge status.
const maxInfeasibleListed = 5

// infeasibleCondition is the ResizeInfeasible condition for the pods in
// inf. Its message depends only on the pods and the kubelet's messages,
// not on the time, so an unchanged set of pods writes nothing.
func infeasibleCondition(inf []logic.InfeasibleResize) (corev1.ConditionStatus, string, string) {
	if len(inf) == 0 {
		return corev1.ConditionFalse, ReasonNoInfeasibleResize, "every in-place resize was feasible"
	}
	inf = slices.Clone(inf)
	slices.SortFunc(inf, func(a, b logic.InfeasibleResize) int { return strings.Compare(a.Pod, b.Pod) })
	parts := make([]string, 0, min(len(inf), maxInfeasibleListed)+1)
	for i, r := range inf {
		if i == maxInfeasibleListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(inf)-i))
			break
		}
		msg := r.Message
		if msg == "" {
			msg = "infeasible"
		}
		parts = append(parts, fmt.Sprintf("pod %s: %s", r.Pod, msg))
	}
	return corev1.ConditionTrue, ReasonInfeasible, "the in-place resize to the current recommendation cannot be done; it is sent again when the recommendation changes: " + strings.Join(parts, "; ")
}

// reportInfeasible keeps the ResizeInfeasible condition in step with inf.
// It writes only when the condition changes: absent and nothing infeasible
// is no change, so autoscalers that never meet an infeasible resize never
// get the condition. The write is a merge patch of the conditions with the
// cached resourceVersion as a precondition, so a status the recommender
// wrote meanwhile is never overwritten: the patch fails with a conflict
// and the next loop, with a fresh cache, tries again.
func (c *Controller) reportInfeasible(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, inf []logic.InfeasibleResize, now time.Time) {
	st, reason, msg := infeasibleCondition(inf)
	conds := slices.Clone(m.Status.Conditions)
	i := slices.IndexFunc(conds, func(x v1alpha1.MultidimPodAutoscalerCondition) bool { return x.Type == v1alpha1.ResizeInfeasible })
	switch {
	case i < 0 && st == corev1.ConditionFalse:
		return
	case i >= 0 && conds[i].Status == st && conds[i].Reason == reason && conds[i].Message == msg:
		return
	case i < 0:
		conds = append(conds, v1alpha1.MultidimPodAutoscalerCondition{Type: v1alpha1.ResizeInfeasible, LastTransitionTime: metav1.NewTime(now)})
		i = len(conds) - 1
	case conds[i].Status != st:
		conds[i].LastTransitionTime = metav1.NewTime(now)
	}
	conds[i].Status, conds[i].Reason, conds[i].Message = st, reason, msg
	logger := klog.FromContext(ctx)
	if c.cfg.DryRun {
		logger.Info("Dry run: would set condition", "type", v1alpha1.ResizeInfeasible, "status", st, "message", msg)
		return
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": m.ResourceVersion},
		"status":   map[string]any{"conditions": conds},
	})
	if err != nil {
		logger.Error(err, "Encoding the ResizeInfeasible condition")
		return
	}
	_, err = c.mpas.AutoscalingV1alpha1().MultidimPodAutoscalers(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		logger.Info("Setting the ResizeInfeasible condition failed; retrying next loop", "err", err)
		return
	}
	logger.Info("Set condition", "type", v1alpha1.ResizeInfeasible, "status", st, "message", msg)
	if st == corev1.ConditionTrue && (len(m.Status.Conditions) == 0 || i >= len(m.Status.Conditions) || m.Status.Conditions[i].Status != st) {
		c.recorder.Event(m, corev1.EventTypeWarning, EventResizeInfeasible, msg)
	}
}
