package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimPod is the pod informer's transform (cache.SharedIndexInformer
// SetTransform): it keeps only what the recommender reads — identity,
// labels (selectors), creation and deletion times, container names and
// resources, phase, start time, the Ready condition, a deferred resize's
// PodResizePending condition, OOM terminations, the
// resources each container runs with (containerStatuses[].resources and
// allocatedResources) and what the scheduler places the pod by (node,
// node selector, required node affinity, tolerations, init containers'
// and pod-level requests, overhead), so 100,000 cached pods cost a fraction of their full size. Objects other
// than pods pass through unchanged (e.g. DeletedFinalStateUnknown).
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Labels:            p.Labels,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase, StartTime: p.Status.StartTime},
	}
	out.Spec.Containers = make([]corev1.Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}}
	}
	// What the scheduler places a pod by, for the nodes' room
	// (--fit-to-nodes): where it is, where it may go, and what it requests
	// beyond its containers.
	out.Spec.NodeName, out.Spec.NodeSelector, out.Spec.Tolerations = p.Spec.NodeName, p.Spec.NodeSelector, p.Spec.Tolerations
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		out.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
	}
	out.Spec.Overhead, out.Spec.Resources = p.Spec.Overhead, p.Spec.Resources
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy,
			Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}})
	}
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		case deferredResize(c):
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		kept := corev1.ContainerStatus{Name: cs.Name, Resources: cs.Resources, AllocatedResources: cs.AllocatedResources}
		if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			kept.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: t.Reason, FinishedAt: t.FinishedAt, ExitCode: t.ExitCode,
			}}
		}
		if kept.Resources != nil || kept.AllocatedResources != nil || kept.LastTerminationState.Terminated != nil {
			out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, kept)
		}
	}
	return out, nil
}

// TrimNode is the node informer's transform (--fit-to-nodes): it keeps
// what the nodes' room is read from (name, labels, fields node affinity
// matches, whether it is cordoned, its taints, allocatable resources and
// Ready condition) and drops the rest, the image list above all.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable},
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// deferredResize reports whether c says the kubelet has deferred a resize
// (PodResizePending, reason Deferred): the one condition besides Ready the
// transform keeps and the observation reads. An infeasible resize is not
// deferred: the updater answers it (docs/api.md).
func deferredResize(c corev1.PodCondition) bool {
	return c.Type == corev1.PodResizePending && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonDeferred
}
