//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// residualGates are rlGates in mode On: the agent acts after about six
// ticks and serves from then on.
const residualGates = `  rl:
    mode: "On"
    gates:
      window: 2
      episodeSteps: 1
      promoteMinMean: -1
      promoteMaxStdDev: 2
      retrainBelowMean: -1
      retrainAboveStdDev: 2
`

// residualCheckpoint writes an untrained residual policy whose initial
// output bias prefers one more replica than the default, by bias (and
// follows it for CPU and memory), so that its greedy choice deviates.
func residualCheckpoint(t *testing.T, seed uint64, bias float64) string {
	t.Helper()
	cfg := learn.ResidualConfig(learn.DefaultFollowBias)
	cfg.Seed = seed
	space := learn.DefaultResidualSpace()
	cfg.InitBias[0] = 0    // replicas: follow
	cfg.InitBias[4] = bias // replicas: +1 (DefaultResidualSpace's order)
	if c := space[learn.DimReplicas][4]; c.Offset != 1 {
		t.Fatalf("replica choice 4 is %s, not +1", c)
	}
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(t.TempDir(), fmt.Sprintf("residual-%d.ckpt", seed))
	if err := os.WriteFile(ckpt, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return ckpt
}

// TestRLAgentResidual serves policies in the residual action space: the
// recommender sends its default with every observation, the agent answers
// with the default changed by its choice per dimension, and the
// recommender applies it and names the choice in status.rl.message. The
// policy is an untrained residual network that prefers one more replica
// than the default, served as the learner's starting point; or two such
// networks of different weights served as a frozen ensemble, which then
// agrees on exactly that.
func TestRLAgentResidual(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
		// exact is the one action the agent must take; empty: any but
		// following the default everywhere.
		exact   string
		version string // prefix of status.rl.policyVersion
	}{
		{"learner", func(t *testing.T) []string {
			return []string{"--action-space=residual", "--initial-checkpoint=" + residualCheckpoint(t, 1, 6)}
		}, "", "v"},
		{"ensemble", func(t *testing.T) []string {
			// A bias far above what random weights give any logit: both
			// members choose +1 in every state.
			return []string{"--ensemble-checkpoints=" + residualCheckpoint(t, 1, 40) + "," + residualCheckpoint(t, 2, 40)}
		}, "replicas=+1/cpu=follow/memory=follow", "ensemble-2of2-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb.DumpLogsOnFailure(t)
			ns := tb.CreateNamespace(t, "residual-"+tc.name)
			w := startMPAWorkload(t, ns, "hamster", residualGates)
			agentAddr := freeAddr(t)
			agent := startProcess(t, processSpec{Binary: "rl-agent", Args: append([]string{
				"--listen-address=" + agentAddr,
			}, tc.args(t)...)})
			rec := startProcess(t, processSpec{Binary: "recommender", Args: recommenderArgs(ns,
				"--leader-elect=false",
				"--checkpoints-interval=1m",
				"--rl-agent-endpoint="+agentAddr,
				"--rl-agent-timeout=2s",
			)})

			m := w.waitRecommendation(t, 3*time.Minute, "status.rl: a residual choice applied in Serving", time.Time{}, func(m *v1alpha1.MultidimPodAutoscaler) error {
				rl := m.Status.RL
				switch {
				case rl == nil:
					return fmt.Errorf("no status.rl")
				case rl.Stage != v1alpha1.RLStageServing:
					return fmt.Errorf("stage %s, want Serving", rl.Stage)
				case rl.Source != v1alpha1.SourceAgent || rl.Reason != "AgentActing":
					return fmt.Errorf("source %s reason %s, want Agent AgentActing", rl.Source, rl.Reason)
				case !strings.HasPrefix(rl.PolicyVersion, tc.version):
					return fmt.Errorf("policy version %q, want %s…", rl.PolicyVersion, tc.version)
				}
				_, action, ok := strings.Cut(rl.Message, ": ")
				if !ok {
					return fmt.Errorf("message %q names no action", rl.Message)
				}
				ch, err := learn.ParseResidual(action)
				if err != nil {
					return fmt.Errorf("message %q: %w", rl.Message, err)
				}
				if ch == [learn.NumDimensions]learn.Choice{learn.Follow, learn.Follow, learn.Follow} {
					return fmt.Errorf("the agent acted by following the default in every dimension (%q)", rl.Message)
				}
				if tc.exact != "" && action != tc.exact {
					return fmt.Errorf("action %q, want %q", action, tc.exact)
				}
				return nil
			}, rec, agent)
			t.Logf("residual agent acting: %s; desiredReplicas %d", rlString(m.Status.RL), m.Status.DesiredReplicas)
			checkAgentApplied(t, m, rec)
			if n, _, err := agent.metric(context.Background(), "aware_rlagent_out_of_bounds_requests_total"); err != nil || n != 0 {
				t.Errorf("agent refused %g genuine requests as out of bounds (%v)", n, err)
			}
		})
	}
}
