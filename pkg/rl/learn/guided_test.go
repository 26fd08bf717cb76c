package learn

import (
	"context"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestGuidedResidualPolicy(t *testing.T) {
	obs, c, def := residualFixture()
	guide := func(replicas int32, cpu, memMi float64) workload.Recommendation {
		g := workload.Recommendation{Replicas: replicas}
		if cpu > 0 {
			g.Containers = []workload.ContainerRecommendation{{Name: "main", Target: workload.Resources{CPU: cpu, Memory: memMi * (1 << 20)}}}
		}
		return g
	}
	for _, tc := range []struct {
		name  string
		guide workload.Recommendation
		want  string // FormatResidual of the choices taken
	}{
		// The fixture's default: 5 replicas (4 in force, at most 6), CPU
		// 0.8 (1 in force), memory 800Mi (1Gi in force).
		{"guide agrees with the default", guide(5, 0.8, 800), "replicas=follow/cpu=follow/memory=follow"},
		{"fewer replicas", guide(3, 0.8, 800), "replicas=-2/cpu=follow/memory=follow"},
		{"the count in force: hold, the first of equals", guide(4, 0.8, 800), "replicas=hold/cpu=follow/memory=follow"},
		// 7.2 cores: at most 6 replicas, so larger pods, and more memory
		// for the load each carries.
		{"more than allowed: the nearest capacity", guide(9, 0.8, 800), "replicas=+1/cpu=x1.3/memory=x1.3"},
		{"fewer, larger pods: the same capacity", guide(2, 2, 800), "replicas=follow/cpu=follow/memory=follow"},
		{"smaller CPU", guide(5, 0.68, 800), "replicas=follow/cpu=x0.85/memory=follow"},
		{"far larger memory: the largest factor", guide(5, 0.8, 4000), "replicas=follow/cpu=follow/memory=x1.3"},
		{"no opinion", guide(0, 0, 0), "replicas=follow/cpu=follow/memory=follow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewGuidedResidualPolicy("guided", fixedPolicy{def}, fixedPolicy{tc.guide}, c)
			got, err := p.Recommend(context.Background(), obs)
			if err != nil {
				t.Fatal(err)
			}
			ch, err := ParseResidual(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			want := ApplyResidual(&obs, &c, def, ch)
			if got.Replicas != want.Replicas || got.Containers[0] != want.Containers[0] || got.Source != want.Source {
				t.Errorf("got %+v, want %s: %+v", got, tc.want, want)
			}
		})
	}
}
