package mpa

import (
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

func overlapMPA(ns, name string, created int, apiVersion, kind, target string) *v1alpha1.MultidimPodAutoscaler {
	m := &v1alpha1.MultidimPodAutoscaler{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC)),
	}}
	if kind != "" {
		m.Spec.ScaleTargetRef = &autoscalingv1.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: target}
	}
	return m
}

func TestShadowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		all  []*v1alpha1.MultidimPodAutoscaler
		want map[string]string // shadowed UID -> governing name
	}{
		{"alone", []*v1alpha1.MultidimPodAutoscaler{overlapMPA("a", "x", 1, "apps/v1", "Deployment", "web")}, map[string]string{}},
		{"the older governs", []*v1alpha1.MultidimPodAutoscaler{
			overlapMPA("a", "new", 2, "apps/v1", "Deployment", "web"),
			overlapMPA("a", "old", 1, "apps/v1", "Deployment", "web"),
		}, map[string]string{"a/new": "old"}},
		{"same age: the first name governs", []*v1alpha1.MultidimPodAutoscaler{
			overlapMPA("a", "b", 1, "apps/v1", "Deployment", "web"),
			overlapMPA("a", "a", 1, "apps/v1", "Deployment", "web"),
			overlapMPA("a", "c", 1, "apps/v1", "Deployment", "web"),
		}, map[string]string{"a/b": "a", "a/c": "a"}},
		{"versions do not matter", []*v1alpha1.MultidimPodAutoscaler{
			overlapMPA("a", "x", 1, "apps/v1", "Deployment", "web"),
			overlapMPA("a", "y", 2, "apps/v1beta2", "Deployment", "web"),
		}, map[string]string{"a/y": "x"}},
		{"other group, kind, name or namespace: no overlap", []*v1alpha1.MultidimPodAutoscaler{
			overlapMPA("a", "x", 1, "apps/v1", "Deployment", "web"),
			overlapMPA("a", "y", 2, "example.com/v1", "Deployment", "web"),
			overlapMPA("a", "z", 3, "apps/v1", "StatefulSet", "web"),
			overlapMPA("a", "w", 4, "apps/v1", "Deployment", "web2"),
			overlapMPA("b", "x", 5, "apps/v1", "Deployment", "web"),
		}, map[string]string{}},
		{"no target: never shadowed, never governs", []*v1alpha1.MultidimPodAutoscaler{
			overlapMPA("a", "x", 1, "", "", ""),
			overlapMPA("a", "y", 2, "", "", ""),
		}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Shadowed(tc.all)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d shadowed, want %d: %v", len(got), len(tc.want), got)
			}
			for uid, g := range tc.want {
				if got[types.UID(uid)] == nil || got[types.UID(uid)].Name != g {
					t.Errorf("%s: governed by %v, want %s", uid, got[types.UID(uid)], g)
				}
			}
			// Oldest agrees with Shadowed on every group.
			for _, m := range tc.all {
				if g := got[m.UID]; g != nil && Oldest([]*v1alpha1.MultidimPodAutoscaler{m, g}) != g {
					t.Errorf("Oldest disagrees for %s", m.Name)
				}
			}
		})
	}
	if Oldest(nil) != nil {
		t.Error("Oldest(nil) is not nil")
	}
}
