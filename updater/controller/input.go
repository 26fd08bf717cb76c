package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/updater/logic"
)

// reasonOOMKilled is the container termination reason the kubelet reports.
const reasonOOMKilled = "OOMKilled"

// podModel turns a pod into the decision model. ok is false for pods that
// have finished (Succeeded/Failed): they are neither updated nor counted.
func podModel(p *corev1.Pod) (logic.Pod, bool) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return logic.Pod{}, false
	}
	out := logic.Pod{
		Name:        p.Name,
		Started:     p.CreationTimestamp.Time,
		Terminating: p.DeletionTimestamp != nil,
	}
	if p.Status.StartTime != nil {
		out.Started = p.Status.StartTime.Time
	}
	out.Unschedulable = unschedulable(p)
	ready, readySince := podReady(p)
	out.Alive = !out.Terminating && p.Status.Phase == corev1.PodRunning && ready
	if ready {
		out.ReadySince = readySince
		if out.ReadySince.IsZero() {
			// A Ready condition without a time: count it from now on
			// rather than never.
			out.ReadySince = out.Started
		}
	}
	boosts := boostRecords(p)
	for _, c := range p.Spec.Containers {
		out.Containers = append(out.Containers, logic.Container{
			Name:        c.Name,
			Requests:    mpa.Resources(c.Resources.Requests),
			Limits:      mpa.Resources(c.Resources.Limits),
			LastOOMKill: lastOOMKill(p, c.Name),
			Boost:       boostOf(&c, boosts),
		})
	}
	out.Resize, out.ResizeSince, out.ResizeMessage = resizeState(p)
	return out, true
}

// podReady reports whether p is Ready, and since when.
func podReady(p *corev1.Pod) (bool, time.Time) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// unschedulable reports whether the scheduler found no node for p.
func unschedulable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// boostRecords reads the admission controller's start-up boost
// annotation; an unreadable one counts as none (the pod is then sized as
// any other).
func boostRecords(p *corev1.Pod) map[string]mpa.BoostRecord {
	raw, ok := p.Annotations[mpa.StartupBoostAnnotation]
	if !ok {
		return nil
	}
	recs, err := mpa.DecodeBoost(raw)
	if err != nil {
		return nil
	}
	return recs
}

// boostOf is the container's boost while it lasts: its CPU request is
// still the one the boost set. Once resized, by the updater or anyone,
// the boost is over.
func boostOf(c *corev1.Container, recs map[string]mpa.BoostRecord) *logic.Boost {
	rec, ok := recs[c.Name]
	if !ok {
		return nil
	}
	boosted, err := resource.ParseQuantity(rec.Boosted)
	cur, has := c.Resources.Requests[corev1.ResourceCPU]
	if err != nil || !has || cur.Cmp(boosted) != 0 {
		return nil
	}
	req, err1 := mpa.CPUQuantity(rec.Request)
	lim, err2 := mpa.CPUQuantity(rec.Limit)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &logic.Boost{Request: req, Limit: lim}
}

func lastOOMKill(p *corev1.Pod, name string) time.Time {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name != name {
			continue
		}
		// A container currently terminated by OOM, or restarted after one.
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil && t.Reason == reasonOOMKilled {
				return t.FinishedAt.Time
			}
		}
	}
	return time.Time{}
}

// resizeState reads the resize conditions (Kubernetes 1.33+). Pending wins
// over InProgress: with both set a new resize was requested while an older
// one is still being applied, and the new one is what waits.
func resizeState(p *corev1.Pod) (logic.ResizeState, time.Time, string) {
	var inProgress *corev1.PodCondition
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodResizePending:
			switch c.Reason {
			case corev1.PodReasonInfeasible:
				return logic.ResizeInfeasible, c.LastTransitionTime.Time, c.Message
			case corev1.PodReasonDeferred:
				return logic.ResizeDeferred, c.LastTransitionTime.Time, c.Message
			}
		case corev1.PodResizeInProgress:
			inProgress = c
		}
	}
	if inProgress != nil {
		return logic.ResizeInProgress, inProgress.LastTransitionTime.Time, inProgress.Message
	}
	return logic.ResizeNone, time.Time{}, ""
}
