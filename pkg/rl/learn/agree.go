package learn

import (
	"cmp"
	"fmt"
	"slices"
)

// Agree is the decision of several residual policies that must agree to
// deviate from the default: choices[m][d] is member m's choice in
// dimension d (index 0 follows the default), and value(d, i) is the
// replica count or request that choice i of dimension d sets
// (ChoiceValue). Per dimension it takes the largest change that at least
// quorum members go as far as in the same direction: with a majority
// quorum the members' median, with all of them the smallest change they
// share. It follows the default (0) where there is none, or where a quorum
// of at most half goes both ways. Of members that set equal values, the
// first listed member's choice is taken, so the result is deterministic.
//
// Agents trained alike differ most in where they deviate, and a deviation
// one seed learnt and the others did not is the likeliest to be a mistake
// on a new workload; following the default there keeps an ensemble's
// deviations to those its members share (docs/results/evidence-residual.md, "Ensembles of
// the training seeds").
func Agree(choices [][]int, quorum int, value func(d, i int) float64) ([]int, error) {
	if len(choices) == 0 {
		return nil, fmt.Errorf("agree: no members")
	}
	if quorum < 1 || quorum > len(choices) {
		return nil, fmt.Errorf("agree: quorum %d out of [1, %d]", quorum, len(choices))
	}
	dims := len(choices[0])
	for m, c := range choices {
		if len(c) != dims {
			return nil, fmt.Errorf("agree: member %d chose in %d dimensions, member 1 in %d", m+1, len(c), dims)
		}
	}
	type vote struct {
		choice int
		value  float64
	}
	votes := make([]vote, len(choices))
	out := make([]int, dims)
	for d := range dims {
		for m, c := range choices {
			votes[m] = vote{c[d], value(d, c[d])}
		}
		// Stable, so that of equal values the first member's choice wins.
		slices.SortStableFunc(votes, func(a, b vote) int { return cmp.Compare(b.value, a.value) })
		def := value(d, 0)
		up, down := votes[quorum-1], votes[len(votes)-quorum]
		switch {
		case up.value > def && down.value < def:
		case up.value > def:
			out[d] = up.choice
		case down.value < def:
			out[d] = down.choice
		}
	}
	return out, nil
}

// ChoiceValue is what choice i of dimension d sets for this decision
// (ChoiceValue of its observation, constraints and default), for Agree.
// It reports false when the agent does not act in a residual space.
func (p *Prepared) ChoiceValue(d, i int) (float64, bool) {
	if p.space == nil || d < 0 || d >= int(NumDimensions) || i < 0 || i >= len(p.space[d]) {
		return 0, false
	}
	return ChoiceValue(&p.obs, &p.cons, p.def, Dimension(d), p.space[d][i]), true
}
