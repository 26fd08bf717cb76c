package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// noteStage counts and announces (an event on the autoscaler) a change of
// the RL stage the agent reports. An answer without a stage (the agent was
// not reached) changes nothing, so a change during an outage shows when the
// agent answers again; the first stage of a new model is compared with the
// one in the status, so a restarted recommender announces nothing twice.
func (c *Controller) noteStage(m *v1alpha1.MultidimPodAutoscaler, st *state, stage v1alpha1.RLStage) {
	if stage == "" {
		return
	}
	prev := st.agent.lastStage
	if prev == "" && m.Status.RL != nil {
		prev = m.Status.RL.Stage
	}
	st.agent.lastStage = stage
	if prev == "" || prev == stage {
		return
	}
	c.metrics.rlStages.WithLabelValues(string(prev), string(stage)).Inc()
	if c.recorder != nil {
		c.recorder.Eventf(m, corev1.EventTypeNormal, ReasonRLStageChanged, "the RL agent's stage changed from %s to %s: %s", prev, stage, stageMeaning(stage))
	}
}

// ReasonRLStageChanged is the reason of the event noteStage records.
const ReasonRLStageChanged = "RLStageChanged"

func stageMeaning(s v1alpha1.RLStage) string {
	switch s {
	case v1alpha1.RLStageBootstrapping:
		return "the defaults act while the agent learns from them"
	case v1alpha1.RLStageOnlineTraining:
		return "the agent acts (with spec.rl.mode On) and keeps learning"
	case v1alpha1.RLStageServing:
		return "the agent acts (with spec.rl.mode On) with the policy it was promoted with"
	case v1alpha1.RLStageRetraining:
		return "the agent's reward degraded: the defaults act again while it relearns"
	}
	return "unknown stage"
}

// forgetAgentState drops the advisor's memory of st and, if its
// autoscaler was deleted (not merely shadowed or handed to another
// recommender) and the agent was ever asked about it, tells the agent to
// drop what it learned, so that a deleted or re-created autoscaler does not
// keep a slot in the agent.
func (c *Controller) forgetAgentState(ctx context.Context, st *state, deleted bool) {
	if f, ok := c.advisor.(interface{ Forget(types.UID) }); ok {
		f.Forget(st.uid)
	}
	r, ok := c.advisor.(Remover)
	if !ok || !deleted || !st.agent.asked {
		return
	}
	if err := r.Remove(ctx, st.namespace, st.name, st.uid); err != nil {
		klog.FromContext(ctx).Info("The agent could not be told that an autoscaler was deleted; it forgets it after its --workload-ttl",
			"mpa", klog.KRef(st.namespace, st.name), "uid", st.uid, "err", err)
	}
}
