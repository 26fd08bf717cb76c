package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunningPods lists the pods in namespace matching selector that are Running
// and Ready and not being deleted: what a kubelet would count as serving.
func (tb *Testbed) RunningPods(ctx context.Context, namespace, selector string) ([]corev1.Pod, error) {
	list, err := tb.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && PodReady(&p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// WaitForRunningPods waits until exactly n pods matching selector are
// running (see RunningPods) and returns them.
func (tb *Testbed) WaitForRunningPods(ctx context.Context, namespace, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := WaitFor(ctx, timeout, defaultInterval, fmt.Sprintf("%d running pods %q in %s", n, selector, namespace), func(ctx context.Context) (bool, error) {
		var err error
		pods, err = tb.RunningPods(ctx, namespace, selector)
		if err != nil {
			return false, err
		}
		if len(pods) != n {
			return false, fmt.Errorf("%d running", len(pods))
		}
		return true, nil
	})
	return pods, err
}

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
