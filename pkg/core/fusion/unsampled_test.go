package fusion

import (
	"context"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// TestUnsampledResourceKeepsRequest: a resource whose histogram is still
// empty keeps its request, even when the other resource has samples. The
// first case is a held-out demo app (app-0424): its pods start out
// CPU-saturated and OOM-killed at their 768Mi limit, so rule 6 records a
// CPU sample but neither a memory sample nor an OOM bump, and the empty
// memory histogram used to give the 250Mi pod minimum, which kept the app
// OOM-killed all day (23 010 kills, 30% of the default's in the demo).
func TestUnsampledResourceKeepsRequest(t *testing.T) {
	const mi = 1 << 20
	alloc := workload.Resources{CPU: 0.5, Memory: 768 * mi}
	c := workload.Constraints{MinReplicas: 1, MaxReplicas: 30, Containers: []workload.ContainerPolicy{{
		Name: "*", Mode: workload.ContainerModeAuto, MinAllowed: workload.Resources{CPU: 0.01, Memory: 32 * mi},
	}}}
	base := func() workload.Observation {
		return workload.Observation{
			Time: t0.Add(15 * time.Second), Window: 15 * time.Second, Replicas: 3, ReadyReplicas: 2, Samples: 3,
			RequestRate: 73, SLO: 2, Latency: workload.Latency{P50: 0.7, P95: 1, P99: 1.2},
			Containers: []workload.ContainerObservation{{
				Name: "main", Requests: alloc, Limits: alloc, OOMKills: 1,
				Usage: workload.Resources{CPU: 0.5, Memory: 500 * mi}, Peak: alloc,
			}},
		}
	}
	for _, tc := range []struct {
		name string
		obs  func() workload.Observation
		// keep is the resource with no sample, which must keep its
		// request.
		keep workload.Resource
	}{
		{"CPU-saturated OOM kill: no memory sample", base, workload.Memory},
		{"OOM kill with no pod ready: no CPU sample", func() workload.Observation {
			o := base()
			o.ReadyReplicas = 0
			o.Containers[0].Usage.CPU = 0.1
			o.Containers[0].Peak.CPU = 0.1
			return o
		}, workload.CPU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicyFactory(Options{})(c)
			if err != nil {
				t.Fatal(err)
			}
			o := tc.obs()
			rec, err := p.Recommend(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := rec.Container("main")
			if !ok {
				t.Fatalf("no recommendation for the container: %+v", rec)
			}
			st := p.(*Fused).Recommender().State("main")
			if st.CPU().IsEmpty() == st.Memory().IsEmpty() {
				t.Fatalf("histograms empty: CPU %v, memory %v; the case needs exactly one empty", st.CPU().IsEmpty(), st.Memory().IsEmpty())
			}
			want := alloc.Get(tc.keep)
			for _, v := range []float64{got.Target.Get(tc.keep), got.LowerBound.Get(tc.keep), got.UpperBound.Get(tc.keep)} {
				if v != want {
					t.Errorf("%s: target/bounds %+v, want the request %g kept", tc.keep, got, want)
					break
				}
			}
		})
	}
}
