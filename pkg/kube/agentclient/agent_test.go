package agentclient

import (
	"context"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

type fakeAgent struct {
	pb.UnimplementedAgentServiceServer
	mu       sync.Mutex
	resp     *pb.RecommendResponse
	err      error
	delay    time.Duration
	calls    int
	outcomes []*pb.ReportOutcomeRequest
	// forgotten records ForgetWorkload calls; forgetErr fails them.
	forgotten []*pb.WorkloadRef
	forgetErr error
}

func (f *fakeAgent) ForgetWorkload(_ context.Context, r *pb.ForgetWorkloadRequest) (*pb.ForgetWorkloadResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forgetErr != nil {
		return nil, f.forgetErr
	}
	f.forgotten = append(f.forgotten, r.GetWorkload())
	return &pb.ForgetWorkloadResponse{Found: true}, nil
}

func (f *fakeAgent) Recommend(ctx context.Context, _ *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	f.mu.Lock()
	f.calls++
	resp, err, delay := f.resp, f.err, f.delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return resp, err
}

func (f *fakeAgent) ReportOutcome(_ context.Context, r *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes = append(f.outcomes, r)
	return &pb.ReportOutcomeResponse{}, nil
}

func (f *fakeAgent) set(resp *pb.RecommendResponse, err error, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resp, f.err, f.delay = resp, err, delay
}

func dial(t *testing.T, srv pb.AgentServiceServer) pb.AgentServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	pb.RegisterAgentServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewAgentServiceClient(conn)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mpaWith(mode v1alpha1.RLMode) *v1alpha1.MultidimPodAutoscaler {
	return &v1alpha1.MultidimPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"},
		Spec: v1alpha1.MultidimPodAutoscalerSpec{
			ScaleTargetRef: &autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
			RL:             &v1alpha1.RLSpec{Mode: mode},
		},
	}
}

func answer(stage pb.Stage, src pb.Source, replicas int32, cpu float64) *pb.RecommendResponse {
	return &pb.RecommendResponse{Stage: stage, Source: src, PolicyVersion: "v7", Reason: "Acting",
		Recommendation: &pb.Recommendation{Replicas: replicas, Containers: []*pb.ContainerRecommendation{{Name: "app", Target: &pb.Resources{CpuCores: cpu, MemoryBytes: 1 << 28}}}}}
}

// named is resp naming the policy's action.
func named(resp *pb.RecommendResponse, action string) *pb.RecommendResponse {
	r := proto.Clone(resp).(*pb.RecommendResponse)
	r.Action = action
	return r
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestAdvise(t *testing.T) {
	obs := &workload.Observation{Time: t0, Window: time.Minute, Replicas: 2, ReadyReplicas: 2,
		Containers: []workload.ContainerObservation{{Name: "app", Requests: workload.Resources{CPU: 0.5}}}}
	cons := &workload.Constraints{MinReplicas: 1, MaxReplicas: 5, Containers: []workload.ContainerPolicy{{Name: "app", MaxAllowed: workload.Resources{CPU: 2}}}}
	def := workload.Recommendation{Replicas: 2, Source: workload.SourceDefault, Containers: []workload.ContainerRecommendation{{Name: "app", Target: workload.Resources{CPU: 0.5}}}}
	serving := answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT, 3, 0.7)
	for _, tc := range []struct {
		name       string
		mode       v1alpha1.RLMode
		resp       *pb.RecommendResponse
		err        error
		delay      time.Duration
		wantSource v1alpha1.RecommendationSource
		wantReason string
	}{
		{"acting", v1alpha1.RLModeOn, serving, nil, 0, v1alpha1.SourceAgent, "AgentActing"},
		{"safeguard", v1alpha1.RLModeOn, answer(pb.Stage_STAGE_ONLINE_TRAINING, pb.Source_SOURCE_SAFEGUARD, 2, 0.5), nil, 0, v1alpha1.SourceSafeguard, "SafeguardApplied"},
		{"shadow", v1alpha1.RLModeShadow, serving, nil, 0, v1alpha1.SourceDefault, "ShadowMode"},
		{"bootstrapping", v1alpha1.RLModeOn, answer(pb.Stage_STAGE_BOOTSTRAPPING, pb.Source_SOURCE_AGENT, 3, 0.7), nil, 0, v1alpha1.SourceDefault, "AgentBootstrapping"},
		{"deferred", v1alpha1.RLModeOn, answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_DEFAULT, 3, 0.7), nil, 0, v1alpha1.SourceDefault, "AgentDeferred"},
		{"above maxReplicas", v1alpha1.RLModeOn, answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT, 9, 0.7), nil, 0, v1alpha1.SourceDefault, "OutOfConstraints"},
		{"above maxAllowed", v1alpha1.RLModeOn, answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT, 3, 4), nil, 0, v1alpha1.SourceDefault, "OutOfConstraints"},
		{"NaN answer", v1alpha1.RLModeOn, answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT, 3, math.NaN()), nil, 0, v1alpha1.SourceDefault, "InvalidAgentAnswer"},
		{"negative answer", v1alpha1.RLModeOn, answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT, 3, -1), nil, 0, v1alpha1.SourceDefault, "InvalidAgentAnswer"},
		{"no recommendation", v1alpha1.RLModeOn, &pb.RecommendResponse{Stage: pb.Stage_STAGE_SERVING, Source: pb.Source_SOURCE_AGENT}, nil, 0, v1alpha1.SourceDefault, "InvalidAgentAnswer"},
		{"down", v1alpha1.RLModeOn, nil, status.Error(codes.Unavailable, "down"), 0, v1alpha1.SourceDefault, "AgentUnavailable"},
		{"cannot persist", v1alpha1.RLModeOn, nil, status.Error(codes.Unavailable, "cannot persist agent state: no space left on device"), 0, v1alpha1.SourceDefault, "AgentUnavailable"},
		{"input refused", v1alpha1.RLModeOn, nil, status.Error(codes.InvalidArgument, "observation.replicas: out of bounds"), 0, v1alpha1.SourceDefault, "AgentRefusedInput"},
		{"slow", v1alpha1.RLModeOn, serving, nil, 5 * time.Second, v1alpha1.SourceDefault, "AgentTimeout"},
		{"residual action named", v1alpha1.RLModeOn, named(serving, "replicas=+1/cpu=x1.15/memory=follow"), nil, 0, v1alpha1.SourceAgent, "AgentActing"},
		{"long action name", v1alpha1.RLModeOn, named(serving, strings.Repeat("x", 10000)), nil, 0, v1alpha1.SourceAgent, "AgentActing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &fakeAgent{}
			srv.set(tc.resp, tc.err, tc.delay)
			a := NewAdvisor(dial(t, srv), Options{Timeout: 100 * time.Millisecond, Now: time.Now})
			rec, rl := a.Advise(context.Background(), mpaWith(tc.mode), obs, cons, def)
			if rl.Source != tc.wantSource || rl.Reason != tc.wantReason {
				t.Fatalf("rl %s/%s (%s), want %s/%s", rl.Source, rl.Reason, rl.Message, tc.wantSource, tc.wantReason)
			}
			if act := tc.resp.GetAction(); act != "" && tc.wantSource == v1alpha1.SourceAgent {
				// The policy's choice reaches the operator, bounded.
				if want := "Acting: " + act[:min(len(act), maxActionName)]; rl.Message != want {
					t.Fatalf("message %q, want %q", rl.Message, want)
				}
			}
			// A failing agent's own reason reaches status.rl.message.
			if st, ok := status.FromError(tc.err); ok && tc.err != nil && tc.wantReason == "AgentUnavailable" && !strings.Contains(rl.Message, st.Message()) {
				t.Errorf("message %q does not carry the agent's %q", rl.Message, st.Message())
			}
			if tc.wantSource == v1alpha1.SourceDefault {
				if rec.Replicas != def.Replicas || rec.Source != workload.SourceDefault {
					t.Fatalf("the default must be applied, got %+v", rec)
				}
			} else if rec.Replicas != tc.resp.Recommendation.Replicas {
				t.Fatalf("agent answer not applied: %+v", rec)
			}
		})
	}
}

func TestCircuitBreakerAndOutcomes(t *testing.T) {
	srv := &fakeAgent{}
	srv.set(nil, status.Error(codes.Unavailable, "down"), 0)
	clk := &clock{t: t0}
	a := NewAdvisor(dial(t, srv), Options{Timeout: time.Second, Now: clk.now, Breaker: NewBreaker(2, time.Minute)})
	obs := &workload.Observation{Time: t0, Replicas: 1, ReadyReplicas: 1}
	cons := &workload.Constraints{MinReplicas: 1}
	def := workload.Recommendation{Replicas: 1}
	m := mpaWith(v1alpha1.RLModeOn)
	for range 2 {
		a.Advise(context.Background(), m, obs, cons, def)
	}
	if a.opts.Breaker.State() != Open {
		t.Fatalf("breaker %s after 2 failures, want open", a.opts.Breaker.State())
	}
	// Refused input is the request's fault: it never opens the breaker.
	refusing := &fakeAgent{}
	refusing.set(nil, status.Error(codes.InvalidArgument, "out of bounds"), 0)
	r := NewAdvisor(dial(t, refusing), Options{Timeout: time.Second, Now: clk.now, Breaker: NewBreaker(2, time.Minute)})
	for range 3 {
		if _, rl := r.Advise(context.Background(), m, obs, cons, def); rl.Reason != "AgentRefusedInput" {
			t.Fatalf("reason %s, want AgentRefusedInput", rl.Reason)
		}
	}
	if r.opts.Breaker.State() != Closed || refusing.calls != 3 {
		t.Fatalf("breaker %s after 3 refusals (%d calls), want closed", r.opts.Breaker.State(), refusing.calls)
	}
	_, rl := a.Advise(context.Background(), m, obs, cons, def)
	if rl.Reason != "CircuitOpen" || srv.calls != 2 {
		t.Fatalf("reason %s, calls %d: an open breaker must not call", rl.Reason, srv.calls)
	}
	clk.t = clk.t.Add(time.Minute)
	srv.set(answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT, 1, 0.1), nil, 0)
	if _, rl := a.Advise(context.Background(), m, obs, cons, def); rl.Reason != "AgentActing" || a.opts.Breaker.State() != Closed {
		t.Fatalf("half-open trial: reason %s breaker %s", rl.Reason, a.opts.Breaker.State())
	}
	next := &workload.Observation{Time: t0.Add(2 * time.Minute), Replicas: 1, ReadyReplicas: 1}
	a.Advise(context.Background(), m, next, cons, def)
	if len(srv.outcomes) != 1 {
		t.Fatalf("%d outcomes reported, want 1", len(srv.outcomes))
	}
	o := srv.outcomes[0]
	if o.AppliedSource != pb.Source_SOURCE_AGENT || o.Applied.Replicas != 1 || !o.NextObservation.Time.AsTime().Equal(next.Time) || !o.Observation.Time.AsTime().Equal(t0) {
		t.Fatalf("outcome %+v", o)
	}
}

// TestAdviseKeepsLastContactWhileAgentDown: status.rl.lastAgentContactTime
// is when the agent last answered, so a failed or skipped call keeps the
// previous value (and a first failure has none to keep).
func TestAdviseKeepsLastContactWhileAgentDown(t *testing.T) {
	obs := &workload.Observation{Time: t0, Replicas: 1, ReadyReplicas: 1}
	cons := &workload.Constraints{MinReplicas: 1}
	def := workload.Recommendation{Replicas: 1}
	contact := metav1.NewTime(t0.Add(-time.Minute))
	for _, tc := range []struct {
		name     string
		previous *v1alpha1.RLStatus
		breaker  *Breaker
		want     *metav1.Time
		reason   string
	}{
		{"down, answered before", &v1alpha1.RLStatus{Stage: v1alpha1.RLStageServing, LastAgentContactTime: &contact}, nil, &contact, "AgentUnavailable"},
		{"circuit open, answered before", &v1alpha1.RLStatus{LastAgentContactTime: &contact}, openBreaker(), &contact, "CircuitOpen"},
		{"down, never answered", nil, nil, nil, "AgentUnavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &fakeAgent{}
			srv.set(nil, status.Error(codes.Unavailable, "down"), 0)
			a := NewAdvisor(dial(t, srv), Options{Timeout: time.Second, Now: func() time.Time { return t0 }, Breaker: tc.breaker})
			m := mpaWith(v1alpha1.RLModeOn)
			m.Status.RL = tc.previous
			_, rl := a.Advise(context.Background(), m, obs, cons, def)
			if rl.Reason != tc.reason || rl.Source != v1alpha1.SourceDefault {
				t.Fatalf("rl %s/%s, want Default/%s", rl.Source, rl.Reason, tc.reason)
			}
			switch {
			case tc.want == nil && rl.LastAgentContactTime != nil:
				t.Fatalf("lastAgentContactTime %v, want none", rl.LastAgentContactTime)
			case tc.want != nil && (rl.LastAgentContactTime == nil || !rl.LastAgentContactTime.Equal(tc.want)):
				t.Fatalf("lastAgentContactTime %v, want the previous %v", rl.LastAgentContactTime, tc.want)
			}
			if rl.Stage != "" {
				t.Fatalf("stage %q: the agent did not say", rl.Stage)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	for _, tc := range []struct {
		name       string
		breaker    *Breaker
		err        error
		wantCalled bool
		wantErr    bool
	}{
		{"tells the agent", nil, nil, true, false},
		{"agent without the call", nil, status.Error(codes.Unimplemented, "no"), false, true},
		{"breaker open", openBreaker(), nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &fakeAgent{forgetErr: tc.err}
			a := NewAdvisor(dial(t, srv), Options{Timeout: time.Second, Now: func() time.Time { return t0 }, Breaker: tc.breaker})
			a.remember("u1", &pb.Observation{}, &pb.Recommendation{}, pb.Source_SOURCE_DEFAULT)
			err := a.Remove(context.Background(), "ns", "web", "u1")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Remove() = %v, want error %v", err, tc.wantErr)
			}
			srv.mu.Lock()
			got := srv.forgotten
			srv.mu.Unlock()
			want := []*pb.WorkloadRef{{Namespace: "ns", Name: "web", Uid: "u1"}}
			if !tc.wantCalled {
				want = nil
			}
			if len(got) != len(want) || (len(want) == 1 && !proto.Equal(got[0], want[0])) {
				t.Errorf("ForgetWorkload calls %v, want %v", got, want)
			}
			a.mu.Lock()
			_, kept := a.last["u1"]
			a.mu.Unlock()
			if kept {
				t.Error("the advisor kept the removed workload's last step")
			}
			if tc.err != nil && a.opts.Breaker.State() != Closed {
				t.Errorf("a failed ForgetWorkload moved the breaker to %v", a.opts.Breaker.State())
			}
		})
	}
}

func openBreaker() *Breaker {
	b := NewBreaker(1, time.Hour)
	b.Failure(t0)
	return b
}

func TestBreakerHalfOpenFailureReopens(t *testing.T) {
	b := NewBreaker(1, time.Minute)
	b.Failure(t0)
	if b.Allow(t0.Add(30 * time.Second)) {
		t.Fatal("open breaker allowed a call")
	}
	if !b.Allow(t0.Add(time.Minute)) || b.State() != HalfOpen {
		t.Fatal("no trial after the cooldown")
	}
	if b.Allow(t0.Add(time.Minute)) {
		t.Fatal("two concurrent trials")
	}
	b.Failure(t0.Add(time.Minute))
	if b.State() != Open || b.Allow(t0.Add(90*time.Second)) {
		t.Fatal("a failed trial must reopen for a full cooldown")
	}
}
