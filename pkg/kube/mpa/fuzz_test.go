package mpa

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// FuzzMPAToRecommendation drives arbitrary MultidimPodAutoscaler objects
// (JSON, as the API server stores them; the CRD's validation is not
// assumed) through the path from an object to a recommendation and back:
// the update mode, recommender name, target and behaviour; the constraints
// every policy clamps to; and the recommendation read from status, written
// back as status and read again. None may panic, clamped replicas stay in
// valid bounds, and a recommendation written to status and read back keeps
// every amount (up to the millicore and byte it is rounded up to).
func FuzzMPAToRecommendation(f *testing.F) {
	examples, err := filepath.Glob("../../../deploy/examples/*.yaml")
	if err != nil || len(examples) == 0 {
		// A moved package must not lose its seeds silently.
		f.Fatalf("no example manifests to seed from (%v)", err)
	}
	for _, e := range examples {
		raw, err := os.ReadFile(e)
		if err != nil {
			f.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j, int32(3))
	}
	f.Add([]byte(`{"spec":{"constraints":{"global":{"minReplicas":5,"maxReplicas":2}}},"status":{"desiredReplicas":3,"recommendation":{"containerRecommendations":[{"containerName":"app","target":{"cpu":"250m","memory":"1Gi"},"lowerBound":{"cpu":"-1"},"upperBound":{"memory":"1e30"}}]}}}`), int32(-7))
	f.Add([]byte(`{"spec":{"constraints":{"container":[{"name":"*","requests":{"minAllowed":{"cpu":"2"},"maxAllowed":{"cpu":"1"}}}]},"resourcePolicy":{"containerPolicies":[{"containerName":"*","mode":"Off"}]}},"status":{"rl":{"source":"Agent","reason":"AgentActing"},"desiredReplicas":2}}`), int32(1<<30))
	// Amounts at the edge of int64 (bytes, millicores).
	f.Add([]byte(`{"status":{"desiredReplicas":1,"recommendation":{"containerRecommendations":[{"containerName":"app","target":{"cpu":"9223372036854775807m","memory":"9223372036854775807"}}]}}}`), int32(1))
	f.Fuzz(func(t *testing.T, raw []byte, replicas int32) {
		var m v1alpha1.MultidimPodAutoscaler
		if err := json.Unmarshal(raw, &m); err != nil {
			return
		}
		mode := UpdateMode(&m)
		_ = ScalesHorizontally(mode)
		_ = RecommenderName(&m)
		_, _ = TargetOf(&m)
		if sc := m.Spec.Constraints; sc != nil && sc.Global != nil {
			_ = Behavior(sc.Global.Behavior)
		}

		c := Constraints(&m)
		if err := c.Validate(); err == nil {
			n := c.ClampReplicas(replicas)
			if n < max(c.MinReplicas, 1) || (c.MaxReplicas > 0 && n > c.MaxReplicas) {
				t.Fatalf("ClampReplicas(%d) = %d outside [%d, %d]", replicas, n, c.MinReplicas, c.MaxReplicas)
			}
		}
		for _, p := range c.Containers {
			_ = c.ContainerPolicy(p.Name)
		}

		rec, ok := Recommendation(&m.Status)
		if !ok {
			return
		}
		back, ok := Recommendation(&v1alpha1.MultidimPodAutoscalerStatus{DesiredReplicas: rec.Replicas, Recommendation: RecommendedPodResources(rec), RL: m.Status.RL})
		if !ok && rec.Replicas != 0 {
			t.Fatalf("a recommendation of %d replicas was lost in status", rec.Replicas)
		}
		if !ok {
			return
		}
		if back.Replicas != rec.Replicas || len(back.Containers) != len(rec.Containers) {
			t.Fatalf("round trip: %d replicas, %d containers; want %d, %d", back.Replicas, len(back.Containers), rec.Replicas, len(rec.Containers))
		}
		for i := range rec.Containers {
			a, b := rec.Containers[i], back.Containers[i]
			for _, v := range []struct {
				name string
				x, y workload.Resources
			}{{"target", a.Target, b.Target}, {"lowerBound", a.LowerBound, b.LowerBound}, {"upperBound", a.UpperBound, b.UpperBound}, {"uncappedTarget", a.UncappedTarget, b.UncappedTarget}} {
				roundTrips(t, a.Name+" "+v.name+" cpu", v.x.CPU, v.y.CPU, 1e-3)
				roundTrips(t, a.Name+" "+v.name+" memory", v.x.Memory, v.y.Memory, 1)
			}
		}
	})
}

// roundTrips checks that y, read back after writing x, is x rounded up to
// a multiple of unit: amounts that are not positive are dropped (0).
func roundTrips(t *testing.T, what string, x, y, unit float64) {
	t.Helper()
	if !(x > 0) || math.IsInf(x, 0) {
		if y != 0 {
			t.Fatalf("%s: %v came back as %v, want it dropped", what, x, y)
		}
		return
	}
	if y < x*(1-1e-12) || y > x+unit*(1+1e-9)+x*1e-12 {
		t.Fatalf("%s: %v came back as %v", what, x, y)
	}
}
