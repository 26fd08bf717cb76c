package patch

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

func TestModesAtCreation(t *testing.T) {
	for _, tc := range []struct {
		mode          v1alpha1.UpdateMode
		sized, boosts bool
	}{
		{v1alpha1.UpdateModeOff, false, false},
		{v1alpha1.UpdateModeInitial, true, false},
		{v1alpha1.UpdateModeRecreate, true, true},
		{v1alpha1.UpdateModeInPlaceOrRecreate, true, true},
		{v1alpha1.UpdateModeInPlace, true, true},
		{v1alpha1.UpdateModeAuto, true, true},
		{"Future", false, false},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			if AppliesAtCreation(tc.mode) != tc.sized || BoostsAtCreation(tc.mode) != tc.boosts {
				t.Errorf("AppliesAtCreation %v BoostsAtCreation %v, want %v %v", AppliesAtCreation(tc.mode), BoostsAtCreation(tc.mode), tc.sized, tc.boosts)
			}
		})
	}
}

// TestStartupBoost: a new pod's CPU request is the boost over what it
// would get without it (the recommendation, or its own request), the limit
// keeps its ratio under RequestsAndLimits, and the annotation records the
// boosted and the unboosted values for the updater.
func TestStartupBoost(t *testing.T) {
	boost := func(factor, value float64, cv workload.ControlledValues, mode workload.ContainerMode) workload.Constraints {
		return workload.Constraints{Containers: []workload.ContainerPolicy{{Name: "*", Mode: mode, ControlledValues: cv,
			MaxAllowed:   workload.Resources{CPU: 1},
			StartupBoost: &workload.CPUBoost{Factor: factor, Value: value}}}}
	}
	rec := recFor("app", workload.Resources{CPU: 0.5, Memory: 256 * mi})
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		in     Input
		req    corev1.ResourceList
		lim    corev1.ResourceList
		record map[string]mpa.BoostRecord // nil: no boost
	}{
		{
			name: "factor over the recommendation, limit keeps its ratio, beyond maxAllowed",
			pod:  pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), rl("cpu", "500m"))),
			in:   Input{Mode: v1alpha1.UpdateModeInPlace, Recommendation: rec, Constraints: boost(3, 0, workload.RequestsAndLimits, workload.ContainerModeAuto)},
			req:  rl("cpu", "1500m", "memory", "256Mi"), lim: rl("cpu", "3"),
			record: map[string]mpa.BoostRecord{"app": {Boosted: "1500m", Request: "500m", Limit: "1"}},
		},
		{
			name:   "value larger than factor × request wins",
			pod:    pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), nil)),
			in:     Input{Mode: v1alpha1.UpdateModeAuto, Recommendation: rec, Constraints: boost(2, 2, workload.RequestsAndLimits, workload.ContainerModeAuto)},
			req:    rl("cpu", "2", "memory", "256Mi"),
			record: map[string]mpa.BoostRecord{"app": {Boosted: "2", Request: "500m"}},
		},
		{
			name: "RequestsOnly: the request stays within the limit",
			pod:  pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), rl("cpu", "800m"))),
			in:   Input{Mode: v1alpha1.UpdateModeInPlace, Recommendation: rec, Constraints: boost(4, 0, workload.RequestsOnly, workload.ContainerModeAuto)},
			req:  rl("cpu", "800m", "memory", "256Mi"), lim: rl("cpu", "800m"),
			record: map[string]mpa.BoostRecord{"app": {Boosted: "800m", Request: "500m", Limit: "800m"}},
		},
		{
			name:   "container mode Off: its own request is boosted and restored",
			pod:    pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), nil)),
			in:     Input{Mode: v1alpha1.UpdateModeInPlace, Recommendation: rec, Constraints: boost(2, 0, workload.RequestsAndLimits, workload.ContainerModeOff)},
			req:    rl("cpu", "500m", "memory", "128Mi"),
			record: map[string]mpa.BoostRecord{"app": {Boosted: "500m", Request: "250m"}},
		},
		{
			name:   "no recommendation yet: the pod's own request is boosted",
			pod:    pod(ctr("app", rl("cpu", "250m"), nil)),
			in:     Input{Mode: v1alpha1.UpdateModeInPlace, Constraints: boost(2, 0, workload.RequestsAndLimits, workload.ContainerModeAuto)},
			req:    rl("cpu", "500m"),
			record: map[string]mpa.BoostRecord{"app": {Boosted: "500m", Request: "250m"}},
		},
		{
			name: "LimitRange maximum caps the boost",
			pod:  pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), nil)),
			in: Input{Mode: v1alpha1.UpdateModeInPlace, Recommendation: rec, Constraints: boost(4, 0, workload.RequestsAndLimits, workload.ContainerModeAuto),
				Caps: Caps{ContainerMax: workload.Resources{CPU: 0.75}}},
			req:    rl("cpu", "750m", "memory", "256Mi"),
			record: map[string]mpa.BoostRecord{"app": {Boosted: "750m", Request: "500m"}},
		},
		{
			name: "Initial mode: no updater to end it, so no boost",
			pod:  pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), nil)),
			in:   Input{Mode: v1alpha1.UpdateModeInitial, Recommendation: rec, Constraints: boost(3, 0, workload.RequestsAndLimits, workload.ContainerModeAuto)},
			req:  rl("cpu", "500m", "memory", "256Mi"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(tc.pod, tc.in)
			b, err := json.Marshal(res.Patch)
			if err != nil {
				t.Fatal(err)
			}
			p := applyPatch(t, encode(t, tc.pod, false), string(b))
			c := p.Spec.Containers[0].Resources
			if !equalList(c.Requests, tc.req) || !equalList(c.Limits, tc.lim) {
				t.Errorf("requests %v limits %v, want %v %v", c.Requests, c.Limits, tc.req, tc.lim)
			}
			raw, ok := p.Annotations[mpa.StartupBoostAnnotation]
			if ok != (tc.record != nil) {
				t.Fatalf("boost annotation %q, want %v", raw, tc.record)
			}
			if !ok {
				return
			}
			got, err := mpa.DecodeBoost(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.record) || got["app"] != tc.record["app"] {
				t.Errorf("record %+v, want %+v", got, tc.record)
			}
		})
	}
}

// TestStartupBoostInputWithoutRecommendation: an autoscaler with a boost
// but no recommendation yet still yields an input, so new pods are boosted;
// without a boost it does not (nothing to do).
func TestStartupBoostInputWithoutRecommendation(t *testing.T) {
	factor := 2.0
	m := &v1alpha1.MultidimPodAutoscaler{Spec: v1alpha1.MultidimPodAutoscalerSpec{ResourcePolicy: &v1alpha1.PodResourcePolicy{
		ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{ContainerName: "app", StartupBoost: &v1alpha1.StartupBoost{CPU: &v1alpha1.CPUStartupBoost{Factor: &factor}}}}}}}
	if _, ok := InputFor(m, Caps{}); !ok {
		t.Error("no input for a boosted autoscaler without a recommendation")
	}
	m.Spec.ResourcePolicy = nil
	if _, ok := InputFor(m, Caps{}); ok {
		t.Error("input for an autoscaler with neither recommendation nor boost")
	}
}
