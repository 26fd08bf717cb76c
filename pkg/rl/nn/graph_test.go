package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"testing"

	G "gorgonia.org/gorgonia"
)

// refMLP is a plain-Go forward pass of the tanh MLP, independent of Gorgonia.
func refMLP(ps []*param, x []float64) []float64 {
	h := x
	for l := 0; l+1 < len(ps); l += 2 {
		w, b := ps[l], ps[l+1]
		out := make([]float64, w.cols)
		for j := range out {
			s := b.data[j]
			for i := range h {
				s += h[i] * w.data[i*w.cols+j]
			}
			out[j] = s
			if l+2 < len(ps) {
				out[j] = math.Tanh(s)
			}
		}
		h = out
	}
	return h
}

// ppoFixture fills the PPO graph with a random minibatch (one padding row
// included) whose old log-probabilities are offset from the current ones, so
// that some ratios are clipped and some are not.
type ppoFixture struct {
	batch             []Transition
	rows              []int
	oldLogp, adv, ret []float64
	refLogp, refValue []float64
	refLogits         [][]float64
}

func newPPOFixture(t *testing.T, p *PPO, rng *rand.Rand, mutate func([]Transition)) *ppoFixture {
	t.Helper()
	cfg := p.cfg
	n := cfg.MinibatchSize - 1
	f := &ppoFixture{batch: randomBatch(rng, n, cfg.StateDim, cfg.NumActions)}
	if mutate != nil {
		mutate(f.batch)
	}
	for i := range f.batch {
		f.rows = append(f.rows, i)
		logits := refMLP(p.ps.actor, f.batch[i].State)
		lp := make([]float64, cfg.NumActions)
		if err := maskedLogSoftmax(logits, f.batch[i].Mask, lp); err != nil {
			t.Fatal(err)
		}
		cur := lp[f.batch[i].Action]
		// Keep every ratio at least 0.02 away from the clipping kinks so
		// that finite differences do not straddle them.
		var off float64
		for {
			off = rng.Float64()*0.8 - 0.4
			r := math.Exp(-off)
			if math.Abs(r-(1-cfg.ClipEpsilon)) > 0.02 && math.Abs(r-(1+cfg.ClipEpsilon)) > 0.02 {
				break
			}
		}
		f.refLogits = append(f.refLogits, logits)
		f.refLogp = append(f.refLogp, cur)
		f.refValue = append(f.refValue, refMLP(p.ps.critic, f.batch[i].State)[0])
		f.oldLogp = append(f.oldLogp, cur+off)
		f.adv = append(f.adv, rng.NormFloat64())
		f.ret = append(f.ret, rng.NormFloat64())
	}
	p.ppo.fill(f.batch, f.rows, f.oldLogp, f.adv, f.ret, cfg)
	return f
}

func gradCheckConfig() Config {
	cfg := smallConfig(3, 4, 11)
	cfg.Hidden = []int{5, 4}
	cfg.MinibatchSize = 7
	cfg.EntropyCoef = 0.05
	return cfg
}

// TestPPOGraphMatchesReference recomputes every loss term of the Gorgonia
// PPO graph in plain Go.
func TestPPOGraphMatchesReference(t *testing.T) {
	cases := []struct {
		name   string
		mutate func([]Transition)
	}{
		{"random masks", nil},
		{"no masks", func(b []Transition) {
			for i := range b {
				b[i].Mask = nil
			}
		}},
		// Regression: Gorgonia's LogSoftMax took row 0's first entry as the
		// maximum of every row, so a masked entry there overflowed all other
		// rows.
		{"first entry of first row masked", func(b []Transition) {
			b[0].Mask = []bool{false, true, true, true}
			b[0].Action = 1
			for i := 1; i < len(b); i++ {
				b[i].Mask = nil
			}
		}},
		{"single legal action", func(b []Transition) {
			for i := range b {
				b[i].Mask = []bool{false, false, false, false}
				b[i].Mask[b[i].Action] = true
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkPPOGraph(t, tc.mutate)
		})
	}
}

func checkPPOGraph(t *testing.T, mutate func([]Transition)) {
	p := mustPPO(t, gradCheckConfig())
	// Move away from the near-uniform initial policy so that the test has
	// teeth.
	for _, q := range p.ps.all {
		for i := range q.data {
			q.data[i] *= 5
		}
	}
	f := newPPOFixture(t, p, newRNG(3), mutate)
	if err := p.ppo.m.run(); err != nil {
		t.Fatal(err)
	}
	eps := p.cfg.ClipEpsilon
	n := float64(len(f.rows))
	var pl, vl, ent float64
	for i, tr := range f.batch {
		r := math.Exp(f.refLogp[i] - f.oldLogp[i])
		pl -= math.Min(r*f.adv[i], math.Max(1-eps, math.Min(r, 1+eps))*f.adv[i]) / n
		d := f.refValue[i] - f.ret[i]
		vl += d * d / n
		lp := make([]float64, len(f.refLogits[i]))
		if err := maskedLogSoftmax(f.refLogits[i], tr.Mask, lp); err != nil {
			t.Fatal(err)
		}
		for _, l := range lp {
			if !math.IsInf(l, -1) {
				ent -= math.Exp(l) * l / n
			}
		}
	}
	total := pl + p.cfg.ValueCoef*vl - p.cfg.EntropyCoef*ent
	logp, err := float64s(p.ppo.logp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.batch {
		if !closeTo(logp[i], f.refLogp[i], 1e-9) {
			t.Errorf("logp[%d] = %v, want %v", i, logp[i], f.refLogp[i])
		}
	}
	for _, c := range []struct {
		name string
		v    *G.Value
		want float64
	}{
		{"policy loss", p.ppo.policyLoss, pl},
		{"value loss", p.ppo.valueLoss, vl},
		{"entropy", p.ppo.entropy, ent},
		{"total", p.ppo.total, total},
	} {
		got, err := scalarOf(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if !closeTo(got, c.want, 1e-9) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestInferenceMatchesReference checks the BLAS forward pass used by Act,
// ActBatch and Update against the plain-loop reference that the Gorgonia
// graph is also checked against.
func TestInferenceMatchesReference(t *testing.T) {
	p := mustPPO(t, gradCheckConfig())
	for _, q := range p.ps.all {
		for i := range q.data {
			q.data[i] *= 3
		}
	}
	p.publish()
	rng := newRNG(5)
	states := make([][]float64, 11)
	for i := range states {
		states[i] = randomState(rng, p.cfg.StateDim)
	}
	logits, values := actorCriticForward(p.ps, false, states, p.cfg.StateDim)
	ds, err := p.ActBatch(states, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := p.cfg.NumActions
	for i, s := range states {
		wantLogits := refMLP(p.ps.actor, s)
		wantValue := refMLP(p.ps.critic, s)[0]
		wantLogp := make([]float64, a)
		if err := maskedLogSoftmax(wantLogits, nil, wantLogp); err != nil {
			t.Fatal(err)
		}
		for j := range wantLogits {
			if !closeTo(logits[i*a+j], wantLogits[j], 1e-12) {
				t.Errorf("state %d: logit %d = %v, want %v", i, j, logits[i*a+j], wantLogits[j])
			}
		}
		if !closeTo(values[i], wantValue, 1e-12) || !closeTo(ds[i].Value, wantValue, 1e-12) {
			t.Errorf("state %d: values %v (canonical) %v (ActBatch), want %v", i, values[i], ds[i].Value, wantValue)
		}
		d, err := p.Act(s, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := range d.Probs {
			want := math.Exp(wantLogp[j])
			if !closeTo(d.Probs[j], want, 1e-12) || !closeTo(ds[i].Probs[j], want, 1e-12) {
				t.Errorf("state %d: p[%d] = %v (Act) %v (ActBatch), want %v", i, j, d.Probs[j], ds[i].Probs[j], want)
			}
		}
	}
}

// gradCheck compares analytic gradients with central finite differences for
// every parameter entry.
func gradCheck(t *testing.T, ps []*param, run func() (float64, [][]float64)) {
	t.Helper()
	_, analytic := run()
	const h = 1e-6
	checked := 0
	for pi, q := range ps {
		for j := range q.data {
			orig := q.data[j]
			q.data[j] = orig + h
			up, _ := run()
			q.data[j] = orig - h
			down, _ := run()
			q.data[j] = orig
			numeric := (up - down) / (2 * h)
			got := analytic[pi][j]
			if math.Abs(numeric-got) > 1e-6+1e-4*math.Abs(numeric) {
				t.Errorf("%s[%d]: analytic %v, numeric %v", q.name, j, got, numeric)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no parameters checked")
	}
}

func TestPPOGradientCheck(t *testing.T) {
	// Minibatch 2 leaves a single real row: length-1 vectors are a special
	// case in Gorgonia's shape handling.
	for _, mb := range []int{2, 7} {
		t.Run(fmt.Sprintf("minibatch=%d", mb), func(t *testing.T) {
			cfg := gradCheckConfig()
			cfg.MinibatchSize = mb
			p := mustPPO(t, cfg)
			for _, q := range p.ps.all {
				for i := range q.data {
					q.data[i] *= 3
				}
			}
			newPPOFixture(t, p, newRNG(7), nil)
			gradCheck(t, p.ps.all, func() (float64, [][]float64) {
				return runGraph(t, &p.ppo.m, p.ppo.total, p.ppo.grads)
			})
		})
	}
}

func TestBCGradientCheck(t *testing.T) {
	p := mustPPO(t, gradCheckConfig())
	for _, q := range p.ps.all {
		for i := range q.data {
			q.data[i] *= 3
		}
	}
	rng := newRNG(9)
	g := p.bc
	s, a := p.cfg.StateDim, p.cfg.NumActions
	for r := 0; r < g.batch-1; r++ { // last row is padding
		tr := randomBatch(rng, 1, s, a)[0]
		copy(g.x[r*s:], tr.State)
		fillMaskBias(g.maskBias[r*a:(r+1)*a], tr.Mask)
		g.oneHot[r*a+tr.Action] = 1
		g.w[r] = 1 / float64(g.batch-1)
	}
	gradCheck(t, p.ps.actor, func() (float64, [][]float64) { return runGraph(t, &g.m, g.loss, g.grads) })
}
