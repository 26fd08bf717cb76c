package controller

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

func baseStatus() *v1alpha1.MultidimPodAutoscalerStatus {
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	return &v1alpha1.MultidimPodAutoscalerStatus{
		ObservedGeneration: 2,
		RecommendationTime: &metav1.Time{Time: t0},
		LastScaleTime:      &metav1.Time{Time: t0},
		CurrentReplicas:    3,
		DesiredReplicas:    4,
		Recommendation: &v1alpha1.RecommendedPodResources{ContainerRecommendations: []v1alpha1.RecommendedContainerResources{{
			ContainerName: "app", Target: rl("250m", "256Mi"), LowerBound: rl("200m", "200Mi"), UpperBound: rl("1", "1Gi"),
		}}},
		CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
			Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: new(int32(70))}}}},
		Conditions: []v1alpha1.MultidimPodAutoscalerCondition{{
			Type: v1alpha1.RecommendationProvided, Status: corev1.ConditionTrue, Reason: "RecommendationProvided", LastTransitionTime: metav1.Time{Time: t0},
		}},
		RL: &v1alpha1.RLStatus{Source: v1alpha1.SourceDefault, Reason: "RLOff", LastAgentContactTime: &metav1.Time{Time: t0}},
	}
}

// TestSameIgnoringTimes: timestamps, currentMetrics and bounds within the
// tolerance do not call for a write; anything else the recommender writes
// does. Neither status is changed by the comparison.
func TestSameIgnoringTimes(t *testing.T) {
	later := &metav1.Time{Time: t0.Add(time.Hour)}
	for _, tc := range []struct {
		name   string
		change func(s *v1alpha1.MultidimPodAutoscalerStatus)
		same   bool
	}{
		{"identical", func(*v1alpha1.MultidimPodAutoscalerStatus) {}, true},
		{"times", func(s *v1alpha1.MultidimPodAutoscalerStatus) {
			s.RecommendationTime, s.LastScaleTime, s.RL.LastAgentContactTime = later, nil, later
			s.Conditions[0].LastTransitionTime = *later
		}, true},
		{"current metrics", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.CurrentMetrics = nil }, true},
		{"bound within tolerance", func(s *v1alpha1.MultidimPodAutoscalerStatus) {
			s.Recommendation.ContainerRecommendations[0].UpperBound[corev1.ResourceCPU] = resource.MustParse("950m")
		}, true},
		{"bound beyond tolerance", func(s *v1alpha1.MultidimPodAutoscalerStatus) {
			s.Recommendation.ContainerRecommendations[0].LowerBound[corev1.ResourceCPU] = resource.MustParse("100m")
		}, false},
		{"target", func(s *v1alpha1.MultidimPodAutoscalerStatus) {
			s.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceMemory] = resource.MustParse("300Mi")
		}, false},
		{"target in another notation", func(s *v1alpha1.MultidimPodAutoscalerStatus) {
			s.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceCPU] = resource.MustParse("0.25")
		}, true},
		{"no recommendation", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.Recommendation = nil }, false},
		{"another container", func(s *v1alpha1.MultidimPodAutoscalerStatus) {
			s.Recommendation.ContainerRecommendations = append(s.Recommendation.ContainerRecommendations, v1alpha1.RecommendedContainerResources{ContainerName: "side"})
		}, false},
		{"desired replicas", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.DesiredReplicas = 5 }, false},
		{"observed generation", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.ObservedGeneration = 3 }, false},
		{"condition reason", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.Conditions[0].Reason = "Other" }, false},
		{"condition added", func(s *v1alpha1.MultidimPodAutoscalerStatus) {
			s.Conditions = append(s.Conditions, v1alpha1.MultidimPodAutoscalerCondition{Type: v1alpha1.LowConfidence, Status: corev1.ConditionTrue})
		}, false},
		{"no conditions", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.Conditions = nil }, false},
		{"rl source", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.RL.Source = v1alpha1.SourceAgent }, false},
		{"no rl", func(s *v1alpha1.MultidimPodAutoscalerStatus) { s.RL = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := baseStatus(), baseStatus()
			tc.change(b)
			a0, b0 := a.DeepCopy(), b.DeepCopy()
			if got := sameIgnoringTimes(a, b); got != tc.same {
				t.Errorf("sameIgnoringTimes = %v, want %v", got, tc.same)
			}
			if got := sameIgnoringTimes(b, a); got != tc.same {
				t.Errorf("sameIgnoringTimes (swapped) = %v, want %v", got, tc.same)
			}
			if !equality.Semantic.DeepEqual(a, a0) || !equality.Semantic.DeepEqual(b, b0) {
				t.Error("the comparison changed a status")
			}
		})
	}
}
