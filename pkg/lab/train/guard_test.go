package train

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

func guardOf(t *testing.T, l Learner) *nn.EmbedGuard {
	t.Helper()
	m, ok := l.(metaLearner)
	if !ok {
		t.Fatalf("a %T, want a Meta-PPO", l)
	}
	return m.m.Guard()
}

// TestFitGuard: the guard of a residual Meta-PPO spans its embeddings and
// falls back to following the default, and a clone (the adapt experiment's
// copy) keeps it; a learner without an embedding, or one whose actions
// cannot follow the default, is refused.
func TestFitGuard(t *testing.T) {
	o := residualOptions()
	apps, err := TrainingApps(o.Seed, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, policy, space, kind, wantErr string
	}{
		{"residual Meta-PPO, box", PolicyMetaPPO, ActionSpaceResidual, GuardBox, ""},
		{"residual Meta-PPO, Mahalanobis", PolicyMetaPPO, ActionSpaceResidual, GuardMahalanobis, ""},
		{"unknown kind", PolicyMetaPPO, ActionSpaceResidual, "sphere", "kind must be box or mahalanobis"},
		{"paper Meta-PPO", PolicyMetaPPO, ActionSpacePaper, GuardBox, "residual action space only"},
		{"residual PPO", PolicyPPO, ActionSpaceResidual, GuardBox, "has no embedding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := residualOptions()
			o.Policy, o.ActionSpace = tc.policy, tc.space
			l, err := NewLearner(o)
			if err != nil {
				t.Fatal(err)
			}
			g, err := FitGuard(context.Background(), l, apps, o, 3, tc.kind)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Fallback != int(learn.FollowAction) || len(g.Lo) != o.EmbedDim || (g.Radius > 0) != (tc.kind == GuardMahalanobis) {
				t.Errorf("%s guard %+v", tc.kind, g)
			}
			wide := false
			for k := range g.Lo {
				wide = wide || g.Hi[k] > g.Lo[k]
			}
			if !wide {
				t.Errorf("guard %+v spans nothing: the episodes' embeddings were not read", g)
			}
			c, err := CloneLearner(l)
			if err != nil {
				t.Fatal(err)
			}
			if got := guardOf(t, c); got == nil || got.Lo[0] != g.Lo[0] || got.Hi[0] != g.Hi[0] {
				t.Errorf("the clone's guard %+v, want %+v", got, g)
			}
			again, err := FitGuard(context.Background(), c, apps, o, 3, tc.kind)
			if err != nil || again.Lo[0] != g.Lo[0] || again.Radius != g.Radius {
				t.Errorf("refitting on the same episodes: %+v, %v (the installed guard must not shape its own refit)", again, err)
			}
		})
	}
}

// TestGuardFollowsDefault: a residual Meta-PPO exploring on an app
// deviates from the default; with a guard that no embedding lies in, every
// decision it makes follows the default and is counted as guarded.
func TestGuardFollowsDefault(t *testing.T) {
	o := residualOptions()
	o.Policy, o.FollowBias, o.EpisodeSteps = PolicyMetaPPO, 1e-9, 48
	l, err := NewLearner(o)
	if err != nil {
		t.Fatal(err)
	}
	apps, err := TrainingApps(o.Seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	episode := func() rollout {
		ro := runEpisode(context.Background(), l, spec{stage: lifecycle.OnlineTraining, app: apps[0], kind: "steady", seed: 11}, o.SimConfig(), o)
		if ro.err != nil {
			t.Fatal(ro.err)
		}
		return ro
	}
	deviations := func(ro rollout) int {
		n := 0
		for _, tr := range ro.transitions {
			if tr.Action != int(learn.FollowAction) {
				n++
			}
		}
		return n
	}
	free := episode()
	if deviations(free) == 0 || free.ep.GuardedDecisions != 0 {
		t.Fatalf("without a guard: %d deviations, %d guarded; want some and none", deviations(free), free.ep.GuardedDecisions)
	}
	far := make([]float64, o.EmbedDim)
	for k := range far {
		far[k] = math.MaxFloat64
	}
	if err := l.(guarder).SetGuard(&nn.EmbedGuard{Lo: far, Hi: far, Fallback: int(learn.FollowAction)}); err != nil {
		t.Fatal(err)
	}
	guarded := episode()
	if d := deviations(guarded); d != 0 {
		t.Errorf("with the guard: %d deviations, want none", d)
	}
	if guarded.ep.GuardedDecisions == 0 || guarded.ep.GuardedDecisions > guarded.ep.Steps {
		t.Errorf("with the guard: %d of %d decisions guarded", guarded.ep.GuardedDecisions, guarded.ep.Steps)
	}
}

// TestEvidenceMetaGuard: with MetaGuard the pre-trained Meta-PPO carries
// its guard into the adapt experiment, whose Meta-PPO runs say how often
// it acted; the guard needs the residual space.
func TestEvidenceMetaGuard(t *testing.T) {
	e := tinyEvidence()
	e.Base.ActionSpace, e.MetaGuard, e.PretrainParamSpread = ActionSpaceResidual, GuardMahalanobis, 4
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	pre := mustPretrain(t, e)
	if pre.Guard == nil || guardOf(t, pre.Meta) == nil || pre.Guard.Radius <= 0 {
		t.Fatalf("no Mahalanobis guard: %+v", pre.Guard)
	}
	// Every embedding outside: Meta-PPO follows the default throughout.
	far := make([]float64, len(pre.Guard.Lo))
	for k := range far {
		far[k] = -math.MaxFloat64
	}
	if err := pre.Meta.(guarder).SetGuard(&nn.EmbedGuard{Lo: far, Hi: far}); err != nil {
		t.Fatal(err)
	}
	res, err := RunAdapt(context.Background(), e, pre)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if (r.Arm == ArmMeta) != (r.Guarded > 0) || (r.Arm == ArmMeta) != (r.ZeroShotGuarded > 0) {
			t.Errorf("%s on %s: guarded %v, zero-shot %v", r.Arm, r.App, r.Guarded, r.ZeroShotGuarded)
		}
	}
	paper := tinyEvidence()
	paper.MetaGuard = GuardBox
	if err := paper.Validate(); err == nil || !strings.Contains(err.Error(), "embedding guard needs the residual action space") {
		t.Errorf("a guard in the paper space: %v", err)
	}
}
