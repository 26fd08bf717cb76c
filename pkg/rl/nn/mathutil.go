package nn

import (
	"fmt"
	"math"
)

// ComputeGAE computes generalised advantage estimates and the matching
// returns (advantage + value) for a time-ordered sequence of steps.
//
// values[t] is V(s_t) and nextValues[t] is V(s_{t+1}); nextValues[t] is
// ignored when dones[t]. The advantage chains into step t+1 only if step t is
// neither done nor truncated; the last step never chains. truncated may be nil.
//
//	δ_t = r_t + γ·V(s_{t+1})·(1-done_t) - V(s_t)
//	A_t = δ_t + γ·λ·A_{t+1}   (only when step t chains into t+1)
func ComputeGAE(rewards, values, nextValues []float64, dones, truncated []bool, gamma, lambda float64) (advantages, returns []float64, err error) {
	n := len(rewards)
	if len(values) != n || len(nextValues) != n || len(dones) != n || (truncated != nil && len(truncated) != n) {
		return nil, nil, fmt.Errorf("%w: GAE inputs have different lengths", ErrInvalidInput)
	}
	if !(gamma >= 0 && gamma <= 1) || !(lambda >= 0 && lambda <= 1) {
		return nil, nil, fmt.Errorf("%w: gamma and lambda must be in [0, 1], got %v and %v", ErrInvalidInput, gamma, lambda)
	}
	advantages = make([]float64, n)
	returns = make([]float64, n)
	var next float64 // A_{t+1} of the chained successor
	for t := n - 1; t >= 0; t-- {
		chains := t < n-1 && !dones[t] && (truncated == nil || !truncated[t])
		if !chains {
			next = 0
		}
		bootstrap := nextValues[t]
		if dones[t] {
			bootstrap = 0
		}
		delta := rewards[t] + gamma*bootstrap - values[t]
		advantages[t] = delta + gamma*lambda*next
		returns[t] = advantages[t] + values[t]
		next = advantages[t]
	}
	for t := range advantages {
		if !isFinite(advantages[t]) {
			return nil, nil, fmt.Errorf("%w: advantage %d is %v", ErrNonFinite, t, advantages[t])
		}
	}
	return advantages, returns, nil
}

// ClipGlobalNorm scales all gradients together so that their joint L2 norm is
// at most maxNorm, which keeps the update direction unchanged (unlike
// elementwise clipping). It returns the norm before clipping. A non-finite
// norm leaves the gradients untouched; the caller must treat it as divergence.
func ClipGlobalNorm(grads [][]float64, maxNorm float64) float64 {
	var sq float64
	for _, g := range grads {
		for _, v := range g {
			sq += v * v
		}
	}
	norm := math.Sqrt(sq)
	if !isFinite(norm) || maxNorm <= 0 || norm <= maxNorm {
		return norm
	}
	scale := maxNorm / norm
	for _, g := range grads {
		for i := range g {
			g[i] *= scale
		}
	}
	return norm
}

// maskedLogSoftmax writes the log-probabilities of a softmax over the legal
// logits into out. Masked entries get -Inf (probability exactly 0).
func maskedLogSoftmax(logits []float64, mask []bool, out []float64) error {
	maxLogit := math.Inf(-1)
	legal := 0
	for i, l := range logits {
		if mask != nil && !mask[i] {
			continue
		}
		if !isFinite(l) {
			return fmt.Errorf("%w: logit %d is %v", ErrNonFinite, i, l)
		}
		legal++
		maxLogit = math.Max(maxLogit, l)
	}
	if legal == 0 {
		return ErrAllActionsMasked
	}
	var sum float64
	for i, l := range logits {
		if mask == nil || mask[i] {
			sum += math.Exp(l - maxLogit)
		}
	}
	lse := maxLogit + math.Log(sum)
	for i, l := range logits {
		if mask == nil || mask[i] {
			out[i] = l - lse
		} else {
			out[i] = math.Inf(-1)
		}
	}
	return nil
}

// normalize rescales xs in place to mean 0 and standard deviation 1. A batch
// without spread becomes all zeros rather than dividing by ~0.
func normalize(xs []float64) {
	if len(xs) == 0 {
		return
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var variance float64
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	std := math.Sqrt(variance / float64(len(xs)))
	for i := range xs {
		xs[i] = (xs[i] - mean) / (std + 1e-8)
	}
}

func explainedVariance(pred, target []float64) float64 {
	varOf := func(xs []float64) float64 {
		var m float64
		for _, x := range xs {
			m += x
		}
		m /= float64(len(xs))
		var v float64
		for _, x := range xs {
			v += (x - m) * (x - m)
		}
		return v / float64(len(xs))
	}
	if len(target) == 0 {
		return 0
	}
	vt := varOf(target)
	if vt == 0 {
		return 0
	}
	diff := make([]float64, len(target))
	for i := range target {
		diff[i] = target[i] - pred[i]
	}
	return 1 - varOf(diff)/vt
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func allFinite(xs []float64) (int, bool) {
	for i, x := range xs {
		if !isFinite(x) {
			return i, false
		}
	}
	return -1, true
}

// checkState validates a caller-supplied state vector.
func checkState(what string, s []float64, dim int) error {
	if len(s) != dim {
		return fmt.Errorf("%w: %s has %d values, want %d", ErrInvalidInput, what, len(s), dim)
	}
	if i, ok := allFinite(s); !ok {
		return fmt.Errorf("%w: %w: %s[%d] is %v", ErrInvalidInput, ErrNonFinite, what, i, s[i])
	}
	return nil
}

// checkMask validates a caller-supplied mask (nil = all legal).
func checkMask(what string, mask []bool, n int) error {
	if mask == nil {
		return nil
	}
	if len(mask) != n {
		return fmt.Errorf("%w: %s has %d entries, want %d", ErrInvalidInput, what, len(mask), n)
	}
	for _, ok := range mask {
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidInput, what, ErrAllActionsMasked)
}

// maskAt is row i of a batch's masks; nil masks mean every action is legal
// in every row.
func maskAt(masks [][]bool, i int) []bool {
	if masks == nil {
		return nil
	}
	return masks[i]
}
