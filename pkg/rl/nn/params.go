package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// param is one weight matrix or bias row with its Adam state.
//
// Invariant: data is the canonical value; infer equals data whenever the
// learner's mutex is not held (it is refreshed after every change). data is
// the backing array of dense, which the Gorgonia graphs read, so it is only
// ever written in place, never reallocated.
type param struct {
	name       string
	rows, cols int
	data       []float64
	infer      []float64
	m, v       []float64
	steps      uint64

	dense *tensor.Dense // backed by data
}

func newParam(name string, rows, cols int) *param {
	n := rows * cols
	p := &param{
		name:  name,
		rows:  rows,
		cols:  cols,
		data:  make([]float64, n),
		infer: make([]float64, n),
		m:     make([]float64, n),
		v:     make([]float64, n),
	}
	p.dense = tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(p.data))
	return p
}

// mlpParams creates the weights of a tanh MLP with the given layer widths
// (input first, output last) as [w0, b0, w1, b1, ...]. Weights are drawn
// from N(0, 1/fanIn) (LeCun normal, suited to tanh), scaled by outScale on
// the output layer; biases start at zero.
func mlpParams(prefix string, widths []int, outScale float64, rng *rand.Rand) []*param {
	var ps []*param
	for l := 0; l+1 < len(widths); l++ {
		in, out := widths[l], widths[l+1]
		w := newParam(fmt.Sprintf("%s/w%d", prefix, l), in, out)
		scale := math.Sqrt(1 / float64(in))
		if l+2 == len(widths) {
			scale *= outScale
		}
		for i := range w.data {
			w.data[i] = rng.NormFloat64() * scale
		}
		b := newParam(fmt.Sprintf("%s/b%d", prefix, l), 1, out)
		ps = append(ps, w, b)
	}
	return ps
}

// paramSet holds all weights of an actor-critic. actor and critic are
// sub-slices of all.
type paramSet struct {
	all    []*param
	actor  []*param
	critic []*param
}

func newActorCriticParams(cfg Config, rng *rand.Rand) *paramSet {
	actorWidths := append(append([]int{cfg.StateDim}, cfg.Hidden...), cfg.NumActions)
	criticWidths := append(append([]int{cfg.StateDim}, cfg.Hidden...), 1)
	// A near-zero actor output layer starts the policy close to uniform over
	// the legal actions, which keeps early exploration broad.
	actor := mlpParams("actor", actorWidths, 0.01, rng)
	if out := actor[len(actor)-1]; len(cfg.InitBias) == len(out.data) {
		copy(out.data, cfg.InitBias)
	}
	critic := mlpParams("critic", criticWidths, 1, rng)
	all := append(append([]*param{}, actor...), critic...)
	ps := &paramSet{all: all, actor: all[:len(actor)], critic: all[len(actor):]}
	ps.syncInference()
	return ps
}

// syncInference publishes the canonical weights to the inference copies. The
// caller must hold the inference lock.
func (ps *paramSet) syncInference() {
	for _, p := range ps.all {
		copy(p.infer, p.data)
	}
}

// finite reports the first parameter holding a NaN or Inf, if any.
func (ps *paramSet) finite() (string, bool) {
	for _, p := range ps.all {
		if _, ok := allFinite(p.data); !ok {
			return p.name, false
		}
	}
	return "", true
}

// adamConfig holds Adam's hyperparameters.
type adamConfig struct {
	lr, beta1, beta2, eps float64
}

// scaledRate is the learning rate a schedule's scale s gives (0: unscaled).
func scaledRate(lr, s float64) float64 {
	if s == 0 {
		return lr
	}
	return lr * s
}

// checkRateScale accepts a learning-rate scale in (0, 1].
func checkRateScale(s float64) error {
	if !(s > 0 && s <= 1) {
		return fmt.Errorf("%w: learning-rate scale %v, want (0, 1]", ErrInvalidInput, s)
	}
	return nil
}

// adamStep applies one Adam step with gradient g to p. Each parameter keeps
// its own step count so that a step that only touches some parameters (a
// behaviour-cloning step changes only the actor) leaves the bias correction
// of the others alone.
func (p *param) adamStep(g []float64, o adamConfig) {
	p.steps++
	c1 := 1 - math.Pow(o.beta1, float64(p.steps))
	c2 := 1 - math.Pow(o.beta2, float64(p.steps))
	for i, gi := range g {
		p.m[i] = o.beta1*p.m[i] + (1-o.beta1)*gi
		p.v[i] = o.beta2*p.v[i] + (1-o.beta2)*gi*gi
		p.data[i] -= o.lr * (p.m[i] / c1) / (math.Sqrt(p.v[i]/c2) + o.eps)
	}
}

// applyGradients copies the gradients of ps out of a graph run into scratch,
// clips them by global norm and applies Adam. It returns the norm before
// clipping; a non-finite norm is an ErrDiverged error and changes nothing.
func applyGradients(gradValues []*G.Value, ps []*param, scratch [][]float64, maxNorm float64, o adamConfig) (float64, error) {
	grads := scratch[:len(ps)]
	for i, v := range gradValues {
		d, err := float64s(v)
		if err != nil {
			return 0, fmt.Errorf("reading gradient of %s: %w", ps[i].name, err)
		}
		if len(d) != len(ps[i].data) {
			return 0, fmt.Errorf("gradient of %s has %d values, want %d", ps[i].name, len(d), len(ps[i].data))
		}
		grads[i] = append(grads[i][:0], d...)
	}
	norm := ClipGlobalNorm(grads, maxNorm)
	if !isFinite(norm) {
		return 0, fmt.Errorf("%w: gradient norm is %v", ErrDiverged, norm)
	}
	for i, q := range ps {
		q.adamStep(grads[i], o)
	}
	return norm, nil
}

// snapshot is a copy of everything training mutates, for rollback.
type snapshot struct {
	data, m, v [][]float64
	steps      []uint64
	rng        []byte
}

func (ps *paramSet) snapshot() *snapshot { return snapshotParams(ps.all) }

func (ps *paramSet) restore(s *snapshot) { restoreParams(ps.all, s) }

func snapshotParams(ps []*param) *snapshot {
	s := &snapshot{}
	for _, p := range ps {
		s.data = append(s.data, append([]float64(nil), p.data...))
		s.m = append(s.m, append([]float64(nil), p.m...))
		s.v = append(s.v, append([]float64(nil), p.v...))
		s.steps = append(s.steps, p.steps)
	}
	return s
}

func restoreParams(ps []*param, s *snapshot) {
	for i, p := range ps {
		copy(p.data, s.data[i])
		copy(p.m, s.m[i])
		copy(p.v, s.v[i])
		p.steps = s.steps[i]
	}
}
