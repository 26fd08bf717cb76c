package patch

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

func TestAppendJSONMatchesMarshal(t *testing.T) {
	computed := *resource.NewMilliQuantity(1500, resource.DecimalSI)
	for _, tc := range []struct {
		name string
		ops  []Operation
	}{
		{name: "nil", ops: nil},
		{name: "empty", ops: []Operation{}},
		{name: "string value", ops: []Operation{{Op: "add", Path: "/metadata/annotations/a~1b", Value: "container app: cpu request"}}},
		{name: "string needing escapes", ops: []Operation{{Op: "add", Path: "/x", Value: "a\"b\\c<d>&e\n\t\x01é\u2028\xff"}}},
		{name: "computed quantities", ops: []Operation{
			{Op: "replace", Path: "/spec/containers/0/resources/requests/cpu", Value: *resource.NewMilliQuantity(250, resource.DecimalSI)},
			{Op: "replace", Path: "/spec/containers/0/resources/requests/memory", Value: *resource.NewQuantity(256<<20, resource.BinarySI)},
			{Op: "add", Path: "/spec/containers/0/resources/limits/memory", Value: *resource.NewQuantity(1e9+1, resource.BinarySI)},
			{Op: "add", Path: "/spec/containers/0/resources/limits/cpu", Value: computed},
		}},
		{name: "resource lists", ops: []Operation{
			{Op: "add", Path: "/a", Value: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(3<<30, resource.BinarySI), corev1.ResourceCPU: *resource.NewMilliQuantity(2000, resource.DecimalSI)}},
			{Op: "add", Path: "/b", Value: corev1.ResourceList{}},
			{Op: "add", Path: "/c", Value: corev1.ResourceList(nil)},
		}},
		{name: "resource requirements", ops: []Operation{
			{Op: "add", Path: "/a", Value: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: computed}}},
			{Op: "add", Path: "/b", Value: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: computed}}},
			{Op: "add", Path: "/c", Value: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: computed}, Requests: corev1.ResourceList{corev1.ResourceMemory: computed}}},
			{Op: "add", Path: "/d", Value: corev1.ResourceRequirements{}},
			{Op: "add", Path: "/e", Value: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}},
		}},
		{name: "annotation maps", ops: []Operation{
			{Op: "add", Path: "/metadata/annotations", Value: map[string]string{UpdatesAnnotation: "container a<b>: cpu request", "z": "1", "a": ""}},
			{Op: "add", Path: "/m", Value: map[string]string(nil)},
		}},
		{name: "other values fall back", ops: []Operation{{Op: "add", Path: "/n", Value: 3}, {Op: "add", Path: "/nil", Value: nil}, {Op: "add", Path: "/s", Value: []string{"x"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.ops)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendJSON([]byte("prefix"), tc.ops)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix"+string(want) {
				t.Fatalf("AppendJSON\n got %s\nwant prefix%s", got, want)
			}
		})
	}
}

func TestAppendJSONReportsUnencodableValue(t *testing.T) {
	if _, err := AppendJSON(nil, []Operation{{Op: "add", Path: "/x", Value: make(chan int)}}); err == nil {
		t.Fatal("a channel value encoded without error")
	}
}

// TestAppendJSONOnComputedPatches holds AppendJSON to json.Marshal on the
// patches Compute returns for many random pods and recommendations, the
// operations the webhook actually encodes.
func TestAppendJSONOnComputedPatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	amount := func(r workload.Resource) string {
		if r == workload.CPU {
			return strconv.Itoa(1+rng.IntN(4000)) + "m"
		}
		return strconv.Itoa(1+rng.IntN(4096)) + "Mi"
	}
	list := func() corev1.ResourceList {
		out := corev1.ResourceList{}
		for _, r := range resourcesInOrder {
			if rng.IntN(2) == 0 {
				out[corev1.ResourceName(r)] = resource.MustParse(amount(r))
			}
		}
		if len(out) == 0 && rng.IntN(2) == 0 {
			return nil
		}
		return out
	}
	modes := []v1alpha1.UpdateMode{v1alpha1.UpdateModeAuto, v1alpha1.UpdateModeInitial, v1alpha1.UpdateModeRecreate}
	patched := 0
	for i := range 500 {
		var ctrs []corev1.Container
		var rec workload.Recommendation
		for c := range 1 + rng.IntN(3) {
			name := "c" + strconv.Itoa(c)
			ctrs = append(ctrs, ctr(name, list(), list()))
			rec.Containers = append(rec.Containers, workload.ContainerRecommendation{Name: name, Target: workload.Resources{
				CPU: rng.Float64() * 4, Memory: rng.Float64() * (4 << 30),
			}})
		}
		p := pod(ctrs...)
		if rng.IntN(2) == 0 {
			p.Annotations = map[string]string{"x": "y"}
			if rng.IntN(2) == 0 {
				p.Annotations[UpdatesAnnotation] = "old"
			}
		}
		in := Input{Mode: modes[rng.IntN(len(modes))], Recommendation: rec}
		if rng.IntN(3) == 0 {
			in.Constraints.Containers = []workload.ContainerPolicy{{Name: "*", ControlledValues: workload.RequestsOnly}}
		}
		if rng.IntN(3) == 0 {
			in.Caps.PodMax = workload.Resources{CPU: 2, Memory: 2 << 30}
		}
		res := Compute(p, in)
		if len(res.Patch) == 0 {
			continue
		}
		patched++
		want, err := json.Marshal(res.Patch)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendJSON(nil, res.Patch)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("case %d: AppendJSON\n got %s\nwant %s", i, got, want)
		}
	}
	if patched < 100 {
		t.Fatalf("only %d of 500 random cases produced a patch; the test lost its reach", patched)
	}
}

// TestQuantityMatchesMPA holds the patch's own conversion to the one the
// rest of AWARE uses, so a pod is never sized differently from what the
// MPA's status says.
func TestQuantityMatchesMPA(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	values := []float64{0, -1, math.NaN(), math.Inf(1), 1e-12, 0.0005, 0.001, 0.0011, 0.25, 1, 1.0000000001, 3.9999, 1 << 20, 1<<30 + 0.5, 1e15}
	for range 1000 {
		values = append(values, rng.Float64()*8, rng.Float64()*(64<<30))
	}
	for _, r := range resourcesInOrder {
		for _, v := range values {
			want, wantOK := mpa.ResourceList(workload.Resources{}.With(r, v))[corev1.ResourceName(r)]
			got, ok := quantity(r, v)
			if ok != wantOK || (ok && (got.Cmp(want) != 0 || got.String() != want.String())) {
				t.Fatalf("quantity(%s, %v) = %v, %v; mpa.ResourceList gives %v, %v", r, v, got.String(), ok, want.String(), wantOK)
			}
		}
	}
}

func TestResourcesInOrderSortedByName(t *testing.T) {
	if !slices.IsSorted(resourcesInOrder[:]) {
		t.Fatalf("resourcesInOrder %v is not sorted; list operations would not come out in JSON key order", resourcesInOrder)
	}
}
