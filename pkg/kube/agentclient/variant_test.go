package agentclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// recordingAgent is a fakeAgent that keeps the Recommend requests.
type recordingAgent struct {
	*fakeAgent
	recommends []*pb.RecommendRequest
}

func (r *recordingAgent) Recommend(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	r.mu.Lock()
	r.recommends = append(r.recommends, req)
	r.mu.Unlock()
	return r.fakeAgent.Recommend(ctx, req)
}

// TestAdvisorSendsDefaultVariant checks that every Recommend and
// ReportOutcome carries the variant the recommender's default came from.
func TestAdvisorSendsDefaultVariant(t *testing.T) {
	obs := &workload.Observation{Time: t0, Window: time.Minute, Replicas: 2, ReadyReplicas: 2}
	cons := &workload.Constraints{MinReplicas: 1, MaxReplicas: 5}
	def := workload.Recommendation{Replicas: 2, Source: workload.SourceDefault}
	for _, tc := range []struct{ name, variant string }{
		{"the fused default", ""},
		{"a variant", "limit-target=0.7/hold=24h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &recordingAgent{fakeAgent: &fakeAgent{}}
			srv.set(answer(pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT, 3, 0.7), nil, 0)
			a := NewAdvisor(dial(t, srv), Options{Timeout: time.Second, DefaultVariant: tc.variant})
			for i := range 3 {
				o := *obs
				o.Time = t0.Add(time.Duration(i) * time.Minute)
				if _, rl := a.Advise(context.Background(), mpaWith(v1alpha1.RLModeOn), &o, cons, def); rl.Reason != "AgentActing" {
					t.Fatalf("advice %d: %s (%s)", i, rl.Reason, rl.Message)
				}
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.recommends) != 3 || len(srv.outcomes) != 2 {
				t.Fatalf("%d Recommend and %d ReportOutcome calls, want 3 and 2", len(srv.recommends), len(srv.outcomes))
			}
			for i, r := range srv.recommends {
				if got := r.GetConfig().GetDefaultVariant(); got != tc.variant {
					t.Errorf("Recommend %d: default_variant %q, want %q", i, got, tc.variant)
				}
			}
			for i, r := range srv.outcomes {
				if got := r.GetConfig().GetDefaultVariant(); got != tc.variant {
					t.Errorf("ReportOutcome %d: default_variant %q, want %q", i, got, tc.variant)
				}
			}
		})
	}
}

// TestAdvisorVariantRefused: an agent whose policy was trained beside
// another variant answers FAILED_PRECONDITION; the default is applied with
// a reason that says so and the agent's words, and the breaker, which
// would hide them behind CircuitOpen, stays closed.
func TestAdvisorVariantRefused(t *testing.T) {
	const msg = `default variant mismatch: config.default_variant "" (the fused default), the policy's anchor "limit-target=0.7"`
	srv := &fakeAgent{}
	srv.set(nil, status.Error(codes.FailedPrecondition, msg), 0)
	a := NewAdvisor(dial(t, srv), Options{Timeout: time.Second, Breaker: NewBreaker(2, time.Minute)})
	obs := &workload.Observation{Time: t0, Replicas: 1, ReadyReplicas: 1}
	def := workload.Recommendation{Replicas: 1, Source: workload.SourceDefault}
	for i := range 4 {
		rec, rl := a.Advise(context.Background(), mpaWith(v1alpha1.RLModeOn), obs, &workload.Constraints{MinReplicas: 1}, def)
		if rl.Source != v1alpha1.SourceDefault || rl.Reason != "AgentRefusedDefault" || !strings.Contains(rl.Message, msg) {
			t.Fatalf("advice %d: %s/%s (%s), want Default/AgentRefusedDefault carrying the agent's message", i, rl.Source, rl.Reason, rl.Message)
		}
		if rec.Replicas != def.Replicas || rec.Source != workload.SourceDefault {
			t.Fatalf("advice %d applied %+v, want the default", i, rec)
		}
	}
	if st := a.opts.Breaker.State(); st != Closed {
		t.Errorf("breaker %s after refusals, want closed", st)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.calls != 4 || len(srv.outcomes) != 0 {
		t.Errorf("%d Recommend calls and %d outcomes, want 4 and none (a refused step has no outcome)", srv.calls, len(srv.outcomes))
	}
}
