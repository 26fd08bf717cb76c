package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/updater/logic"
)

func TestHorizontalScalesWithinMaxAndRecordsEvents(t *testing.T) {
	m := newMPA(v1alpha1.UpdateModeRecreate, 20, time.Minute)
	f := newFixture(t, testConfig(), 4, m, freshLease(t0))
	f.run(0)
	// Default behavior: +max(100%, 4 pods) per 15 s → 8, then capped at max 10.
	if !slices.Equal(f.target.updates, []int32{8}) {
		t.Fatalf("updates = %v, want [8]", f.target.updates)
	}
	f.run(20 * time.Second)
	if !slices.Equal(f.target.updates, []int32{8, 10}) {
		t.Fatalf("updates = %v, want [8 10]", f.target.updates)
	}
	f.run(40 * time.Second)
	if len(f.target.updates) != 2 {
		t.Fatalf("scaled beyond max: %v", f.target.updates)
	}
	ev := f.events()
	if !hasEvent(ev, "Scaled Scaled Deployment/web from 4 to 8") {
		t.Errorf("events %v lack the scale event", ev)
	}
	if got := counter(t, f.ctrl.metrics.scaleOperations, "up", resultSuccess); got != 2 {
		t.Errorf("scale operations = %g, want 2", got)
	}
	// lastScaleTime recorded through the status subresource.
	var patched bool
	for _, a := range f.mpas.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" && strings.Contains(string(p.GetPatch()), "lastScaleTime") {
			patched = true
		}
	}
	if !patched {
		t.Error("lastScaleTime not patched")
	}
}

// The recommender's variant may let the count grow faster than the HPA's
// +100% per 15 s; the updater must not cut it back, but an autoscaler's own
// behavior.scaleUp still holds.
func TestScaleUpPercent(t *testing.T) {
	hundred := int32(100)
	period := int32(15)
	for _, tc := range []struct {
		name    string
		percent int32
		own     bool // the autoscaler sets behavior.scaleUp: +100% per 15 s
		want    int32
	}{
		{"HPA default: doubling", 0, false, 8},
		{"scale-up=400", 400, false, 20},
		{"scale-up=150", 150, false, 10},
		{"the autoscaler's own rules win", 400, true, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA(v1alpha1.UpdateModeRecreate, 20, time.Minute)
			m.Spec.Constraints.Global.MaxReplicas = ptr.To[int32](50)
			if tc.own {
				m.Spec.Constraints.Global.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: hundred, PeriodSeconds: period}}},
				}
			}
			cfg := testConfig()
			cfg.ScaleUpPercent = tc.percent
			f := newFixture(t, cfg, 4, m, freshLease(t0))
			f.run(0)
			if !slices.Equal(f.target.updates, []int32{tc.want}) {
				t.Fatalf("updates = %v, want [%d]", f.target.updates, tc.want)
			}
		})
	}
}

// An autoscaler whose target an older one governs is skipped, whatever it
// recommends; the older one acts.
func TestAmbiguousTargetSkipped(t *testing.T) {
	older := newMPA(v1alpha1.UpdateModeRecreate, 5, time.Minute)
	older.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	newer := newMPA(v1alpha1.UpdateModeRecreate, 9, time.Minute)
	newer.Name, newer.UID, newer.CreationTimestamp = "web-b", "mpa-b", metav1.NewTime(t0.Add(-time.Minute))
	for _, tc := range []struct {
		name string
		mpas []*v1alpha1.MultidimPodAutoscaler
		want []int32
	}{
		{"the newer alone acts", []*v1alpha1.MultidimPodAutoscaler{newer}, []int32{8}},
		{"the older governs", []*v1alpha1.MultidimPodAutoscaler{newer, older}, []int32{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(), 4, tc.mpas[0], freshLease(t0))
			for _, m := range tc.mpas[1:] {
				if err := f.mpaIdx.Add(m); err != nil {
					t.Fatal(err)
				}
			}
			f.run(0)
			if !slices.Equal(f.target.updates, tc.want) {
				t.Fatalf("updates = %v, want %v", f.target.updates, tc.want)
			}
			if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipAmbiguousTarget)); got != float64(len(tc.mpas)-1) {
				t.Errorf("ambiguous-target skips = %g, want %d", got, len(tc.mpas)-1)
			}
		})
	}
}

// TestReplicasLeftToARival: while another autoscaler owns the replica
// count (the recommender left desiredReplicas empty with
// ConfigUnsupported/ConflictingAutoscaler), the updater does not scale,
// not even a count above maxReplicas, which an HPA may have set; a
// desiredReplicas of 0 without that condition still brings the count
// within the bounds.
func TestReplicasLeftToARival(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rival      bool
		noVertical bool
		want       []int32
	}{
		{"rival owns the replicas", true, false, nil},
		{"rivals own both dimensions", true, true, nil},
		{"no recommendation yet", false, false, []int32{10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA(v1alpha1.UpdateModeAuto, 0, time.Minute)
			if tc.noVertical {
				m.Status.Recommendation = nil
			}
			if tc.rival {
				m.Status.Conditions = []v1alpha1.MultidimPodAutoscalerCondition{{
					Type: v1alpha1.ConfigUnsupported, Status: corev1.ConditionTrue, Reason: mpa.ReasonConflictingAutoscaler}}
			}
			f := newFixture(t, testConfig(), 14, m, freshLease(t0))
			f.run(0)
			if !slices.Equal(f.target.updates, tc.want) {
				t.Fatalf("updates = %v, want %v", f.target.updates, tc.want)
			}
			if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipRivalAutoscaler)); (got == 1) != tc.rival {
				t.Errorf("rival skips = %g", got)
			}
		})
	}
}

func TestHorizontalScaleDownWaitsForWindow(t *testing.T) {
	m := newMPA(v1alpha1.UpdateModeAuto, 2, 0)
	stab := int32(120)
	m.Spec.Constraints.Global.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &stab},
	}
	f := newFixture(t, testConfig(), 6, m, freshLease(t0))
	for _, at := range []time.Duration{0, 30 * time.Second, 60 * time.Second, 119 * time.Second} {
		m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at)}
		f.run(at)
	}
	if len(f.target.updates) != 0 {
		t.Fatalf("scaled down within the window: %v", f.target.updates)
	}
	m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(125 * time.Second)}
	f.run(125 * time.Second)
	if !slices.Equal(f.target.updates, []int32{2}) {
		t.Fatalf("after the window: %v, want [2]", f.target.updates)
	}
}

// An agent's scale-in that grows the pods to keep the capacity is not held
// for the scale-down window (the window holds capacity in the
// recommendation's per-pod CPU): on the real node the updater resized both
// of an agent's pods to 807m, the node deferred one, and the scale-in to
// the one grown pod came a loop later (docs/real-node-rounds.md, round
// twenty-seven). The same scale-in without the growth waits.
func TestHorizontalScaleInWithGrowthNotHeld(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grown string
		want  []int32
	}{
		{"grown to keep the capacity", "2500m", []int32{1}},
		{"the same size", "1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA(v1alpha1.UpdateModeAuto, 2, 0)
			m.Status.RL = &v1alpha1.RLStatus{Source: v1alpha1.SourceAgent}
			f := newFixture(t, testConfig(), 2, m, freshLease(t0))
			for _, at := range []time.Duration{0, 15 * time.Second, 30 * time.Second} {
				m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at)}
				f.run(at)
			}
			if len(f.target.updates) != 0 {
				t.Fatalf("scaled at a steady recommendation: %v", f.target.updates)
			}
			m.Status.DesiredReplicas = 1
			m.Status.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceCPU] = resource.MustParse(tc.grown)
			m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(45 * time.Second)}
			f.run(45 * time.Second)
			if !slices.Equal(f.target.updates, tc.want) {
				t.Errorf("scale updates %v, want %v", f.target.updates, tc.want)
			}
		})
	}
}

func TestHorizontalModesThatDoNotScale(t *testing.T) {
	for _, mode := range []v1alpha1.UpdateMode{v1alpha1.UpdateModeOff, v1alpha1.UpdateModeInitial} {
		f := newFixture(t, testConfig(), 2, newMPA(mode, 8, 0), freshLease(t0), newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"), newPod("c", "100m", "128Mi"))
		f.run(0)
		if len(f.target.updates) != 0 || len(f.writes()) != 0 {
			t.Errorf("mode %s acted: scale %v writes %v", mode, f.target.updates, f.writes())
		}
	}
}

func TestScaleFailureIsReported(t *testing.T) {
	f := newFixture(t, testConfig(), 2, newMPA(v1alpha1.UpdateModeAuto, 4, 0), freshLease(t0))
	f.target.err = errors.New("boom")
	f.run(0)
	if counter(t, f.ctrl.metrics.scaleOperations, "up", resultError) != 1 {
		t.Error("failed scale not counted")
	}
	if ev := f.events(); !hasEvent(ev, EventScaleFailed) {
		t.Errorf("events %v", ev)
	}
}
