package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aware-k8s/aware/pkg/agent"
	"github.com/aware-k8s/aware/pkg/learn"
	"github.com/aware-k8s/aware/pkg/lifecycle"
	"github.com/aware-k8s/aware/pkg/policy"
	"github.com/aware-k8s/aware/pkg/serve"
	"github.com/aware-k8s/aware/pkg/store"
	"github.com/aware-k8s/aware/pkg/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newPPO(t testing.TB, seed uint64) *policy.PPO {
	t.Helper()
	cfg := policy.DefaultConfig(learn.StateDim, int(learn.NumActions))
	cfg.MinibatchSize = 16
	cfg.Seed = seed
	p, err := policy.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// harness is a server behind a gRPC server on an in-memory listener.
type harness struct {
	srv    *Server
	reg    *prometheus.Registry
	client pb.AgentServiceClient
	health healthpb.HealthClient
	conn   *grpc.ClientConn
	g      *grpc.Server
}

func start(t testing.TB, mutate func(*Options)) *harness {
	t.Helper()
	o := DefaultOptions()
	o.Learner = newPPO(t, 1)
	// The agent's clock is past every tick a test reports: observations
	// stamped ahead of it are refused (bounds.go).
	o.Now = func() time.Time { return t0.Add(1000 * time.Hour) }
	h := &harness{reg: prometheus.NewRegistry()}
	o.Registerer = h.reg
	if mutate != nil {
		mutate(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	lis := bufconn.Listen(1 << 20)
	h.g = grpc.NewServer(grpc.ChainUnaryInterceptor(srv.UnaryInterceptor()))
	srv.Register(h.g)
	go h.g.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.conn, h.client, h.health = conn, pb.NewAgentServiceClient(conn), healthpb.NewHealthClient(conn)
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.conn.Close()
	GracefulStop(h.g, time.Second)
	h.srv.Close()
}

// restartStore stops h (if not yet stopped), closes its store st and reopens the state in dir,
// as a restarted agent would; the new store is closed when the test ends.
func restartStore(t testing.TB, h *harness, st *store.Store, dir string) (*store.Store, store.Recovery) {
	t.Helper()
	h.stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, rec, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	return st2, rec
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

const mi = 1 << 20

func ref(name string) *pb.WorkloadRef {
	return &pb.WorkloadRef{Namespace: "shop", Name: name, Uid: "uid-" + name, TargetKind: "Deployment"}
}

func observation(tick int) *pb.Observation {
	return &pb.Observation{
		Time:     timestamppb.New(t0.Add(time.Duration(tick) * time.Minute)),
		Window:   durationpb.New(time.Minute),
		Replicas: 3, ReadyReplicas: 3,
		Containers: []*pb.ContainerObservation{{
			Name:     "app",
			Requests: &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi},
			Usage:    &pb.Resources{CpuCores: 0.9, MemoryBytes: 470 * mi},
			Peak:     &pb.Resources{CpuCores: 0.95, MemoryBytes: 480 * mi},
		}},
		RequestRate: 100, Latency: &pb.Latency{P50Seconds: 0.02, P95Seconds: 0.05, P99Seconds: 0.08},
		SloSeconds: 0.2, Samples: 6,
	}
}

func defaultRec() *pb.Recommendation {
	return &pb.Recommendation{Replicas: 3, Containers: []*pb.ContainerRecommendation{{
		Name: "app", Target: &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi},
	}}}
}

// config has small gates so that tests reach a stage in a few calls.
func config() *pb.Config {
	return &pb.Config{Mode: pb.RLMode_RL_MODE_ON, Alpha: 0.5, Gates: &pb.Gates{Window: 2, EpisodeSteps: 1}}
}

func recommendReq(name string, tick int) *pb.RecommendRequest {
	return &pb.RecommendRequest{
		Workload: ref(name), Observation: observation(tick),
		Constraints:           &pb.Constraints{MinReplicas: 1, MaxReplicas: 10},
		DefaultRecommendation: defaultRec(), Config: config(),
	}
}

func outcomeReq(name string, tick int) *pb.ReportOutcomeRequest {
	return &pb.ReportOutcomeRequest{
		Workload: ref(name), Observation: observation(tick), Applied: defaultRec(),
		AppliedSource: pb.Source_SOURCE_DEFAULT, NextObservation: observation(tick + 1), Config: config(),
	}
}

// promote feeds good outcomes (reward ≈ 0.95) until the workload leaves
// Bootstrapping: with window 2 and one step per episode, two of them.
func promote(t testing.TB, c pb.AgentServiceClient, name string) {
	t.Helper()
	for i := range 2 {
		r, err := c.ReportOutcome(ctx(t), outcomeReq(name, i))
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 1; (r.Stage == pb.Stage_STAGE_ONLINE_TRAINING) != want || !r.EpisodeComplete {
			t.Fatalf("outcome %d: %v", i, r)
		}
	}
}

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
	if n := len(h.srv.agents); n != 0 {
		t.Errorf("%d workloads created by invalid requests", n)
	}
}

// sameAllocation compares replicas and targets, the parts of a
// recommendation that are applied.
func sameAllocation(a, b *pb.Recommendation) bool {
	if a.GetReplicas() != b.GetReplicas() || len(a.GetContainers()) != len(b.GetContainers()) {
		return false
	}
	for i := range a.GetContainers() {
		x, y := a.GetContainers()[i], b.GetContainers()[i]
		if x.GetName() != y.GetName() || !proto.Equal(x.GetTarget(), y.GetTarget()) {
			return false
		}
	}
	return true
}

// wantField checks for InvalidArgument with a BadRequest naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %v (%v), want InvalidArgument", st.Code(), err)
	}
	if !strings.Contains(st.Message(), field) {
		t.Errorf("message %q does not name %s", st.Message(), field)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return
				}
			}
			t.Errorf("BadRequest %v lacks field %s", br, field)
			return
		}
	}
	t.Errorf("no BadRequest detail in %v", st.Proto())
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
		rec, err := agent.FromRecommendation(r.Recommendation)
		if err != nil {
			t.Fatalf("recommender would reject %v: %v", r.Recommendation, err)
		}
		if err := agent.Within(&rec, &workload.Constraints{MinReplicas: 1, MaxReplicas: 10}); err != nil {
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

// gatedLearner blocks ActBatch until released, to hold the batcher.
type gatedLearner struct {
	Learner
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int64
	maxSize atomic.Int64
	// onDemand learners gate only while paused is set, so a test can set up
	// state through the learner first; others gate every call.
	onDemand bool
	paused   atomic.Bool
}

func (g *gatedLearner) ActBatch(states [][]float64, masks [][]bool, greedy bool, rng *rand.Rand) ([]policy.Decision, error) {
	g.calls.Add(1)
	for {
		cur := g.maxSize.Load()
		if int64(len(states)) <= cur || g.maxSize.CompareAndSwap(cur, int64(len(states))) {
			break
		}
	}
	if g.entered != nil && (!g.onDemand || g.paused.Load()) {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Learner.ActBatch(states, masks, greedy, rng)
}

func TestDeadlineExceeded(t *testing.T) {
	gl := &gatedLearner{Learner: newPPO(t, 1), entered: make(chan struct{}, 16), release: make(chan struct{})}
	h := start(t, func(o *Options) { o.Learner = gl })
	promote(t, h.client, "web")

	// The forward pass outlives the caller's deadline.
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := h.client.Recommend(c, recommendReq("web", 5))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("slow forward pass: %v, want DeadlineExceeded", err)
	}
	<-gl.entered
	close(gl.release)

	// A call whose deadline passed before it started does no work.
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := h.srv.Recommend(expired, recommendReq("other", 0)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("expired context: %v, want DeadlineExceeded", err)
	}
	if _, ok := h.srv.agents["shop/other/uid-other"]; ok {
		t.Error("an expired call created a workload")
	}
}

func TestOverloadAndShutdown(t *testing.T) {
	gl := &gatedLearner{Learner: newPPO(t, 1), entered: make(chan struct{}, 16), release: make(chan struct{})}
	h := start(t, func(o *Options) {
		o.Learner = gl
		o.QueueSize, o.MaxBatch = 1, 1
	})
	promote(t, h.client, "web")

	errs := make(chan error, 2)
	go func() { _, err := h.client.Recommend(ctx(t), recommendReq("web", 10)); errs <- err }()
	<-gl.entered // the batcher holds the first call
	go func() { _, err := h.client.Recommend(ctx(t), recommendReq("web", 11)); errs <- err }()
	for len(h.srv.queue) < 1 { // the second fills the queue
		time.Sleep(time.Millisecond)
	}
	_, err := h.client.Recommend(ctx(t), recommendReq("web", 12))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("full queue: %v, want Unavailable", err)
	}
	close(gl.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("queued call: %v", err)
		}
	}
	if got := testutil.ToFloat64(h.srv.metrics.requests.WithLabelValues("Recommend", "Unavailable")); got != 1 {
		t.Errorf("Unavailable count %v, want 1", got)
	}

	// Health is SERVING until the server drains; then calls are refused.
	for _, svc := range []string{"", pb.AgentService_ServiceDesc.ServiceName} {
		r, err := h.health.Check(ctx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v, %v", svc, r, err)
		}
	}
	h.srv.Drain()
	if r, err := h.health.Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health while draining: %v, %v", r, err)
	}
	for name, call := range map[string]func() error{
		"Recommend":     func() error { _, err := h.client.Recommend(ctx(t), recommendReq("web", 20)); return err },
		"ReportOutcome": func() error { _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", 20)); return err },
		"GetPolicyStatus": func() error {
			_, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.Unavailable {
			t.Errorf("%s while draining: %v, want Unavailable", name, err)
		}
	}
}

// TestMicroBatching checks that decisions queued while a forward pass runs
// share the next one. The first pass is held at a gate until every other
// call is queued, so the outcome does not depend on goroutine scheduling.
func TestMicroBatching(t *testing.T) {
	gl := &gatedLearner{Learner: newPPO(t, 1), entered: make(chan struct{}, 4), release: make(chan struct{}), onDemand: true}
	h := start(t, func(o *Options) { o.Learner = gl })
	const n = 32
	for i := range n {
		promote(t, h.client, fmt.Sprintf("w%d", i))
	}
	gl.calls.Store(0)
	gl.maxSize.Store(0)
	gl.paused.Store(true)

	errs := make(chan error, n)
	call := func(i int) {
		_, err := h.client.Recommend(ctx(t), recommendReq(fmt.Sprintf("w%d", i), 10))
		errs <- err
	}
	go call(0)
	select {
	case <-gl.entered: // the batcher is now busy with w0's pass
	case <-time.After(30 * time.Second):
		t.Fatal("first forward pass never started")
	}
	for i := 1; i < n; i++ {
		go call(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(h.srv.queue) < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d decisions queued", len(h.srv.queue), n-1)
		}
		time.Sleep(time.Millisecond)
	}
	gl.paused.Store(false)
	close(gl.release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	calls, biggest := gl.calls.Load(), gl.maxSize.Load()
	if calls != 2 || biggest != n-1 {
		t.Errorf("%d decisions took %d forward passes (largest %d), want 2 passes, the second of %d", n, calls, biggest, n-1)
	}
}

// TestRestart checks that a server restarted on the same state directory
// resumes every workload's stage, the policy version and the weights.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	learner := newPPO(t, 1)
	h := start(t, func(o *Options) { o.Store, o.Learner = st, learner })
	promote(t, h.client, "web")
	// The transition was checkpointed before it was reported, not at the
	// next interval (30s by default): a kill -9 now would not undo it.
	if b, err := st.LoadCheckpoint(checkpointName); err != nil || !strings.Contains(string(b), `"workload":"shop/web/uid-web","lifecycle":{"stage":2`) {
		t.Fatalf("stage transition not checkpointed: %v %.300s", err, b)
	}
	if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("idle", 0)); err != nil {
		t.Fatal(err)
	}
	// Bootstrapping episodes queue training; wait for them.
	deadline := time.Now().Add(20 * time.Second)
	for h.srv.version.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("training did not run: version %s", h.srv.PolicyVersion())
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.stop() // a training job in flight ends before the version is read
	version := h.srv.PolicyVersion()
	st2, rec := restartStore(t, h, st, dir)
	if rec.Records != 3 {
		t.Errorf("experience log holds %d records, want 3", rec.Records)
	}
	fresh := newPPO(t, 99)
	h2 := start(t, func(o *Options) { o.Store, o.Learner = st2, fresh })
	if got := h2.srv.PolicyVersion(); got != version {
		t.Errorf("policy version %s after restart, want %s", got, version)
	}
	for name, want := range map[string]pb.Stage{"web": pb.Stage_STAGE_ONLINE_TRAINING, "idle": pb.Stage_STAGE_BOOTSTRAPPING} {
		r, err := h2.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref(name)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Stage != want || r.Status.PolicyVersion != version {
			t.Errorf("%s after restart: %v, want stage %v version %s", name, r.Status, want, version)
		}
	}
	// The weights are the trained ones, not the fresh learner's: both give
	// the same probabilities and value on a state. (The checkpoint bytes
	// differ: the config, seed included, stays the learner's own.)
	state := make([]float64, learn.StateDim)
	for i := range state {
		state[i] = float64(i) / learn.StateDim
	}
	a, err := learner.Act(state, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fresh.Act(state, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Value != b.Value || fmt.Sprint(a.Probs) != fmt.Sprint(b.Probs) {
		t.Errorf("restored policy %+v differs from the checkpointed one %+v", b, a)
	}
	if got := testutil.ToFloat64(h2.srv.metrics.workloads.WithLabelValues("OnlineTraining")); got != 1 {
		t.Errorf("workloads gauge after restart: %v", got)
	}
}

func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{&InvalidRequestError{Violations: []FieldViolation{{Field: "x", Description: "bad"}}}, codes.InvalidArgument},
		{fmt.Errorf("act: %w", policy.ErrInvalidInput), codes.InvalidArgument},
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

// TestGateHoldsBackBadDefaults feeds transitions whose reward fails the
// gate (an OOM kill each window): the workload stays in Bootstrapping, the
// defaults keep acting, and the reward is the negative penalty.
func TestGateHoldsBackBadDefaults(t *testing.T) {
	h := start(t, nil)
	for i := range 6 {
		req := outcomeReq("oomy", i)
		req.NextObservation.Containers[0].OomKills = 1
		r, err := h.client.ReportOutcome(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stage != pb.Stage_STAGE_BOOTSTRAPPING || r.Reward >= 0 || !r.EpisodeComplete {
			t.Fatalf("outcome %d: %v", i, r)
		}
	}
	r, err := h.client.Recommend(ctx(t), recommendReq("oomy", 10))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != pb.Source_SOURCE_DEFAULT || r.Stage != pb.Stage_STAGE_BOOTSTRAPPING {
		t.Errorf("after failing the gate: %v", r)
	}
	st, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("oomy")})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Episodes != 6 || st.Status.RewardMean != -1 || st.Status.RewardStdDev != 0 {
		t.Errorf("status %v", st.Status)
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

// fakeStore records what the server persists and can fail on demand.
type fakeStore struct {
	mu        sync.Mutex
	appended  []string // workload of each durable record, in order
	compacted [][]string
	failNext  bool
	// failCheckpoints fails every SaveCheckpoint while set.
	failCheckpoints bool
	ckpts           map[string][]byte
}

var _ Store = (*fakeStore)(nil)

// workloadsOf names the workload of each record; an undecodable record
// shows as "<corrupt>" and fails the comparisons.
func workloadsOf(recs [][]byte) []string {
	var out []string
	for _, r := range recs {
		e, err := learn.UnmarshalExperience(r)
		if err != nil {
			e.Workload = "<corrupt>"
		}
		out = append(out, e.Workload)
	}
	return out
}

func (f *fakeStore) Experience() [][]byte { return nil }
func (f *fakeStore) Append(recs [][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext {
		f.failNext = false
		return errors.New("disk full")
	}
	f.appended = append(f.appended, workloadsOf(recs)...)
	return nil
}
func (f *fakeStore) Compact(keep [][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacted = append(f.compacted, workloadsOf(keep))
	return nil
}
func (f *fakeStore) SaveCheckpoint(name string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failCheckpoints {
		return errors.New("read-only file system")
	}
	f.ckpts[name] = data
	return nil
}
func (f *fakeStore) LoadCheckpoint(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.ckpts[name]; ok {
		return b, nil
	}
	return nil, store.ErrNotFound
}

// TestExperiencePersistence checks that experience reaches the store in
// order, that a failed append is retried rather than lost, and that the log
// is compacted to the most recent records.
func TestExperiencePersistence(t *testing.T) {
	fs := &fakeStore{ckpts: map[string][]byte{}, failNext: true}
	h := start(t, func(o *Options) {
		o.Store = fs
		o.FlushRecords, o.KeepRecords, o.FlushInterval = 1000, 3, time.Hour
	})
	var want []string
	for i := range 14 {
		name := fmt.Sprintf("w%02d", i)
		req := outcomeReq(name, 0)
		req.Config.Gates.Window = 10 // no transitions: they would checkpoint
		if _, err := h.client.ReportOutcome(ctx(t), req); err != nil {
			t.Fatal(err)
		}
		want = append(want, "shop/"+name+"/uid-"+name)
		if i%2 == 1 {
			err := h.srv.flushExperience()
			if (err != nil) != (i == 1) {
				t.Fatalf("flush after %d: %v (only the first may fail)", i, err)
			}
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fmt.Sprint(fs.appended) != fmt.Sprint(want) {
		t.Errorf("appended %v, want %v", fs.appended, want)
	}
	// 14 records with KeepRecords 3: compaction once 12 were written, to
	// the 3 most recent at that point.
	if len(fs.compacted) != 1 || fmt.Sprint(fs.compacted[0]) != fmt.Sprint(want[9:12]) {
		t.Errorf("compactions %v, want one to %v", fs.compacted, want[9:12])
	}
	if got := testutil.ToFloat64(h.srv.metrics.persist.WithLabelValues("experience", "failed")); got != 1 {
		t.Errorf("failed appends counted %v, want 1", got)
	}
}

// TestLifecycleOverGRPC walks one workload through every stage with
// synthetic outcomes: good rewards promote it twice (Bootstrapping →
// OnlineTraining → Serving), OOM kills fire the detector (→ Retraining),
// and good rewards bring it back (→ OnlineTraining). Serving decisions are
// greedy and Serving episodes queue no training.
func TestLifecycleOverGRPC(t *testing.T) {
	// The defaults act for at least 3 episodes of Retraining.
	h := start(t, func(o *Options) { o.Retraining = lifecycle.RetrainingBounds{Min: 3} })
	tick := 0
	feed := func(n int, oom bool) *pb.ReportOutcomeResponse { return feedOutcomes(t, h, &tick, n, oom) }
	if r := feed(2, false); r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("after 2 good episodes: %v", r.Stage)
	}
	if r := feed(2, false); r.Stage != pb.Stage_STAGE_SERVING {
		t.Fatalf("after 2 stable online episodes: %v", r.Stage)
	}
	// Let the training queued so far finish, then check Serving adds none.
	waitTrainerIdle(h.srv)
	before := testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("ok")) + testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("dropped"))
	rec, err := h.client.Recommend(ctx(t), recommendReq("web", tick))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Stage != pb.Stage_STAGE_SERVING || rec.Source == pb.Source_SOURCE_DEFAULT {
		t.Fatalf("serving decision: %v", rec)
	}
	if r := feed(2, true); r.Stage != pb.Stage_STAGE_RETRAINING || r.Reward != -1 {
		t.Fatalf("after 2 OOM episodes: %v", r)
	}
	waitTrainerIdle(h.srv)
	after := testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("ok")) + testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("dropped"))
	if after != before {
		t.Errorf("Serving episodes queued %v training jobs, want 0", after-before)
	}
	// The gate passes after 2 good episodes, but the minimum holds it.
	if r := feed(2, false); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 2 good Retraining episodes of at least 3: %v", r.Stage)
	}
	if r := feed(1, false); r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("after recovery: %v", r.Stage)
	}
	for _, tr := range [][2]string{{"Bootstrapping", "OnlineTraining"}, {"OnlineTraining", "Serving"}, {"Serving", "Retraining"}, {"Retraining", "OnlineTraining"}} {
		if got := testutil.ToFloat64(h.srv.metrics.transitions.WithLabelValues(tr[0], tr[1])); got != 1 {
			t.Errorf("transitions %s→%s = %v, want 1", tr[0], tr[1], got)
		}
	}
}

// TestRetrainingCap: a workload whose defaults never pass the promotion
// gate after the detector fired returns to the agent after the cap, and a
// restart keeps counting the episodes of the stay.
func TestRetrainingCap(t *testing.T) {
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	bounds := func(o *Options) { o.Store, o.Retraining = st, lifecycle.RetrainingBounds{Max: 3} }
	h := start(t, bounds)
	tick := 0
	feed := func(h *harness, n int, oom bool) *pb.ReportOutcomeResponse { return feedOutcomes(t, h, &tick, n, oom) }
	feed(h, 4, false) // Bootstrapping → OnlineTraining → Serving
	if r := feed(h, 2, true); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 2 OOM episodes: %v", r.Stage)
	}
	// One bad episode in Retraining; the gate fails (reward -1).
	if r := feed(h, 1, true); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 1 bad Retraining episode: %v", r.Stage)
	}
	if err := h.srv.persist(true); err != nil {
		t.Fatal(err)
	}
	st, _ = restartStore(t, h, st, dir)
	h2 := start(t, bounds)
	if r := feed(h2, 1, true); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 2 bad Retraining episodes across a restart: %v", r.Stage)
	}
	if r := feed(h2, 1, true); r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("after the cap of 3: %v", r.Stage)
	}
	if got := testutil.ToFloat64(h2.srv.metrics.transitions.WithLabelValues("Retraining", "OnlineTraining")); got != 1 {
		t.Errorf("transitions Retraining→OnlineTraining = %v, want 1", got)
	}
}

// feedOutcomes reports n outcomes of workload "web" from tick *tick on,
// each an episode at the test gates; oom makes each window OOM-kill (reward
// -1). It returns the last answer.
func feedOutcomes(t *testing.T, h *harness, tick *int, n int, oom bool) *pb.ReportOutcomeResponse {
	t.Helper()
	var r *pb.ReportOutcomeResponse
	for range n {
		req := outcomeReq("web", *tick)
		if oom {
			req.NextObservation.Containers[0].OomKills = 1
		}
		*tick++
		var err error
		if r, err = h.client.ReportOutcome(ctx(t), req); err != nil {
			t.Fatal(err)
		}
	}
	return r
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
	srv.version.Store(7)
	if v := srv.PolicyVersion(); v != "v7" {
		t.Errorf("policy version after training %q, want v7", v)
	}
}
