package controller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/serve"
)

func TestRecommendsAndWritesStatus(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	f.start()
	ups := statusUpdates(t, f.tick())
	if len(ups) != 1 {
		t.Fatalf("want 1 status update, got %d", len(ups))
	}
	m := f.mpa("ns", "web")
	s := m.Status
	if s.RecommendationTime == nil || !s.RecommendationTime.Time.Equal(t0) {
		t.Errorf("recommendationTime = %v, want %v", s.RecommendationTime, t0)
	}
	if s.CurrentReplicas != 2 || s.DesiredReplicas < 1 || s.ObservedGeneration != 1 {
		t.Errorf("replicas current %d desired %d observedGeneration %d", s.CurrentReplicas, s.DesiredReplicas, s.ObservedGeneration)
	}
	if s.Recommendation == nil || len(s.Recommendation.ContainerRecommendations) != 1 || s.Recommendation.ContainerRecommendations[0].ContainerName != "app" {
		t.Fatalf("recommendation %+v", s.Recommendation)
	}
	if cpu := s.Recommendation.ContainerRecommendations[0].Target.Cpu(); cpu.IsZero() {
		t.Errorf("cpu target is zero")
	}
	if s.RL == nil || s.RL.Source != v1alpha1.SourceDefault || s.RL.Reason != "RLOff" {
		t.Errorf("rl status %+v", s.RL)
	}
	if len(s.CurrentMetrics) != 2 || s.CurrentMetrics[0].Resource.Current.AverageValue.MilliValue() != 400 || *s.CurrentMetrics[0].Resource.Current.AverageUtilization != 80 {
		t.Errorf("currentMetrics %+v", s.CurrentMetrics)
	}
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
	wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported")
	wantCond(t, m, v1alpha1.NoPodsMatched, corev1.ConditionFalse, "PodsMatched")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound")
	wantCond(t, m, v1alpha1.AbleToScale, corev1.ConditionTrue, "SucceededGetScale")
	wantCond(t, m, v1alpha1.ScalingLimited, corev1.ConditionFalse, "DesiredWithinRange")
	wantCond(t, m, v1alpha1.LowConfidence, corev1.ConditionTrue, "InsufficientHistory")
	wantCond(t, m, v1alpha1.FetchingHistory, corev1.ConditionFalse, "NoHistorySource")
	if got := testutil.ToFloat64(f.c.metrics.recommendations.WithLabelValues("Default")); got != 1 {
		t.Errorf("recommendations{source=Default} = %g", got)
	}
}

// An autoscaler without maxReplicas is bounded by mpa.DefaultMaxReplicas,
// and ScalingLimited says so, whether or not the bound binds.
func TestDefaultMaxReplicasInStatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		max         *int32
		cpu         float64 // per pod, of a 500m request
		wantStatus  corev1.ConditionStatus
		wantReason  string
		wantMessage string
		wantDesired int32
	}{
		{"within range, unset", nil, 0.4, corev1.ConditionFalse, "DesiredWithinRange", "default bound of 100 replicas", 0},
		{"bound binds, unset", nil, 40, corev1.ConditionTrue, "TooManyReplicas", "limited by the default maximum", 100},
		{"within range, set", ptr(int32(500)), 0.4, corev1.ConditionFalse, "DesiredWithinRange", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA("ns", "web")
			m.Spec.Constraints = &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MaxReplicas: tc.max}}
			f := newFixture(t, m, newPod("ns", "web", "web-1", true), newPod("ns", "web", "web-2", true))
			// 90 replicas: the default scale-up rate (100%) would reach 180.
			f.targets.replicas = map[string]int32{"web": 90}
			f.usage.set(podUsage("ns", "web-1", tc.cpu, 200<<20), podUsage("ns", "web-2", tc.cpu, 200<<20))
			f.start()
			f.tick()
			got := f.mpa("ns", "web")
			c := cond(t, got, v1alpha1.ScalingLimited)
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantMessage) {
				t.Fatalf("ScalingLimited = %s/%s %q, want %s/%s containing %q", c.Status, c.Reason, c.Message, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
			if tc.wantMessage == "" && c.Message != "" {
				t.Errorf("message %q for an explicit maxReplicas", c.Message)
			}
			if tc.wantDesired != 0 && got.Status.DesiredReplicas != tc.wantDesired {
				t.Errorf("desiredReplicas = %d, want %d", got.Status.DesiredReplicas, tc.wantDesired)
			}
		})
	}
}

func TestRecommenderNameAndNamespaces(t *testing.T) {
	named := func(ns, name, rec string) *v1alpha1.MultidimPodAutoscaler {
		m := newMPA(ns, name)
		if rec != "" {
			m.Spec.Recommenders = []v1alpha1.MultidimPodAutoscalerRecommenderSelector{{Name: rec}}
		}
		return m
	}
	objs := []runtime.Object{
		named("ns", "unnamed", ""), named("ns", "default", "default"), named("ns", "custom", "custom"),
		named("skip", "unnamed", ""),
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{DefaultRecommenderName, []string{"ns/unnamed", "ns/default"}},
		{"custom", []string{"ns/custom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, objs...)
			f.cfg.RecommenderName = tc.name
			f.cfg.IgnoredNamespaces = []string{"skip"}
			f.targets.sel = labels.Nothing()
			f.start()
			var got []string
			for _, u := range statusUpdates(t, f.tick()) {
				got = append(got, u.Namespace+"/"+u.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") && !sameSet(got, tc.want) {
				t.Fatalf("handled %v, want %v", got, tc.want)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

func TestInvalidConstraintsAreConfigUnsupported(t *testing.T) {
	m := newMPA("ns", "web")
	lo, hi := int32(5), int32(2)
	m.Spec.Constraints = &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MinReplicas: &lo, MaxReplicas: &hi}}
	f := newFixture(t, m, newPod("ns", "web", "web-1", true))
	f.start()
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "InvalidConfiguration")
}

// TestQuantityBeyondInt64IsConfigUnsupported: a bound no int64 holds is
// refused by name, not read as 0 (no bound) or a wrapped value.
func TestQuantityBeyondInt64IsConfigUnsupported(t *testing.T) {
	m := newMPA("ns", "web")
	m.Spec.ResourcePolicy = &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{
		ContainerName: "*", MaxAllowed: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100E")},
	}}}
	f := newFixture(t, m, newPod("ns", "web", "web-1", true))
	f.start()
	f.tick()
	got := f.mpa("ns", "web")
	wantCond(t, got, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "InvalidConfiguration")
	c := condition(&got.Status, v1alpha1.ConfigUnsupported)
	if !strings.Contains(c.Message, "spec.resourcePolicy.containerPolicies[0].maxAllowed: memory 100E") {
		t.Errorf("ConfigUnsupported message %q does not name the quantity", c.Message)
	}
	if got.Status.Recommendation != nil {
		t.Errorf("a recommendation was written under an unreadable bound: %+v", got.Status.Recommendation)
	}
}

func TestMetricsLint(t *testing.T) {
	f := newFixture(t)
	f.start()
	if err := serve.LintMetrics(f.reg, "recommender"); err != nil {
		t.Fatal(err)
	}
}
