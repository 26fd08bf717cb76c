package workload

import (
	"math"
	"strings"
	"testing"
)

const mi = 1 << 20

// TestFit: the cases are the real node's (2 cores allocatable, 0.5 of
// them requested by the autoscaler's own components) and a few nodes.
func TestFit(t *testing.T) {
	app := func(cpu, mem float64) ContainerRecommendation {
		return ContainerRecommendation{Name: "app",
			Target:     Resources{CPU: cpu, Memory: mem},
			LowerBound: Resources{CPU: cpu * 0.8, Memory: mem * 0.8},
			UpperBound: Resources{CPU: cpu * 2, Memory: mem * 2}}
	}
	obs := []ContainerObservation{{Name: "app", Requests: Resources{CPU: 0.2, Memory: 96 * mi}}}
	withSidecar := append(obs[:1:1], ContainerObservation{Name: "proxy", Requests: Resources{CPU: 0.1, Memory: 32 * mi}})
	bounds := &Constraints{MinReplicas: 1, MaxReplicas: 8, Containers: []ContainerPolicy{{Name: "*", Mode: ContainerModeAuto, MinAllowed: Resources{CPU: 0.05, Memory: 64 * mi}}}}
	realNode := Room{Nodes: []Resources{{CPU: 1.5, Memory: 20 << 30}}}
	for _, tc := range []struct {
		name         string
		rec          Recommendation
		room         Room
		current      []ContainerObservation
		replicas     int32 // now
		wantReplicas int32
		wantCPU      float64 // the app container's target
		wantMem      float64
		wantNote     string // a substring; "" means unchanged
	}{
		{"unknown room: unchanged", Recommendation{Replicas: 2, Containers: []ContainerRecommendation{app(1, 96*mi)}}, Room{}, obs, 1, 2, 1, 96 * mi, ""},
		{"fits: unchanged", Recommendation{Replicas: 1, Containers: []ContainerRecommendation{app(1, 96*mi)}}, realNode, obs, 1, 1, 1, 96 * mi, ""},
		// The real node's third path: two pods of 1 core on 1.5 cores.
		{"two pods of 1 core on 1.5: two of 0.75", Recommendation{Replicas: 2, Containers: []ContainerRecommendation{app(1, 96*mi)}}, realNode, obs, 2, 2, 0.75, 96 * mi, "pod cpu 1 → 0.75"},
		{"a scale-out of 1-core pods on 1.5: none", Recommendation{Replicas: 2, Containers: []ContainerRecommendation{app(1, 96*mi)}}, realNode, obs, 1, 1, 1, 96 * mi, "replicas 2 → 1"},
		{"four pods of 0.8 on 1.5: four of 0.375", Recommendation{Replicas: 4, Containers: []ContainerRecommendation{app(0.8, 96*mi)}}, realNode, obs, 4, 4, 0.375, 96 * mi, "→ 0.375"},
		// The real node's scale-out path: three pods asked to grow to 1
		// core each and a fourth: the fourth would only split the room.
		{"a scale-out from 3 to 4 of 1 core: 3 of 0.5", Recommendation{Replicas: 4, Containers: []ContainerRecommendation{app(1, 96*mi)}}, realNode, obs, 3, 3, 0.5, 96 * mi, "replicas 4 → 3"},
		{"a scale-out into room: as far as it goes", Recommendation{Replicas: 4, Containers: []ContainerRecommendation{app(0.5, 96*mi)}}, realNode, obs, 2, 3, 0.5, 96 * mi, "replicas 4 → 3"},
		{"a pod larger than any node", Recommendation{Replicas: 1, Containers: []ContainerRecommendation{app(3, 96*mi)}}, realNode, obs, 1, 1, 1.5, 96 * mi, "pod cpu 3 → 1.5"},
		{"memory above every node: capped", Recommendation{Replicas: 1, Containers: []ContainerRecommendation{app(1, 30<<30)}}, realNode, obs, 1, 1, 1, 20 << 30, "memory"},
		{"not even at minAllowed: fewer replicas", Recommendation{Replicas: 40, Containers: []ContainerRecommendation{app(0.5, 96*mi)}}, realNode, obs, 40, 30, 0.05, 96 * mi, "replicas 40 → 30"},
		{"no room for one pod: unchanged", Recommendation{Replicas: 2, Containers: []ContainerRecommendation{app(1, 96*mi)}}, Room{Nodes: []Resources{{CPU: 0.01, Memory: 20 << 30}}}, obs, 2, 2, 1, 96 * mi, ""},
		// Three nodes of 1, 1 and 0.5: three pods of 0.6 do not fit (two
		// slots); three of 0.5 do (1 + 1 + 1 slots... 2 + 2 + 1).
		{"bins, not the sum", Recommendation{Replicas: 3, Containers: []ContainerRecommendation{app(0.6, 96*mi)}}, Room{Nodes: []Resources{{CPU: 1, Memory: 1 << 30}, {CPU: 1, Memory: 1 << 30}, {CPU: 0.5, Memory: 1 << 30}}}, obs, 3, 3, 0.5, 96 * mi, "→ 0.5"},
		{"memory decides the slots", Recommendation{Replicas: 3, Containers: []ContainerRecommendation{app(0.2, 600*mi)}}, Room{Nodes: []Resources{{CPU: 4, Memory: 1 << 30}, {CPU: 4, Memory: 1 << 30}}}, obs, 3, 2, 0.2, 600 * mi, "replicas 3 → 2"},
		// A sidecar the autoscaler does not size still takes room: 1.5 −
		// 2 × 0.1 = 1.3 for two app containers.
		{"a sidecar counts", Recommendation{Replicas: 2, Containers: []ContainerRecommendation{app(1, 96*mi)}}, realNode, withSidecar, 2, 2, 0.65, 96 * mi, "pod cpu 1.1 → 0.75"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.rec.Containers[0]
			got, note := Fit(tc.rec, tc.room, bounds, tc.current, tc.replicas)
			if tc.wantNote == "" && note != "" || !strings.Contains(note, tc.wantNote) {
				t.Errorf("note %q, want it to contain %q", note, tc.wantNote)
			}
			c, _ := got.Container("app")
			if got.Replicas != tc.wantReplicas || math.Abs(c.Target.CPU-tc.wantCPU) > 1e-3 || math.Abs(c.Target.Memory-tc.wantMem) > 1e-3*tc.wantMem {
				t.Errorf("replicas %d, app %+v; want %d, cpu %g, memory %g", got.Replicas, c.Target, tc.wantReplicas, tc.wantCPU, tc.wantMem)
			}
			if c.LowerBound.CPU > c.Target.CPU || c.UpperBound.CPU < c.Target.CPU {
				t.Errorf("bounds [%g, %g] exclude the target %g", c.LowerBound.CPU, c.UpperBound.CPU, c.Target.CPU)
			}
			if note != "" && c.UpperBound.CPU != c.Target.CPU && c.Target.CPU < tc.rec.Containers[0].Target.CPU {
				t.Errorf("upper bound %g above the lowered target %g: a larger pod would keep its room", c.UpperBound.CPU, c.Target.CPU)
			}
			if tc.rec.Containers[0] != orig {
				t.Error("the input was modified")
			}
		})
	}
}
