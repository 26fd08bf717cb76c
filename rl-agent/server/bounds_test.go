package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// outOfBounds are well-formed requests that cannot have been measured or
// applied, each naming the field and the bound it breaks.
var outOfBoundsRecommend = []struct {
	name, field, bound string
	mutate             func(*pb.RecommendRequest)
}{
	{"more replicas than the largest cluster", "observation.replicas", boundReplicas, func(r *pb.RecommendRequest) {
		r.Observation.Replicas, r.Observation.ReadyReplicas = MaxReplicas+1, 1
	}},
	{"more ready replicas than replicas", "observation.ready_replicas", boundReplicas, func(r *pb.RecommendRequest) { r.Observation.ReadyReplicas = 4 }},
	{"an observation from the future", "observation.time", boundTime, func(r *pb.RecommendRequest) {
		r.Observation.Time = timestamppb.New(t0.Add(1000*time.Hour + MaxClockSkew + time.Second))
	}},
	{"a latency of days", "observation.latency.p99_seconds", boundLatency, func(r *pb.RecommendRequest) { r.Observation.Latency.P99Seconds = 86400 }},
	{"an SLO of days", "observation.slo_seconds", boundLatency, func(r *pb.RecommendRequest) { r.Observation.SloSeconds = 86400 }},
	{"CPU usage far above the limit", "observation.containers[0].usage.cpu_cores", boundUsage, func(r *pb.RecommendRequest) {
		r.Observation.Containers[0].Limits = &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi}
		r.Observation.Containers[0].Usage.CpuCores, r.Observation.Containers[0].Peak.CpuCores = 40, 40
	}},
	{"memory peak far above the limit", "observation.containers[0].peak.memory_bytes", boundUsage, func(r *pb.RecommendRequest) {
		r.Observation.Containers[0].Limits = &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi}
		r.Observation.Containers[0].Peak.MemoryBytes = 4 << 30
	}},
	{"usage above the largest node", "observation.containers[0].usage.memory_bytes", boundUsage, func(r *pb.RecommendRequest) {
		r.Observation.Containers[0].Usage.MemoryBytes, r.Observation.Containers[0].Peak.MemoryBytes = 1<<50, 1<<50
	}},
	{"mean usage above the window's peak", "observation.containers[0].usage.cpu_cores", boundUsage, func(r *pb.RecommendRequest) { r.Observation.Containers[0].Usage.CpuCores = 2 }},
	{"request above the limit", "observation.containers[0].requests.cpu_cores", boundAllocation, func(r *pb.RecommendRequest) {
		r.Observation.Containers[0].Limits = &pb.Resources{CpuCores: 0.5}
		r.Observation.Containers[0].Usage.CpuCores, r.Observation.Containers[0].Peak.CpuCores = 0.4, 0.5
	}},
	{"a request above the largest node", "observation.containers[0].requests.cpu_cores", boundAllocation, func(r *pb.RecommendRequest) { r.Observation.Containers[0].Requests.CpuCores = 4096 }},
	{"default replicas above the constraints", "default_recommendation.replicas", boundAction, func(r *pb.RecommendRequest) { r.DefaultRecommendation.Replicas = 11 }},
	{"default target below minAllowed", "default_recommendation.containers[0].target.cpu_cores", boundAction, func(r *pb.RecommendRequest) {
		r.Constraints.Containers = []*pb.ContainerConstraints{{Name: "app", MinAllowed: &pb.Resources{CpuCores: 2}}}
	}},
	{"default target above maxAllowed", "default_recommendation.containers[0].target.memory_bytes", boundAction, func(r *pb.RecommendRequest) {
		r.Constraints.Containers = []*pb.ContainerConstraints{{Name: "app", MaxAllowed: &pb.Resources{MemoryBytes: 256 * mi}}}
	}},
	{"constraints beyond the largest cluster", "constraints", boundConstraints, func(r *pb.RecommendRequest) { r.Constraints.MaxReplicas = MaxReplicas + 1 }},
}

var outOfBoundsOutcome = []struct {
	name, field, bound string
	mutate             func(*pb.ReportOutcomeRequest)
}{
	{"applied replicas outside the constraints", "applied.replicas", boundAction, func(r *pb.ReportOutcomeRequest) { r.Applied.Replicas = 500 }},
	{"a transition back in time", "next_observation.time", boundTime, func(r *pb.ReportOutcomeRequest) { r.NextObservation.Time = r.Observation.Time }},
	{"next usage far above the limit", "next_observation.containers[0].usage.cpu_cores", boundUsage, func(r *pb.ReportOutcomeRequest) {
		c := r.NextObservation.Containers[0]
		c.Limits = &pb.Resources{CpuCores: 1}
		c.Usage.CpuCores, c.Peak.CpuCores = 100, 100
	}},
	{"next ready replicas above replicas", "next_observation.ready_replicas", boundReplicas, func(r *pb.ReportOutcomeRequest) { r.NextObservation.ReadyReplicas = 30 }},
	{"next observation from the future", "next_observation.time", boundTime, func(r *pb.ReportOutcomeRequest) {
		r.NextObservation.Time = timestamppb.New(t0.Add(2000 * time.Hour))
	}},
}

// TestOutOfBounds: each request is refused with INVALID_ARGUMENT naming
// its field, and counted by method and bound.
func TestOutOfBounds(t *testing.T) {
	h := start(t, nil)
	// The workload's constraints are known from a Recommend within bounds.
	if _, err := h.client.Recommend(ctx(t), recommendReq("web", 0)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range outOfBoundsRecommend {
		t.Run("Recommend/"+tc.name, func(t *testing.T) {
			before := testutil.ToFloat64(h.srv.bounds.rejected.WithLabelValues("Recommend", tc.bound))
			req := recommendReq("web", 1)
			tc.mutate(req)
			_, err := h.client.Recommend(ctx(t), req)
			wantField(t, err, tc.field)
			if got := testutil.ToFloat64(h.srv.bounds.rejected.WithLabelValues("Recommend", tc.bound)); got != before+1 {
				t.Errorf("out_of_bounds_requests_total{method=Recommend,bound=%s} went from %g to %g, want +1", tc.bound, before, got)
			}
		})
	}
	for _, tc := range outOfBoundsOutcome {
		t.Run("ReportOutcome/"+tc.name, func(t *testing.T) {
			before := testutil.ToFloat64(h.srv.bounds.rejected.WithLabelValues("ReportOutcome", tc.bound))
			req := outcomeReq("web", 0)
			tc.mutate(req)
			_, err := h.client.ReportOutcome(ctx(t), req)
			wantField(t, err, tc.field)
			if got := testutil.ToFloat64(h.srv.bounds.rejected.WithLabelValues("ReportOutcome", tc.bound)); got != before+1 {
				t.Errorf("out_of_bounds_requests_total{method=ReportOutcome,bound=%s} went from %g to %g, want +1", tc.bound, before, got)
			}
		})
	}
	t.Run("within bounds", func(t *testing.T) {
		for _, mutate := range []func(*pb.ReportOutcomeRequest){
			func(*pb.ReportOutcomeRequest) {},
			// Usage above the request without a limit is bursting, not an
			// impossible measurement.
			func(r *pb.ReportOutcomeRequest) {
				r.NextObservation.Containers[0].Usage.CpuCores, r.NextObservation.Containers[0].Peak.CpuCores = 6, 7
			},
			// Above the newest pod's limit: older pods of a rollout that
			// cut it still use what the old limit allowed.
			func(r *pb.ReportOutcomeRequest) {
				c := r.NextObservation.Containers[0]
				c.Limits = &pb.Resources{CpuCores: 1}
				c.Usage.CpuCores, c.Peak.CpuCores = 1.1, 2.5
			},
			// p95 carries the SLO's percentile, which may lie above p99.
			func(r *pb.ReportOutcomeRequest) { r.NextObservation.Latency.P95Seconds = 0.5 },
			// Replicas observed above a lowered maximum: the constraint
			// binds what is applied, not what was running.
			func(r *pb.ReportOutcomeRequest) { r.Observation.Replicas, r.Observation.ReadyReplicas = 14, 14 },
		} {
			req := outcomeReq("web", 0)
			mutate(req)
			if _, err := h.client.ReportOutcome(ctx(t), req); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestFabricatedTransitionsChangeNothing sends a stream of fabricated
// transitions, each crafted to push the workload's reward (and so its
// stage) one way or the other, and shows that the workload's stage,
// statistics, experience and the shared policy are exactly as before.
func TestFabricatedTransitionsChangeNothing(t *testing.T) {
	h := start(t, nil)
	// One genuine transition: the workload is known and has statistics.
	if _, err := h.client.Recommend(ctx(t), recommendReq("web", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", 0)); err != nil {
		t.Fatal(err)
	}
	status := func() *pb.PolicyStatus {
		t.Helper()
		r, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	pending := func() int {
		h.srv.journal.expMu.Lock()
		defer h.srv.journal.expMu.Unlock()
		return len(h.srv.journal.pending)
	}
	// Its episode's training job lands before the snapshot.
	deadline := time.Now().Add(20 * time.Second)
	for h.srv.trainer.pending.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("training did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before, beforeExp, beforeVersion := status(), pending(), h.srv.PolicyVersion()
	if before.Transitions != 1 {
		t.Fatalf("setup: %d transitions", before.Transitions)
	}

	sent := 0
	for i := range 20 { // more than enough outcomes to close episodes and pass gates
		for _, tc := range outOfBoundsOutcome {
			req := outcomeReq("web", i+1)
			tc.mutate(req)
			if _, err := h.client.ReportOutcome(ctx(t), req); err == nil {
				t.Fatalf("%s: accepted", tc.name)
			}
			sent++
		}
		for _, tc := range outOfBoundsRecommend {
			req := recommendReq("web", i+1)
			tc.mutate(req)
			if _, err := h.client.Recommend(ctx(t), req); err == nil {
				t.Fatalf("%s: accepted", tc.name)
			}
			sent++
		}
	}
	after := status()
	if !proto.Equal(before, after) {
		t.Errorf("fabricated transitions changed the workload:\nbefore %v\nafter  %v", before, after)
	}
	if n := pending(); n != beforeExp {
		t.Errorf("experience records %d → %d", beforeExp, n)
	}
	if v := h.srv.PolicyVersion(); v != beforeVersion {
		t.Errorf("policy version %s → %s", beforeVersion, v)
	}
	var counted float64
	for _, m := range []string{"Recommend", "ReportOutcome"} {
		for _, b := range []string{boundReplicas, boundAllocation, boundUsage, boundLatency, boundTime, boundAction, boundReward, boundConstraints} {
			counted += testutil.ToFloat64(h.srv.bounds.rejected.WithLabelValues(m, b))
		}
	}
	if int(counted) != sent {
		t.Errorf("%g refusals counted, %d sent", counted, sent)
	}
	// The genuine stream goes on where it was.
	r, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := status().Transitions; got != 2 || r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Errorf("after the genuine outcome: %d transitions, stage %v", got, r.Stage)
	}
}

func TestRewardWithinRange(t *testing.T) {
	for _, tc := range []struct {
		reward float64
		ok     bool
	}{{-1, true}, {0, true}, {1, true}, {1.5, false}, {-1.01, false}, {1 + 1e-12, true}} {
		if got := rewardInRange(tc.reward); got != tc.ok {
			t.Errorf("rewardInRange(%v) = %v, want %v", tc.reward, got, tc.ok)
		}
	}
}
