package train

import (
	"context"
	"math"
	"testing"

	"github.com/aware-k8s/aware/pkg/learn"
	"github.com/aware-k8s/aware/pkg/lifecycle"
	"github.com/aware-k8s/aware/pkg/sim"
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
}
