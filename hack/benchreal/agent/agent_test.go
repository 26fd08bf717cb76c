package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The gates are valid, and on the lifecycle machine they hand the agent
// the workload after 4 ticks, and keep it, whatever the rewards.
func TestGatesActMostOfTheRun(t *testing.T) {
	g := Gates()
	gates := lifecycle.Gates{Window: int(g.Window), EpisodeSteps: int(g.EpisodeSteps), PromoteMinMean: *g.PromoteMinMean,
		PromoteMaxStdDev: *g.PromoteMaxStdDev, RetrainBelowMean: *g.RetrainBelowMean, RetrainAboveStdDev: *g.RetrainAboveStdDev}
	for _, tc := range []struct {
		name    string
		rewards func(episode int) float64
	}{
		{"steady rewards", func(int) float64 { return 0.7 }},
		{"poor rewards", func(int) float64 { return 0 }},
		{"rewards swinging from 0 to 1", func(e int) float64 { return float64(e % 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := lifecycle.New(gates, metav1.Now().Time)
			if err != nil {
				t.Fatal(err)
			}
			const ticks = 32 // 8 minutes at 15 s
			acting := 0
			for tick := 1; tick <= ticks; tick++ {
				if m.Stage().AgentActs() {
					acting++
				}
				if tick%gates.EpisodeSteps == 0 {
					if _, _, err := m.RecordEpisode(tc.rewards(tick/gates.EpisodeSteps), metav1.Now().Time); err != nil {
						t.Fatal(err)
					}
				}
			}
			if want := ticks - 4; acting != want {
				t.Errorf("the agent acts in %d of %d ticks, want %d", acting, ticks, want)
			}
			if m.Stage() != lifecycle.Serving {
				t.Errorf("stage %s at the end, want Serving", m.Stage())
			}
		})
	}
}

func mpa(mode v1alpha1.RLMode, stage v1alpha1.RLStage, source v1alpha1.RecommendationSource, scaling string) *v1alpha1.MultidimPodAutoscaler {
	m := &v1alpha1.MultidimPodAutoscaler{}
	if mode != "" {
		m.Spec.RL = &v1alpha1.RLSpec{Mode: mode}
	}
	if stage != "" || source != "" {
		m.Status.RL = &v1alpha1.RLStatus{Stage: stage, Source: source, Reason: "R"}
	}
	if scaling != "" {
		m.Status.Conditions = []v1alpha1.MultidimPodAutoscalerCondition{
			{Type: v1alpha1.RecommendationProvided, Reason: "RecommendationProvided"},
			{Type: v1alpha1.ScalingActive, Reason: scaling},
		}
	}
	return m
}

func TestStateOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		m           *v1alpha1.MultidimPodAutoscaler
		want        State
		wantApplied string
		switchOn    map[string]bool // policy → SwitchOn
	}{
		{"a new autoscaler", mpa("", "", "", ""), State{}, "default", map[string]bool{Learner: false, Ensemble: false}},
		{"shadow, bootstrapping", mpa(v1alpha1.RLModeShadow, v1alpha1.RLStageBootstrapping, v1alpha1.SourceDefault, "ValidMetricFound"),
			State{Mode: "Shadow", Stage: "Bootstrapping", Source: "Default", Reason: "R", ScalingReason: "ValidMetricFound"}, "default",
			map[string]bool{Learner: false}},
		{"shadow, promoted", mpa(v1alpha1.RLModeShadow, v1alpha1.RLStageOnlineTraining, v1alpha1.SourceDefault, ""),
			State{Mode: "Shadow", Stage: "OnlineTraining", Source: "Default", Reason: "R"}, "default",
			map[string]bool{Learner: true, Ensemble: false, "fused": false}},
		{"on, serving, the agent's applied", mpa(v1alpha1.RLModeOn, v1alpha1.RLStageServing, v1alpha1.SourceAgent, "SLOMetricMissing"),
			State{Mode: "On", Stage: "Serving", Source: "Agent", Reason: "R", ScalingReason: "SLOMetricMissing"}, "agent",
			map[string]bool{Learner: false}},
		{"the safeguard trimmed the agent's", mpa(v1alpha1.RLModeOn, v1alpha1.RLStageOnlineTraining, v1alpha1.SourceSafeguard, ""),
			State{Mode: "On", Stage: "OnlineTraining", Source: "Safeguard", Reason: "R"}, "agent", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StateOf(tc.m)
			if got != tc.want {
				t.Errorf("StateOf = %+v, want %+v", got, tc.want)
			}
			if a := got.Applied(); a != tc.wantApplied {
				t.Errorf("Applied = %s, want %s", a, tc.wantApplied)
			}
			for p, want := range tc.switchOn {
				if SwitchOn(p, got) != want {
					t.Errorf("SwitchOn(%s) = %v, want %v", p, !want, want)
				}
			}
		})
	}
}

func TestServeArgs(t *testing.T) {
	deploy := []string{"serve", "--listen-address=:9090", "--state-dir=/var/lib/aware-rl-agent"}
	members := []string{"/m/seed1.ckpt", "/m/seed2.ckpt", "/m/seed3.ckpt"}
	withEnsemble := append(slices.Clone(deploy), "--ensemble-checkpoints=/m/seed1.ckpt,/m/seed2.ckpt,/m/seed3.ckpt", "--ensemble-quorum=0")
	for _, tc := range []struct {
		name    string
		args    []string
		policy  string
		members []string
		want    []string
		wantErr bool
	}{
		{"the learner is deploy/'s", deploy, Learner, nil, deploy, false},
		{"the learner after an ensemble", withEnsemble, Learner, nil, deploy, false},
		{"the ensemble", deploy, Ensemble, members, withEnsemble, false},
		{"the ensemble twice", withEnsemble, Ensemble, members, withEnsemble, false},
		{"an ensemble of one", deploy, Ensemble, members[:1], nil, true},
		{"not an agent policy", deploy, "fused", nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ServeArgs(tc.args, tc.policy, tc.members)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("ServeArgs = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestCacheKey(t *testing.T) {
	base := CacheKey("0123456789abcdef0123", "")
	if !strings.HasPrefix(base, "0123456789ab-") {
		t.Errorf("key %q does not start with the commit", base)
	}
	for _, tc := range []struct {
		name         string
		commit, diff string
		same         bool
	}{
		{"same inputs", "0123456789abcdef0123", "", true},
		{"another commit", "fedcba9876543210fedc", "", false},
		{"uncommitted changes", "0123456789abcdef0123", "diff --git a/pkg/x.go", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CacheKey(tc.commit, tc.diff); (got == base) != tc.same {
				t.Errorf("CacheKey = %q, base %q, want same %v", got, base, tc.same)
			}
		})
	}
}

func TestTrainArgs(t *testing.T) {
	for _, s := range Seeds {
		t.Run("seed", func(t *testing.T) {
			args := TrainArgs(s, "/c/x.ckpt")
			for _, want := range []string{"train", "--action-space=residual", "--checkpoint=/c/x.ckpt"} {
				if !slices.Contains(args, want) {
					t.Errorf("TrainArgs(%d) = %q lacks %q", s, args, want)
				}
			}
		})
	}
}
