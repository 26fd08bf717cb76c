package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// EmbedGuard is the range of embeddings a Meta-PPO learner saw where it
// learnt (per dimension [Lo, Hi]) and the action it takes outside it. The
// actor's response to an embedding outside that range is extrapolation:
// on a workload unlike every training workload it can deviate wrongly from
// the first decision. Outside the range the learner takes Fallback in
// every head where Fallback's choice is legal (in the residual action
// space 0: follow the default in every dimension) instead of its own
// choice; inside it, it acts as without a guard.
type EmbedGuard struct {
	Lo []float64 `json:"lo"`
	Hi []float64 `json:"hi"`
	// Fallback is an action (Config.ActionCount) taken outside the range.
	Fallback int `json:"fallback"`
}

// Contains reports whether every dimension of e lies within [Lo, Hi].
func (g *EmbedGuard) Contains(e []float64) bool {
	for k, v := range e {
		if !(v >= g.Lo[k] && v <= g.Hi[k]) {
			return false
		}
	}
	return true
}

func (g *EmbedGuard) clone() *EmbedGuard {
	if g == nil {
		return nil
	}
	return &EmbedGuard{Lo: slices.Clone(g.Lo), Hi: slices.Clone(g.Hi), Fallback: g.Fallback}
}

// validate checks g against the learner's configuration; nil is valid (no
// guard).
func (g *EmbedGuard) validate(c MetaConfig) error {
	if g == nil {
		return nil
	}
	var errs []error
	if len(g.Lo) != c.EmbedDim || len(g.Hi) != c.EmbedDim {
		errs = append(errs, fmt.Errorf("guard: lo and hi must have embedDim (%d) entries, got %d and %d", c.EmbedDim, len(g.Lo), len(g.Hi)))
	} else {
		for k := range g.Lo {
			if math.IsNaN(g.Lo[k]) || math.IsNaN(g.Hi[k]) || g.Lo[k] > g.Hi[k] {
				errs = append(errs, fmt.Errorf("guard: dimension %d has range [%v, %v]", k, g.Lo[k], g.Hi[k]))
			}
		}
	}
	if g.Fallback < 0 || g.Fallback >= c.ActionCount() {
		errs = append(errs, fmt.Errorf("guard: fallback action must be in [0, %d), got %d", c.ActionCount(), g.Fallback))
	}
	return errors.Join(errs...)
}

// NewEmbedGuard returns the guard of the embeddings es: per dimension
// their minimum and maximum, each widened by margin times the range's
// width, with fallback as the action outside.
func NewEmbedGuard(es [][]float64, margin float64, fallback int) (*EmbedGuard, error) {
	if len(es) == 0 {
		return nil, fmt.Errorf("%w: no embeddings to take the range of", ErrInvalidInput)
	}
	if !(margin >= 0) || math.IsInf(margin, 0) {
		return nil, fmt.Errorf("%w: guard margin must be finite and >= 0, got %v", ErrInvalidInput, margin)
	}
	d := len(es[0])
	g := &EmbedGuard{Lo: slices.Clone(es[0]), Hi: slices.Clone(es[0]), Fallback: fallback}
	for i, e := range es {
		if len(e) != d {
			return nil, fmt.Errorf("%w: embedding %d has %d values, want %d", ErrInvalidInput, i, len(e), d)
		}
		for k, v := range e {
			if !isFinite(v) {
				return nil, fmt.Errorf("%w: %w: embedding %d[%d] is %v", ErrInvalidInput, ErrNonFinite, i, k, v)
			}
			g.Lo[k], g.Hi[k] = math.Min(g.Lo[k], v), math.Max(g.Hi[k], v)
		}
	}
	for k := range g.Lo {
		w := margin * (g.Hi[k] - g.Lo[k])
		g.Lo[k], g.Hi[k] = g.Lo[k]-w, g.Hi[k]+w
	}
	return g, nil
}

// Guard returns a copy of the learner's guard, nil without one.
func (m *MetaPPO) Guard() *EmbedGuard { return m.guard.Load().clone() }

// SetGuard installs g (nil removes the guard) for the decisions that
// follow; it is saved in checkpoints and kept by Freeze.
func (m *MetaPPO) SetGuard(g *EmbedGuard) error {
	if err := g.validate(m.cfg); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	m.guard.Store(g.clone())
	return nil
}

// applyGuard replaces, in each decision whose embedding (row i of emb,
// EmbedDim wide) lies outside the guard, the choice of every head where the
// fallback's choice is legal by the fallback's, and sets Guarded; LogProb
// becomes that of the action taken. Without a guard it does nothing.
func (m *MetaPPO) applyGuard(ds []Decision, emb []float64, masks [][]bool) {
	g := m.guard.Load()
	if g == nil {
		return
	}
	e, heads := m.cfg.EmbedDim, m.cfg.heads()
	fb := SplitAction(g.Fallback, heads)
	for i := range ds {
		if g.Contains(emb[i*e : (i+1)*e]) {
			continue
		}
		mask := maskAt(masks, i)
		choices := SplitAction(ds[i].Action, heads)
		var lp float64
		off := 0
		for h, n := range heads {
			if mask == nil || mask[off+fb[h]] {
				choices[h] = fb[h]
			}
			lp += math.Log(ds[i].Probs[off+choices[h]])
			off += n
		}
		ds[i].Action, ds[i].LogProb, ds[i].Guarded = JoinAction(choices, heads), lp, true
	}
}
