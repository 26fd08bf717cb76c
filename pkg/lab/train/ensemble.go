package train

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// An ensemble of residual agents trained with different seeds deviates
// from the fused default only where enough of them agree. Agents trained
// alike differ most in where they deviate, and a deviation one seed learnt
// and the others did not is the likeliest to be a mistake on a new app;
// following the default there keeps the ensemble's deviations to those the
// training seeds share. Measured on the demo's held-out apps
// (docs/results/evidence-residual.md), three agents that must all deviate the same way,
// each going at least as far as the ensemble, lose the single agents' SLO
// regressions and most of their churn and keep most of their cost cut.

// Ensemble is a greedy Learner over members that share one residual
// action space and state. Per dimension it deviates from the default only
// as far as Quorum members agree (ActValues, which the Agent uses; Act
// when what the choices do is not known) and otherwise follows it. It
// never trains, and it has no single checkpoint.
type Ensemble struct {
	members []Learner
	quorum  int
	sizes   []int
	cfg     nn.Config
}

var _ Learner = (*Ensemble)(nil)

// NewEnsemble returns the ensemble of members that deviates in a
// dimension when at least quorum of them deviate there the same way
// (quorum 0: all of them).
func NewEnsemble(members []Learner, quorum int) (*Ensemble, error) {
	if len(members) < 2 {
		return nil, fmt.Errorf("ensemble: %d members, want at least 2", len(members))
	}
	if quorum == 0 {
		quorum = len(members)
	}
	if quorum < 1 || quorum > len(members) {
		return nil, fmt.Errorf("ensemble: quorum %d out of [1, %d]", quorum, len(members))
	}
	var first learn.PolicyShape
	for i, m := range members {
		if m == nil {
			return nil, fmt.Errorf("ensemble: member %d is nil", i+1)
		}
		sh, err := learn.ShapeOf(m.PolicyConfig())
		if err != nil {
			return nil, fmt.Errorf("ensemble: member %d: %w", i+1, err)
		}
		if sh.Residual == nil {
			return nil, fmt.Errorf("ensemble: member %d acts in the paper's action space; an ensemble needs residual agents, whose heads have a choice that follows the default", i+1)
		}
		if i == 0 {
			first = sh
			continue
		}
		// The agent encodes one state for all (learn.ShapeOf checked its
		// length): the members must read the same features.
		if sh.FeaturesOff != first.FeaturesOff {
			return nil, fmt.Errorf("ensemble: member %d was trained with other state features (%q) than member 1 (%q)", i+1, m.PolicyConfig().StateFeatures, members[0].PolicyConfig().StateFeatures)
		}
		// ... and read the same steps in their windows.
		if a, b := m.SignatureLen(), members[0].SignatureLen(); a != b {
			return nil, fmt.Errorf("ensemble: member %d reads %d signature values per step, member 1 %d", i+1, a, b)
		}
		// ... and act on the same default.
		if a, b := m.PolicyConfig().Anchor, members[0].PolicyConfig().Anchor; !fusion.SameVariant(a, b) {
			return nil, fmt.Errorf("ensemble: member %d was trained beside another default (anchor %q) than member 1 (%q)", i+1, a, b)
		}
	}
	return &Ensemble{members: members, quorum: quorum, sizes: first.Residual.Sizes(), cfg: members[0].PolicyConfig()}, nil
}

// Kind implements Learner: the members' kind.
func (e *Ensemble) Kind() string { return e.members[0].Kind() }

// WindowLen implements Learner: the longest window a member reads.
func (e *Ensemble) WindowLen() int {
	n := 0
	for _, m := range e.members {
		n = max(n, m.WindowLen())
	}
	return n
}

// SignatureLen implements Learner: the members' (NewEnsemble checks that
// they agree).
func (e *Ensemble) SignatureLen() int { return e.members[0].SignatureLen() }

// PolicyConfig implements Learner: the first member's (all share the
// shape).
func (e *Ensemble) PolicyConfig() nn.Config { return e.cfg }

// Quorum is how many members must agree on a deviation.
func (e *Ensemble) Quorum() int { return e.quorum }

var errEnsembleSamples = errors.New("ensemble: acts greedily only (it is for evaluation, not training)")

// Act implements Learner without knowing what the choices do: per
// dimension, a choice at least Quorum members take, else follow. Each
// member acts greedily on its own view of the window; the result's Value
// is the members' mean and its LogProb 0 (the vote is deterministic).
func (e *Ensemble) Act(state []float64, window []nn.Step, mask []bool, greedy bool, _ *rand.Rand) (nn.Decision, error) {
	choices, value, err := e.memberChoices(state, window, mask, greedy)
	if err != nil {
		return nn.Decision{}, err
	}
	out := make([]int, len(e.sizes))
	for d, n := range e.sizes {
		votes := make([]int, n)
		for _, c := range choices {
			votes[c[d]]++
		}
		// Index 0 follows the default; a deviation needs the quorum. Two
		// deviations cannot both reach a quorum above half; below it the
		// first listed wins, deterministically.
		for c := 1; c < n; c++ {
			if votes[c] >= e.quorum {
				out[d] = c
				break
			}
		}
	}
	return nn.Decision{Action: nn.JoinAction(out, e.sizes), Value: value}, nil
}

// ActValues is Act knowing what each choice does: value(d, i) is the
// replica count or request that choice i of dimension d sets
// (learn.ChoiceValue), index 0 the default's; the members' choices are
// combined by learn.Agree with the ensemble's quorum.
func (e *Ensemble) ActValues(state []float64, window []nn.Step, mask []bool, value func(d, i int) float64) (nn.Decision, error) {
	choices, v, err := e.memberChoices(state, window, mask, true)
	if err != nil {
		return nn.Decision{}, err
	}
	out, err := learn.Agree(choices, e.quorum, value)
	if err != nil {
		return nn.Decision{}, err
	}
	return nn.Decision{Action: nn.JoinAction(out, e.sizes), Value: v}, nil
}

// memberChoices returns each member's greedy choice per dimension and the
// members' mean value estimate.
func (e *Ensemble) memberChoices(state []float64, window []nn.Step, mask []bool, greedy bool) ([][]int, float64, error) {
	if !greedy {
		return nil, 0, errEnsembleSamples
	}
	out := make([][]int, len(e.members))
	var value float64
	for i, m := range e.members {
		w := window
		if n := m.WindowLen(); len(w) > n {
			w = w[len(w)-n:]
		}
		dec, err := m.Act(state, w, mask, true, nil)
		if err != nil {
			return nil, 0, fmt.Errorf("ensemble member %d: %w", i+1, err)
		}
		value += dec.Value
		out[i] = nn.SplitAction(dec.Action, e.sizes)
	}
	return out, value / float64(len(e.members)), nil
}

var errEnsembleTrains = errors.New("ensemble: does not train; train its members")

// Update implements Learner: an ensemble does not train.
func (e *Ensemble) Update([]nn.MetaTransition) (nn.Stats, error) {
	return nn.Stats{}, errEnsembleTrains
}

// BehaviourClone implements Learner: an ensemble does not train.
func (e *Ensemble) BehaviourClone([]nn.MetaDemonstration) (nn.BCStats, error) {
	return nn.BCStats{}, errEnsembleTrains
}

// SetLearningRateScale implements Learner: an ensemble does not train.
func (e *Ensemble) SetLearningRateScale(float64) error { return errEnsembleTrains }

// MarshalBinary implements Learner: an ensemble is its members'
// checkpoints, written one by one.
func (e *Ensemble) MarshalBinary() ([]byte, error) {
	return nil, errors.New("ensemble: has no single checkpoint; save its members")
}
