package server

import (
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/aware-k8s/aware/pkg/core/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

// TestCPUPressureArrives: a pressure the recommender sends (pkg/kube/agentclient's
// conversion, then the wire) reaches the agent's observation unchanged, and
// a client that predates the field, which never encodes it, gives 0.
func TestCPUPressureArrives(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pressure float64
		old      bool // encode the container without the field, as an old client does
	}{
		{"none", 0, false},
		{"below the starved threshold", 0.01, false},
		{"starved", 0.3, false},
		{"the whole window", 1, false},
		{"an old client", 0.3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := workload.Observation{Replicas: 1, Containers: []workload.ContainerObservation{{
				Name: "app", Requests: workload.Resources{CPU: 1, Memory: 512 * mi}, CPUPressure: tc.pressure,
			}}}
			req := recommendReq("web", 0)
			wire := wire.ToObservation(&obs)
			req.Observation.Containers = wire.Containers
			want := tc.pressure
			if tc.old {
				req.Observation.Containers[0].CpuPressure = 0
				want = 0
			}
			b, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			var got pb.RecommendRequest
			if err := proto.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			in, err := fromRecommendRequest(&got)
			if err != nil {
				t.Fatal(err)
			}
			if p := in.obs.Containers[0].CPUPressure; p != want {
				t.Errorf("cpu pressure %v arrived as %v, want %v", tc.pressure, p, want)
			}
			if err := in.obs.Validate(); err != nil {
				t.Errorf("accepted observation is invalid: %v", err)
			}
		})
	}
}

// TestCPUPressureRefused: a pressure that is no share of a window is
// refused with INVALID_ARGUMENT naming the field, in both methods and both
// observations of an outcome, and creates no workload.
func TestCPUPressureRefused(t *testing.T) {
	h := start(t, nil)
	for _, tc := range []struct {
		name string
		x    float64
	}{
		{"NaN", math.NaN()},
		{"+Inf", math.Inf(1)},
		{"-Inf", math.Inf(-1)},
		{"negative", -0.01},
		{"above 1", 1.0001},
		{"a percentage", 30},
	} {
		t.Run("Recommend/"+tc.name, func(t *testing.T) {
			req := recommendReq("web", 0)
			req.Observation.Containers[0].CpuPressure = tc.x
			_, err := h.client.Recommend(ctx(t), req)
			wantField(t, err, "observation.containers[0].cpu_pressure")
		})
		for _, obs := range []string{"observation", "next_observation"} {
			t.Run("ReportOutcome/"+obs+"/"+tc.name, func(t *testing.T) {
				req := outcomeReq("web", 0)
				o := req.Observation
				if obs == "next_observation" {
					o = req.NextObservation
				}
				o.Containers[0].CpuPressure = tc.x
				_, err := h.client.ReportOutcome(ctx(t), req)
				wantField(t, err, obs+".containers[0].cpu_pressure")
			})
		}
	}
	if n := len(h.srv.registry.agents); n != 0 {
		t.Errorf("%d workloads created by refused requests", n)
	}
	t.Run("within range", func(t *testing.T) {
		for _, x := range []float64{0, 0.05, 1} {
			req := recommendReq("web", 0)
			req.Observation.Containers[0].CpuPressure = x
			if _, err := h.client.Recommend(ctx(t), req); err != nil {
				t.Errorf("pressure %v: %v", x, err)
			}
		}
	})
}
