package patch

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

const mi = 1 << 20

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func pod(ctrs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: ctrs},
	}
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Image: "img", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func recFor(targets ...any) workload.Recommendation {
	var r workload.Recommendation
	for i := 0; i < len(targets); i += 2 {
		r.Containers = append(r.Containers, workload.ContainerRecommendation{Name: targets[i].(string), Target: targets[i+1].(workload.Resources)})
	}
	return r
}

type want struct {
	// ops is the expected patch as JSON; "" means no patch.
	ops string
	// requests and limits of each container after the patch, "-" for none.
	after   map[string][2]corev1.ResourceList
	updates string
}

func TestCompute(t *testing.T) {
	auto := v1alpha1.UpdateModeAuto
	appRec := recFor("app", workload.Resources{CPU: 0.5, Memory: 256 * mi})
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		in   Input
		want want
	}{
		{
			name: "no resources at all: one add of the whole object",
			pod:  pod(ctr("app", nil, nil)),
			in:   Input{Mode: auto, Recommendation: appRec},
			want: want{
				ops:     `[{"op":"add","path":"/spec/containers/0/resources","value":{"requests":{"cpu":"500m","memory":"256Mi"}}},{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/updates":"container app: cpu request, memory request"}}]`,
				after:   map[string][2]corev1.ResourceList{"app": {rl("cpu", "500m", "memory", "256Mi"), nil}},
				updates: "container app: cpu request, memory request",
			},
		},
		{
			name: "requests replaced, limits scaled in proportion",
			pod:  pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), rl("cpu", "1", "memory", "256Mi"))),
			in:   Input{Mode: v1alpha1.UpdateModeInitial, Recommendation: appRec},
			want: want{
				ops: `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"500m"},{"op":"replace","path":"/spec/containers/0/resources/requests/memory","value":"256Mi"},` +
					`{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"2"},{"op":"replace","path":"/spec/containers/0/resources/limits/memory","value":"512Mi"},` +
					`{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/updates":"container app: cpu request, cpu limit, memory request, memory limit"}}]`,
				after: map[string][2]corev1.ResourceList{"app": {rl("cpu", "500m", "memory", "256Mi"), rl("cpu", "2", "memory", "512Mi")}},
			},
		},
		{
			name: "RequestsOnly keeps limits and stays within them",
			pod:  pod(ctr("app", rl("cpu", "250m", "memory", "128Mi"), rl("cpu", "400m"))),
			in: Input{Mode: v1alpha1.UpdateModeRecreate, Recommendation: appRec, Constraints: workload.Constraints{Containers: []workload.ContainerPolicy{
				{Name: "*", ControlledValues: workload.RequestsOnly},
			}}},
			want: want{
				after:   map[string][2]corev1.ResourceList{"app": {rl("cpu", "400m", "memory", "256Mi"), rl("cpu", "400m")}},
				updates: "container app: cpu request, memory request",
			},
		},
		{
			name: "minAllowed and maxAllowed clamp the target",
			pod:  pod(ctr("app", rl("cpu", "100m"), nil)),
			in: Input{Mode: auto, Recommendation: appRec, Constraints: workload.Constraints{Containers: []workload.ContainerPolicy{
				{Name: "app", MaxAllowed: workload.Resources{CPU: 0.3}, MinAllowed: workload.Resources{Memory: 512 * mi}},
			}}},
			want: want{
				ops:   `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"300m"},{"op":"add","path":"/spec/containers/0/resources/requests/memory","value":"512Mi"},{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/updates":"container app: cpu request, memory request"}}]`,
				after: map[string][2]corev1.ResourceList{"app": {rl("cpu", "300m", "memory", "512Mi"), nil}},
			},
		},
		{
			name: "controlledResources cpu only leaves memory",
			pod:  pod(ctr("app", rl("cpu", "100m", "memory", "64Mi"), rl("memory", "64Mi"))),
			in: Input{Mode: auto, Recommendation: appRec, Constraints: workload.Constraints{Containers: []workload.ContainerPolicy{
				{Name: "*", ControlledResources: []workload.Resource{workload.CPU}},
			}}},
			want: want{
				after:   map[string][2]corev1.ResourceList{"app": {rl("cpu", "500m", "memory", "64Mi"), rl("memory", "64Mi")}},
				updates: "container app: cpu request",
			},
		},
		{
			name: "container in mode Off is left alone, the other is sized",
			pod:  pod(ctr("sidecar", nil, nil), ctr("app", nil, rl("cpu", "1"))),
			in: Input{Mode: auto, Recommendation: recFor("sidecar", workload.Resources{CPU: 1}, "app", workload.Resources{CPU: 0.5}), Constraints: workload.Constraints{Containers: []workload.ContainerPolicy{
				{Name: "sidecar", Mode: workload.ContainerModeOff},
			}}},
			want: want{
				// No request but a limit: Kubernetes would default the
				// request to the limit, so the limit follows the request.
				ops:   `[{"op":"add","path":"/spec/containers/1/resources/requests","value":{"cpu":"500m"}},{"op":"replace","path":"/spec/containers/1/resources/limits/cpu","value":"500m"},{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/updates":"container app: cpu request, cpu limit"}}]`,
				after: map[string][2]corev1.ResourceList{"sidecar": {nil, nil}, "app": {rl("cpu", "500m"), rl("cpu", "500m")}},
			},
		},
		{
			name: "update mode Off: no patch",
			pod:  pod(ctr("app", nil, nil)),
			in:   Input{Mode: v1alpha1.UpdateModeOff, Recommendation: appRec},
			want: want{},
		},
		{
			name: "unknown update mode: no patch",
			pod:  pod(ctr("app", nil, nil)),
			in:   Input{Mode: "Sometimes", Recommendation: appRec},
			want: want{},
		},
		{
			name: "already at the recommendation: no patch, no annotation",
			pod:  pod(ctr("app", rl("cpu", "0.5", "memory", "268435456"), nil)),
			in:   Input{Mode: auto, Recommendation: appRec},
			want: want{},
		},
		{
			name: "no recommendation for the container: no patch",
			pod:  pod(ctr("other", nil, nil)),
			in:   Input{Mode: auto, Recommendation: appRec},
			want: want{},
		},
		{
			name: "existing annotations: add one key, escaped",
			pod: func() *corev1.Pod {
				p := pod(ctr("app", rl("cpu", "1"), nil))
				p.Annotations = map[string]string{"a": "b"}
				return p
			}(),
			in: Input{Mode: InPlace(), Recommendation: recFor("app", workload.Resources{CPU: 0.25})},
			want: want{
				ops: `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"250m"},{"op":"add","path":"/metadata/annotations/autoscaling.aware.dev~1updates","value":"container app: cpu request"}]`,
			},
		},
		{
			name: "stale updates annotation from the template is replaced",
			pod: func() *corev1.Pod {
				p := pod(ctr("app", rl("cpu", "1"), nil))
				p.Annotations = map[string]string{UpdatesAnnotation: "old"}
				return p
			}(),
			in: Input{Mode: auto, Recommendation: recFor("app", workload.Resources{CPU: 0.25})},
			want: want{
				ops: `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"250m"},{"op":"replace","path":"/metadata/annotations/autoscaling.aware.dev~1updates","value":"container app: cpu request"}]`,
			},
		},
		{
			name: "resource claims kept: requests added beside them",
			pod: func() *corev1.Pod {
				p := pod(ctr("app", nil, nil))
				p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
				return p
			}(),
			in: Input{Mode: auto, Recommendation: recFor("app", workload.Resources{CPU: 0.25})},
			want: want{
				ops: `[{"op":"add","path":"/spec/containers/0/resources/requests","value":{"cpu":"250m"}},{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/updates":"container app: cpu request"}}]`,
			},
		},
		{
			name: "LimitRange container max scales request and limit together",
			pod:  pod(ctr("app", rl("cpu", "250m"), rl("cpu", "1"))),
			in:   Input{Mode: auto, Recommendation: appRec, Caps: Caps{ContainerMax: workload.Resources{CPU: 1}}},
			want: want{
				// 500m with ratio 4 would be a 2-core limit; capped at 1
				// core the request shrinks to keep the ratio.
				after: map[string][2]corev1.ResourceList{"app": {rl("cpu", "250m", "memory", "256Mi"), rl("cpu", "1")}},
			},
		},
		{
			name: "LimitRange min and maxLimitRequestRatio raise the request",
			pod:  pod(ctr("app", rl("cpu", "1"), rl("cpu", "2"))),
			in: Input{Mode: auto, Recommendation: recFor("app", workload.Resources{CPU: 0.05}), Caps: Caps{ContainerMin: workload.Resources{CPU: 0.1}, MaxRatio: workload.Resources{CPU: 4}},
				Constraints: workload.Constraints{Containers: []workload.ContainerPolicy{{Name: "*", ControlledValues: workload.RequestsOnly}}}},
			want: want{after: map[string][2]corev1.ResourceList{"app": {rl("cpu", "500m"), rl("cpu", "2")}}},
		},
		{
			name: "LimitRange pod max shares the budget in proportion",
			pod:  pod(ctr("a", nil, nil), ctr("b", nil, nil), ctr("fixed", rl("cpu", "1"), nil)),
			in: Input{Mode: auto, Recommendation: recFor("a", workload.Resources{CPU: 2}, "b", workload.Resources{CPU: 2}),
				Constraints: workload.Constraints{Containers: []workload.ContainerPolicy{{Name: "fixed", Mode: workload.ContainerModeOff}}},
				Caps:        Caps{PodMax: workload.Resources{CPU: 3}}},
			want: want{after: map[string][2]corev1.ResourceList{"a": {rl("cpu", "1"), nil}, "b": {rl("cpu", "1"), nil}, "fixed": {rl("cpu", "1"), nil}}},
		},
		{
			name: "non-finite target is ignored",
			pod:  pod(ctr("app", nil, nil)),
			in:   Input{Mode: auto, Recommendation: recFor("app", workload.Resources{CPU: -1, Memory: 0})},
			want: want{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.pod)
			res := Compute(tc.pod, tc.in)
			if after, _ := json.Marshal(tc.pod); string(after) != string(before) {
				t.Fatal("Compute modified its input")
			}
			got := ""
			if len(res.Patch) > 0 {
				b, err := json.Marshal(res.Patch)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if tc.want.ops != "" && got != tc.want.ops {
				t.Fatalf("patch\n got %s\nwant %s", got, tc.want.ops)
			}
			if tc.want.ops == "" && tc.want.after == nil && got != "" {
				t.Fatalf("want no patch, got %s", got)
			}
			if tc.want.updates != "" && strings.Join(res.Updates, "; ") != tc.want.updates {
				t.Fatalf("updates %q, want %q", res.Updates, tc.want.updates)
			}
			if got == "" {
				return
			}
			// The API server applies the patch to its own encoding of the
			// pod; check both shapes a container's resources can take.
			for _, shape := range []string{"as encoded", "resources omitted"} {
				doc := encode(t, tc.pod, shape == "resources omitted")
				p := applyPatch(t, doc, got)
				if p.Annotations[UpdatesAnnotation] != strings.Join(res.Updates, "; ") {
					t.Fatalf("%s: annotation %q, updates %q", shape, p.Annotations[UpdatesAnnotation], res.Updates)
				}
				for k, v := range tc.pod.Annotations {
					if k != UpdatesAnnotation && p.Annotations[k] != v {
						t.Fatalf("%s: annotation %s lost", shape, k)
					}
				}
				for _, c := range p.Spec.Containers {
					w, ok := tc.want.after[c.Name]
					if !ok {
						continue
					}
					if !equalList(c.Resources.Requests, w[0]) || !equalList(c.Resources.Limits, w[1]) {
						t.Fatalf("%s: container %s requests %v limits %v, want %v %v", shape, c.Name, c.Resources.Requests, c.Resources.Limits, w[0], w[1])
					}
					if len(c.Resources.Claims) != len(containerNamed(tc.pod, c.Name).Resources.Claims) {
						t.Fatalf("%s: claims lost", shape)
					}
				}
			}
		})
	}
}

// InPlace is a helper so the table reads as the mode names.
func InPlace() v1alpha1.UpdateMode { return v1alpha1.UpdateModeInPlaceOrRecreate }

func containerNamed(p *corev1.Pod, name string) corev1.Container {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	return corev1.Container{}
}

func equalList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// encode serialises the pod as the API server does; with dropEmpty, empty
// "resources" objects are removed, as a hand-written client might send.
func encode(t *testing.T, p *corev1.Pod, dropEmpty bool) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !dropEmpty {
		return b
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, c := range m["spec"].(map[string]any)["containers"].([]any) {
		cm := c.(map[string]any)
		if r, ok := cm["resources"].(map[string]any); ok && len(r) == 0 {
			delete(cm, "resources")
		}
	}
	b, _ = json.Marshal(m)
	return b
}

func applyPatch(t *testing.T, doc []byte, ops string) *corev1.Pod {
	t.Helper()
	p, err := jsonpatch.DecodePatch([]byte(ops))
	if err != nil {
		t.Fatalf("decode patch: %v", err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("apply %s to %s: %v", ops, doc, err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(out, &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

func TestEscapePointer(t *testing.T) {
	for in, want := range map[string]string{
		"autoscaling.aware.dev/updates": "autoscaling.aware.dev~1updates",
		"a~b/c":                         "a~0b~1c",
		"~1":                            "~01",
		"plain":                         "plain",
	} {
		if got := EscapePointer(in); got != want {
			t.Errorf("EscapePointer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCapsFrom(t *testing.T) {
	lr := func(typ corev1.LimitType, max, min, ratio corev1.ResourceList) *corev1.LimitRange {
		return &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: typ, Max: max, Min: min, MaxLimitRequestRatio: ratio}}}}
	}
	c := CapsFrom([]*corev1.LimitRange{
		lr(corev1.LimitTypeContainer, rl("cpu", "2", "memory", "1Gi"), rl("cpu", "100m"), rl("cpu", "4")),
		lr(corev1.LimitTypeContainer, rl("cpu", "1"), rl("cpu", "50m", "memory", "64Mi"), rl("cpu", "10")),
		lr(corev1.LimitTypePod, rl("memory", "2Gi"), nil, nil),
		nil,
	})
	want := Caps{
		ContainerMax: workload.Resources{CPU: 1, Memory: 1 << 30},
		ContainerMin: workload.Resources{CPU: 0.1, Memory: 64 * mi},
		MaxRatio:     workload.Resources{CPU: 4},
		PodMax:       workload.Resources{Memory: 2 << 30},
	}
	if c != want {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestInputFor(t *testing.T) {
	m := &v1alpha1.MultidimPodAutoscaler{}
	if _, ok := InputFor(m, Caps{}); ok {
		t.Fatal("an MPA without a recommendation must give no input")
	}
	off := v1alpha1.UpdateModeOff
	m.Spec.Policy = &v1alpha1.PodUpdatePolicy{UpdateMode: &off}
	m.Status.Recommendation = &v1alpha1.RecommendedPodResources{ContainerRecommendations: []v1alpha1.RecommendedContainerResources{{ContainerName: "app", Target: rl("cpu", "1")}}}
	in, ok := InputFor(m, Caps{})
	if !ok || in.Mode != off || in.Recommendation.Containers[0].Target.CPU != 1 {
		t.Fatalf("got %+v %v", in, ok)
	}
	if res := Compute(pod(ctr("app", nil, nil)), in); len(res.Patch) != 0 {
		t.Fatalf("mode Off patched: %v", res.Patch)
	}
}

// TestVerticalLeftToARival: while a VerticalPodAutoscaler contests the pod
// resources, the recommender writes the replica count only; the webhook
// then changes no pod.
func TestVerticalLeftToARival(t *testing.T) {
	m := &v1alpha1.MultidimPodAutoscaler{}
	m.Status.DesiredReplicas = 3
	in, ok := InputFor(m, Caps{})
	if !ok {
		t.Fatal("a replica-only recommendation is a recommendation")
	}
	if res := Compute(pod(ctr("app", rl("cpu", "100m"), nil)), in); len(res.Patch) != 0 {
		t.Fatalf("pod resources patched without a recommendation for them: %v", res.Patch)
	}
}
