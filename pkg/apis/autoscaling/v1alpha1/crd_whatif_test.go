package v1alpha1

import (
	"encoding/json"
	"testing"
)

// whatifManifest is the manifest `recommender whatif` writes for the
// recorded history of its tests (golden, rewritten with their -update).
const whatifManifest = "../../../../recommender/app/testdata/whatif/mpa-shop-web.yaml"

// TestCRDAdmitsWhatifManifest: the MPA the what-if tells a user to apply
// passes the API server's create path (pruning, defaulting, OpenAPI and
// CEL validation) unchanged, and keeps updateMode Off, which defaulting
// must not turn into Auto.
func TestCRDAdmitsWhatifManifest(t *testing.T) {
	crd := loadCRD(t, "autoscaling.aware.dev_multidimpodautoscalers.yaml")
	obj, pruned, errs := crd.admit(t, readObject(t, whatifManifest))
	if len(pruned) > 0 {
		t.Errorf("the schema would silently drop %v", pruned)
	}
	if len(errs) > 0 {
		t.Fatalf("rejected: %v", errs.ToAggregate())
	}
	var mpa MultidimPodAutoscaler
	b, _ := json.Marshal(obj)
	mustUnmarshal(t, b, &mpa)
	if p := mpa.Spec.Policy; p == nil || p.UpdateMode == nil || *p.UpdateMode != UpdateModeOff {
		t.Errorf("updateMode %+v, want Off", p)
	}
	c := mpa.Spec.ResourcePolicy.ContainerPolicies
	if len(c) != 1 || c[0].MinAllowed.Cpu().Cmp(*c[0].MaxAllowed.Cpu()) > 0 || c[0].MinAllowed.Memory().Cmp(*c[0].MaxAllowed.Memory()) > 0 {
		t.Errorf("container policies %+v", c)
	}
}
