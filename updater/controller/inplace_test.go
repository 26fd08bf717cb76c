package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/updater/logic"
)

// syncMPA copies the stored autoscaler into the lister's cache, as the
// informer would, so the next loop sees the status the last one wrote.
func (f *fixture) syncMPA() *v1alpha1.MultidimPodAutoscaler {
	f.t.Helper()
	m, err := f.mpas.Tracker().Get(schema.GroupVersionResource{Group: v1alpha1.SchemeGroupVersion.Group, Version: "v1alpha1", Resource: "multidimpodautoscalers"}, "ns", "web")
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.mpaIdx.Update(m); err != nil {
		f.t.Fatal(err)
	}
	return m.(*v1alpha1.MultidimPodAutoscaler)
}

// statusPatches counts the writes to the autoscaler's status that set the
// ResizeInfeasible condition.
func (f *fixture) statusPatches() int {
	n := 0
	for _, a := range f.mpas.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" && strings.Contains(string(p.GetPatch()), string(v1alpha1.ResizeInfeasible)) {
			n++
		}
	}
	return n
}

// syncPods copies the stored pods into the pod cache, so a loop sees what
// the last one resized.
func (f *fixture) syncPods() {
	f.t.Helper()
	l, err := f.kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range l.Items {
		if err := f.podIdx.Update(&l.Items[i]); err != nil {
			f.t.Fatal(err)
		}
	}
}

func resizeCondition(m *v1alpha1.MultidimPodAutoscaler) *v1alpha1.MultidimPodAutoscalerCondition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == v1alpha1.ResizeInfeasible {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

func pending(p *corev1.Pod, reason, msg string) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
		Reason: reason, Message: msg, LastTransitionTime: metav1.Time{Time: t0.Add(-time.Hour)}})
	return p
}

// TestInPlaceModeNeverEvicts: pods that InPlaceOrRecreate would evict
// (refused resize, deferred past the timeout, infeasible) are not evicted
// in InPlace mode, over several loops, and a single-replica workload,
// which no eviction may touch, is still resized.
func TestInPlaceModeNeverEvicts(t *testing.T) {
	cfg := testConfig()
	cases := []struct {
		name  string
		pods  []*corev1.Pod
		react bool // the API server refuses every resize
		want  []string
	}{
		{"resize, single replica", []*corev1.Pod{newPod("a", "100m", "128Mi")}, false, []string{"update/resize/a"}},
		{"refused resize is not retried or evicted", []*corev1.Pod{newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi")}, true, []string{"update/resize/a"}},
		{"deferred an hour: left to the kubelet", []*corev1.Pod{pending(newPod("a", "1", "1Gi"), corev1.PodReasonDeferred, ""), newPod("b", "1", "1Gi")}, false, nil},
		{"infeasible: not evicted, not re-sent", []*corev1.Pod{pending(newPod("a", "1", "1Gi"), corev1.PodReasonInfeasible, "Node didn't have enough capacity"), newPod("b", "1", "1Gi")}, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, cfg, int32(len(tc.pods)), newMPA(v1alpha1.UpdateModeInPlace, int32(len(tc.pods)), 0), freshLease(t0), tc.pods...)
			if tc.react {
				f.kube.PrependReactor("update", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() == "resize" {
						return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil)
					}
					return false, nil, nil
				})
			}
			for i := range 4 {
				f.renewLease(time.Duration(i) * time.Minute)
				f.run(time.Duration(i) * time.Minute)
				f.syncMPA()
				f.syncPods()
			}
			if w := f.writes(); !slices.Equal(w, tc.want) {
				t.Errorf("writes = %v, want %v", w, tc.want)
			}
		})
	}
}

// TestInPlaceInfeasibleCondition: an infeasible resize is reported once in
// the ResizeInfeasible condition (with the pod and the kubelet's message),
// not patched again while nothing changes, re-sent when the recommendation
// changes, and the condition turns False when the pod fits again.
func TestInPlaceInfeasibleCondition(t *testing.T) {
	cfg := testConfig()
	// The spec holds what the last resize asked for (1 CPU, the current
	// target); the kubelet says it cannot be done.
	a := pending(newPod("a", "1", "1Gi"), corev1.PodReasonInfeasible, "Node didn't have enough capacity: cpu, requested: 1000, capacity: 500")
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlace, 2, 0), freshLease(t0), a, newPod("b", "1", "1Gi"))
	f.run(0)
	m := f.syncMPA()
	c := resizeCondition(m)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonInfeasible ||
		!strings.Contains(c.Message, "pod a: Node didn't have enough capacity") {
		t.Fatalf("condition = %+v", c)
	}
	if ev := f.events(); !hasEvent(ev, EventResizeInfeasible) {
		t.Errorf("events = %v", ev)
	}
	if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipResizeInfeasible)); got != 1 {
		t.Errorf("ResizeInfeasible skips = %g", got)
	}
	for i := 1; i <= 3; i++ {
		f.run(time.Duration(i) * time.Minute)
		f.syncMPA()
	}
	if n := f.statusPatches(); n != 1 {
		t.Errorf("condition written %d times over 4 loops, want once", n)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes while infeasible and unchanged = %v", w)
	}

	// A new recommendation (500m, what fits) is a new request: sent once.
	m = f.syncMPA().DeepCopy()
	m.Status.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceCPU] = resource.MustParse("500m")
	m.Status.Recommendation.ContainerRecommendations[0].LowerBound[corev1.ResourceCPU] = resource.MustParse("250m")
	if err := f.mpaIdx.Update(m); err != nil {
		t.Fatal(err)
	}
	f.run(4 * time.Minute)
	if w := f.writes(); !slices.Equal(w, []string{"update/resize/a"}) {
		t.Fatalf("writes after the recommendation changed = %v", w)
	}

	// The kubelet applied it: the pod is no longer infeasible, and the
	// condition says so.
	fit := newPod("a", "500m", "1Gi")
	if err := f.podIdx.Update(fit); err != nil {
		t.Fatal(err)
	}
	f.run(5 * time.Minute)
	if c := resizeCondition(f.syncMPA()); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonNoInfeasibleResize {
		t.Errorf("condition after the resize fit = %+v", c)
	}
}

// TestInPlaceOrRecreateHasNoCondition: the condition is InPlace's; in
// InPlaceOrRecreate an infeasible pod is evicted and nothing is written to
// the autoscaler's conditions.
func TestInPlaceOrRecreateHasNoCondition(t *testing.T) {
	cfg := testConfig()
	cfg.Vertical.MinReplicas = 1
	a := pending(newPod("a", "1", "1Gi"), corev1.PodReasonInfeasible, "no room")
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 2, 0), freshLease(t0), a, newPod("b", "1", "1Gi"))
	f.run(0)
	if w := f.writes(); !slices.Equal(w, []string{"create/eviction/a"}) {
		t.Errorf("writes = %v", w)
	}
	if n := f.statusPatches(); n != 0 {
		t.Errorf("condition written %d times", n)
	}
}

// TestStartupBoostEndsOnceReady: a pod the admission controller boosted
// (its annotation, its CPU request still the boosted one) is left alone
// while it starts, even though its CPU is outside the recommendation's
// bounds, and is resized back in place once Ready, in Recreate mode too.
func TestStartupBoostEndsOnceReady(t *testing.T) {
	cfg := testConfig()
	m := newMPA(v1alpha1.UpdateModeRecreate, 2, 0)
	factor := 3.0
	m.Spec.ResourcePolicy = &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{
		ContainerName: "*", StartupBoost: &v1alpha1.StartupBoost{CPU: &v1alpha1.CPUStartupBoost{Factor: &factor}}}}}
	a := newPod("a", "3", "1Gi")
	a.Annotations = map[string]string{mpa.StartupBoostAnnotation: `{"app":{"boosted":"3","request":"1"}}`}
	a.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	f := newFixture(t, cfg, 2, m, freshLease(t0), a, newPod("b", "1", "1Gi"))
	f.run(0)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("writes while starting = %v", w)
	}
	if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipStartupBoost)); got != 1 {
		t.Errorf("StartupBoost skips = %g", got)
	}
	ready := a.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0}}}
	if err := f.podIdx.Update(ready); err != nil {
		t.Fatal(err)
	}
	f.renewLease(time.Second)
	f.run(time.Second)
	var resized *corev1.Pod
	for _, act := range f.kube.Actions() {
		if ua, ok := act.(clienttesting.UpdateAction); ok && act.GetSubresource() == "resize" {
			resized = ua.GetObject().(*corev1.Pod)
		}
	}
	if w := f.writes(); !slices.Equal(w, []string{"update/resize/a"}) || resized == nil {
		t.Fatalf("writes once Ready = %v", w)
	}
	if got := resized.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("CPU request after the boost = %s, want the recommendation's 1", got.String())
	}
	if counter(t, f.ctrl.metrics.resizes, string(logic.ReasonStartupBoostEnded), resultSuccess) != 1 {
		t.Error("resize back not counted")
	}
	// Once resized, the CPU request is no longer the boosted one: the pod
	// is sized as any other and nothing more happens.
	f.syncPods()
	f.run(2 * time.Second)
	if w := f.writes(); len(w) != 1 {
		t.Errorf("writes after the boost ended = %v", w)
	}
}

// TestRefusedResizeForgottenWithThePod: a refused resize is remembered
// while its pod exists (InPlace never evicts it, so nothing else would
// forget it) and dropped once the pod is gone.
func TestRefusedResizeForgottenWithThePod(t *testing.T) {
	a := newPod("a", "100m", "128Mi")
	f := newFixture(t, testConfig(), 2, newMPA(v1alpha1.UpdateModeInPlace, 2, 0), freshLease(t0), a, newPod("b", "1", "1Gi"))
	f.kube.PrependReactor("update", "pods", func(act clienttesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() == "resize" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "a", nil)
		}
		return false, nil, nil
	})
	f.run(0)
	f.run(time.Minute)
	if _, ok := f.ctrl.resizeRejected[a.UID]; !ok {
		t.Fatal("refused resize not remembered")
	}
	if err := f.podIdx.Delete(a); err != nil {
		t.Fatal(err)
	}
	f.run(2 * time.Minute)
	if n := len(f.ctrl.resizeRejected); n != 0 {
		t.Errorf("%d refused resizes remembered after the pod left", n)
	}
}

// TestResizeOfAPodGoingAway: a pod the loop listed may be deleted before
// its resize lands, typically by the ReplicaSet controller after the same
// loop scaled the target in. That is not a failure (no Warning, counted as
// pod_gone); a conflict on a pod that stays is retried on a fresh read; a
// NotFound for a pod that exists is the API server's refusal.
func TestResizeOfAPodGoingAway(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	cases := []struct {
		name string
		// first answers the first resize; later ones reach the tracker.
		first      func(f *fixture, a *corev1.Pod) error
		wantWrites []string
		wantResult string
		wantEvent  string // a substring of the autoscaler's events; "" none
	}{
		{"being deleted after the list", func(f *fixture, a *corev1.Pod) error {
			d := a.DeepCopy()
			d.DeletionTimestamp = &metav1.Time{Time: t0}
			if err := f.kube.Tracker().Update(pods, d, "ns"); err != nil {
				t.Fatal(err)
			}
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", nil)
		}, []string{"update/resize/a"}, resultPodGone, ""},
		{"deleted after the list", func(f *fixture, a *corev1.Pod) error {
			if err := f.kube.Tracker().Delete(pods, "ns", "a"); err != nil {
				t.Fatal(err)
			}
			return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a")
		}, []string{"update/resize/a"}, resultPodGone, ""},
		{"replaced by a successor of the same name", func(f *fixture, a *corev1.Pod) error {
			s := a.DeepCopy()
			s.UID = "successor"
			if err := f.kube.Tracker().Update(pods, s, "ns"); err != nil {
				t.Fatal(err)
			}
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", nil)
		}, []string{"update/resize/a"}, resultPodGone, ""},
		{"conflict on a pod that stays: retried", func(*fixture, *corev1.Pod) error {
			return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", nil)
		}, []string{"update/resize/a", "update/resize/a"}, resultSuccess, "Resized pod a"},
		{"no resize subresource", func(*fixture, *corev1.Pod) error {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a")
		}, []string{"update/resize/a"}, resultError, "Resizing pod a in place"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newPod("a", "100m", "128Mi")
			f := newFixture(t, testConfig(), 1, newMPA(v1alpha1.UpdateModeInPlace, 1, 0), freshLease(t0), a)
			sent := 0
			f.kube.PrependReactor("update", "pods", func(act clienttesting.Action) (bool, runtime.Object, error) {
				if act.GetSubresource() != "resize" {
					return false, nil, nil
				}
				if sent++; sent == 1 {
					return true, nil, tc.first(f, a)
				}
				return false, nil, nil
			})
			f.run(0)
			if w := f.writes(); !slices.Equal(w, tc.wantWrites) {
				t.Errorf("writes = %v, want %v", w, tc.wantWrites)
			}
			for _, r := range []string{resultSuccess, resultError, resultPodGone} {
				want := 0.0
				if r == tc.wantResult {
					want = 1
				}
				if got := counter(t, f.ctrl.metrics.resizes, string(logic.ReasonOutsideBounds), r); got != want {
					t.Errorf("resizes{result=%s} = %g, want %g", r, got, want)
				}
			}
			ev := f.events()
			if tc.wantEvent == "" && hasEvent(ev, "Warning") {
				t.Errorf("events = %v, want no warning", ev)
			}
			if tc.wantEvent != "" && !hasEvent(ev, tc.wantEvent) {
				t.Errorf("events = %v, want %q", ev, tc.wantEvent)
			}
		})
	}
}
