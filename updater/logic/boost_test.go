package logic

import (
	"slices"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// TestVerticalStartupBoost: a boosted pod is left alone until it is Ready
// and the boost's duration has passed, then its CPU is resized back in
// place, in every mode, to the recommendation (or, where the
// recommendation does not size CPU, to the unboosted values).
func TestVerticalStartupBoost(t *testing.T) {
	cfg := DefaultVerticalConfig()
	// boosted: 3 CPU (3x the 1-CPU target), limit 6 (ratio 2), unboosted
	// 0.5/1 from the admission controller's record.
	boosted := func(readyAgo time.Duration) Pod {
		p := pod("a", 3, 1, t0.Add(-time.Hour))
		p.Containers[0].Boost = &Boost{Request: 0.5, Limit: 1}
		if readyAgo >= 0 {
			p.ReadySince = t0.Add(-readyAgo)
		} else {
			p.Alive = false
		}
		return p
	}
	boost := workload.ContainerPolicy{Name: "*", Mode: workload.ContainerModeAuto, StartupBoost: &workload.CPUBoost{Factor: 3, For: time.Minute}}
	memOnly := boost
	memOnly.ControlledResources = []workload.Resource{workload.Memory}
	refused := boosted(time.Hour)
	refused.Resize, refused.Refused = ResizeInfeasible, []ContainerResources{{Name: "app", Requests: workload.Resources{CPU: 1, Memory: gi}, Limits: workload.Resources{CPU: 2, Memory: gi}}}
	oom := boosted(-1)
	oom.Containers[0].Requests.Memory, oom.Containers[0].LastOOMKill = gi/4, t0.Add(-time.Minute)

	back := func(cpu, cpuLim float64) []ContainerResources {
		return []ContainerResources{{Name: "app", Requests: workload.Resources{CPU: cpu, Memory: gi}, Limits: workload.Resources{CPU: cpuLim, Memory: gi}}}
	}
	cases := []struct {
		name    string
		mode    v1alpha1.UpdateMode
		pol     workload.ContainerPolicy
		pod     Pod
		updates []string
		skips   []string
		res     []ContainerResources
	}{
		{name: "not Ready: left boosted, not evicted though outside bounds", mode: v1alpha1.UpdateModeRecreate, pol: boost, pod: boosted(-1), skips: []string{"a:StartupBoost"}},
		{name: "Ready 30 s of a 1 min boost: left boosted", mode: v1alpha1.UpdateModeInPlace, pol: boost, pod: boosted(30 * time.Second), skips: []string{"a:StartupBoost"}},
		{name: "boost over, Recreate: resized back in place, not evicted", mode: v1alpha1.UpdateModeRecreate, pol: boost, pod: boosted(time.Minute),
			updates: []string{"a:Resize:StartupBoostEnded"}, res: back(1, 2)},
		{name: "boost over, InPlace: to the recommendation", mode: v1alpha1.UpdateModeInPlace, pol: boost, pod: boosted(time.Hour),
			updates: []string{"a:Resize:StartupBoostEnded"}, res: back(1, 2)},
		{name: "CPU not sized: back to the unboosted request and limit", mode: v1alpha1.UpdateModeInPlaceOrRecreate, pol: memOnly, pod: boosted(time.Hour),
			updates: []string{"a:Resize:StartupBoostEnded"}, res: back(0.5, 1)},
		{name: "resize back refused: not re-sent, not evicted", mode: v1alpha1.UpdateModeInPlaceOrRecreate, pol: boost, pod: refused, skips: []string{"a:ResizeInfeasible"}},
		{name: "OOM-killed while boosted: memory raised, CPU kept boosted", mode: v1alpha1.UpdateModeInPlace, pol: boost, pod: oom,
			updates: []string{"a:Resize:OOMKilled"}, res: []ContainerResources{{Name: "app", Requests: workload.Resources{CPU: 3, Memory: gi}, Limits: workload.Resources{CPU: 6, Memory: 4 * gi}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := testWorkload(tc.mode, 3, tc.pod, pod("x", 1, 1, t0), pod("y", 1, 1, t0))
			w.Constraints.Containers = []workload.ContainerPolicy{tc.pol}
			p := DecideVertical(t0, cfg, w, open())
			if !slices.Equal(names(p.Updates), tc.updates) || !slices.Equal(skips(p.Skips), tc.skips) {
				t.Fatalf("updates %v skips %v, want %v %v", names(p.Updates), skips(p.Skips), tc.updates, tc.skips)
			}
			if tc.res != nil && !slices.Equal(p.Updates[0].Resources, tc.res) {
				t.Errorf("resources %+v, want %+v", p.Updates[0].Resources, tc.res)
			}
		})
	}
}
