// Package agent holds the pure parts of the real-node benchmark's agent
// policies (make bench-real --policies agent,ensemble; hack/benchreal):
// the lifecycle gates the harness gives the autoscaler, what it reads from
// the autoscaler's status each look (the stage, and whose recommendation
// was applied), when a learner in Shadow is switched On, the arguments
// of the rl-agent for each policy, and the cache key of the ensemble's
// trained members. It does no I/O, so all of it is unit-tested.
package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// Policies are the harness's agent policies: a learner (rl-agent serve
// from deploy/, fresh state every run) and a frozen ensemble of residual
// PPO checkpoints (rl-agent serve --ensemble-checkpoints).
const (
	Learner  = "agent"
	Ensemble = "ensemble"
)

// Is reports whether policy is one of the agent policies.
func Is(policy string) bool { return policy == Learner || policy == Ensemble }

// Gates are spec.rl.gates for a run of about 8 minutes at the
// recommender's 15-s interval (32 ticks). An episode is 2 ticks and the
// gates judge 2 episodes, so each stage the gates end lasts 4 ticks: the
// defaults act for the first minute (Bootstrapping), the agent acts and
// learns in the second (OnlineTraining), and serves from then on. The
// promotion gate always passes (mean ≥ −1, deviation ≤ 2: rewards lie in
// [0, 1]) and the detector never fires (retrain below −1, above 2), so
// what the stages are does not depend on the rewards of so short a run.
// The agent acts in about 7 of every 8 minutes.
func Gates() *v1alpha1.RLGates {
	f := func(v float64) *float64 { return &v }
	return &v1alpha1.RLGates{
		Window: 2, EpisodeSteps: 2,
		PromoteMinMean: f(-1), PromoteMaxStdDev: f(2),
		RetrainBelowMean: f(-1), RetrainAboveStdDev: f(2),
	}
}

// InitialMode is spec.rl.mode at the start of a run: the learner starts in
// Shadow (it learns, the default is applied) and is switched On once it
// reports a stage that lets it act (SwitchOn); the ensemble, trained
// offline, is On from the start (the defaults still act while it
// bootstraps).
func InitialMode(policy string) v1alpha1.RLMode {
	if policy == Learner {
		return v1alpha1.RLModeShadow
	}
	return v1alpha1.RLModeOn
}

// Acting reports whether the agent's recommendation is applied in stage
// (with mode On): OnlineTraining and Serving.
func Acting(stage string) bool {
	return stage == string(v1alpha1.RLStageOnlineTraining) || stage == string(v1alpha1.RLStageServing)
}

// State is what one look at the autoscaler's status says.
type State struct {
	Mode   string // spec.rl.mode
	Stage  string // status.rl.stage
	Source string // status.rl.source: Agent, Default or Safeguard
	Reason string // status.rl.reason
	// ScalingReason is the reason of the ScalingActive condition, which
	// names a missing SLO input (package slo).
	ScalingReason string
}

// StateOf reads m's state.
func StateOf(m *v1alpha1.MultidimPodAutoscaler) State {
	var s State
	if m.Spec.RL != nil {
		s.Mode = string(m.Spec.RL.Mode)
	}
	if rl := m.Status.RL; rl != nil {
		s.Stage, s.Source, s.Reason = string(rl.Stage), string(rl.Source), rl.Reason
	}
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ScalingActive {
			s.ScalingReason = c.Reason
		}
	}
	return s
}

// Applied says whose recommendation the status says was applied: "agent"
// (status.rl.source Agent, or Safeguard: the agent's with a downward step
// refused) or "default".
func (s State) Applied() string {
	if s.Source == string(v1alpha1.SourceAgent) || s.Source == string(v1alpha1.SourceSafeguard) {
		return "agent"
	}
	return "default"
}

// SwitchOn reports whether a learner run in Shadow should now be switched
// On: its stage lets it act.
func SwitchOn(policy string, s State) bool {
	return policy == Learner && s.Mode == string(v1alpha1.RLModeShadow) && Acting(s.Stage)
}

// ensembleFlags are the flags the harness adds to rl-agent serve, and
// removes again for the learner.
var ensembleFlags = []string{"--ensemble-checkpoints=", "--ensemble-quorum="}

// ServeArgs are the rl-agent container's arguments for policy, from those
// deploy/ gives it (args): the learner's are deploy/'s; the ensemble's add
// the members (paths inside the container) with quorum 0 (all must
// agree, the ensemble docs/results/evidence-residual.md measured), as
// deploy/components/rl-agent-ensemble does.
func ServeArgs(args []string, policy string, members []string) ([]string, error) {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return slices.ContainsFunc(ensembleFlags, func(f string) bool { return strings.HasPrefix(a, f) })
	})
	switch policy {
	case Learner:
		return out, nil
	case Ensemble:
		if len(members) < 2 {
			return nil, fmt.Errorf("an ensemble needs at least 2 members, got %d", len(members))
		}
		return append(out, "--ensemble-checkpoints="+strings.Join(members, ","), "--ensemble-quorum=0"), nil
	}
	return nil, fmt.Errorf("%q is not an agent policy", policy)
}

// Seeds are the ensemble members' training seeds.
var Seeds = []uint64{1, 2, 3}

// TrainArgs are rl-agent train's arguments for the member of seed: a
// residual PPO (the trainer's default for ppo) on a small simulator
// configuration, 16 training apps and 960 episodes of 240 windows, a
// quarter of the defaults (32 apps, 4000 episodes), so that the three
// train in minutes on this machine; the rest (traces, SLO, the fused
// default it acts beside, checkpoint selection on validation apps) are the
// trainer's defaults.
func TrainArgs(seed uint64, checkpoint string) []string {
	return []string{"train", "--action-space=residual", "--apps=16", "--episodes=960",
		fmt.Sprintf("--seed=%d", seed), "--checkpoint=" + checkpoint, "--no-progress"}
}

// CacheKey names the ensemble's cache directory: the commit of the last
// change to the training code, the hash of uncommitted changes to it
// (empty when clean), and the training arguments (seeds included). A
// change to any of them trains again.
func CacheKey(commit, dirtyDiff string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", dirtyDiff)
	for _, s := range Seeds {
		fmt.Fprintf(h, "%q\n", TrainArgs(s, "CHECKPOINT"))
	}
	return fmt.Sprintf("%.12s-%s", commit, hex.EncodeToString(h.Sum(nil))[:12])
}

// TrainingPaths are where the training code lives (the trainer, the
// simulator, the learners and the fused default they act beside), for the
// commit of CacheKey.
var TrainingPaths = []string{"rl-agent", "pkg", "go.mod", "go.sum"}
