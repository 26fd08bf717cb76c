package v1alpha1

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

const crdDir = "../../../../deploy/crd"

// crdSchema is a CRD's v1alpha1 schema in the forms the API server uses.
type crdSchema struct {
	props      *apiextensions.JSONSchemaProps
	structural *structuralschema.Structural
}

// loadCRD reads a generated CRD, checks that the API server's own CRD
// validation accepts it (this compiles every CEL rule and checks its cost
// budget), and returns its schema.
func loadCRD(t *testing.T, file string) crdSchema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(crdDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var v1 apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &v1); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	scheme := runtime.NewScheme()
	apiextensionsinstall.Install(scheme)
	scheme.Default(&v1)
	var crd apiextensions.CustomResourceDefinition
	if err := scheme.Convert(&v1, &crd, nil); err != nil {
		t.Fatalf("convert: %v", err)
	}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &crd); len(errs) > 0 {
		t.Fatalf("the API server would reject %s: %v", file, errs.ToAggregate())
	}
	props := crd.Spec.Validation
	if props == nil {
		props = crd.Spec.Versions[0].Schema
	}
	if props == nil || props.OpenAPIV3Schema == nil {
		t.Fatalf("%s has no schema", file)
	}
	s, err := structuralschema.NewStructural(props.OpenAPIV3Schema)
	if err != nil {
		t.Fatalf("structural schema: %v", err)
	}
	return crdSchema{props: props.OpenAPIV3Schema, structural: s}
}

// admit runs an object through the API server's create path for custom
// resources: pruning, defaulting, OpenAPI validation, then CEL rules. It
// returns the admitted object, the pruned paths and the validation errors.
func (c crdSchema) admit(t *testing.T, obj map[string]any) (map[string]any, []string, field.ErrorList) {
	t.Helper()
	// Decode as the API server does: integers become int64, which CEL
	// needs, rather than encoding/json's float64.
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj = map[string]any{}
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	pruned := structuralpruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	structuraldefaulting.Default(obj, c.structural)
	validator, _, err := apiservervalidation.NewSchemaValidator(c.props)
	if err != nil {
		t.Fatal(err)
	}
	errs := apiservervalidation.ValidateCustomResource(nil, obj, validator)
	celErrs, _ := cel.NewValidator(c.structural, true, celconfig.PerCallLimit).
		Validate(context.Background(), nil, c.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return obj, pruned, append(errs, celErrs...)
}

func readObject(t *testing.T, path string) map[string]any {
	t.Helper()
	var obj map[string]any
	mustUnmarshal(t, readJSON(t, path), &obj)
	return obj
}

func TestCRDAcceptsExamplesAndAppliesDefaults(t *testing.T) {
	crd := loadCRD(t, "autoscaling.aware.dev_multidimpodautoscalers.yaml")
	for _, name := range []string{"upstream-mpa.yaml", "hamster-mpa.yaml", "rl-mpa.yaml"} {
		t.Run(name, func(t *testing.T) {
			obj, pruned, errs := crd.admit(t, readObject(t, filepath.Join(examplesDir, name)))
			if len(pruned) > 0 {
				t.Errorf("the schema would silently drop %v", pruned)
			}
			if len(errs) > 0 {
				t.Fatalf("rejected: %v", errs.ToAggregate())
			}
			var mpa MultidimPodAutoscaler
			b, _ := json.Marshal(obj)
			mustUnmarshal(t, b, &mpa)
			if mpa.Spec.Policy == nil || mpa.Spec.Policy.UpdateMode == nil || *mpa.Spec.Policy.UpdateMode != UpdateModeAuto && name != "rl-mpa.yaml" {
				t.Errorf("updateMode not defaulted to Auto: %+v", mpa.Spec.Policy)
			}
			if g := mpa.Spec.Constraints.Global; g == nil || g.MinReplicas == nil || *g.MinReplicas < 1 {
				t.Errorf("minReplicas not defaulted: %+v", g)
			}
		})
	}
}

func TestCRDDefaultsRL(t *testing.T) {
	crd := loadCRD(t, "autoscaling.aware.dev_multidimpodautoscalers.yaml")
	obj := minimalMPA()
	obj["spec"].(map[string]any)["rl"] = map[string]any{"gates": map[string]any{}}
	obj, _, errs := crd.admit(t, obj)
	if len(errs) > 0 {
		t.Fatalf("rejected: %v", errs.ToAggregate())
	}
	var mpa MultidimPodAutoscaler
	b, _ := json.Marshal(obj)
	mustUnmarshal(t, b, &mpa)
	rl := mpa.Spec.RL
	if rl.Mode != RLModeOff || rl.Alpha == nil || *rl.Alpha != 0.5 {
		t.Errorf("rl defaults: mode=%q alpha=%v", rl.Mode, rl.Alpha)
	}
	g := rl.Gates
	if g.Window != 10 || g.EpisodeSteps != 30 || *g.PromoteMinMean != 0.6 || *g.PromoteMaxStdDev != 0.1 || *g.RetrainBelowMean != 0.5 || *g.RetrainAboveStdDev != 0.2 {
		t.Errorf("gate defaults: %+v", g)
	}
}

func minimalMPA() map[string]any {
	return map[string]any{
		"apiVersion": "autoscaling.aware.dev/v1alpha1",
		"kind":       "MultidimPodAutoscaler",
		"metadata":   map[string]any{"name": "m", "namespace": "default"},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
		},
	}
}

// TestCRDRejectsInvalid covers each rule the issue asks the schema to
// enforce; each case must fail with a message naming the problem.
func TestCRDRejectsInvalid(t *testing.T) {
	crd := loadCRD(t, "autoscaling.aware.dev_multidimpodautoscalers.yaml")
	for _, tc := range invalidCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			obj := minimalMPA()
			for k, v := range tc.Spec {
				obj["spec"].(map[string]any)[k] = v
			}
			_, _, errs := crd.admit(t, obj)
			if len(errs) == 0 {
				t.Fatalf("accepted an invalid object")
			}
			if msg := errs.ToAggregate().Error(); !strings.Contains(msg, tc.Want) {
				t.Fatalf("error %q does not mention %q", msg, tc.Want)
			}
		})
	}
}

// invalidCase is one entry of testdata/invalid-mpas.yaml, shared with the
// e2e test that runs the same cases against a real API server.
type invalidCase struct {
	Name string         `json:"name"`
	Spec map[string]any `json:"spec"`
	Want string         `json:"want"`
}

func invalidCases(t *testing.T) []invalidCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/invalid-mpas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []invalidCase
	if err := yaml.UnmarshalStrict(raw, &cases); err != nil {
		t.Fatalf("testdata/invalid-mpas.yaml: %v", err)
	}
	if len(cases) == 0 {
		t.Fatal("testdata/invalid-mpas.yaml holds no case")
	}
	return cases
}

func TestCheckpointCRDIsValid(t *testing.T) {
	loadCRD(t, "autoscaling.aware.dev_multidimpodautoscalercheckpoints.yaml")
}

// TestCRDAcceptsInPlaceAndStartupBoost: the InPlace mode and a start-up
// boost with each of its forms are admitted unchanged (nothing pruned).
func TestCRDAcceptsInPlaceAndStartupBoost(t *testing.T) {
	crd := loadCRD(t, "autoscaling.aware.dev_multidimpodautoscalers.yaml")
	for _, tc := range []struct {
		name string
		cpu  map[string]any
	}{
		{"factor", map[string]any{"factor": 3}},
		{"fractional factor and duration", map[string]any{"factor": 1.5, "duration": "30s"}},
		{"value", map[string]any{"value": "2"}},
		{"factor 1 and value in millicores", map[string]any{"factor": 1, "value": "500m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := minimalMPA()
			spec := obj["spec"].(map[string]any)
			spec["policy"] = map[string]any{"updateMode": "InPlace"}
			spec["resourcePolicy"] = map[string]any{"containerPolicies": []any{map[string]any{"containerName": "*", "startupBoost": map[string]any{"cpu": tc.cpu}}}}
			_, pruned, errs := crd.admit(t, obj)
			if len(errs) > 0 || len(pruned) > 0 {
				t.Fatalf("errors %v, pruned %v", errs.ToAggregate(), pruned)
			}
		})
	}
}
