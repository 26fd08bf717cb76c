//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// stubAgent is an agent of the contract that always acts (stage Serving,
// source Agent) and answers the default's pod sizes with the replica count
// the test sets: what is tested is what the recommender and the updater do
// with an agent's answer, not how an agent learns one.
type stubAgent struct {
	pb.UnimplementedAgentServiceServer
	replicas atomic.Int32
	addr     string
}

func startStubAgent(t *testing.T, replicas int32) *stubAgent {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stubAgent{addr: lis.Addr().String()}
	s.replicas.Store(replicas)
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s
}

func (s *stubAgent) Recommend(_ context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	rec := proto.Clone(req.GetDefaultRecommendation()).(*pb.Recommendation)
	rec.Replicas = s.replicas.Load()
	return &pb.RecommendResponse{
		Recommendation: rec, Source: pb.Source_SOURCE_AGENT, Stage: pb.Stage_STAGE_SERVING,
		PolicyVersion: "stub", Reason: "the e2e stub agent",
	}, nil
}

func (s *stubAgent) ReportOutcome(context.Context, *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	return &pb.ReportOutcomeResponse{Stage: pb.Stage_STAGE_SERVING, PolicyVersion: "stub"}, nil
}

func (s *stubAgent) ForgetWorkload(context.Context, *pb.ForgetWorkloadRequest) (*pb.ForgetWorkloadResponse, error) {
	return &pb.ForgetWorkloadResponse{}, nil
}

// agentScaleDownWindow is the MPA's scale-down stabilization window in
// TestAgentScaleDownWindow: long against the updater's loop (5s) and the
// recommender's (5s), so that a scale-down inside it is told apart from
// one at its end.
const agentScaleDownWindow = 45 * time.Second

// agentMPA is the autoscaler of TestAgentScaleDownWindow: mode Auto, the
// agent On, replicas [1, 6] (the agent's 4 and 2 inside, off both ends),
// and the pod size the default's, which the stub echoes.
func agentMPA(name string) mpaManifest {
	return mpaManifest{
		name: name, mode: v1alpha1.UpdateModeAuto, maxCPU: "500m", maxMemory: "1Gi", minReplicas: 1, maxReplicas: 6,
		global: fmt.Sprintf(`      behavior:
        scaleDown:
          stabilizationWindowSeconds: %d
`, int(agentScaleDownWindow/time.Second)),
		spec: `  rl:
    mode: "On"
`,
	}
}

// TestAgentScaleDownWindow checks the updater's own scale-down window. The
// fused default's desiredReplicas is stabilized by the recommender
// (rule 7), so the updater applies it as it comes; an agent's answer is
// not, and the updater holds it for spec.constraints.global.behavior's
// scaleDown window (updater/controller: horizontal). An agent in mode On
// asks for 4 replicas, then for 2: status.desiredReplicas falls to 2 at
// once (the recommender does not hold the agent's count), and the
// Deployment no sooner than the window (less the updater's loop) after
// the agent's first answer of 2 was in the status, and not much later.
func TestAgentScaleDownWindow(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "agentdown")
	const name, high, low = "hamster", int32(4), int32(2)
	createLoopDeployment(t, ctx, ns, name)
	runEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), baseRate)
	agent := startStubAgent(t, high)
	getMPA := createMPA(t, ns, agentMPA(name))
	rec := startProcess(t, processSpec{Binary: "recommender", Args: recommenderArgs(ns,
		"--leader-elect=false",
		"--rl-agent-endpoint="+agent.addr,
		// The stub listens in plaintext on loopback.
		"--rl-agent-tls-mode=plaintext",
		"--rl-agent-timeout=2s",
	)})
	// No admission controller renews its heartbeat Lease, so the updater
	// scales and never evicts.
	upd := startUpdater(t, ns, "aware-admission-controller-"+ns, "--leader-elect=false", "--update-interval=5s")

	// The agent's 4 is applied: a scale-up, which no window holds.
	framework.Eventually(t, 3*time.Minute, "the updater to apply the agent's 4 replicas", func(ctx context.Context) (bool, error) {
		rec.running(t)
		upd.running(t)
		m, err := getMPA(ctx)
		if err != nil {
			return false, err
		}
		if rl := m.Status.RL; rl == nil || rl.Source != v1alpha1.SourceAgent || rl.Reason != "AgentActing" {
			return false, fmt.Errorf("status.rl %s: the agent's answer is not applied", rlString(m.Status.RL))
		}
		if n := deploymentReplicas(t, ns, name); n != high {
			return false, fmt.Errorf("spec.replicas %d, status.desiredReplicas %d", n, m.Status.DesiredReplicas)
		}
		return true, nil
	})
	if _, err := tb.WaitForRunningPods(ctx, ns, "app="+name, int(high), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	// A window of the agent's 4 in the updater's history, so that what
	// holds the scale-down below is the window, not a history too short
	// to hold anything.
	time.Sleep(agentScaleDownWindow)

	agent.replicas.Store(low)
	asked := time.Now()
	// recommended is when the status first carried the agent's 2; fell
	// when the Deployment first went below 4.
	var recommended, fell time.Time
	err := framework.WaitFor(ctx, agentScaleDownWindow+3*time.Minute, time.Second, "the updater to scale down to the agent's 2", func(ctx context.Context) (bool, error) {
		rec.running(t)
		upd.running(t)
		m, err := getMPA(ctx)
		if err != nil {
			return false, err
		}
		if recommended.IsZero() && m.Status.DesiredReplicas == low && m.Status.RL != nil && m.Status.RL.Source == v1alpha1.SourceAgent {
			// The recommender wrote it at recommendationTime; the poll
			// may see it up to a second later.
			recommended = m.Status.RecommendationTime.Time
			t.Logf("status.desiredReplicas %d from the agent at %s, %s after it was asked", low,
				recommended.Format(time.RFC3339), time.Since(asked).Round(time.Second))
		}
		n := deploymentReplicas(t, ns, name)
		if n < high && fell.IsZero() {
			fell = time.Now()
			t.Logf("replicas fell to %d %s after the agent's 2 was recommended (window %s)", n, fell.Sub(recommended).Round(time.Second), agentScaleDownWindow)
		}
		if n != low {
			return false, fmt.Errorf("spec.replicas %d; status.desiredReplicas %d", n, m.Status.DesiredReplicas)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case recommended.IsZero():
		t.Fatal("the agent's 2 was never seen in status.desiredReplicas before the scale-down")
	// The recommender passes the agent's count on within a few loops: it
	// is not what holds the scale-down.
	case recommended.Sub(asked) > 20*time.Second:
		t.Errorf("status.desiredReplicas fell %s after the agent asked: the recommender held the agent's count", recommended.Sub(asked).Round(time.Second))
	}
	// The window holds the highest recommendation the updater read in its
	// span, and it reads one per loop: the last 4 it read was read about
	// one loop (5s) before recommended, so the 4 leaves the window about
	// window-5s after recommended (seen: 41s and 43s of a 45s window).
	// Two loops of slack, for loops that a busy machine spaces out, and a
	// second for the status time's resolution. Without the window the
	// fall would come within a loop of recommended.
	const slack = 2*5*time.Second + time.Second
	if held := fell.Sub(recommended.Truncate(time.Second)); held < agentScaleDownWindow-slack {
		t.Errorf("replicas fell %s after the agent's 2 was recommended, inside the %s scale-down window (less %s)", held.Round(time.Millisecond), agentScaleDownWindow, slack)
	} else if held > agentScaleDownWindow+30*time.Second {
		// Six updater loops of slack: later than that, something other
		// than the window held it.
		t.Errorf("replicas fell %s after the agent's 2 was recommended, more than 30s after the %s window", held.Round(time.Second), agentScaleDownWindow)
	}
	if n := mustMetric(t, rec, "aware_recommender_recommendations_total", "source=Agent"); n < 1 {
		t.Errorf("%g recommendations with source Agent", n)
	}
}
