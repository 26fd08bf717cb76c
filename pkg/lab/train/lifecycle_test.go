package train

import (
	"context"
	"math"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// TestFreezeServing trains with gates that pass anything: frozen, apps
// reach Serving and serve (greedy, no learning); not frozen, they leave
// Bootstrapping and then stay in OnlineTraining for the rest of the run.
func TestFreezeServing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		freeze      bool
		wantServing bool
	}{
		{"frozen as in the cluster", true, true},
		{"every app keeps learning", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tiny()
			o.Episodes, o.FreezeServing = 15, tc.freeze
			o.Gates.Window, o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 2, -1, 2
			o.Gates.RetrainBelowMean, o.Gates.RetrainAboveStdDev = -1, 2
			res := mustTrain(t, o)
			serving := 0
			for _, e := range res.Episodes {
				if e.Stage == lifecycle.Serving.String() {
					serving++
				}
			}
			if (serving > 0) != tc.wantServing {
				t.Errorf("%d serving episodes, want some: %v; changes %+v", serving, tc.wantServing, res.Changes)
			}
			if !tc.freeze {
				for _, c := range res.Changes {
					if c.From != lifecycle.Bootstrapping.String() {
						t.Errorf("change %+v: only bootstrapping should end", c)
					}
				}
				if len(res.Changes) != o.Apps {
					t.Errorf("%d changes, want one per app (%d)", len(res.Changes), o.Apps)
				}
			}
		})
	}
}

// TestRetrainingDefaultActs starts every app in Retraining with gates
// that never promote: the fused default acts in every episode and the
// learner clones it, as in Bootstrapping.
func TestRetrainingDefaultActs(t *testing.T) {
	o := tiny()
	o.StartStage = lifecycle.Retraining
	o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 1, 0
	res := mustTrain(t, o)
	for _, e := range res.Episodes {
		if e.Stage != lifecycle.Retraining.String() || e.Phase != PhaseBootstrap || e.AgentDecisions != 0 {
			t.Errorf("episode %+v: want the default acting in Retraining", e)
		}
	}
	if len(res.BC) == 0 || len(res.Updates) == 0 {
		t.Errorf("%d cloning rounds and %d updates: the learner should relearn from the default", len(res.BC), len(res.Updates))
	}
}

// TestRetrainingCap starts every app in Retraining with gates that never
// promote: without a cap the default acts for ever; with one, each app's
// first Retraining.Max episodes are the default's and the rest the
// agent's, in OnlineTraining, also when the cap falls inside a batch.
func TestRetrainingCap(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		apps, batch, retrain int
		episodes             int
		// wantRetraining is each app's number of Retraining episodes.
		wantRetraining int
	}{
		{"no cap stays on the default", 3, 3, 0, 9, 3},
		{"cap between batches", 3, 3, 2, 12, 2},
		{"cap inside a batch", 1, 4, 2, 8, 2},
		{"cap beyond the run", 2, 2, 10, 6, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tiny()
			o.Apps, o.BatchEpisodes, o.Episodes = tc.apps, tc.batch, tc.episodes
			o.Retraining = lifecycle.RetrainingBounds{Max: tc.retrain}
			o.StartStage = lifecycle.Retraining
			o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 1, 0
			res := mustTrain(t, o)
			retraining := map[string]int{}
			for _, e := range res.Episodes {
				switch e.Stage {
				case lifecycle.Retraining.String():
					retraining[e.App]++
					if e.Phase != PhaseBootstrap || e.AgentDecisions != 0 {
						t.Errorf("episode %+v: the default should act while Retraining", e)
					}
					if retraining[e.App] > tc.wantRetraining {
						t.Errorf("episode %d: app %s Retraining again after its cap", e.Index, e.App)
					}
				case lifecycle.OnlineTraining.String():
					if retraining[e.App] != tc.wantRetraining {
						t.Errorf("episode %d: app %s acts after %d Retraining episodes, want %d", e.Index, e.App, retraining[e.App], tc.wantRetraining)
					}
					if e.Phase != PhaseOnline || e.AgentDecisions == 0 {
						t.Errorf("episode %+v: the agent should act in OnlineTraining", e)
					}
				default:
					t.Errorf("episode %+v: unexpected stage", e)
				}
			}
			capped := tc.retrain > 0 && tc.retrain*tc.apps < tc.episodes
			wantChanges := 0
			if capped {
				wantChanges = tc.apps
			}
			if len(res.Changes) != wantChanges {
				t.Fatalf("changes %+v, want %d", res.Changes, wantChanges)
			}
			for _, c := range res.Changes {
				if c.From != lifecycle.Retraining.String() || c.To != lifecycle.OnlineTraining.String() || c.Reason != "RetrainingCapReached" {
					t.Errorf("change %+v, want Retraining → OnlineTraining (RetrainingCapReached)", c)
				}
			}
		})
	}
}

// TestScalingCostShapesOnlyTheLearningReward runs one episode of a policy
// that always adds a replica, with and without a scaling cost: the
// episode's reward (what gates and reports see) is the same, and each
// transition's learning reward is lower by the cost of the replicas that
// decision added.
func TestScalingCostShapesOnlyTheLearningReward(t *testing.T) {
	apps, err := TrainingApps(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	app := apps[0]
	app.Constraints.MaxReplicas = 0 // room to add every window
	cfg := sim.DefaultConfig()
	run := func(cost float64) rollout {
		o := tiny()
		o.ScalingCost = cost
		sp := spec{index: 0, stage: lifecycle.OnlineTraining, app: app, kind: sim.Steady, seed: 7}
		r := runEpisode(context.Background(), alwaysLearner{action: learn.AddReplica}, sp, cfg, o)
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	}
	free, charged := run(0), run(0.1)
	if free.ep.MeanReward != charged.ep.MeanReward {
		t.Errorf("episode reward %v with the cost, %v without: the reported reward must not change", charged.ep.MeanReward, free.ep.MeanReward)
	}
	var added int
	for i := range free.transitions {
		d := free.transitions[i].Reward - charged.transitions[i].Reward
		if learn.Action(free.transitions[i].Action) == learn.AddReplica {
			added++
			if math.Abs(d-0.1) > 1e-12 {
				t.Errorf("transition %d added a replica: learning reward lower by %v, want 0.1", i, d)
			}
		} else if d != 0 {
			t.Errorf("transition %d (%v) changed no replica but was charged %v", i, learn.Action(free.transitions[i].Action), d)
		}
	}
	if added == 0 {
		t.Fatal("the policy never added a replica; the test checks nothing")
	}
	// The episode reports the charge beside the reward.
	if want := 0.1 * float64(added) / float64(len(free.transitions)); free.ep.MeanShaping != 0 || math.Abs(charged.ep.MeanShaping-want) > 1e-12 {
		t.Errorf("mean shaping %v without the cost and %v with it, want 0 and %v", free.ep.MeanShaping, charged.ep.MeanShaping, want)
	}
}

// TestServingActsWithPinnedWeights: apps promoted to Serving act with the
// weights that earned the promotion, however the shared learner trains
// afterwards. Every app learns for its first two episodes (one batch) and
// is then promoted, pinned to the initial weights, while that batch's
// update changes the learner. Its later Serving episodes must then be
// exactly those of a run that serves the initial weights from the start.
func TestServingActsWithPinnedWeights(t *testing.T) {
	o := tiny()
	o.Episodes, o.BootstrapEpisodes, o.BatchEpisodes = 12, 0, 6
	o.Gates.Window, o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 2, -1, 2
	o.Gates.RetrainBelowMean, o.Gates.RetrainAboveStdDev = -1, 2
	init, err := NewLearner(o)
	if err != nil {
		t.Fatal(err)
	}
	initBytes := marshal(t, init)
	fresh := func() Learner {
		l, err := ParseLearner(initBytes)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	o.Init = fresh()
	trained := mustTrain(t, o)
	if got := marshal(t, trained.Learner); string(got) == string(initBytes) {
		t.Fatal("the first batch did not train the learner: the test proves nothing")
	}
	ref := o
	ref.Init, ref.StartStage = fresh(), lifecycle.Serving
	served := mustTrain(t, ref)
	first := o.Apps * o.Gates.Window
	for i := first; i < o.Episodes; i++ {
		a, b := trained.Episodes[i], served.Episodes[i]
		if a.Stage != lifecycle.Serving.String() || b.Stage != lifecycle.Serving.String() {
			t.Fatalf("episode %d: stages %s and %s, want Serving", i, a.Stage, b.Stage)
		}
		if a.MeanReward != b.MeanReward {
			t.Errorf("episode %d: reward %v, want %v (the initial weights that were promoted)", i, a.MeanReward, b.MeanReward)
		}
	}
}
