package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

const examplesDir = "../../../../deploy/examples"

// TestExamplesRoundTrip decodes every example manifest strictly (an unknown
// field fails) and encodes it back: the result must hold every field of the
// input with the same value, so no upstream field is silently dropped.
func TestExamplesRoundTrip(t *testing.T) {
	for _, name := range []string{"upstream-mpa.yaml", "hamster-mpa.yaml", "rl-mpa.yaml"} {
		t.Run(name, func(t *testing.T) {
			in := readJSON(t, filepath.Join(examplesDir, name))
			var mpa MultidimPodAutoscaler
			dec := json.NewDecoder(bytes.NewReader(in))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&mpa); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			out, err := json.Marshal(&mpa)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			var want, got map[string]any
			mustUnmarshal(t, in, &want)
			mustUnmarshal(t, out, &got)
			// Encoding adds empty status fields; drop them so the comparison
			// is about what the user wrote.
			delete(got, "status")
			if md, ok := got["metadata"].(map[string]any); ok {
				delete(md, "creationTimestamp")
			}
			if diff := compare("", normalize(want), normalize(got)); diff != "" {
				t.Fatalf("round trip changed the manifest:\n%s", diff)
			}
		})
	}
}

// TestUpstreamExampleMeaning checks the decoded values, not only their
// presence: the same manifest must mean the same thing as upstream.
func TestUpstreamExampleMeaning(t *testing.T) {
	var mpa MultidimPodAutoscaler
	mustUnmarshal(t, readJSON(t, filepath.Join(examplesDir, "upstream-mpa.yaml")), &mpa)
	s := mpa.Spec
	if got := s.ScaleTargetRef.Kind + "/" + s.ScaleTargetRef.Name; got != "Deployment/hamster" {
		t.Errorf("scaleTargetRef = %s", got)
	}
	if got := *s.Policy.UpdateMode; got != UpdateModeAuto {
		t.Errorf("updateMode = %s", got)
	}
	if got := *s.Constraints.Global.MaxReplicas; got != 6 {
		t.Errorf("maxReplicas = %d", got)
	}
	if got := *s.Constraints.Global.Behavior.ScaleDown.StabilizationWindowSeconds; got != 120 {
		t.Errorf("scaleDown window = %d", got)
	}
	cp := s.ResourcePolicy.ContainerPolicies[0]
	if got := cp.MaxAllowed.Cpu().MilliValue(); got != 1000 {
		t.Errorf("maxAllowed cpu = %dm", got)
	}
	if got := *cp.ControlledValues; got != ContainerControlledValuesRequestsAndLimits {
		t.Errorf("controlledValues = %s", got)
	}
	if got := *s.ResourcePolicy.ContainerPolicies[1].Mode; got != ContainerScalingModeOff {
		t.Errorf("sidecar mode = %s", got)
	}
	if got := s.Constraints.Container[0].Requests.MaxAllowed.Memory().Value(); got != 1<<30 {
		t.Errorf("container maxAllowed memory = %d", got)
	}
	if got := len(s.Goals.Metrics); got != 4 {
		t.Errorf("goals.metrics has %d entries", got)
	}
	if got := *s.Goals.Metrics[0].Resource.Target.AverageUtilization; got != 30 {
		t.Errorf("cpu averageUtilization = %d", got)
	}
	if got := s.Goals.Metrics[2].Object.Target.Value.Value(); got != 10000 {
		t.Errorf("object target value = %d", got)
	}
}

func readJSON(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return j
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// normalize turns numbers into their string form so that a quantity written
// as 1 and encoded as "1" compare equal; everything else is kept.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = normalize(e)
		}
		return s
	case float64:
		return fmt.Sprint(x)
	default:
		return x
	}
}

// compare reports every path where got lacks or changes a value of want.
func compare(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want object, got %v\n", path, got)
		}
		var out string
		for k, e := range w {
			gv, ok := g[k]
			if !ok {
				out += fmt.Sprintf("%s.%s: missing after round trip\n", path, k)
				continue
			}
			out += compare(path+"."+k, e, gv)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: want %v, got %v\n", path, want, got)
		}
		var out string
		for i := range w {
			out += compare(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: want %v, got %v\n", path, want, got)
		}
		return ""
	}
}
