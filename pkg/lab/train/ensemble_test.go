package train

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// fixedLearner always chooses one residual choice per dimension.
type fixedLearner struct {
	Learner // a residual PPO, for the configuration and the rest
	choice  []int
	value   float64
	err     error
}

func (f fixedLearner) Act([]float64, []nn.Step, []bool, bool, *rand.Rand) (nn.Decision, error) {
	space := learn.DefaultResidualSpace()
	return nn.Decision{Action: nn.JoinAction(f.choice, space.Sizes()), Value: f.value}, f.err
}

func TestEnsembleVotes(t *testing.T) {
	base, err := NewLearner(residualOptions())
	if err != nil {
		t.Fatal(err)
	}
	fixed := func(value float64, c ...int) Learner { return fixedLearner{Learner: base, choice: c, value: value} }
	space := learn.DefaultResidualSpace()
	tests := []struct {
		name    string
		members []Learner
		quorum  int
		want    []int
	}{
		{"unanimous deviation", []Learner{fixed(1, 1, 2, 0), fixed(2, 1, 2, 0), fixed(3, 1, 2, 0)}, 3, []int{1, 2, 0}},
		{"majority deviates, unanimity follows", []Learner{fixed(1, 1, 2, 3), fixed(2, 1, 0, 3), fixed(3, 2, 2, 3)}, 3, []int{0, 0, 3}},
		{"majority", []Learner{fixed(1, 1, 2, 3), fixed(2, 1, 0, 3), fixed(3, 2, 2, 3)}, 2, []int{1, 2, 3}},
		{"quorum 0 is unanimity", []Learner{fixed(1, 1, 2, 3), fixed(2, 1, 0, 3), fixed(3, 2, 2, 3)}, 0, []int{0, 0, 3}},
		{"no two agree: follow", []Learner{fixed(1, 1, 2, 3), fixed(2, 2, 1, 4), fixed(3, 3, 0, 0)}, 2, []int{0, 0, 0}},
		{"two follow beat one deviation", []Learner{fixed(1, 0, 0, 0), fixed(2, 0, 0, 0), fixed(3, 4, 4, 4)}, 2, []int{0, 0, 0}},
		{"quorum 1: the first member's deviation", []Learner{fixed(1, 0, 3, 0), fixed(2, 2, 1, 0)}, 1, []int{2, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEnsemble(tc.members, tc.quorum)
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Act(make([]float64, learn.StateDim), nil, nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := nn.SplitAction(d.Action, space.Sizes())
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("choices %v, want %v", got, tc.want)
				}
			}
			if want := float64(len(tc.members)+1) / 2; d.Value != want {
				t.Errorf("value %v, want the members' mean %v", d.Value, want)
			}
		})
	}
}

func TestEnsembleRefuses(t *testing.T) {
	res, err := NewLearner(residualOptions())
	if err != nil {
		t.Fatal(err)
	}
	po := residualOptions()
	po.ActionSpace = ActionSpacePaper
	paper, err := NewLearner(po)
	if err != nil {
		t.Fatal(err)
	}
	fo := residualOptions()
	fo.FeaturesOff = learn.AllFeatures
	noFeatures, err := NewLearner(fo)
	if err != nil {
		t.Fatal(err)
	}
	ao := residualOptions()
	ao.Anchor = "limit-target=0.7"
	anchored, err := NewLearner(ao)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		members []Learner
		quorum  int
		want    string
	}{
		{"one member", []Learner{res}, 1, "at least 2"},
		{"quorum above size", []Learner{res, res}, 3, "quorum 3"},
		{"negative quorum", []Learner{res, res}, -1, "quorum -1"},
		{"paper actions", []Learner{res, paper}, 0, "paper's action space"},
		{"other features", []Learner{res, noFeatures}, 0, "other state features"},
		{"other default", []Learner{res, anchored}, 0, `another default (anchor "limit-target=0.7")`},
		{"nil member", []Learner{res, nil}, 0, "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEnsemble(tc.members, tc.quorum)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	e, err := NewEnsemble([]Learner{res, fixedLearner{Learner: res, choice: []int{0, 0, 0}, err: errors.New("boom")}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Act(make([]float64, learn.StateDim), nil, nil, true, nil); err == nil || !strings.Contains(err.Error(), "member 2: boom") {
		t.Errorf("a member's error: %v", err)
	}
	if _, err := e.Act(make([]float64, learn.StateDim), nil, nil, false, rand.New(rand.NewPCG(1, 2))); err == nil {
		t.Error("an ensemble sampled")
	}
	if _, err := e.Update(nil); err == nil {
		t.Error("an ensemble trained")
	}
	if _, err := e.MarshalBinary(); err == nil {
		t.Error("an ensemble wrote one checkpoint")
	}
}

func TestEnsembleActValues(t *testing.T) {
	base, err := NewLearner(residualOptions())
	if err != nil {
		t.Fatal(err)
	}
	fixed := func(c ...int) Learner { return fixedLearner{Learner: base, choice: c} }
	space := learn.DefaultResidualSpace()
	// What each replica choice would set, follow (index 0) 5; the vertical
	// dimensions: hold (index 1) sets the default's value, the factors scale 10.
	replicas := []float64{5, 7, 3, 4, 6, 7, 4, 6}
	vertical := []float64{10, 10, 7, 8.5, 11.5, 13}
	value := func(d, i int) float64 {
		if d == int(learn.DimReplicas) {
			return replicas[i]
		}
		return vertical[i]
	}
	tests := []struct {
		name    string
		members []Learner
		quorum  int
		want    []int
	}{
		{"majority takes the median cut", []Learner{fixed(3, 2, 5), fixed(2, 3, 4), fixed(0, 0, 0)}, 2, []int{3, 3, 4}},
		{"unanimity takes the smallest common cut", []Learner{fixed(3, 2, 5), fixed(2, 3, 5), fixed(2, 2, 4)}, 3, []int{3, 3, 4}},
		{"unanimity with one follower follows", []Learner{fixed(3, 2, 5), fixed(2, 3, 4), fixed(0, 0, 0)}, 3, []int{0, 0, 0}},
		{"one up, one down, one follows: follow", []Learner{fixed(4, 4, 2), fixed(2, 2, 5), fixed(0, 0, 0)}, 2, []int{0, 0, 0}},
		{"quorum 1 both ways: follow", []Learner{fixed(4, 4, 2), fixed(2, 2, 5), fixed(0, 0, 0)}, 1, []int{0, 0, 0}},
		{"quorum 1 one way: the largest", []Learner{fixed(4, 4, 0), fixed(5, 5, 0), fixed(0, 0, 0)}, 1, []int{5, 5, 0}},
		{"hold at the default's value is following", []Learner{fixed(0, 1, 1), fixed(0, 1, 1), fixed(0, 1, 1)}, 2, []int{0, 0, 0}},
		{"equal values: the first member's choice", []Learner{fixed(3, 0, 0), fixed(6, 0, 0), fixed(6, 0, 0)}, 3, []int{3, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEnsemble(tc.members, tc.quorum)
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.ActValues(make([]float64, learn.StateDim), nil, nil, value)
			if err != nil {
				t.Fatal(err)
			}
			if got := nn.SplitAction(d.Action, space.Sizes()); !slices.Equal(got, tc.want) {
				t.Fatalf("choices %v, want %v", got, tc.want)
			}
		})
	}
}
