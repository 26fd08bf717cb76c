package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

func TestTargetMissingOrWithoutScale(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("deployments.apps %q: %w", "web", ErrTargetNotFound), "TargetNotFound"},
		{fmt.Errorf("kind ConfigMap: %w", ErrTargetUnsupported), "TargetUnsupported"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			f := newFixture(t, twoPodWorkload()...)
			f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20))
			f.targets.err = tc.err
			f.start()
			f.tick()
			m := f.mpa("ns", "web")
			wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, tc.reason)
			wantCond(t, m, v1alpha1.AbleToScale, corev1.ConditionFalse, "FailedGetScale")
			if m.Status.RecommendationTime != nil {
				t.Fatal("no recommendation for an unusable target")
			}
			wantEvent(t, f.recorder, "Warning "+tc.reason)
			// Recovery flips the condition back.
			f.targets.mu.Lock()
			f.targets.err = nil
			f.targets.mu.Unlock()
			f.clock.Step(time.Minute)
			f.tick()
			m = f.mpa("ns", "web")
			wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported")
			if c := cond(t, m, v1alpha1.ConfigUnsupported); !c.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
				t.Errorf("transition time %v", c.LastTransitionTime)
			}
			wantEvent(t, f.recorder, "Normal ConfigSupported")
		})
	}
}

func TestTransientTargetErrorIsNotConfigUnsupported(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.targets.err = errors.New("connection refused")
	f.start()
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.AbleToScale, corev1.ConditionFalse, "FailedGetScale")
	if c := condition(&m.Status, v1alpha1.ConfigUnsupported); c != nil {
		t.Fatalf("a transient error must not claim the config is unsupported: %+v", c)
	}
}

func TestSelectorMatchingNoPods(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.targets.sel = labels.SelectorFromSet(labels.Set{"app": "nothing"})
	f.start()
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.NoPodsMatched, corev1.ConditionTrue, "NoPodsMatched")
	if f.usage.calls != 1 {
		t.Errorf("metrics read %d times per loop, want 1", f.usage.calls)
	}
	wantEvent(t, f.recorder, "Warning NoPodsMatched")
}

func TestTerminatingPodsDoNotCount(t *testing.T) {
	p := newPod("ns", "web", "web-1", true)
	p.DeletionTimestamp = &metav1.Time{Time: t0}
	p.Finalizers = []string{"x"}
	q := newPod("ns", "web", "web-2", true)
	q.Status.Phase = corev1.PodSucceeded
	f := newFixture(t, newMPA("ns", "web"), p, q)
	f.start()
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.NoPodsMatched, corev1.ConditionTrue, "NoPodsMatched")
}

// Two autoscalers of one target: the older governs, the newer recommends
// nothing and says why; once the older is gone the newer takes over.
func TestAmbiguousTarget(t *testing.T) {
	older, newer := newMPA("ns", "web"), newMPA("ns", "web-b")
	newer.Spec.ScaleTargetRef.Name = "web"
	older.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	newer.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	f := newFixture(t, older, newer, newPod("ns", "web", "web-1", true), newPod("ns", "web", "web-2", true))
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	f.start()
	f.tick()
	if m := f.mpa("ns", "web"); m.Status.Recommendation == nil {
		t.Fatal("the older autoscaler has no recommendation")
	}
	m := f.mpa("ns", "web-b")
	if m.Status.Recommendation != nil || m.Status.DesiredReplicas != 0 || m.Status.RecommendationTime != nil {
		t.Errorf("the shadowed autoscaler recommends: %+v", m.Status)
	}
	wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, ReasonAmbiguousTarget)
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionFalse, ReasonAmbiguousTarget)
	if c := cond(t, m, v1alpha1.ConfigUnsupported); !strings.Contains(c.Message, "older MultidimPodAutoscaler web") {
		t.Errorf("message %q does not name the governing autoscaler", c.Message)
	}

	// Nothing changed: no second write for the shadowed autoscaler.
	f.clock.Step(time.Minute)
	for _, u := range statusUpdates(t, f.tick()) {
		if u.Name == "web-b" {
			t.Errorf("rewrote the unchanged status of web-b")
		}
	}

	if err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers("ns").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.clock.Step(time.Minute)
	f.tick()
	m = f.mpa("ns", "web-b")
	if m.Status.Recommendation == nil {
		t.Fatal("the remaining autoscaler does not take over")
	}
	wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
}
