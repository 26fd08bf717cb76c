//go:build e2e

package e2e

import (
	"context"
	"fmt"
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

// resizeAnswerAnnotation makes the testbed's KWOK answer every in-place
// resize of the pod with its value, Deferred or Infeasible, in the pod's
// PodResizePending condition, as a kubelet of Kubernetes 1.33+ does, and
// not apply it (hack/testbed/kwok.sh: write_resize_refused_stage).
const resizeAnswerAnnotation = "aware.dev/e2e-resize"

// refusedHold is how long the tests watch the updater not send a refused
// resize again: six of its loops (--update-interval=5s).
const refusedHold = 30 * time.Second

// TestResizeRefusedByKubelet runs the updater in mode InPlace against pods
// whose kubelet (the testbed's KWOK stage) does not apply their resize:
// one answers Infeasible, the other Deferred. The autoscaler pins the pod
// size at 50m/128Mi, far from the template's 300m/512Mi, so the updater
// resizes at once and the target cannot drift from loop to loop. What the
// updater does with each answer (updater/logic: DecideVertical):
//
//   - Infeasible: the same request would fail again, so it is not sent
//     again; the autoscaler's ResizeInfeasible condition says which pods
//     and why. A new recommendation is a new request: it is sent.
//   - Deferred: in mode InPlace the updater leaves it to the kubelet,
//     which retries as room frees up: nothing is sent again, nothing is
//     evicted, and it is not reported as infeasible.
func TestResizeRefusedByKubelet(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	for _, answer := range []string{corev1.PodReasonInfeasible, corev1.PodReasonDeferred} {
		t.Run(answer, func(t *testing.T) {
			tb.DumpLogsOnFailure(t)
			resizeRefused(t, answer)
		})
	}
}

func resizeRefused(t *testing.T, answer string) {
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "resize-"+map[string]string{corev1.PodReasonInfeasible: "infeasible", corev1.PodReasonDeferred: "deferred"}[answer])
	const (
		app      = "resizee"
		replicas = 2
	)
	selector := "app=" + app
	dep := oversizedDeployment(app, replicas)
	dep.Spec.Template.Annotations = map[string]string{resizeAnswerAnnotation: answer}
	if _, err := tb.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	original, err := tb.WaitForRunningPods(ctx, ns, selector, replicas, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": app}), baseRate)
	getMPA := createMPA(t, ns, mpaManifest{
		name: app, mode: v1alpha1.UpdateModeInPlace, minCPU: "50m", maxCPU: "50m", minMemory: "128Mi", maxMemory: "128Mi",
		minReplicas: replicas, maxReplicas: replicas,
	})
	rec := startRecommender(t, ns)
	waitForRecommendation(t, rec, getMPA)
	// No admission controller renews the heartbeat Lease: the updater
	// cannot evict, whatever it decides.
	upd := startUpdater(t, ns, "aware-admission-controller-"+ns, "--leader-elect=false", "--update-interval=5s")

	// Each pod's resize sent, observed and answered: the spec holds the
	// pinned size, the status the template's, and PodResizePending the
	// answer.
	refused := func(ctx context.Context, cpu string) (map[string]*corev1.Pod, error) {
		pods := map[string]*corev1.Pod{}
		for _, o := range original {
			p, err := tb.Client.CoreV1().Pods(ns).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("%w: pod %s: %v (it must not be recreated)", framework.ErrPermanent, o.Name, err)
			}
			if p.UID != o.UID || p.DeletionTimestamp != nil {
				return nil, fmt.Errorf("%w: pod %s was replaced or is being deleted", framework.ErrPermanent, o.Name)
			}
			if got := p.Spec.Containers[0].Resources.Requests.Cpu(); got.String() != cpu {
				return nil, fmt.Errorf("pod %s requests cpu %s, want %s", p.Name, got, cpu)
			}
			if p.Status.ObservedGeneration != p.Generation {
				return nil, fmt.Errorf("pod %s: observedGeneration %d, generation %d", p.Name, p.Status.ObservedGeneration, p.Generation)
			}
			var pending *corev1.PodCondition
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == corev1.PodResizePending {
					pending = &p.Status.Conditions[i]
				}
			}
			if pending == nil || pending.Status != corev1.ConditionTrue || pending.Reason != answer {
				return nil, fmt.Errorf("pod %s: PodResizePending %+v", p.Name, pending)
			}
			if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].Resources == nil || st[0].Resources.Requests.Cpu().String() != "300m" {
				return nil, fmt.Errorf("%w: pod %s: the refused resize was applied: status %+v", framework.ErrPermanent, p.Name, st)
			}
			pods[p.Name] = p
		}
		return pods, nil
	}
	var answered map[string]*corev1.Pod
	framework.Eventually(t, 3*time.Minute, "both pods' resize to 50m sent and answered "+answer, func(ctx context.Context) (bool, error) {
		rec.running(t)
		upd.running(t)
		var err error
		answered, err = refused(ctx, "50m")
		return err == nil, err
	})
	sent := mustMetric(t, upd, "aware_updater_in_place_resizes_total", "result=success")
	t.Logf("both pods answered %s; the updater sent %g resizes", answer, sent)

	// The answer is heard: for a while nothing is sent again, and
	// nothing is evicted.
	skip := map[string]string{corev1.PodReasonInfeasible: "ResizeInfeasible", corev1.PodReasonDeferred: "ResizePending"}[answer]
	// A counter with no sample yet is not exposed: 0.
	skips := func() float64 {
		n, _, err := upd.metric(ctx, "aware_updater_skips_total", "reason="+skip)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	skipsBefore := skips()
	time.Sleep(refusedHold)
	upd.running(t)
	if n := mustMetric(t, upd, "aware_updater_in_place_resizes_total", "result=success"); n != sent {
		t.Errorf("%g resizes sent in %s after the %s answer, %g before: a refused resize was sent again", n, refusedHold, answer, sent)
	}
	if n := skips(); n <= skipsBefore {
		t.Errorf("%g %s skips in %s, %g before: the updater did not count the answer as a reason to wait", n, skip, refusedHold, skipsBefore)
	}
	if n, _, err := upd.metric(ctx, "aware_updater_evictions_total"); err != nil || n != 0 {
		t.Errorf("the updater counted %g evictions (%v)", n, err)
	}
	now, err := refused(ctx, "50m")
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range now {
		if p.Generation != answered[name].Generation {
			t.Errorf("pod %s: generation %d, %d when answered: its spec changed again", name, p.Generation, answered[name].Generation)
		}
	}
	m, err := getMPA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := condition(m, v1alpha1.ResizeInfeasible)
	t.Logf("after %s: ResizeInfeasible %s", refusedHold, condString(c))

	if answer == corev1.PodReasonDeferred {
		// Deferred is not infeasible: the kubelet may still apply it.
		if c != nil && c.Status == corev1.ConditionTrue {
			t.Errorf("ResizeInfeasible %s for a deferred resize", condString(c))
		}
		return
	}
	if c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("ResizeInfeasible %s, want True for the kubelet's Infeasible", condString(c))
	}
	for _, o := range original {
		if !strings.Contains(c.Message, o.Name) {
			t.Errorf("ResizeInfeasible message %q does not name pod %s", c.Message, o.Name)
		}
	}

	// A new recommendation is a new request, sent once more.
	mpaClient, err := versioned.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"spec":{"resourcePolicy":{"containerPolicies":[{"containerName":"*","minAllowed":{"cpu":"60m","memory":"128Mi"},"maxAllowed":{"cpu":"60m","memory":"128Mi"},"controlledResources":["cpu","memory"]}]}}}`
	if _, err := mpaClient.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Patch(ctx, app, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch MPA: %v", err)
	}
	framework.Eventually(t, 2*time.Minute, "both pods' resize to the new 60m sent and answered "+answer, func(ctx context.Context) (bool, error) {
		rec.running(t)
		upd.running(t)
		_, err := refused(ctx, "60m")
		return err == nil, err
	})
	if n := mustMetric(t, upd, "aware_updater_in_place_resizes_total", "result=success"); n < sent+replicas {
		t.Errorf("%g resizes sent after the recommendation changed, %g before: want one more per pod", n, sent)
	}
}
