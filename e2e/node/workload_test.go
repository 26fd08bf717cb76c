//go:build e2enode

package node

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// realWorkloadScales: under a load step, the fused default scales the test
// app out and resizes it in place, on the real kubelet. The app (one
// replica of 100m, limit 100m, 10 ms of CPU per request) gets 2 requests/s
// for 30 s, then 30 (0.3 cores of work, three times its limit) from the
// load generator in this process; the test passes once the Deployment
// wants at least two replicas and a pod that was running before runs with
// another CPU request than it started with, without being replaced.
func realWorkloadScales(t *testing.T, in *nodeinstall.Installer) {
	t.Helper()
	env := in.Env
	port := env.BasePort + 41
	manifest := nodeinstall.TestApp{
		Namespace: "real-workload", Env: env, Port: port,
		Args: []string{"--cpu=10ms", "--base-memory=32Mi", "--startup-delay=2s", "--shutdown-timeout=5s"},
		CPU:  "100m", CPULimit: "100m", Memory: "96Mi", MemoryLimit: "256Mi",
	}.Manifest() + nodeinstall.MPA("real-workload", 1, 4)
	kubectl(t, in, strings.NewReader(manifest), "apply", "-f", "-")
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = tb.Client.CoreV1().Namespaces().Delete(c, "real-workload", metav1.DeleteOptions{})
		_ = framework.WaitFor(c, 2*time.Minute, time.Second, "real-workload gone", func(ctx context.Context) (bool, error) {
			_, err := tb.Client.CoreV1().Namespaces().Get(ctx, "real-workload", metav1.GetOptions{})
			return err != nil, nil
		})
	})
	ctx := context.Background()
	pods, err := waitAppReady(ctx, "real-workload")
	if err != nil {
		t.Fatal(err)
	}
	initial := map[types.UID]int64{}
	for _, p := range pods {
		initial[p.UID] = runningCPU(&p)
	}

	lctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, err := loadgen.Run(lctx, loadgen.Config{
			Target:   fmt.Sprintf("http://127.0.0.1:%d/", port),
			Series:   loadgen.Series{Starts: []time.Duration{0, 30 * time.Second}, Rates: []float64{2, 30}},
			Duration: 6 * time.Minute, MaxRequests: 20000, MaxRate: 50, Timeout: 5 * time.Second,
			Seed: 1, Window: 15 * time.Second, RequestsPerConn: 20,
		}, prometheus.NewRegistry(), io.Discard)
		done <- err
	}()
	start := time.Now()
	var scaledOut, resized bool
	var last string
	err = framework.WaitFor(ctx, 6*time.Minute, 5*time.Second, "the fused default scales out and resizes in place", func(ctx context.Context) (bool, error) {
		d, err := tb.Client.AppsV1().Deployments("real-workload").Get(ctx, "testapp", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Spec.Replicas != nil && *d.Spec.Replicas >= 2 && !scaledOut {
			scaledOut = true
			t.Logf("%.0f s after the load started: %d replicas wanted", time.Since(start).Seconds(), *d.Spec.Replicas)
		}
		ps, err := tb.Client.CoreV1().Pods("real-workload").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		last = nodeinstall.DescribePods(ps.Items)
		for i := range ps.Items {
			p := &ps.Items[i]
			// Either way counts: the fused default may first size the
			// idle pod down, then out; what matters here is that the real
			// kubelet applied a resize to the pod that was running.
			if before, ok := initial[p.UID]; ok && !resized && p.DeletionTimestamp == nil && runningCPU(p) != before {
				resized = true
				t.Logf("%.0f s after the load started: pod %s runs with %dm of CPU, resized in place (started with %dm)",
					time.Since(start).Seconds(), p.Name, runningCPU(p), before)
			}
		}
		return scaledOut && resized, nil
	})
	stop()
	if lerr := <-done; lerr != nil && lctx.Err() == nil {
		t.Errorf("load generator: %v", lerr)
	}
	if err != nil {
		status, _ := in.Kubectl(context.Background(), nil, "get", "mpa", "-n", "real-workload", "testapp", "-o", "jsonpath={.status}")
		t.Fatalf("%v (scaled out %v, resized in place %v); the MPA's status: %s; pods: %s", err, scaledOut, resized, status, last)
	}
}

// waitAppReady waits for the app's one pod to be Ready.
func waitAppReady(ctx context.Context, ns string) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := framework.WaitFor(ctx, 2*time.Minute, 2*time.Second, "the test app ready in "+ns, func(ctx context.Context) (bool, error) {
		ps, err := tb.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = ps.Items
		return len(pods) == 1 && framework.PodReady(&pods[0]), nil
	})
	return pods, err
}

// runningCPU is the CPU request, in millicores, the pod's first container
// runs with (its status; the spec until the kubelet reports one).
func runningCPU(p *corev1.Pod) int64 {
	if len(p.Status.ContainerStatuses) > 0 {
		if r := p.Status.ContainerStatuses[0].Resources; r != nil {
			if q, ok := r.Requests[corev1.ResourceCPU]; ok {
				return q.MilliValue()
			}
		}
	}
	if len(p.Spec.Containers) == 0 {
		return 0
	}
	return p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
}

// oomAtStartRecovers: a container OOM-killed by the kernel at start, before
// any usage is measured, is given more memory and runs. The test app holds
// 160Mi from start under a 128Mi limit (request 64Mi), so every start is
// killed; the fused default records the kill, raises the memory above the
// limit it hit, and the updater replaces the dead pod, until a pod runs
// Ready without a new kill. Before the fix the autoscaler kept "no valid
// usage" and the pod stayed in CrashLoopBackOff. A resize in place, which
// the updater sent until the node showed otherwise, left the pod's cgroup
// at 128Mi on this kubelet (kubernetes/kubernetes#138760): whether the
// test passed depended on whether the container was running when it came.
func oomAtStartRecovers(t *testing.T, in *nodeinstall.Installer) {
	t.Helper()
	env := in.Env
	port := env.BasePort + 42
	manifest := nodeinstall.TestApp{
		Namespace: "oom-at-start", Env: env, Port: port,
		Args: []string{"--base-memory=160Mi"},
		CPU:  "50m", CPULimit: "200m", Memory: "64Mi", MemoryLimit: "128Mi",
	}.Manifest() + nodeinstall.MPA("oom-at-start", 1, 2)
	kubectl(t, in, strings.NewReader(manifest), "apply", "-f", "-")
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = tb.Client.CoreV1().Namespaces().Delete(c, "oom-at-start", metav1.DeleteOptions{})
		_ = framework.WaitFor(c, 2*time.Minute, time.Second, "oom-at-start gone", func(ctx context.Context) (bool, error) {
			_, err := tb.Client.CoreV1().Namespaces().Get(ctx, "oom-at-start", metav1.GetOptions{})
			return err != nil, nil
		})
	})
	start := time.Now()
	var killed bool
	var last string
	err := framework.WaitFor(context.Background(), 6*time.Minute, 3*time.Second, "the OOM-killed app runs with more memory", func(ctx context.Context) (bool, error) {
		ps, err := tb.Client.CoreV1().Pods("oom-at-start").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		last = nodeinstall.DescribePods(ps.Items)
		for i := range ps.Items {
			p := &ps.Items[i]
			for _, cs := range p.Status.ContainerStatuses {
				if cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.Reason == "OOMKilled" {
					killed = true
				}
			}
			if p.DeletionTimestamp == nil && framework.PodReady(p) && runningMemoryLimit(p) > 160<<20 {
				t.Logf("%.0f s after creation: pod %s Ready with a memory limit of %d Mi (the kernel killed a start: %v)",
					time.Since(start).Seconds(), p.Name, runningMemoryLimit(p)>>20, killed)
				return killed, nil
			}
		}
		return false, nil
	})
	if err != nil {
		status, _ := in.Kubectl(context.Background(), nil, "get", "mpa", "-n", "oom-at-start", "testapp", "-o", "jsonpath={.status}")
		t.Fatalf("%v (an OOM kill seen: %v); the MPA's status: %s; pods: %s", err, killed, status, last)
	}
}

// runningMemoryLimit is the memory limit, in bytes, the pod's first
// container runs with (its status; the spec until the kubelet reports one).
func runningMemoryLimit(p *corev1.Pod) int64 {
	if len(p.Status.ContainerStatuses) > 0 {
		if r := p.Status.ContainerStatuses[0].Resources; r != nil {
			if q, ok := r.Limits[corev1.ResourceMemory]; ok {
				return q.Value()
			}
		}
	}
	if len(p.Spec.Containers) == 0 {
		return 0
	}
	return p.Spec.Containers[0].Resources.Limits.Memory().Value()
}
