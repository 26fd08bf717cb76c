//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
)

// TestInPlaceResize runs the vertical loop through in-place resize: the
// updater, for an MPA in InPlaceOrRecreate mode, changes running pods'
// requests through the pods/resize subresource without recreating them.
//
// What this control plane does with a resize (tried by hand with kubectl
// against the testbed): kube-apiserver v1.36 serves pods/resize and, for a
// pod on a node that reports resize support, accepts it and bumps
// metadata.generation; it refuses a resize that removes a limit (Invalid)
// or whose requests exceed the node's allocatable (Forbidden: "node didn't
// have enough allocatable resources"). KWOK v0.8.0 has no kubelet: the
// testbed's extra KWOK Stage (hack/testbed) mirrors each running
// container's spec resources into status.containerStatuses[].resources and
// allocatedResources and echoes metadata.generation into
// status.observedGeneration, within about a second. For these pods it
// never sets the PodResizePending or PodResizeInProgress conditions: a
// deferred or infeasible resize as a kubelet reports it is played by
// another stage, for pods annotated to ask for it
// (TestResizeRefusedByKubelet), and the updater's timeout fallback for a
// deferred one is left to the unit tests. What is tested below is the API
// server refusing the resize: the
// updater then falls back to eviction, which it does only while the
// admission controller's heartbeat is fresh.
func TestInPlaceResize(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "inplace")
	const (
		app      = "resizee"
		replicas = 2
	)
	selector := "app=" + app

	if _, err := tb.Client.AppsV1().Deployments(ns).Create(ctx, oversizedDeployment(app, replicas), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	original, err := tb.WaitForRunningPods(ctx, ns, selector, replicas, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": app}), baseRate)
	getMPA := createSizedMPA(t, ns, app, v1alpha1.UpdateModeInPlaceOrRecreate, replicas)
	rec := startRecommender(t, ns)
	targets := targetLog{}
	targets.see(waitForRecommendation(t, rec, getMPA))

	// No admission controller runs, and the heartbeat Lease the updater is
	// pointed at (named for this test) never exists: the updater cannot
	// evict, so whatever changes, changes in place.
	heartbeat := "aware-admission-controller-" + ns
	upd := startUpdater(t, ns, heartbeat, "--update-interval=5s")

	start := time.Now()
	resized := map[string]*corev1.Pod{}
	framework.Eventually(t, 3*time.Minute, "both pods resized in place and the resize reported in status", func(ctx context.Context) (bool, error) {
		rec.running(t)
		upd.running(t)
		m, err := getMPA(ctx)
		if err != nil {
			return false, err
		}
		targets.see(m)
		for _, o := range original {
			p, err := tb.Client.CoreV1().Pods(ns).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("%w: pod %s: %v (it must not be recreated)", framework.ErrPermanent, o.Name, err)
			}
			if p.UID != o.UID || p.DeletionTimestamp != nil {
				return false, fmt.Errorf("%w: pod %s was replaced or is being deleted", framework.ErrPermanent, o.Name)
			}
			req := p.Spec.Containers[0].Resources.Requests
			if req.Cpu().MilliValue() > 100 || req.Memory().Value() > 256*mib {
				return false, fmt.Errorf("pod %s still requests %s/%s", p.Name, req.Cpu(), req.Memory())
			}
			if p.Status.ObservedGeneration != p.Generation {
				return false, fmt.Errorf("pod %s: observedGeneration %d, generation %d", p.Name, p.Status.ObservedGeneration, p.Generation)
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].Resources == nil || !cs[0].Resources.Requests.Cpu().Equal(*req.Cpu()) || !cs[0].Resources.Requests.Memory().Equal(*req.Memory()) {
				return false, fmt.Errorf("pod %s: status resources %+v, spec requests %v", p.Name, cs, req)
			}
			resized[p.Name] = p
		}
		return true, nil
	})
	t.Logf("both pods resized in place %s after the updater started", time.Since(start).Round(time.Second))

	t.Run("same pods, new requests from the recommendation", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		for _, o := range original {
			p := resized[o.Name]
			res := p.Spec.Containers[0].Resources
			cpu, mem := res.Requests.Cpu(), res.Requests.Memory()
			t.Logf("pod %s (uid %s, generation %d): requests %s/%s -> %s/%s, limits %s/%s",
				p.Name, p.UID, p.Generation, o.Spec.Containers[0].Resources.Requests.Cpu(), o.Spec.Containers[0].Resources.Requests.Memory(), cpu, mem, res.Limits.Cpu(), res.Limits.Memory())
			if p.Generation <= o.Generation {
				t.Errorf("pod %s: generation %d, not above %d: its spec did not change", p.Name, p.Generation, o.Generation)
			}
			if !targets.has(res.Requests) {
				t.Errorf("pod %s: requests %s/%s are none of the targets published meanwhile %v", p.Name, cpu, mem, keys(targets))
			}
			if cpu.MilliValue() < 10 || mem.Value() < 32*mib {
				t.Errorf("pod %s: requests %s/%s below the policy's minAllowed 10m/32Mi", p.Name, cpu, mem)
			}
			if r := float64(res.Limits.Cpu().MilliValue()) / float64(cpu.MilliValue()); math.Abs(r-3) > 0.05 {
				t.Errorf("pod %s: cpu limit %s for request %s, want the template's 3x", p.Name, res.Limits.Cpu(), cpu)
			}
			if r := float64(res.Limits.Memory().Value()) / float64(mem.Value()); math.Abs(r-2) > 0.01 {
				t.Errorf("pod %s: memory limit %s for request %s, want the template's 2x", p.Name, res.Limits.Memory(), mem)
			}
			if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 {
				t.Errorf("pod %s: container restarted %d times; resizePolicy NotRequired resizes without a restart", p.Name, cs.RestartCount)
			}
		}
		pods, err := tb.RunningPods(ctx, ns, selector)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != replicas {
			t.Errorf("%d running pods, want the original %d", len(pods), replicas)
		}
		resizes, _, err := upd.metric(ctx, "aware_updater_in_place_resizes_total", "result=success")
		if err != nil {
			t.Fatal(err)
		}
		evictions, _, err := upd.metric(ctx, "aware_updater_evictions_total")
		if err != nil {
			t.Fatal(err)
		}
		if resizes < replicas || evictions != 0 {
			t.Errorf("updater: %g successful resizes, %g evictions; want at least %d and none", resizes, evictions, replicas)
		}
		ev, err := tb.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ResizedInPlace,involvedObject.kind=Pod"})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[types.UID]bool{}
		for _, e := range ev.Items {
			seen[e.InvolvedObject.UID] = true
		}
		for _, o := range original {
			if !seen[o.UID] {
				t.Errorf("no ResizedInPlace event for pod %s", o.Name)
			}
		}
	})

	t.Run("a resize the API server refuses falls back to eviction", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		// A CPU floor above the node's allocatable (8 CPUs on the KWOK
		// node): the recommendation follows it, the API server refuses the
		// resize as Forbidden, and the updater turns to eviction, which
		// the stale heartbeat (no admission controller) holds back, since
		// the pod would come back at its template size.
		mpaClient, err := versioned.NewForConfig(tb.Config)
		if err != nil {
			t.Fatal(err)
		}
		p := `{"spec":{"resourcePolicy":{"containerPolicies":[{"containerName":"*","minAllowed":{"cpu":"9","memory":"32Mi"},"maxAllowed":{"cpu":"10","memory":"256Mi"},"controlledResources":["cpu","memory"]}]}}}`
		if _, err := mpaClient.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Patch(ctx, app, types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch MPA: %v", err)
		}
		staleBefore, _, err := upd.metric(ctx, "aware_updater_skips_total", "reason=AdmissionHeartbeatStale")
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "a refused resize, then an eviction held back by the stale heartbeat", func(ctx context.Context) (bool, error) {
			rec.running(t)
			upd.running(t)
			refused, _, err := upd.metric(ctx, "aware_updater_in_place_resizes_total", "result=error")
			if err != nil {
				return false, err
			}
			stale, _, err := upd.metric(ctx, "aware_updater_skips_total", "reason=AdmissionHeartbeatStale")
			if err != nil {
				return false, err
			}
			if refused < 1 || stale <= staleBefore {
				return false, fmt.Errorf("%g refused resizes, %g heartbeat-stale skips (%g before)", refused, stale, staleBefore)
			}
			return true, nil
		})
		ev, err := tb.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedResize"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range ev.Items {
			found = found || strings.Contains(e.Message, "allocatable")
		}
		if !found {
			t.Errorf("no FailedResize event naming the node's allocatable among %d", len(ev.Items))
		}
		// The skipped pods are the ones whose resize was refused: the
		// updater logs what each skipped pod wanted.
		log, err := os.ReadFile(upd.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), `wanted="ResizeInfeasible" reason="AdmissionHeartbeatStale"`) {
			t.Error("the updater never logged an eviction for a refused resize held back by the stale heartbeat")
		}
		for _, o := range original {
			cur, err := tb.Client.CoreV1().Pods(ns).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("pod %s: %v (it must not be evicted without a fresh heartbeat)", o.Name, err)
			}
			if cur.UID != o.UID || cur.DeletionTimestamp != nil {
				t.Errorf("pod %s was replaced or is being deleted", o.Name)
			}
			if got, was := cur.Spec.Containers[0].Resources.Requests.Cpu(), resized[o.Name].Spec.Containers[0].Resources.Requests.Cpu(); !got.Equal(*was) {
				t.Errorf("pod %s: cpu request %s, want %s still (the refused resize must not have applied)", o.Name, got, was)
			}
		}
	})
}
