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
	rec := func(replicas int32, cpu, mem float64) Recommendation {
		return Recommendation{Replicas: replicas, Containers: []ContainerRecommendation{app(cpu, mem)}}
	}
	minThree := *bounds
	minThree.MinReplicas = 3
	for _, tc := range []struct {
		name         string
		rec          Recommendation
		room         Room
		current      []ContainerObservation
		c            *Constraints
		wantReplicas int32
		wantCPU      float64 // the app container's target
		wantMem      float64
		wantNote     string // a substring; "" means unchanged
	}{
		{"unknown room: unchanged", rec(2, 1, 96*mi), Room{}, obs, bounds, 2, 1, 96 * mi, ""},
		{"fits: unchanged", rec(1, 1, 96*mi), realNode, obs, bounds, 1, 1, 96 * mi, ""},
		// The real node's third path: a second replica and 1-core pods,
		// on 1.5 cores.
		{"two pods of 1 core on 1.5: one", rec(2, 1, 96*mi), realNode, obs, bounds, 1, 1, 96 * mi, "replicas 2 → 1"},
		// Its scale-out path: pods of 0.2 scaled out, then grown to 1 core
		// each. The size is kept, the count is what fits.
		{"five pods grown to 1 core: one", rec(5, 1, 96*mi), realNode, obs, bounds, 1, 1, 96 * mi, "replicas 5 → 1"},
		{"a scale-out into room: as far as it goes", rec(4, 0.5, 96*mi), realNode, obs, bounds, 3, 0.5, 96 * mi, "replicas 4 → 3"},
		{"minReplicas above what fits: the pods shrink", rec(3, 1, 96*mi), realNode, obs, &minThree, 3, 0.5, 96 * mi, "pod cpu 1 → 0.5"},
		{"a pod larger than any node", rec(1, 3, 96*mi), realNode, obs, bounds, 1, 1.5, 96 * mi, "pod cpu 3 → 1.5"},
		{"memory above every node: capped", rec(1, 1, 30<<30), realNode, obs, bounds, 1, 1, 20 << 30, "memory"},
		{"no room for one pod: unchanged", rec(2, 1, 96*mi), Room{Nodes: []Resources{{CPU: 0.01, Memory: 20 << 30}}}, obs, bounds, 2, 1, 96 * mi, ""},
		// Nodes of 1, 1 and 0.5 core: 1.7 in all would take three pods of
		// 0.6 by the sum, but each node holds one at most, and the third
		// none.
		{"bins, not the sum", rec(3, 0.6, 96*mi), Room{Nodes: []Resources{{CPU: 1, Memory: 1 << 30}, {CPU: 1, Memory: 1 << 30}, {CPU: 0.5, Memory: 1 << 30}}}, obs, bounds, 2, 0.6, 96 * mi, "replicas 3 → 2"},
		{"memory decides the slots", rec(3, 0.2, 600*mi), Room{Nodes: []Resources{{CPU: 4, Memory: 1 << 30}, {CPU: 4, Memory: 1 << 30}}}, obs, bounds, 2, 0.2, 600 * mi, "replicas 3 → 2"},
		// A sidecar the autoscaler does not size takes room: 1.5 − 0.1.
		{"a sidecar counts", rec(1, 1.5, 96*mi), realNode, withSidecar, bounds, 1, 1.4, 96 * mi, "pod cpu 1.6 → 1.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.rec.Containers[0]
			got, note := Fit(tc.rec, tc.room, tc.c, tc.current)
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
