package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
)

// Factored actions. With Config.Heads set, the actor's NumActions logits are
// the concatenation of len(Heads) independent categorical heads (a
// multi-discrete action: one choice per dimension). An action is then the
// mixed-radix number Σ_h a_h·Π_{k<h} Heads[k] (head 0 least significant), a
// mask has NumActions entries (each head's legal choices, concatenated) and
// must leave every head a legal choice, an action's log-probability is the
// sum of its heads', and Decision.Probs holds each head's probabilities,
// concatenated. Without Heads there is one head of NumActions logits, and
// all of this reduces to the plain categorical policy.

// heads returns the head sizes: Heads, or one head of NumActions.
func (c Config) heads() []int {
	if len(c.Heads) > 0 {
		return c.Heads
	}
	return []int{c.NumActions}
}

// ActionCount is the number of distinct actions: the product of the heads.
func (c Config) ActionCount() int {
	n := 1
	for _, h := range c.heads() {
		n *= h
	}
	return n
}

// SplitAction decodes action a into one choice per head.
func SplitAction(a int, heads []int) []int {
	out := make([]int, len(heads))
	for h, n := range heads {
		out[h] = a % n
		a /= n
	}
	return out
}

// JoinAction encodes one choice per head as an action.
func JoinAction(choices, heads []int) int {
	a, radix := 0, 1
	for h, n := range heads {
		a += choices[h] * radix
		radix *= n
	}
	return a
}

// maskedLogSoftmaxHeads is maskedLogSoftmax per head, into out.
func maskedLogSoftmaxHeads(logits []float64, mask []bool, heads []int, out []float64) error {
	off := 0
	for h, n := range heads {
		var m []bool
		if mask != nil {
			m = mask[off : off+n]
		}
		if err := maskedLogSoftmax(logits[off:off+n], m, out[off:off+n]); err != nil {
			if len(heads) > 1 {
				return fmt.Errorf("head %d: %w", h, err)
			}
			return err
		}
		off += n
	}
	return nil
}

// actionLogProb is the log-probability of action a given the per-head
// log-probabilities logp.
func actionLogProb(logp []float64, a int, heads []int) float64 {
	var lp float64
	off := 0
	for _, n := range heads {
		lp += logp[off+a%n]
		a /= n
		off += n
	}
	return lp
}

// setOneHot writes 1 at each head's chosen entry of action a into row.
func setOneHot(row []float64, a int, heads []int) {
	off := 0
	for _, n := range heads {
		row[off+a%n] = 1
		a /= n
		off += n
	}
}

// greedyAction is the action of each head's most likely choice, given a
// row of (masked) logits or log-probabilities.
func greedyAction(row []float64, heads []int) int {
	choices := make([]int, len(heads))
	off := 0
	for h, n := range heads {
		choices[h] = argmax(row[off : off+n])
		off += n
	}
	return JoinAction(choices, heads)
}

// checkMask checks a mask's length and that it leaves every head a legal
// choice.
func (c Config) checkMask(what string, mask []bool) error {
	if err := checkMask(what, mask, c.NumActions); err != nil {
		return err
	}
	return checkHeadsMask(what, mask, c.heads())
}

// checkHeadsMask checks that mask (validated by checkMask for its length)
// leaves every head a legal choice.
func checkHeadsMask(what string, mask []bool, heads []int) error {
	if mask == nil || len(heads) < 2 {
		return nil
	}
	off := 0
	for h, n := range heads {
		legal := false
		for _, ok := range mask[off : off+n] {
			legal = legal || ok
		}
		if !legal {
			return fmt.Errorf("%w: %s: head %d: %w", ErrInvalidInput, what, h, ErrAllActionsMasked)
		}
		off += n
	}
	return nil
}

// checkHeadsAction validates an action taken under mask: in range, and
// legal in every head.
func checkHeadsAction(what string, a int, mask []bool, heads []int) error {
	count := 1
	for _, n := range heads {
		count *= n
	}
	if a < 0 || a >= count {
		return fmt.Errorf("%w: %s %d out of range [0, %d)", ErrInvalidInput, what, a, count)
	}
	if mask == nil {
		return nil
	}
	off, rest := 0, a
	for h, n := range heads {
		if !mask[off+rest%n] {
			if len(heads) == 1 {
				return fmt.Errorf("%w: %s %d is masked", ErrInvalidInput, what, a)
			}
			return fmt.Errorf("%w: %s %d: head %d choice %d is masked", ErrInvalidInput, what, a, h, rest%n)
		}
		rest /= n
		off += n
	}
	return nil
}

// decide turns logits into a Decision, head by head. Masked choices get
// log-probability -Inf and probability exactly 0, and are skipped by both
// argmax and sampling; sampling draws one number from rng per head.
func decide(logits []float64, value float64, mask []bool, heads []int, greedy bool, rng *rand.Rand) (Decision, error) {
	if !isFinite(value) {
		return Decision{}, fmt.Errorf("%w: value estimate is %v", ErrNonFinite, value)
	}
	logp := make([]float64, len(logits))
	if err := maskedLogSoftmaxHeads(logits, mask, heads, logp); err != nil {
		return Decision{}, err
	}
	probs := make([]float64, len(logits))
	for i, lp := range logp {
		probs[i] = math.Exp(lp)
	}
	choices := make([]int, len(heads))
	var lpSum float64
	off := 0
	for h, n := range heads {
		best, chosen := -1, -1
		for i := off; i < off+n; i++ {
			if mask != nil && !mask[i] {
				continue
			}
			if best < 0 || logp[i] > logp[best] {
				best = i
			}
		}
		if greedy {
			chosen = best
		} else {
			u := rng.Float64()
			var cum float64
			for i := off; i < off+n; i++ {
				if mask != nil && !mask[i] {
					continue
				}
				chosen = i // the last legal choice absorbs rounding in cum
				cum += probs[i]
				if u < cum {
					break
				}
			}
		}
		choices[h] = chosen - off
		lpSum += logp[chosen]
		off += n
	}
	return Decision{Action: JoinAction(choices, heads), LogProb: lpSum, Value: value, Probs: probs}, nil
}

// logSoftmaxHeads is logSoftmax applied to each head's columns of a
// batch×NumActions matrix.
func (b *builder) logSoftmaxHeads(z *G.Node, heads []int) *G.Node {
	if len(heads) < 2 {
		return b.logSoftmax(z)
	}
	parts := make([]*G.Node, len(heads))
	off := 0
	for h, n := range heads {
		lo, hi := off, off+n
		seg := b.apply("head", func() (*G.Node, error) { return G.Slice(z, nil, G.S(lo, hi)) })
		parts[h] = b.logSoftmax(seg)
		off += n
	}
	return b.apply("concat", func() (*G.Node, error) { return G.Concat(1, parts...) })
}
