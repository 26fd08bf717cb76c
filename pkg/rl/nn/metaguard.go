package nn

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// EmbedGuard is the range of embeddings a Meta-PPO learner saw where it
// learnt (per dimension [Lo, Hi]) and the action it takes outside it. The
// actor's response to an embedding outside that range is extrapolation:
// on a workload unlike every training workload it can deviate wrongly from
// the first decision. Outside the range the learner takes Fallback in
// every head where Fallback's choice is legal (in the residual action
// space 0: follow the default in every dimension) instead of its own
// choice; inside it, it acts as without a guard.
//
// With Radius > 0 the range is also an ellipsoid: the Mahalanobis distance
// sqrt((e−Mean)ᵀ InvCov (e−Mean)) of the embedding from the seen ones must
// not exceed Radius. A box per dimension misses an embedding that is
// ordinary in every dimension alone but not in their combination; the
// ellipsoid does not.
type EmbedGuard struct {
	Lo []float64 `json:"lo"`
	Hi []float64 `json:"hi"`
	// Fallback is an action (Config.ActionCount) taken outside the range.
	Fallback int `json:"fallback"`
	// Mean (EmbedDim values), InvCov (EmbedDim² values, row-major,
	// symmetric) and Radius define the ellipsoid; Radius 0: none.
	Mean   []float64 `json:"mean,omitempty"`
	InvCov []float64 `json:"invCov,omitempty"`
	Radius float64   `json:"radius,omitempty"`
}

// Contains reports whether e lies within [Lo, Hi] in every dimension and,
// with an ellipsoid, within Radius of Mean.
func (g *EmbedGuard) Contains(e []float64) bool {
	for k, v := range e {
		if !(v >= g.Lo[k] && v <= g.Hi[k]) {
			return false
		}
	}
	return g.Radius == 0 || g.Distance(e) <= g.Radius
}

// Distance is the Mahalanobis distance of e from the ellipsoid's Mean (0
// without an ellipsoid).
func (g *EmbedGuard) Distance(e []float64) float64 {
	if g.Radius == 0 {
		return 0
	}
	n := len(g.Mean)
	var d2 float64
	for i := range n {
		var row float64
		for j := range n {
			row += g.InvCov[i*n+j] * (e[j] - g.Mean[j])
		}
		d2 += (e[i] - g.Mean[i]) * row
	}
	return math.Sqrt(math.Max(d2, 0))
}

func (g *EmbedGuard) clone() *EmbedGuard {
	if g == nil {
		return nil
	}
	return &EmbedGuard{Lo: slices.Clone(g.Lo), Hi: slices.Clone(g.Hi), Fallback: g.Fallback,
		Mean: slices.Clone(g.Mean), InvCov: slices.Clone(g.InvCov), Radius: g.Radius}
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
	if g.Radius != 0 || g.Mean != nil || g.InvCov != nil {
		if !(g.Radius > 0) || math.IsInf(g.Radius, 0) || len(g.Mean) != c.EmbedDim || len(g.InvCov) != c.EmbedDim*c.EmbedDim {
			errs = append(errs, fmt.Errorf("guard: an ellipsoid needs a finite radius > 0, embedDim (%d) means and embedDim² inverse covariances, got %v, %d and %d",
				c.EmbedDim, g.Radius, len(g.Mean), len(g.InvCov)))
		} else if _, ok := allFinite(append(slices.Clone(g.Mean), g.InvCov...)); !ok {
			errs = append(errs, errors.New("guard: the ellipsoid holds non-finite values"))
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

// EllipseQuantile is the share of the seen embeddings whose Mahalanobis
// distance sets an ellipsoid's radius (before the margin): the farthest
// 1% of windows seen, the start of an episode's trajectory among them,
// are left out, so that they do not stretch the ellipsoid over regions
// no workload occupies.
const EllipseQuantile = 0.99

// AddEllipse adds to g the ellipsoid of the embeddings es: their mean and
// covariance (with a ridge of 1e-6 times the mean variance, so that a
// direction the embeddings never vary in still inverts), and the radius
// that holds EllipseQuantile of them, times 1 + margin.
func (g *EmbedGuard) AddEllipse(es [][]float64, margin float64) error {
	n := len(g.Lo)
	if len(es) < 2 {
		return fmt.Errorf("%w: an ellipsoid needs at least 2 embeddings, got %d", ErrInvalidInput, len(es))
	}
	mean, c, err := stats.Covariance(es)
	if err != nil {
		return fmt.Errorf("%w: embeddings: %w", ErrInvalidInput, err)
	}
	if len(mean) != n {
		return fmt.Errorf("%w: embeddings have %d dimensions, the guard %d", ErrInvalidInput, len(mean), n)
	}
	cov := make([]float64, 0, n*n)
	for _, row := range c {
		cov = append(cov, row...)
	}
	var tr float64
	for i := range n {
		tr += cov[i*n+i]
	}
	ridge := 1e-6 * math.Max(tr/float64(n), 1e-12)
	for i := range n {
		cov[i*n+i] += ridge
	}
	inv, err := invertSPD(cov, n)
	if err != nil {
		return fmt.Errorf("%w: embedding covariance: %w", ErrInvalidInput, err)
	}
	g.Mean, g.InvCov, g.Radius = mean, inv, 1
	ds := make([]float64, len(es))
	for i, e := range es {
		ds[i] = g.Distance(e)
	}
	slices.Sort(ds)
	g.Radius = ds[min(len(ds)-1, int(math.Ceil(EllipseQuantile*float64(len(ds))))-1)] * (1 + margin)
	if !(g.Radius > 0) {
		// Every embedding at the mean: the smallest positive radius.
		g.Radius = math.SmallestNonzeroFloat64
	}
	return nil
}

// invertSPD inverts the symmetric positive definite n×n matrix a
// (row-major) by Cholesky decomposition.
func invertSPD(a []float64, n int) ([]float64, error) {
	l := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			s := a[i*n+j]
			for k := range j {
				s -= l[i*n+k] * l[j*n+k]
			}
			if i == j {
				if !(s > 0) {
					return nil, errors.New("not positive definite")
				}
				l[i*n+i] = math.Sqrt(s)
			} else {
				l[i*n+j] = s / l[j*n+j]
			}
		}
	}
	// Columns of A⁻¹ = L⁻ᵀ L⁻¹ eᵢ: a forward and a back substitution each.
	inv := make([]float64, n*n)
	y := make([]float64, n)
	for c := range n {
		for i := range n {
			s := 0.0
			if i == c {
				s = 1
			}
			for k := range i {
				s -= l[i*n+k] * y[k]
			}
			y[i] = s / l[i*n+i]
		}
		for i := n - 1; i >= 0; i-- {
			s := y[i]
			for k := i + 1; k < n; k++ {
				s -= l[k*n+i] * inv[k*n+c]
			}
			inv[i*n+c] = s / l[i*n+i]
		}
	}
	return inv, nil
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
