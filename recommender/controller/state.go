package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

// carrier is a policy that takes over what its predecessor learned about
// the workload, beyond the histograms, when a spec change rebuilds it.
type carrier interface {
	CarryOver(old workload.Policy) bool
}

// state is the model of one autoscaler.
type state struct {
	namespace, name string
	uid             types.UID
	generation      int64
	policy          workload.Policy
	constraints     workload.Constraints
	configErr       error
	lastObs         time.Time
	containers      []string
	lastCheckpoint  time.Time
	restored        int
	history         historyState
	agent           agentState
	// noted is the last recommendation change noteChange recorded, with
	// the status it was measured against.
	noted string
}

// historyState is an autoscaler's load of its history from Prometheus
// (prometheus.go). pending: no checkpoint was found and history is to be
// loaded before the first recommendation; load is the load, once started.
type historyState struct {
	pending bool
	load    *historyLoad
	loaded  int
	err     error
}

// agentState is what the controller knows of the RL agent's view of an
// autoscaler.
type agentState struct {
	// asked: the advisor was asked for this autoscaler, so the agent keeps
	// state for it to be dropped when it is deleted.
	asked bool
	// lastStage is the last RL stage the agent reported (noteStage).
	lastStage v1alpha1.RLStage
}

// stateFor returns the model of m, creating the policy (and restoring
// checkpoints) the first time, and rebuilding it, histograms kept, when the
// spec changes.
func (c *Controller) stateFor(ctx context.Context, key string, m *v1alpha1.MultidimPodAutoscaler) *state {
	st := c.loop.states[key]
	if st != nil && st.uid == m.UID && st.generation == m.Generation {
		return st
	}
	if st != nil && st.uid != m.UID {
		// Deleted and re-created under the same name between two loops.
		c.forgetAgentState(ctx, st, true)
		if st.history.load != nil {
			st.history.load.cancel()
		}
	}
	// lastCheckpoint starts now: there is nothing new to save before a
	// checkpoint interval of samples has been seen.
	ns := &state{namespace: m.Namespace, name: m.Name, uid: m.UID, generation: m.Generation, constraints: mpa.Constraints(m), lastCheckpoint: c.clock.Now()}
	if err := mpa.CheckQuantities(m); err != nil {
		// Read as another value (0 is "unbounded"), such a bound would
		// be silently ignored.
		ns.configErr = fmt.Errorf("invalid constraints: %w", err)
	} else if err := ns.constraints.Validate(); err != nil {
		ns.configErr = fmt.Errorf("invalid constraints: %w", err)
	} else if p, err := c.newPolicy(ns.constraints); err != nil {
		ns.configErr = err
	} else {
		ns.policy = p
	}
	if cp, ok := ns.policy.(carrier); ok && st != nil && st.uid == m.UID && st.policy != nil {
		// Spec changed: what the policy learned about the workload besides
		// the histograms (the fused default's CPU-per-request estimate)
		// carries over, as they do below.
		cp.CarryOver(st.policy)
	}
	h, ok := ns.policy.(histograms)
	switch {
	case !ok:
	case st != nil && st.uid == m.UID:
		// Spec changed: carry the histograms over to the new policy. The
		// HPA stabilization history starts afresh with the new behavior.
		if old, ok := st.policy.(histograms); ok {
			for _, name := range st.containers {
				if err := h.Recommender().State(name).Restore(old.Recommender().State(name).Checkpoint()); err != nil {
					klog.FromContext(ctx).Error(err, "Carrying history over a spec change", "mpa", klog.KObj(m), "container", name)
				}
			}
		}
		ns.containers, ns.lastObs, ns.lastCheckpoint, ns.restored = st.containers, st.lastObs, st.lastCheckpoint, st.restored
		ns.history, ns.agent = st.history, st.agent
	default:
		ns.restored = c.restore(ctx, m, h)
		ns.history.pending = ns.restored == 0 && c.sources.history != nil
	}
	c.loop.states[key] = ns
	return ns
}
