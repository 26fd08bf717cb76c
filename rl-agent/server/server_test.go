package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

func TestInvalidArgument(t *testing.T) {
	h := start(t, nil)
	for _, tc := range []struct {
		name   string
		mutate func(*pb.RecommendRequest)
		field  string
	}{
		{"missing workload", func(r *pb.RecommendRequest) { r.Workload = nil }, "workload"},
		{"empty name", func(r *pb.RecommendRequest) { r.Workload.Name = "" }, "workload.name"},
		{"slash in namespace", func(r *pb.RecommendRequest) { r.Workload.Namespace = "a/b" }, "workload.namespace"},
		{"missing observation", func(r *pb.RecommendRequest) { r.Observation = nil }, "observation"},
		{"missing time", func(r *pb.RecommendRequest) { r.Observation.Time = nil }, "observation.time"},
		{"negative window", func(r *pb.RecommendRequest) { r.Observation.Window = durationpb.New(-time.Second) }, "observation.window"},
		{"NaN request rate", func(r *pb.RecommendRequest) { r.Observation.RequestRate = math.NaN() }, "observation.request_rate"},
		{"+Inf p95", func(r *pb.RecommendRequest) { r.Observation.Latency.P95Seconds = math.Inf(1) }, "observation.latency.p95_seconds"},
		{"-Inf SLO", func(r *pb.RecommendRequest) { r.Observation.SloSeconds = math.Inf(-1) }, "observation.slo_seconds"},
		{"negative error rate", func(r *pb.RecommendRequest) { r.Observation.ErrorRate = -1 }, "observation.error_rate"},
		{"negative replicas", func(r *pb.RecommendRequest) { r.Observation.Replicas = -1 }, "observation.replicas"},
		{"no containers", func(r *pb.RecommendRequest) { r.Observation.Containers = nil }, "observation.containers"},
		{"unnamed container", func(r *pb.RecommendRequest) { r.Observation.Containers[0].Name = "" }, "observation.containers[0].name"},
		{"duplicate container", func(r *pb.RecommendRequest) {
			r.Observation.Containers = append(r.Observation.Containers, proto.Clone(r.Observation.Containers[0]).(*pb.ContainerObservation))
		}, "observation.containers[1].name"},
		{"negative CPU usage", func(r *pb.RecommendRequest) { r.Observation.Containers[0].Usage.CpuCores = -0.1 }, "observation.containers[0].usage.cpu_cores"},
		{"NaN memory request", func(r *pb.RecommendRequest) { r.Observation.Containers[0].Requests.MemoryBytes = math.NaN() }, "observation.containers[0].requests.memory_bytes"},
		{"negative OOM kills", func(r *pb.RecommendRequest) { r.Observation.Containers[0].OomKills = -2 }, "observation.containers[0].oom_kills"},
		{"min above max replicas", func(r *pb.RecommendRequest) { r.Constraints.MinReplicas = 11 }, "constraints.min_replicas"},
		{"NaN maxAllowed", func(r *pb.RecommendRequest) {
			r.Constraints.Containers = []*pb.ContainerConstraints{{Name: "app", MaxAllowed: &pb.Resources{CpuCores: math.NaN()}}}
		}, "constraints.containers[0].max_allowed.cpu_cores"},
		{"unknown controlled resource", func(r *pb.RecommendRequest) {
			r.Constraints.Containers = []*pb.ContainerConstraints{{Name: "app", ControlledResources: []pb.Resource{7}}}
		}, "constraints.containers[0].controlled_resources[0]"},
		{"missing default", func(r *pb.RecommendRequest) { r.DefaultRecommendation = nil }, "default_recommendation"},
		{"negative default replicas", func(r *pb.RecommendRequest) { r.DefaultRecommendation.Replicas = -3 }, "default_recommendation.replicas"},
		{"Inf default target", func(r *pb.RecommendRequest) { r.DefaultRecommendation.Containers[0].Target.CpuCores = math.Inf(1) }, "default_recommendation.containers[0].target.cpu_cores"},
		{"missing config", func(r *pb.RecommendRequest) { r.Config = nil }, "config"},
		{"unknown mode", func(r *pb.RecommendRequest) { r.Config.Mode = 42 }, "config.mode"},
		{"NaN alpha", func(r *pb.RecommendRequest) { r.Config.Alpha = math.NaN() }, "config.alpha"},
		{"alpha above 1", func(r *pb.RecommendRequest) { r.Config.Alpha = 1.5 }, "config.alpha"},
		{"negative window gate", func(r *pb.RecommendRequest) { r.Config.Gates.Window = -1 }, "config.gates.window"},
		{"window gate of 1", func(r *pb.RecommendRequest) { r.Config.Gates.Window = 1 }, "config.gates"},
		{"NaN promote mean", func(r *pb.RecommendRequest) { r.Config.Gates.PromoteMinMean = math.NaN() }, "config.gates.promote_min_mean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := recommendReq("web", 0)
			tc.mutate(req)
			_, err := h.client.Recommend(ctx(t), req)
			wantField(t, err, tc.field)
		})
	}
	t.Run("ReportOutcome", func(t *testing.T) {
		for field, mutate := range map[string]func(*pb.ReportOutcomeRequest){
			"next_observation":                     func(r *pb.ReportOutcomeRequest) { r.NextObservation = nil },
			"applied":                              func(r *pb.ReportOutcomeRequest) { r.Applied = nil },
			"applied_source":                       func(r *pb.ReportOutcomeRequest) { r.AppliedSource = pb.Source_SOURCE_UNSPECIFIED },
			"next_observation.latency.p99_seconds": func(r *pb.ReportOutcomeRequest) { r.NextObservation.Latency.P99Seconds = math.NaN() },
		} {
			req := outcomeReq("web", 0)
			mutate(req)
			_, err := h.client.ReportOutcome(ctx(t), req)
			wantField(t, err, field)
		}
	})
	t.Run("GetPolicyStatus", func(t *testing.T) {
		_, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{})
		wantField(t, err, "workload")
	})
	// Nothing invalid created a workload.
	if n := len(h.srv.registry.agents); n != 0 {
		t.Errorf("%d workloads created by invalid requests", n)
	}
}

func TestRecommendStages(t *testing.T) {
	h := start(t, nil)
	r, err := h.client.Recommend(ctx(t), recommendReq("web", 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != pb.Source_SOURCE_DEFAULT || r.Stage != pb.Stage_STAGE_BOOTSTRAPPING || r.Reason != "Bootstrapping" || !sameAllocation(r.Recommendation, defaultRec()) {
		t.Fatalf("bootstrapping response %v", r)
	}
	// Mode Off defers whatever the stage.
	off := recommendReq("quiet", 0)
	off.Config.Mode = pb.RLMode_RL_MODE_OFF
	if r, err := h.client.Recommend(ctx(t), off); err != nil || r.Reason != "RLModeOff" || r.Source != pb.Source_SOURCE_DEFAULT {
		t.Fatalf("mode Off: %v, %v", r, err)
	}

	promote(t, h.client, "web")
	// The workload's peak is 95% of its request: the safeguard refuses
	// every downward CPU step, so the agent's answer is its own or the
	// safeguard's, and always within the constraints.
	sources := map[pb.Source]int{}
	for i := range 50 {
		r, err := h.client.Recommend(ctx(t), recommendReq("web", 10+i))
		if err != nil {
			t.Fatal(err)
		}
		if r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
			t.Fatalf("stage %v", r.Stage)
		}
		sources[r.Source]++
		if n := r.Recommendation.Replicas; n < 1 || n > 10 {
			t.Fatalf("replicas %d outside [1, 10]", n)
		}
		// The safeguard keeps the allocation in force (here also the
		// default's).
		if r.Source == pb.Source_SOURCE_SAFEGUARD && !sameAllocation(r.Recommendation, defaultRec()) {
			t.Fatalf("safeguard did not keep the allocation in force: %v", r.Recommendation)
		}
		if c := r.Recommendation.Containers[0].Target.CpuCores; r.Source == pb.Source_SOURCE_AGENT && c < 1-1e-9 {
			t.Fatalf("agent lowered CPU to %v with peak at 95%% of the request", c)
		}
		// The recommender's side accepts every answer as it is.
		rec, err := wire.FromRecommendation(r.Recommendation)
		if err != nil {
			t.Fatalf("recommender would reject %v: %v", r.Recommendation, err)
		}
		if err := wire.Within(&rec, &workload.Constraints{MinReplicas: 1, MaxReplicas: 10}); err != nil {
			t.Fatalf("answer outside the constraints: %v", err)
		}
	}
	if sources[pb.Source_SOURCE_AGENT] == 0 {
		t.Errorf("the agent never acted in OnlineTraining: %v", sources)
	}
	st, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Status; s.Stage != pb.Stage_STAGE_ONLINE_TRAINING || s.Episodes != 2 || s.Transitions != 2 || !proto.Equal(s.Workload, &pb.WorkloadRef{Namespace: "shop", Name: "web", Uid: "uid-web"}) {
		t.Errorf("status %v", s)
	}
	if _, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("nobody")}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown workload: %v, want NotFound", err)
	}

	// Metrics: one gate transition, workloads by stage, request codes;
	// and every family passes the project's lint.
	if got := testutil.ToFloat64(h.srv.metrics.transitions.WithLabelValues("Bootstrapping", "OnlineTraining")); got != 1 {
		t.Errorf("transitions = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.srv.metrics.workloads.WithLabelValues("OnlineTraining")); got != 1 {
		t.Errorf("workloads in OnlineTraining = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.srv.metrics.requests.WithLabelValues("GetPolicyStatus", "NotFound")); got != 1 {
		t.Errorf("NotFound status requests = %v, want 1", got)
	}
	if err := serve.LintMetrics(h.reg, "rl-agent"); err != nil {
		t.Error(err)
	}
}

func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{&InvalidRequestError{Violations: []FieldViolation{{Field: "x", Description: "bad"}}}, codes.InvalidArgument},
		{fmt.Errorf("act: %w", nn.ErrInvalidInput), codes.InvalidArgument},
		{ErrOverloaded, codes.Unavailable},
		{fmt.Errorf("x: %w", ErrShuttingDown), codes.Unavailable},
		{ErrUnknownWorkload, codes.NotFound},
		{ErrTooManyWorkloads, codes.ResourceExhausted},
		{fmt.Errorf("x: %w", ErrVariantMismatch), codes.FailedPrecondition},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{errors.New("disk on fire"), codes.Internal},
		{status.Error(codes.Aborted, "already a status"), codes.Aborted},
	} {
		if got := status.Code(toStatus(tc.err)); got != tc.want {
			t.Errorf("toStatus(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestTooManyWorkloads(t *testing.T) {
	h := start(t, func(o *Options) { o.MaxWorkloads = 1 })
	if _, err := h.client.Recommend(ctx(t), recommendReq("a", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Recommend(ctx(t), recommendReq("b", 0)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second workload: %v, want ResourceExhausted", err)
	}
}

func TestShadowModeDefers(t *testing.T) {
	gl := &gatedLearner{Learner: newPPO(t, 1)}
	h := start(t, func(o *Options) { o.Learner = gl })
	promote(t, h.client, "web")
	req := recommendReq("web", 10)
	req.Config.Mode = pb.RLMode_RL_MODE_SHADOW
	r, err := h.client.Recommend(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != pb.Source_SOURCE_DEFAULT || r.Reason != "Shadow" || r.Stage != pb.Stage_STAGE_ONLINE_TRAINING || !sameAllocation(r.Recommendation, defaultRec()) {
		t.Errorf("shadow response %v", r)
	}
	if n := gl.calls.Load(); n != 0 {
		t.Errorf("%d forward passes for a decision that is never applied", n)
	}
}

// TestInterceptorCounts checks the interceptor's cached series against the
// vectors: every call is counted once under its method and code, for the
// agent's methods (cached) and any other (looked up).
func TestInterceptorCounts(t *testing.T) {
	o := DefaultOptions()
	o.Learner = newPPO(t, 1)
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ic := srv.UnaryInterceptor()
	calls := []struct {
		full string
		err  error
	}{
		{"/aware.rlagent.v1.AgentService/Recommend", nil},
		{"/aware.rlagent.v1.AgentService/Recommend", nil},
		{"/aware.rlagent.v1.AgentService/Recommend", status.Error(codes.Unavailable, "busy")},
		{"/aware.rlagent.v1.AgentService/GetPolicyStatus", ErrUnknownWorkload},
		{"/grpc.health.v1.Health/Check", nil},
		{"/aware.rlagent.v1.AgentService/Recommend", status.Error(codes.Code(99), "odd")},
	}
	for _, c := range calls {
		_, _ = ic(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: c.full}, func(context.Context, any) (any, error) { return nil, c.err })
	}
	for _, tc := range []struct {
		method, code string
		want         float64
	}{
		{"Recommend", "OK", 2},
		{"Recommend", "Unavailable", 1},
		{"Recommend", "Code(99)", 1},
		{"GetPolicyStatus", "NotFound", 1},
		{"Check", "OK", 1},
	} {
		t.Run(tc.method+"/"+tc.code, func(t *testing.T) {
			if got := testutil.ToFloat64(srv.metrics.requests.WithLabelValues(tc.method, tc.code)); got != tc.want {
				t.Fatalf("requests_total{method=%q,code=%q} = %v, want %v", tc.method, tc.code, got, tc.want)
			}
		})
	}
	if got := testutil.CollectAndCount(srv.metrics.requests); got != 5 {
		t.Errorf("requests_total has %d series, want 5", got)
	}
	if got := testutil.CollectAndCount(srv.metrics.latency); got != 3 {
		t.Errorf("request_duration_seconds has %d series, want 3 (Recommend, GetPolicyStatus, Check)", got)
	}
	if v := srv.PolicyVersion(); v != "v0" {
		t.Errorf("policy version %q, want v0", v)
	}
	srv.trainer.version.Store(7)
	if v := srv.PolicyVersion(); v != "v7" {
		t.Errorf("policy version after training %q, want v7", v)
	}
}
