//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// rlGates opens the lifecycle gates as fast as spec.rl allows, so the
// agent's stage lets it act within a minute instead of after 10 episodes
// of 30 recommender ticks each (the defaults, hours at a 1m interval):
//
//   - episodeSteps 1: every recommender tick (one ReportOutcome) ends an
//     episode;
//   - window 2 (the CRD's minimum): the gates judge the last two episodes;
//   - promoteMinMean -1 and promoteMaxStdDev 2 (the CRD's bounds): any two
//     episode rewards (each in [-1, 1]) pass the promotion gate, so
//     Bootstrapping → OnlineTraining after 2 episodes and OnlineTraining →
//     Serving after 2 more, about six ticks (30s at --recommender-interval
//     5s) after the MPA is first seen;
//   - retrainBelowMean -1 and retrainAboveStdDev 2: no pair of rewards in
//     [-1, 1] has a mean below -1 or a deviation above 1, so Serving is
//     final and the stage the test sees before killing the agent is the
//     stage a restored agent must report.
//
// pkg/core/lifecycle's unit tests cover the gates with realistic thresholds;
// this test is about the recommender and the agent process around them.
// The second workload's MPA, in mode On with the default gates, is the
// control: its agent cannot leave Bootstrapping within 300 ticks (25
// minutes at 5s), so the default keeps being applied.
const rlGates, rlOnDefaultGates = `  rl:
    mode: Shadow
    gates:
      window: 2
      episodeSteps: 1
      promoteMinMean: -1
      promoteMaxStdDev: 2
      retrainBelowMean: -1
      retrainAboveStdDev: 2
`, `  rl:
    mode: "On"
`

// TestRLAgent runs rl-agent serve and the recommender as local processes:
// in Shadow mode the agent is consulted (status.rl shows its stage and
// contact) while the default is applied; in On mode the agent's answer is
// applied once its stage allows, and not before (a second MPA in mode On
// whose agent is still Bootstrapping); when the agent is SIGKILLed the
// recommender keeps recommending from the defaults and says why; restarted
// on the same address and state directory the agent resumes where it was,
// and the source returns to the agent.
func TestRLAgent(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "rl")
	w := startMPAWorkload(t, ns, "hamster", rlGates)
	gated := startMPAWorkload(t, ns, "gated", rlOnDefaultGates)

	agentAddr := freeAddr(t)
	// Mutual TLS as the manifests set it: a CA shared through a Secret.
	agent := startProcess(t, processSpec{Binary: "rl-agent", Args: []string{
		"--listen-address=" + agentAddr,
		"--state-dir=" + t.TempDir(),
		// The paper's actions: a fresh residual policy follows the
		// default, and this test is about the agent's own answers.
		"--action-space=paper",
		// Persist often: the restart below must find what was learnt
		// before the kill.
		"--checkpoint-interval=1s",
	}})
	rec := startProcess(t, processSpec{Binary: "recommender", Args: recommenderArgs(ns,
		"--leader-elect=false",
		"--checkpoints-interval=1m",
		"--rl-agent-endpoint="+agentAddr,
		"--rl-agent-timeout=2s",
		// Two failures open the breaker; it stays open for 15s (three
		// loops), so CircuitOpen is seen, and a restarted agent is called
		// again within 15s.
		"--rl-agent-failure-threshold=2",
		"--rl-agent-cooldown=15s",
	)})

	// The test reads the agent as a tool of another identity would: it
	// may read, not report.
	agentClient := pb.NewAgentServiceClient(agentConn(t, agentAddr, "aware-e2e-reader"))
	ref := &pb.WorkloadRef{Namespace: ns, Name: "hamster", Uid: string(w.mpa.UID)}
	policyStatus := func(ctx context.Context) (*pb.PolicyStatus, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := agentClient.GetPolicyStatus(cctx, &pb.GetPolicyStatusRequest{Workload: ref})
		if err != nil {
			return nil, err
		}
		return resp.GetStatus(), nil
	}

	t.Run("mutual TLS: only the recommender reports, plaintext is refused", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := agentClient.ReportOutcome(cctx, &pb.ReportOutcomeRequest{Workload: ref})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("ReportOutcome as aware-e2e-reader: %v, want PermissionDenied", err)
		}
		plain, err := grpc.NewClient(agentAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if _, err := pb.NewAgentServiceClient(plain).GetPolicyStatus(cctx, &pb.GetPolicyStatusRequest{Workload: ref}); status.Code(err) != codes.Unavailable {
			t.Errorf("GetPolicyStatus in plaintext: %v, want Unavailable (no TLS handshake)", err)
		}
		if n := mustMetric(t, agent, "aware_rlagent_unauthorized_requests_total", "method=ReportOutcome", "reason=forbidden"); n != 1 {
			t.Errorf("agent counted %g forbidden ReportOutcome calls, want 1", n)
		}
	})

	if !t.Run("Shadow: the agent is consulted, the default is applied", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		start := time.Now()
		m := w.waitRecommendation(t, 3*time.Minute, "status.rl: Serving stage, default applied in Shadow mode", time.Time{}, func(m *v1alpha1.MultidimPodAutoscaler) error {
			rl := m.Status.RL
			switch {
			case rl == nil:
				return fmt.Errorf("no status.rl")
			case rl.Source != v1alpha1.SourceDefault || rl.Reason != "ShadowMode":
				return fmt.Errorf("source %s reason %s, want Default ShadowMode", rl.Source, rl.Reason)
			case rl.LastAgentContactTime == nil || rl.PolicyVersion == "":
				return fmt.Errorf("no sign of the agent's answer (lastAgentContactTime, policyVersion)")
			case rl.Stage != v1alpha1.RLStageServing:
				// Waiting for Serving shows that even a stage that lets
				// the agent act does not apply it in Shadow mode.
				return fmt.Errorf("stage %s", rl.Stage)
			}
			return nil
		}, rec, agent)
		t.Logf("Serving in Shadow mode after %s: %s", time.Since(start).Round(time.Second), rlString(m.Status.RL))
		if n := mustMetric(t, rec, "aware_recommender_recommendations_total", "source=Agent"); n != 0 {
			t.Errorf("%g recommendations with source Agent in Shadow mode", n)
		}
		if n := mustMetric(t, rec, "aware_recommender_recommendations_total", "source=Default"); n < 1 {
			t.Errorf("%g recommendations with source Default in Shadow mode", n)
		}
		if n := mustMetric(t, agent, "aware_rlagent_stage_transitions_total", "from=OnlineTraining", "to=Serving"); n != 1 {
			t.Errorf("agent counted %g OnlineTraining→Serving transitions, want 1", n)
		}
		// The recommender's genuine observations lie within the agent's
		// physical bounds: none was refused.
		if n, _, err := agent.metric(ctx, "aware_rlagent_out_of_bounds_requests_total"); err != nil || n != 0 {
			t.Errorf("agent refused %g genuine requests as out of bounds (%v)", n, err)
		}
		st, err := policyStatus(ctx)
		if err != nil {
			t.Fatalf("GetPolicyStatus: %v", err)
		}
		if st.GetStage() != pb.Stage_STAGE_SERVING || st.GetEpisodes() < 4 {
			t.Errorf("GetPolicyStatus: stage %s after %d episodes, want Serving after at least 4", st.GetStage(), st.GetEpisodes())
		}
	}) {
		t.FailNow()
	}

	if !t.Run("On: the agent's recommendation is applied", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		patched, err := w.client.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Patch(ctx, "hamster", types.MergePatchType,
			[]byte(`{"spec":{"rl":{"mode":"On"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("switch to On: %v", err)
		}
		m := w.waitRecommendation(t, 2*time.Minute, "status.rl: source Agent in On mode", time.Time{}, func(m *v1alpha1.MultidimPodAutoscaler) error {
			rl := m.Status.RL
			switch {
			case m.Status.ObservedGeneration < patched.Generation:
				return fmt.Errorf("observedGeneration %d < %d", m.Status.ObservedGeneration, patched.Generation)
			case rl == nil:
				return fmt.Errorf("no status.rl")
			case rl.Source != v1alpha1.SourceAgent || rl.Reason != "AgentActing":
				return fmt.Errorf("source %s reason %s, want Agent AgentActing", rl.Source, rl.Reason)
			case rl.Stage != v1alpha1.RLStageServing:
				return fmt.Errorf("stage %s, want Serving", rl.Stage)
			}
			return nil
		}, rec, agent)
		t.Logf("agent acting: %s; desiredReplicas %d", rlString(m.Status.RL), m.Status.DesiredReplicas)
		checkAgentApplied(t, m, rec)
		// The control: mode On, but the stage does not let the agent act.
		g := gated.waitRecommendation(t, time.Minute, "the gated MPA: default applied while Bootstrapping", time.Time{}, func(m *v1alpha1.MultidimPodAutoscaler) error {
			rl := m.Status.RL
			switch {
			case rl == nil || rl.LastAgentContactTime == nil:
				return fmt.Errorf("the agent was not consulted")
			case rl.Stage != v1alpha1.RLStageBootstrapping || rl.Source != v1alpha1.SourceDefault || rl.Reason != "AgentBootstrapping":
				return fmt.Errorf("%w: want stage Bootstrapping, source Default, reason AgentBootstrapping", framework.ErrPermanent)
			}
			return nil
		}, rec, agent)
		t.Logf("gated MPA in mode On: %s", rlString(g.Status.RL))
	}) {
		t.FailNow()
	}

	// before is what the agent had learnt for the workload when it was
	// killed, as a persisted checkpoint holds it.
	var before *pb.PolicyStatus
	var beforeVersion int
	if !t.Run("agent killed: defaults keep coming, status.rl says why", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		st, err := policyStatus(ctx)
		if err != nil {
			t.Fatalf("GetPolicyStatus: %v", err)
		}
		before = st
		// Checkpoints are serialised; the second one to finish after this
		// point began after the status was read, so it holds at least
		// these episodes.
		saved := mustMetric(t, agent, "aware_rlagent_persist_operations_total", "kind=checkpoint", "result=ok")
		framework.Eventually(t, time.Minute, "two more agent checkpoints", func(ctx context.Context) (bool, error) {
			n, _, err := agent.metric(ctx, "aware_rlagent_persist_operations_total", "kind=checkpoint", "result=ok")
			if err != nil || n < saved+2 {
				return false, fmt.Errorf("%g checkpoints (was %g): %v", n, saved, err)
			}
			return true, nil
		})
		if beforeVersion, err = policyVersion(before.GetPolicyVersion()); err != nil {
			t.Fatal(err)
		}
		t.Logf("before the kill: stage %s, %d episodes, %d transitions, policy %s", before.GetStage(), before.GetEpisodes(), before.GetTransitions(), before.GetPolicyVersion())

		agent.kill(t)
		killed := time.Now()
		m := w.waitRecommendation(t, 2*time.Minute, "a default recommendation after the kill, with the agent's failure as reason", killed, func(m *v1alpha1.MultidimPodAutoscaler) error {
			rl := m.Status.RL
			if rl == nil || rl.Source != v1alpha1.SourceDefault {
				return fmt.Errorf("source is not Default")
			}
			// The API: lastAgentContactTime is when the agent last
			// answered, which was before the kill.
			if c := rl.LastAgentContactTime; c == nil || c.Time.After(killed) {
				return fmt.Errorf("%w: lastAgentContactTime %v, want the last contact before the kill at %s",
					framework.ErrPermanent, c, killed.Format(time.RFC3339Nano))
			}
			switch rl.Reason {
			case "AgentUnavailable", "AgentTimeout", "CircuitOpen":
				return nil
			}
			return fmt.Errorf("reason %s", rl.Reason)
		}, rec)
		t.Logf("after the kill: %s", rlString(m.Status.RL))
		first := m.Status.RecommendationTime.Time
		// The breaker opens after two failures; its reason shows while it
		// is open, and recommendations keep being refreshed meanwhile.
		m = w.waitRecommendation(t, 2*time.Minute, "CircuitOpen, and a refreshed recommendation", first, func(m *v1alpha1.MultidimPodAutoscaler) error {
			if rl := m.Status.RL; rl == nil || rl.Source != v1alpha1.SourceDefault || rl.Reason != "CircuitOpen" {
				return fmt.Errorf("want source Default, reason CircuitOpen")
			}
			return nil
		}, rec)
		t.Logf("recommendationTime advanced from %s to %s with the agent down", first.Format(time.RFC3339), m.Status.RecommendationTime.Format(time.RFC3339))
		if st := mustMetric(t, rec, "aware_recommender_agent_circuit_breaker_state"); st != 2 {
			t.Errorf("aware_recommender_agent_circuit_breaker_state = %g, want 2 (open)", st)
		}
		if n := mustMetric(t, rec, "aware_recommender_agent_errors_total", "method=Recommend"); n < 2 {
			t.Errorf("%g failed Recommend calls counted, want at least 2", n)
		}
	}) {
		t.FailNow()
	}

	t.Run("agent restarted: resumes its state, the source returns to the agent", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		restarted := time.Now()
		agent.restart(t)
		// Read the restored state at once: the recommender may call the
		// agent meanwhile, but it can only add episodes.
		st, err := policyStatus(ctx)
		if err != nil {
			t.Fatalf("GetPolicyStatus after the restart: %v (a fresh agent does not know the workload)", err)
		}
		t.Logf("after the restart: stage %s, %d episodes, %d transitions, policy %s", st.GetStage(), st.GetEpisodes(), st.GetTransitions(), st.GetPolicyVersion())
		if st.GetStage() != before.GetStage() {
			t.Errorf("stage %s after the restart, %s before", st.GetStage(), before.GetStage())
		}
		if st.GetEpisodes() < before.GetEpisodes() || st.GetTransitions() < before.GetTransitions() {
			t.Errorf("%d episodes / %d transitions after the restart, %d / %d before: the agent lost its state",
				st.GetEpisodes(), st.GetTransitions(), before.GetEpisodes(), before.GetTransitions())
		}
		if v, err := policyVersion(st.GetPolicyVersion()); err != nil || v < beforeVersion {
			t.Errorf("policy version %s after the restart, %s before (%v)", st.GetPolicyVersion(), before.GetPolicyVersion(), err)
		}
		m := w.waitRecommendation(t, 2*time.Minute, "the agent's recommendation applied again", restarted, func(m *v1alpha1.MultidimPodAutoscaler) error {
			rl := m.Status.RL
			switch {
			case rl == nil || rl.Source != v1alpha1.SourceAgent:
				return fmt.Errorf("source is not Agent")
			case rl.LastAgentContactTime == nil || rl.LastAgentContactTime.Time.Before(restarted):
				return fmt.Errorf("no contact with the restarted agent yet")
			case rl.Stage != v1alpha1.RLStageServing:
				return fmt.Errorf("stage %s, want Serving (restored)", rl.Stage)
			}
			return nil
		}, rec, agent)
		t.Logf("after the restart: %s", rlString(m.Status.RL))
		if st := mustMetric(t, rec, "aware_recommender_agent_circuit_breaker_state"); st != 0 {
			t.Errorf("aware_recommender_agent_circuit_breaker_state = %g, want 0 (closed)", st)
		}
	})

	t.Run("stage changes were announced", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		if n := mustMetric(t, rec, "aware_recommender_rl_stage_transitions_total", "to=Serving"); n < 1 {
			t.Errorf("%g transitions to Serving counted by the recommender", n)
		}
		events, err := tb.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RLStageChanged,involvedObject.name=hamster"})
		if err != nil {
			t.Fatal(err)
		}
		var serving bool
		for _, e := range events.Items {
			serving = serving || strings.Contains(e.Message, "to Serving")
		}
		if !serving {
			t.Errorf("no RLStageChanged event for the promotion to Serving among %d", len(events.Items))
		}
	})

	t.Run("deleted autoscaler: the agent forgets it", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		if err := w.client.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Delete(ctx, "hamster", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "GetPolicyStatus of the deleted autoscaler to answer NotFound", func(ctx context.Context) (bool, error) {
			agent.running(t)
			_, err := policyStatus(ctx)
			return status.Code(err) == codes.NotFound, fmt.Errorf("GetPolicyStatus: %v", err)
		})
		if n := mustMetric(t, agent, "aware_rlagent_workloads_forgotten_total", "reason=removed"); n != 1 {
			t.Errorf("aware_rlagent_workloads_forgotten_total{reason=removed} = %g, want 1", n)
		}
		// The other workload ("gated") stays: 1 of --max-workloads.
		if r := mustMetric(t, agent, "aware_rlagent_workload_capacity_ratio"); r != 1.0/10000 {
			t.Errorf("aware_rlagent_workload_capacity_ratio = %g, want 1/10000", r)
		}
	})
}

// mustMetric reads one metric of c, failing the test if it is absent.
func mustMetric(t *testing.T, c *component, name string, labels ...string) float64 {
	t.Helper()
	v, found, err := c.metric(context.Background(), name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("%s exposes no %s{%s}", c.name, name, strings.Join(labels, ","))
	}
	return v
}

// policyVersion parses the agent's "v<N>" policy version.
func policyVersion(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "v"))
	if err != nil || !strings.HasPrefix(s, "v") {
		return 0, fmt.Errorf("policy version %q is not v<N>", s)
	}
	return n, nil
}

// checkAgentApplied checks an autoscaler the agent acts on: its replica
// count and CPU targets within the test workload's sane range, and the
// recommender counting recommendations with source Agent.
func checkAgentApplied(t *testing.T, m *v1alpha1.MultidimPodAutoscaler, rec *component) {
	t.Helper()
	if r := m.Status.DesiredReplicas; r < 1 || r > 6 {
		t.Errorf("the agent's desiredReplicas %d is outside [1, 6]", r)
	}
	for _, cr := range m.Status.Recommendation.ContainerRecommendations {
		if cpu := cr.Target.Cpu().MilliValue(); cpu < 10 || cpu > 500 {
			t.Errorf("container %s: the agent's cpu target %dm is outside [10m, 500m]", cr.ContainerName, cpu)
		}
	}
	if n := mustMetric(t, rec, "aware_recommender_recommendations_total", "source=Agent"); n < 1 {
		t.Errorf("%g recommendations with source Agent", n)
	}
}
