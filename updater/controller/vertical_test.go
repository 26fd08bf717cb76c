package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/updater/logic"
)

func TestEvictsOutsideBoundsRespectingMinReplicas(t *testing.T) {
	cfg := testConfig()
	f := newFixture(t, cfg, 3, newMPA(v1alpha1.UpdateModeRecreate, 3, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"), newPod("c", "1", "1Gi"))
	f.run(0)
	// a and b are outside bounds; evicting both would leave 1 < 2 alive.
	if w := f.writes(); len(w) != 1 || !strings.HasPrefix(w[0], "create/eviction/") {
		t.Fatalf("writes = %v, want one eviction", w)
	}
	if got := counter(t, f.ctrl.metrics.evictions, string(logic.ReasonOutsideBounds), resultSuccess); got != 1 {
		t.Errorf("evictions = %g", got)
	}
	if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipMinReplicas)); got != 1 {
		t.Errorf("min-replica skips = %g", got)
	}
	if ev := f.events(); !hasEvent(ev, EventEvicted) {
		t.Errorf("events %v", ev)
	}
	// The eviction carries a UID precondition.
	for _, a := range f.kube.Actions() {
		if ca, ok := a.(clienttesting.CreateAction); ok && a.GetSubresource() == "eviction" {
			ev := ca.GetObject().(*policyv1.Eviction)
			if ev.DeleteOptions == nil || ev.DeleteOptions.Preconditions == nil || *ev.DeleteOptions.Preconditions.UID != types.UID(ev.Name+"-uid") {
				t.Errorf("eviction without UID precondition: %+v", ev.DeleteOptions)
			}
		}
	}
}

func TestEvictionBlockedByPDB(t *testing.T) {
	cfg := testConfig()
	cfg.Vertical.MinReplicas = 1
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeRecreate, 2, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"))
	blocked := true
	f.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" && blocked {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return false, nil, nil
	})
	f.run(0)
	if got := counter(t, f.ctrl.metrics.evictions, string(logic.ReasonOutsideBounds), resultBlockedByPDB); got != 1 {
		t.Fatalf("blocked evictions = %g", got)
	}
	if ev := f.events(); !hasEvent(ev, EventEvictionBlocked) {
		t.Errorf("events %v", ev)
	}
	if _, err := f.kube.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("blocked pod was deleted: %v", err)
	}
	// Retried on the next loop; this time the budget allows it.
	blocked = false
	f.renewLease(time.Minute)
	f.run(time.Minute)
	if got := counter(t, f.ctrl.metrics.evictions, string(logic.ReasonOutsideBounds), resultSuccess); got != 1 {
		t.Fatalf("retry evictions = %g", got)
	}
}

func TestAdmissionHeartbeatGuard(t *testing.T) {
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"), newPod("c", "1", "1Gi")}
	}
	cases := []struct {
		name  string
		lease *coordinationv1.Lease
		evict bool
	}{
		{"fresh", freshLease(t0.Add(-10 * time.Second)), true},
		{"expired", freshLease(t0.Add(-31 * time.Second)), false},
		{"missing", nil, false},
		{"no renew time", func() *coordinationv1.Lease { l := freshLease(t0); l.Spec.RenewTime = nil; return l }(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(), 3, newMPA(v1alpha1.UpdateModeRecreate, 3, 0), tc.lease, pods()...)
			f.run(0)
			evicted := len(f.writes()) == 1
			if evicted != tc.evict {
				t.Fatalf("writes %v, want eviction=%v", f.writes(), tc.evict)
			}
			wantFresh := 0.0
			if tc.evict {
				wantFresh = 1
			}
			if got := testutil.ToFloat64(f.ctrl.metrics.admissionFresh); got != wantFresh {
				t.Errorf("admission fresh gauge = %g", got)
			}
			if !tc.evict && counter(t, f.ctrl.metrics.skips, string(logic.SkipAdmissionStale)) != 1 {
				t.Errorf("no AdmissionHeartbeatStale skip recorded")
			}
		})
	}
}

func TestEvictionRateLimits(t *testing.T) {
	cfg := testConfig()
	cfg.Vertical.MinReplicas = 1
	cfg.GlobalEvictionRate, cfg.GlobalEvictionBurst = 10, 10
	cfg.WorkloadEvictionRate, cfg.WorkloadEvictionBurst = 1.0/60, 1 // one per minute
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		pods = append(pods, newPod(n, "100m", "128Mi"))
	}
	f := newFixture(t, cfg, 5, newMPA(v1alpha1.UpdateModeRecreate, 5, 0), freshLease(t0), pods...)
	f.run(0)
	if n := len(f.writes()); n != 1 {
		t.Fatalf("evictions in first loop = %d, want 1", n)
	}
	if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipWorkloadRateLimit)); got != 4 {
		t.Errorf("rate-limit skips = %g, want 4", got)
	}
	// Ten seconds on (lease renewed) the workload bucket is still empty.
	f.renewLease(10 * time.Second)
	f.run(10 * time.Second)
	if n := len(f.writes()); n != 1 {
		t.Fatalf("writes after 10 s = %v", f.writes())
	}
	// A minute on, one more.
	f.renewLease(61 * time.Second)
	f.run(61 * time.Second)
	if n := len(f.writes()); n != 2 {
		t.Fatalf("writes after 61 s = %v", f.writes())
	}
}

func TestInPlaceResizeAndFallback(t *testing.T) {
	cfg := testConfig()
	cfg.Vertical.MinReplicas = 1
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 2, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"))
	f.run(0)
	var resized *corev1.Pod
	for _, a := range f.kube.Actions() {
		if ua, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "resize" {
			resized = ua.GetObject().(*corev1.Pod)
		}
	}
	if resized == nil || resized.Name != "a" {
		t.Fatalf("no resize of a: %v", f.writes())
	}
	res := resized.Spec.Containers[0].Resources
	if !res.Requests.Cpu().Equal(resource.MustParse("1")) || !res.Requests.Memory().Equal(resource.MustParse("1Gi")) ||
		!res.Limits.Memory().Equal(resource.MustParse("1Gi")) {
		t.Errorf("resized resources = %v", res)
	}
	if _, ok := res.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a CPU limit appeared: %v", res.Limits)
	}
	if counter(t, f.ctrl.metrics.resizes, string(logic.ReasonOutsideBounds), resultSuccess) != 1 {
		t.Error("resize not counted")
	}

	// The API server refuses a resize (e.g. the feature is off): next loop
	// evicts instead.
	f2 := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 2, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"))
	f2.kube.PrependReactor("update", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "resize" {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil)
		}
		return false, nil, nil
	})
	f2.run(0)
	f2.run(time.Second)
	if w := f2.writes(); !slices.Equal(w, []string{"update/resize/a", "create/eviction/a"}) {
		t.Fatalf("writes = %v, want resize then eviction", w)
	}
	if counter(t, f2.ctrl.metrics.evictions, string(logic.ReasonResizeInfeasible), resultSuccess) != 1 {
		t.Error("fallback eviction not counted as ResizeInfeasible")
	}

	// The kubelet reports the resize infeasible: evict.
	inf := newPod("a", "1", "1Gi")
	inf.Status.Conditions = append(inf.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonInfeasible, LastTransitionTime: metav1.Time{Time: t0}})
	f3 := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 2, 0), freshLease(t0), inf, newPod("b", "1", "1Gi"))
	f3.run(0)
	if w := f3.writes(); !slices.Equal(w, []string{"create/eviction/a"}) {
		t.Fatalf("infeasible: writes = %v", w)
	}
}
