package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/updater/logic"
)

func TestPodModel(t *testing.T) {
	p := newPod("a", "250m", "256Mi")
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", LastTerminationState: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", FinishedAt: metav1.Time{Time: t0}}}}}
	p.Status.Conditions = append(p.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0}},
		corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, LastTransitionTime: metav1.Time{Time: t0.Add(time.Second)}})
	m, ok := podModel(p)
	if !ok || !m.Alive || m.Containers[0].Requests.CPU != 0.25 || !m.Containers[0].LastOOMKill.Equal(t0) {
		t.Errorf("model = %+v", m)
	}
	if m.Resize != logic.ResizeDeferred || !m.ResizeSince.Equal(t0.Add(time.Second)) {
		t.Errorf("resize = %q since %v; pending must win over in progress", m.Resize, m.ResizeSince)
	}
	p.DeletionTimestamp = &metav1.Time{Time: t0}
	if m, _ := podModel(p); m.Alive || !m.Terminating {
		t.Errorf("terminating pod: %+v", m)
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, ok := podModel(p); ok {
		t.Error("finished pod modelled")
	}
}

func TestPodModelUnschedulable(t *testing.T) {
	for _, tc := range []struct {
		name string
		node string
		cond *corev1.PodCondition
		want bool
	}{
		{"the scheduler found no node", "", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}, true},
		{"not yet tried", "", nil, false},
		{"waiting for another reason", "", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}, false},
		{"bound since", "node-1", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("a", "250m", "256Mi")
			p.Spec.NodeName, p.Status.Phase, p.Status.Conditions = tc.node, corev1.PodPending, nil
			if tc.cond != nil {
				p.Status.Conditions = []corev1.PodCondition{*tc.cond}
			}
			if m, _ := podModel(p); m.Unschedulable != tc.want || m.Alive {
				t.Errorf("unschedulable = %v, alive = %v; want %v, false", m.Unschedulable, m.Alive, tc.want)
			}
		})
	}
}
