package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"

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
	out.Alive = !out.Terminating && p.Status.Phase == corev1.PodRunning && podReady(p)
	for _, c := range p.Spec.Containers {
		out.Containers = append(out.Containers, logic.Container{
			Name:        c.Name,
			Requests:    mpa.Resources(c.Resources.Requests),
			Limits:      mpa.Resources(c.Resources.Limits),
			LastOOMKill: lastOOMKill(p, c.Name),
		})
	}
	out.Resize, out.ResizeSince, out.ResizeMessage = resizeState(p)
	return out, true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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
