package mpa

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

func load(t *testing.T, name string) *v1alpha1.MultidimPodAutoscaler {
	t.Helper()
	raw, err := os.ReadFile("../../../deploy/examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var m v1alpha1.MultidimPodAutoscaler
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestConstraintsFromUpstreamExample(t *testing.T) {
	c := Constraints(load(t, "upstream-mpa.yaml"))
	if c.MinReplicas != 1 || c.MaxReplicas != 6 {
		t.Fatalf("replicas [%d, %d]", c.MinReplicas, c.MaxReplicas)
	}
	if c.Behavior == nil || c.Behavior.ScaleDown == nil || *c.Behavior.ScaleDown.StabilizationWindow != 120e9 ||
		c.Behavior.ScaleDown.Policies[0].Type != workload.PercentScalingPolicy || c.Behavior.ScaleUp.Policies[0].Period != 30e9 {
		t.Fatalf("behavior %+v", c.Behavior)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		mode           workload.ContainerMode
		minCPU, maxCPU float64
		minMem, maxMem float64
		controlsMemory bool
	}{
		// resourcePolicy "*" [100m,1] x constraints "hamster" [100m,2]: tighter max is 1.
		{"hamster", workload.ContainerModeAuto, 0.1, 1, 50 << 20, 500 << 20, true},
		{"sidecar", workload.ContainerModeOff, 0, 0, 0, 0, false},
		{"other", workload.ContainerModeAuto, 0.1, 1, 50 << 20, 500 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := c.ContainerPolicy(tc.name)
			if p.Mode != tc.mode || p.MinAllowed.CPU != tc.minCPU || p.MaxAllowed.CPU != tc.maxCPU ||
				p.MinAllowed.Memory != tc.minMem || p.MaxAllowed.Memory != tc.maxMem || p.Controls(workload.Memory) != tc.controlsMemory {
				t.Fatalf("got %+v", p)
			}
		})
	}
}

func TestConstraintsMerge(t *testing.T) {
	off := v1alpha1.ContainerScalingModeOff
	cpuOnly := []corev1.ResourceName{corev1.ResourceCPU}
	reqOnly := v1alpha1.ContainerControlledValuesRequestsOnly
	m := &v1alpha1.MultidimPodAutoscaler{Spec: v1alpha1.MultidimPodAutoscalerSpec{
		ResourcePolicy: &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{
			{ContainerName: "a", MinAllowed: corev1.ResourceList{"cpu": resource.MustParse("2")}, ControlledResources: &cpuOnly, ControlledValues: &reqOnly},
		}},
		Constraints: &v1alpha1.ScalingConstraints{
			ContainerControlledResources: []corev1.ResourceName{"cpu", "memory"},
			Container: []v1alpha1.VerticalScalingConstraints{
				{Name: "a", Requests: &v1alpha1.MinMaxVerticalScalingLimits{MaxAllowed: corev1.ResourceList{"cpu": resource.MustParse("1")}}},
				{Name: "b", Mode: &off},
			},
		},
	}}
	c := Constraints(m)
	a := c.ContainerPolicy("a")
	if a.MinAllowed.CPU != 1 || a.MaxAllowed.CPU != 1 {
		t.Errorf("conflicting min 2 / max 1 must resolve to the max, got [%g, %g]", a.MinAllowed.CPU, a.MaxAllowed.CPU)
	}
	if !a.Controls(workload.CPU) || a.Controls(workload.Memory) || a.ControlledValues != workload.RequestsOnly {
		t.Errorf("a: %+v", a)
	}
	if b := c.ContainerPolicy("b"); b.Mode != workload.ContainerModeOff || b.Controls(workload.CPU) {
		t.Errorf("b: %+v", b)
	}
	if c.MinReplicas != 1 {
		t.Errorf("minReplicas default = %d", c.MinReplicas)
	}
}

func TestMaxReplicasBound(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name          string
		constraints   *v1alpha1.ScalingConstraints
		wantMin       int32
		wantMax       int32
		wantDefaulted bool
	}{
		{"no constraints", nil, 1, DefaultMaxReplicas, true},
		{"no global", &v1alpha1.ScalingConstraints{}, 1, DefaultMaxReplicas, true},
		{"min only", &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MinReplicas: i32(3)}}, 3, DefaultMaxReplicas, true},
		{"min above the default", &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MinReplicas: i32(150)}}, 150, 150, true},
		{"max set", &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MaxReplicas: i32(7)}}, 1, 7, false},
		{"max set above the default", &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MaxReplicas: i32(500)}}, 1, 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &v1alpha1.MultidimPodAutoscaler{Spec: v1alpha1.MultidimPodAutoscalerSpec{Constraints: tc.constraints}}
			c := Constraints(m)
			if c.MinReplicas != tc.wantMin || c.MaxReplicas != tc.wantMax {
				t.Errorf("replicas [%d, %d], want [%d, %d]", c.MinReplicas, c.MaxReplicas, tc.wantMin, tc.wantMax)
			}
			if got := MaxReplicasDefaulted(m); got != tc.wantDefaulted {
				t.Errorf("MaxReplicasDefaulted = %v, want %v", got, tc.wantDefaulted)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("defaulted constraints invalid: %v", err)
			}
		})
	}
}

func TestResourceListRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   workload.Resources
		want corev1.ResourceList
		// saturates: the amount exceeds what a quantity holds, and reads
		// back as the largest one.
		saturates bool
	}{
		{"rounds cpu up to millicores", workload.Resources{CPU: 0.2501, Memory: 1 << 20}, corev1.ResourceList{"cpu": resource.MustParse("251m"), "memory": resource.MustParse("1Mi")}, false},
		{"exact values stay", workload.Resources{CPU: 1.5, Memory: 3}, corev1.ResourceList{"cpu": resource.MustParse("1500m"), "memory": resource.MustParse("3")}, false},
		{"zero and NaN are unset", workload.Resources{CPU: 0, Memory: math.NaN()}, corev1.ResourceList{}, false},
		{"negative is unset", workload.Resources{CPU: -1, Memory: math.Inf(1)}, corev1.ResourceList{}, false},
		{"beyond int64 saturates, never wraps negative", workload.Resources{CPU: 1e17, Memory: 1e20}, corev1.ResourceList{
			"cpu": *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI), "memory": *resource.NewQuantity(math.MaxInt64, resource.BinarySI)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ResourceList(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if g := got[k]; g.Cmp(v) != 0 {
					t.Fatalf("%s: got %s, want %s", k, g.String(), v.String())
				}
			}
			back := Resources(got)
			for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
				if w := tc.want[corev1.ResourceName(r)]; !w.IsZero() && back.Get(r) < tc.in.Get(r) && !tc.saturates {
					t.Fatalf("%s rounded down: %g < %g", r, back.Get(r), tc.in.Get(r))
				}
			}
		})
	}
}

func TestRecommendationRoundTrip(t *testing.T) {
	rec := workload.Recommendation{Replicas: 3, Source: workload.SourceDefault, Containers: []workload.ContainerRecommendation{{
		Name: "app", Target: workload.Resources{CPU: 0.5, Memory: 256 << 20}, LowerBound: workload.Resources{CPU: 0.25, Memory: 128 << 20},
		UpperBound: workload.Resources{CPU: 1, Memory: 512 << 20}, UncappedTarget: workload.Resources{CPU: 0.5, Memory: 256 << 20},
	}}}
	st := v1alpha1.MultidimPodAutoscalerStatus{DesiredReplicas: rec.Replicas, Recommendation: RecommendedPodResources(rec)}
	got, ok := Recommendation(&st)
	if !ok || got.Replicas != 3 || got.Containers[0] != rec.Containers[0] || got.Source != workload.SourceDefault {
		t.Fatalf("got %+v ok=%v", got, ok)
	}
	if _, ok := Recommendation(&v1alpha1.MultidimPodAutoscalerStatus{}); ok {
		t.Fatal("empty status must have no recommendation")
	}
}

func TestModes(t *testing.T) {
	m := &v1alpha1.MultidimPodAutoscaler{}
	if UpdateMode(m) != v1alpha1.UpdateModeAuto || RecommenderName(m) != "" {
		t.Fatal("defaults")
	}
	for mode, want := range map[v1alpha1.UpdateMode]bool{
		v1alpha1.UpdateModeOff: false, v1alpha1.UpdateModeInitial: false, v1alpha1.UpdateModeRecreate: true,
		v1alpha1.UpdateModeInPlaceOrRecreate: true, v1alpha1.UpdateModeInPlace: true, v1alpha1.UpdateModeAuto: true,
	} {
		if ScalesHorizontally(mode) != want {
			t.Errorf("ScalesHorizontally(%s) != %v", mode, want)
		}
	}
}

// TestParseResources: amounts beyond the int64 range are an explicit
// error, never 0 or a wrapped negative value.
func TestParseResources(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      corev1.ResourceList
		want    workload.Resources
		wantErr string // substring; empty: no error
	}{
		{"ordinary amounts", corev1.ResourceList{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("1Gi")}, workload.Resources{CPU: 0.25, Memory: 1 << 30}, ""},
		{"largest memory fits", corev1.ResourceList{"memory": *resource.NewQuantity(math.MaxInt64, resource.BinarySI)}, workload.Resources{Memory: math.MaxInt64}, ""},
		{"memory of 100E", corev1.ResourceList{"memory": resource.MustParse("100E")}, workload.Resources{Memory: math.MaxInt64}, "memory 100E"},
		{"memory one byte past int64", corev1.ResourceList{"memory": resource.MustParse("9223372036854775808")}, workload.Resources{Memory: math.MaxInt64}, "memory"},
		{"cpu whose millicores overflow", corev1.ResourceList{"cpu": resource.MustParse("1e17")}, workload.Resources{CPU: math.MaxInt64 / 1000.0}, "cpu 100e15"},
		{"both", corev1.ResourceList{"cpu": resource.MustParse("10E"), "memory": resource.MustParse("1e30")}, workload.Resources{CPU: math.MaxInt64 / 1000.0, Memory: math.MaxInt64}, "cpu 10E"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResources(tc.in)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (!errors.Is(err, ErrQuantityRange) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want ErrQuantityRange mentioning %q", err, tc.wantErr)
			}
			if math.Abs(got.CPU-tc.want.CPU) > 1e-9*tc.want.CPU || math.Abs(got.Memory-tc.want.Memory) > 1e-9*tc.want.Memory {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if r := Resources(tc.in); r != got {
				t.Errorf("Resources = %+v, ParseResources = %+v", r, got)
			}
		})
	}
}

// TestCheckQuantities names every spec bound beyond the int64 range.
func TestCheckQuantities(t *testing.T) {
	huge := corev1.ResourceList{"memory": resource.MustParse("100E")}
	ok := corev1.ResourceList{"memory": resource.MustParse("1Gi")}
	m := &v1alpha1.MultidimPodAutoscaler{Spec: v1alpha1.MultidimPodAutoscalerSpec{
		ResourcePolicy: &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{ContainerName: "*", MinAllowed: ok, MaxAllowed: huge}}},
		Constraints: &v1alpha1.ScalingConstraints{Container: []v1alpha1.VerticalScalingConstraints{
			{Name: "app", Requests: &v1alpha1.MinMaxVerticalScalingLimits{MinAllowed: huge, MaxAllowed: ok}},
		}},
	}}
	err := CheckQuantities(m)
	if !errors.Is(err, ErrQuantityRange) {
		t.Fatalf("CheckQuantities = %v, want ErrQuantityRange", err)
	}
	for _, f := range []string{"spec.resourcePolicy.containerPolicies[0].maxAllowed", "spec.constraints.container[0].requests.minAllowed"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
	for _, f := range []string{"containerPolicies[0].minAllowed", "container[0].requests.maxAllowed"} {
		if strings.Contains(err.Error(), f) {
			t.Errorf("%v names the valid %s", err, f)
		}
	}
	m.Spec.ResourcePolicy.ContainerPolicies[0].MaxAllowed = ok
	m.Spec.Constraints.Container[0].Requests.MinAllowed = ok
	if err := CheckQuantities(m); err != nil {
		t.Errorf("valid spec: %v", err)
	}
}
