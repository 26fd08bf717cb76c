//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var mpaGVR = schema.GroupVersionResource{Group: "autoscaling.aware.dev", Version: "v1alpha1", Resource: "multidimpodautoscalers"}

func minimalMPA(ns, name string) map[string]any {
	return map[string]any{
		"apiVersion": "autoscaling.aware.dev/v1alpha1",
		"kind":       "MultidimPodAutoscaler",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
		},
	}
}

// TestCRDValidation runs the CRD from deploy/crd in the real API server: each
// invalid MultidimPodAutoscaler its OpenAPI and CEL rules forbid is refused
// with a message naming the problem, the upstream-style example is
// accepted as is, and the schema's defaults are applied.
func TestCRDValidation(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "crd")
	dyn, err := dynamic.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	mpas := dyn.Resource(mpaGVR).Namespace(ns)

	raw, err := os.ReadFile(filepath.Join(repoRoot, "pkg/apis/autoscaling/v1alpha1/testdata/invalid-mpas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The same cases the unit test runs through the API server's code.
	var cases []struct {
		Name string         `json:"name"`
		Spec map[string]any `json:"spec"`
		Want string         `json:"want"`
	}
	if err := yaml.UnmarshalStrict(raw, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("invalid-mpas.yaml: %d cases, %v", len(cases), err)
	}
	for _, tc := range cases {
		t.Run("rejects "+tc.Name, func(t *testing.T) {
			tb.DumpLogsOnFailure(t)
			obj := minimalMPA(ns, "invalid")
			for k, v := range tc.Spec {
				obj["spec"].(map[string]any)[k] = v
			}
			_, err := mpas.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
			if err == nil {
				_ = mpas.Delete(ctx, "invalid", metav1.DeleteOptions{})
				t.Fatal("the API server accepted an invalid object")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("error %q does not mention %q", err, tc.Want)
			}
		})
	}

	t.Run("accepts the upstream example", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/examples/upstream-mpa.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace(ns)
		// Strict field validation: the example must use only fields the
		// schema knows (nothing silently pruned).
		created, err := mpas.Create(ctx, u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		if err != nil {
			t.Fatalf("rejected: %v", err)
		}
		got, err := mpas.Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, _, _ := unstructured.NestedString(got.Object, "spec", "policy", "updateMode"); m != "Auto" {
			t.Errorf("spec.policy.updateMode = %q, want Auto", m)
		}
		if n, found, _ := unstructured.NestedInt64(got.Object, "spec", "constraints", "global", "maxReplicas"); !found || n != 6 {
			t.Errorf("spec.constraints.global.maxReplicas = %d (found %v), want 6", n, found)
		}
	})

	t.Run("applies defaults", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		obj := minimalMPA(ns, "defaulted")
		// Defaults apply inside objects that are present: give the
		// constraints and the RL gates an empty shell.
		obj["spec"].(map[string]any)["constraints"] = map[string]any{"global": map[string]any{"maxReplicas": 4}}
		obj["spec"].(map[string]any)["rl"] = map[string]any{"gates": map[string]any{}}
		if _, err := mpas.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("rejected a minimal MPA: %v", err)
		}
		got, err := mpas.Get(ctx, "defaulted", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, _, _ := unstructured.NestedString(got.Object, "spec", "policy", "updateMode"); m != "Auto" {
			t.Errorf("spec.policy.updateMode = %q, want the default Auto", m)
		}
		if n, found, _ := unstructured.NestedInt64(got.Object, "spec", "constraints", "global", "minReplicas"); !found || n != 1 {
			t.Errorf("spec.constraints.global.minReplicas = %d (found %v), want the default 1", n, found)
		}
		if m, _, _ := unstructured.NestedString(got.Object, "spec", "rl", "mode"); m != "Off" {
			t.Errorf("spec.rl.mode = %q, want the default Off", m)
		}
		if a, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "rl", "alpha"); !found || a != 0.5 {
			t.Errorf("spec.rl.alpha = %v (found %v), want the default 0.5", a, found)
		}
		if w, found, _ := unstructured.NestedInt64(got.Object, "spec", "rl", "gates", "window"); !found || w != 10 {
			t.Errorf("spec.rl.gates.window = %d (found %v), want the default 10", w, found)
		}
	})
}
