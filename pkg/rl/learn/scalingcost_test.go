package learn

import (
	"math"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestScalingCost(t *testing.T) {
	obs := &workload.Observation{Replicas: 3}
	for _, tc := range []struct {
		name       string
		replicas   int32
		perReplica float64
		want       float64
	}{
		{"no change", 3, 0.02, 0},
		{"one added", 4, 0.02, 0.02},
		{"two removed", 1, 0.02, 0.04},
		{"no replica count named", 0, 0.02, 0},
		{"no cost", 5, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ScalingCost(obs, workload.Recommendation{Replicas: tc.replicas}, tc.perReplica)
			if diff := got - tc.want; diff > 1e-12 || diff < -1e-12 {
				t.Errorf("ScalingCost = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOutcomeChargesScaling reports two outcomes of the same window to a
// bootstrapping agent, one that kept the replicas and one that added two:
// the reward the outcome reports (the paper's) is the same, the learning
// transition of the second is lower by two replicas' DefaultScalingCost.
func TestOutcomeChargesScaling(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Unix(0, 0)
	o := obs()
	o.Time = now
	next := o
	next.Time = now.Add(time.Minute)
	c := cons()
	var rewards, learned []float64
	for _, replicas := range []int32{o.Replicas, o.Replicas + 2} {
		a, err := NewAgent("ns/app", cfg.Gates, DefaultSteps(), now)
		if err != nil {
			t.Fatal(err)
		}
		applied := Apply(&o, &c, NoOp, DefaultSteps())
		applied.Replicas = replicas
		out, err := a.Outcome(Outcome{Observation: o, Applied: applied, AppliedSource: workload.SourceDefault, Next: next, Config: cfg}, next.Time)
		if err != nil {
			t.Fatal(err)
		}
		rewards = append(rewards, out.Reward.Reward)
		learned = append(learned, out.Experience.Transition.Reward)
	}
	if rewards[0] != rewards[1] || learned[0] != rewards[0] {
		t.Errorf("rewards %v, learning rewards %v: only a replica change may be charged", rewards, learned)
	}
	if d := learned[0] - learned[1]; math.Abs(d-2*DefaultScalingCost) > 1e-12 {
		t.Errorf("two added replicas charged %v, want %v", d, 2*DefaultScalingCost)
	}
}
