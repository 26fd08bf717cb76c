package mpa

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestStartupBoostConstraints(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name string
		cpu  *v1alpha1.CPUStartupBoost
		want *workload.CPUBoost
	}{
		{"factor and duration", &v1alpha1.CPUStartupBoost{Factor: ptr.To(2.5), Duration: &metav1.Duration{Duration: 30 * time.Second}}, &workload.CPUBoost{Factor: 2.5, For: 30 * time.Second}},
		{"value", &v1alpha1.CPUStartupBoost{Value: q("1500m")}, &workload.CPUBoost{Value: 1.5}},
		{"factor 1 alone boosts nothing", &v1alpha1.CPUStartupBoost{Factor: ptr.To(1.0)}, nil},
		{"factor below 1 (refused by the CRD) is no boost, not a cut", &v1alpha1.CPUStartupBoost{Factor: ptr.To(0.5)}, nil},
		{"no cpu", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1alpha1.MultidimPodAutoscaler{Spec: v1alpha1.MultidimPodAutoscalerSpec{ResourcePolicy: &v1alpha1.PodResourcePolicy{
				ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{ContainerName: "*", StartupBoost: &v1alpha1.StartupBoost{CPU: tc.cpu}}}}}}
			c := Constraints(m)
			got := c.ContainerPolicy("app").StartupBoost
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("boost %+v, want %+v", got, tc.want)
			}
			if HasStartupBoost(&c) != (tc.want != nil) {
				t.Errorf("HasStartupBoost = %v", HasStartupBoost(&c))
			}
		})
	}
}

func TestBoostAnnotationRoundTrip(t *testing.T) {
	in := map[string]BoostRecord{"app": {Boosted: "1500m", Request: "500m", Limit: "1"}, "side": {Boosted: "2"}}
	out, err := DecodeBoost(EncodeBoost(in))
	if err != nil || len(out) != 2 || out["app"] != in["app"] || out["side"] != in["side"] {
		t.Fatalf("round trip: %+v %v", out, err)
	}
	if _, err := DecodeBoost("{"); err == nil {
		t.Error("garbage decoded")
	}
	for s, want := range map[string]float64{"": 0, "250m": 0.25, "2": 2} {
		if got, err := CPUQuantity(s); err != nil || got != want {
			t.Errorf("CPUQuantity(%q) = %g, %v", s, got, err)
		}
	}
}
