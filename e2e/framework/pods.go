package framework

import (
	"context"
	"fmt"
	"testing"
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

// PodLogsOnFailure registers a cleanup that prints, if t has failed by the
// time it runs, the last ComponentLogLines lines of every container of the
// pods in namespace, and of its previous run if it restarted: the logs of
// components a test runs as pods (on a real node), which the testbed's log
// directory does not hold. Register it after the cleanup that deletes the
// pods, so that it runs before it.
func (tb *Testbed) PodLogsOnFailure(t testing.TB, namespace string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			tb.DumpPodLogs(t, namespace, ComponentLogLines)
		}
	})
}

// DumpPodLogs prints the last n lines of every container of the pods in
// namespace (and of its previous run, if it restarted).
func (tb *Testbed) DumpPodLogs(t testing.TB, namespace string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := tb.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("===== the pods of %s: %v", namespace, err)
		return
	}
	if len(pods.Items) == 0 {
		t.Logf("no pods in %s", namespace)
	}
	lines := int64(n)
	for _, p := range pods.Items {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			runs := []bool{false}
			if cs.RestartCount > 0 {
				runs = []bool{true, false}
			}
			for _, previous := range runs {
				what := fmt.Sprintf("%s/%s container %s", namespace, p.Name, cs.Name)
				if previous {
					what += fmt.Sprintf(" (its run before the last of %d restarts)", cs.RestartCount)
				}
				raw, err := tb.Client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{
					Container: cs.Name, TailLines: &lines, Previous: previous,
				}).DoRaw(ctx)
				if err != nil {
					t.Logf("===== %s: %v", what, err)
					continue
				}
				t.Logf("===== last %d lines of %s =====\n%s", n, what, raw)
			}
		}
	}
}
