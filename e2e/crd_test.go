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

	res := func(cpu, mem string) map[string]any { return map[string]any{"cpu": cpu, "memory": mem} }
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"minReplicas above maxReplicas", map[string]any{"constraints": map[string]any{"global": map[string]any{"minReplicas": 5, "maxReplicas": 2}}}, "minReplicas must be less than or equal to maxReplicas"},
		{"zero maxReplicas", map[string]any{"constraints": map[string]any{"global": map[string]any{"maxReplicas": 0}}}, "maxReplicas"},
		{"minAllowed above maxAllowed in resourcePolicy", map[string]any{"resourcePolicy": map[string]any{"containerPolicies": []any{map[string]any{"containerName": "*", "minAllowed": res("2", "1Gi"), "maxAllowed": res("1", "2Gi")}}}}, "minAllowed must be less than or equal to maxAllowed"},
		{"minAllowed above maxAllowed in constraints", map[string]any{"constraints": map[string]any{"container": []any{map[string]any{"name": "c", "requests": map[string]any{"minAllowed": res("100m", "2Gi"), "maxAllowed": res("1", "1Gi")}}}}}, "minAllowed must be less than or equal to maxAllowed"},
		{"two recommenders", map[string]any{"recommenders": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}, "recommenders"},
		{"unknown updateMode", map[string]any{"policy": map[string]any{"updateMode": "Sometimes"}}, "updateMode"},
		{"unknown container mode", map[string]any{"resourcePolicy": map[string]any{"containerPolicies": []any{map[string]any{"containerName": "*", "mode": "Maybe"}}}}, "mode"},
		{"unknown controlledValues", map[string]any{"resourcePolicy": map[string]any{"containerPolicies": []any{map[string]any{"containerName": "*", "controlledValues": "LimitsOnly"}}}}, "controlledValues"},
		{"zero SLO target", map[string]any{"rl": map[string]any{"slo": map[string]any{"metric": map[string]any{"name": "lat"}, "target": "0s"}}}, "slo.target must be greater than zero"},
		{"malformed SLO target", map[string]any{"rl": map[string]any{"slo": map[string]any{"metric": map[string]any{"name": "lat"}, "target": "fast"}}}, "target"},
		{"alpha above 1", map[string]any{"rl": map[string]any{"alpha": 1.5}}, "alpha"},
		{"negative alpha", map[string]any{"rl": map[string]any{"alpha": -0.1}}, "alpha"},
		{"unknown rl mode", map[string]any{"rl": map[string]any{"mode": "Aggressive"}}, "mode"},
		{"retrain mean above promote mean", map[string]any{"rl": map[string]any{"gates": map[string]any{"promoteMinMean": 0.5, "retrainBelowMean": 0.7}}}, "retrainBelowMean must not exceed promoteMinMean"},
		{"retrain std below promote std", map[string]any{"rl": map[string]any{"gates": map[string]any{"promoteMaxStdDev": 0.3, "retrainAboveStdDev": 0.1}}}, "retrainAboveStdDev must be at least promoteMaxStdDev"},
		{"window of one episode", map[string]any{"rl": map[string]any{"gates": map[string]any{"window": 1}}}, "window"},
		{"negative std threshold", map[string]any{"rl": map[string]any{"gates": map[string]any{"promoteMaxStdDev": -0.1}}}, "promoteMaxStdDev"},
		{"unsupported percentile", map[string]any{"rl": map[string]any{"slo": map[string]any{"metric": map[string]any{"name": "lat"}, "target": "1s", "percentile": 42}}}, "percentile"},
	} {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			obj := minimalMPA(ns, "invalid")
			for k, v := range tc.spec {
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
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	t.Run("accepts the upstream example", func(t *testing.T) {
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
