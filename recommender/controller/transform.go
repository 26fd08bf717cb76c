package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimPod is the pod informer's transform (cache.SharedIndexInformer
// SetTransform): it keeps only what the recommender reads — identity,
// labels (selectors), creation and deletion times, container names and
// resources, phase, start time, the Ready condition, OOM terminations and
// the resources each container runs with (containerStatuses[].resources),
// so 100,000 cached pods cost a fraction of their full size. Objects other
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
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		kept := corev1.ContainerStatus{Name: cs.Name, Resources: cs.Resources}
		if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			kept.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: t.Reason, FinishedAt: t.FinishedAt, ExitCode: t.ExitCode,
			}}
		}
		if kept.Resources != nil || kept.LastTerminationState.Terminated != nil {
			out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, kept)
		}
	}
	return out, nil
}
