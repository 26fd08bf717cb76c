package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

func recStatus(written bool, replicas int32, cpu, mem string) *v1alpha1.MultidimPodAutoscalerStatus {
	s := &v1alpha1.MultidimPodAutoscalerStatus{DesiredReplicas: replicas}
	if written {
		s.RecommendationTime = &metav1.Time{}
	}
	target := corev1.ResourceList{}
	if cpu != "" {
		target[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		target[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	s.Recommendation = &v1alpha1.RecommendedPodResources{ContainerRecommendations: []v1alpha1.RecommendedContainerResources{{ContainerName: "app", Target: target}}}
	return s
}

func TestRecommendationChanges(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after *v1alpha1.MultidimPodAutoscalerStatus
		want          string
	}{
		{"first", &v1alpha1.MultidimPodAutoscalerStatus{}, recStatus(true, 2, "200m", "256Mi"), "first recommendation: replicas 2; app cpu 200m; app memory 256Mi"},
		{"unchanged", recStatus(true, 2, "200m", "256Mi"), recStatus(true, 2, "0.2", "256Mi"), ""},
		{"scale-out", recStatus(true, 1, "200m", "256Mi"), recStatus(true, 3, "200m", "256Mi"), "replicas 1 -> 3"},
		{"resize", recStatus(true, 1, "200m", "256Mi"), recStatus(true, 1, "1", "300Mi"), "app cpu 200m -> 1; app memory 256Mi -> 300Mi"},
		{"both", recStatus(true, 3, "600m", "256Mi"), recStatus(true, 4, "800m", "256Mi"), "replicas 3 -> 4; app cpu 600m -> 800m"},
		{"a resource newly set", recStatus(true, 1, "200m", ""), recStatus(true, 1, "200m", "256Mi"), "app memory 256Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := recommendationChanges(tc.before, tc.after); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRecommendationChangedEvent: the first recommendation and every later
// change are announced with what changed and the default's reason; a loop
// that changes nothing announces nothing.
func TestRecommendationChangedEvent(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	f.start()
	changed := func() []string {
		var got []string
		for _, e := range drainEvents(f.recorder) {
			if strings.Contains(e, ReasonRecommendationChanged) {
				got = append(got, e)
			}
		}
		return got
	}
	drainEvents(f.recorder)
	f.tick()
	got := changed()
	if len(got) != 1 || !strings.HasPrefix(got[0], "Normal") || !strings.Contains(got[0], "first recommendation: replicas") || !strings.Contains(got[0], "decided by Default: ") {
		t.Fatalf("first loop: events %v, want one first recommendation decided by the default", got)
	}
	// Four times the usage: the default scales out, and says why.
	f.usage.set(podUsage("ns", "web-1", 1.6, 256<<20), podUsage("ns", "web-2", 1.6, 256<<20))
	f.tick()
	got = changed()
	if len(got) != 1 || !strings.Contains(got[0], "RecommendationChanged replicas ") || !strings.Contains(got[0], " -> ") {
		t.Fatalf("after the load rose: events %v, want one scale-out", got)
	}
	if _, reason, _ := strings.Cut(got[0], "decided by Default: "); strings.TrimSpace(reason) == "" {
		t.Errorf("the event %q gives no reason", got[0])
	}
}

// TestRecommendationChangedOnceWhileWritesFail: while the status write
// fails, every retry measures the same change against the same old
// status; it is announced once. A different change, or the same one
// against a newer status, is announced again.
func TestRecommendationChangedOnceWhileWritesFail(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	c := &Controller{recorder: rec}
	st := &state{}
	m := &v1alpha1.MultidimPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	m.Status = *recStatus(true, 3, "500m", "256Mi")
	m.Status.RecommendationTime = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name  string
		now   *v1alpha1.MultidimPodAutoscalerStatus
		newer bool // the status was written since
		want  int
	}{
		{"a change", recStatus(true, 6, "500m", "256Mi"), false, 1},
		{"the same change, its write failed", recStatus(true, 6, "500m", "256Mi"), false, 0},
		{"again", recStatus(true, 6, "500m", "256Mi"), false, 0},
		{"another change", recStatus(true, 2, "2410m", "256Mi"), false, 1},
		{"back to the first", recStatus(true, 6, "500m", "256Mi"), false, 1},
		{"the first against a newer status", recStatus(true, 6, "500m", "256Mi"), true, 1},
	} {
		if tc.newer {
			m.Status.RecommendationTime = &metav1.Time{Time: m.Status.RecommendationTime.Add(time.Minute)}
		}
		c.noteChange(context.Background(), m, st, tc.now, "ScaleUp")
		n := 0
		for _, e := range drainEvents(rec) {
			if strings.Contains(e, ReasonRecommendationChanged) {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("%s: %d change events, want %d", tc.name, n, tc.want)
		}
	}
}
