package nn

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
)

// guardedMeta returns a factored Meta-PPO whose output biases make
// choices (1, 1, 2) the greedy action, and a window with its embedding.
func guardedMeta(t *testing.T) (*MetaPPO, []Step, []float64) {
	t.Helper()
	cfg := factoredMetaConfig(5)
	cfg.InitBias = []float64{0, 6, 0, 0, 6, 0, 0, 6, 0}
	m := mustMeta(t, cfg)
	rng := newRNG(9)
	win := make([]Step, cfg.Window)
	for i := range win {
		win[i] = Step{State: randomState(rng, cfg.StateDim), Action: rng.IntN(cfg.ActionCount()), Reward: rng.NormFloat64()}
	}
	e, err := m.Embed(win)
	if err != nil {
		t.Fatal(err)
	}
	return m, win, e
}

func shifted(e []float64, by float64) []float64 {
	out := slices.Clone(e)
	for k := range out {
		out[k] += by
	}
	return out
}

// TestMetaGuardFallsBack: outside the guard's range a Meta-PPO takes the
// fallback's choice in every head where it is legal, with that action's
// log-probability, through every way of acting (ActWindow, Act with an
// embedding, ActWindowBatch, a frozen copy); inside it, or without a
// guard, it takes its own choice.
func TestMetaGuardFallsBack(t *testing.T) {
	m, win, e := guardedMeta(t)
	heads := m.cfg.heads()
	state := randomState(newRNG(10), m.cfg.StateDim)
	own := JoinAction([]int{1, 1, 2}, heads)
	noZeroInHead1 := []bool{true, true, true, false, true, true, true, true, true}
	for _, tc := range []struct {
		name    string
		guard   *EmbedGuard
		mask    []bool
		want    int
		guarded bool
	}{
		{"no guard", nil, nil, own, false},
		{"inside", &EmbedGuard{Lo: shifted(e, -0.5), Hi: shifted(e, 0.5)}, nil, own, false},
		{"on the edge", &EmbedGuard{Lo: e, Hi: e}, nil, own, false},
		{"outside", &EmbedGuard{Lo: shifted(e, 0.5), Hi: shifted(e, 1)}, nil, 0, true},
		{"outside, fallback masked in one head", &EmbedGuard{Lo: shifted(e, -1), Hi: shifted(e, -0.5)}, noZeroInHead1, JoinAction([]int{0, 1, 0}, heads), true},
		{"outside, other fallback", &EmbedGuard{Lo: shifted(e, 0.5), Hi: shifted(e, 1), Fallback: JoinAction([]int{2, 0, 3}, heads)}, nil, JoinAction([]int{2, 0, 3}, heads), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.SetGuard(tc.guard); err != nil {
				t.Fatal(err)
			}
			frozen := m.Freeze()
			var ds []Decision
			d, err := m.ActWindow(state, win, tc.mask, true, nil)
			ds = append(ds, d)
			if err == nil {
				d, err = m.Act(state, e, tc.mask, true, nil)
				ds = append(ds, d)
			}
			if err == nil {
				var b []Decision
				b, err = m.ActWindowBatch([][]float64{state}, [][]Step{win}, [][]bool{tc.mask}, true, nil)
				ds = append(ds, b...)
			}
			if err == nil {
				var b []Decision
				b, err = frozen.ActBatch([][]float64{state}, [][]Step{win}, [][]bool{tc.mask}, true, nil)
				ds = append(ds, b...)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range ds {
				if d.Action != tc.want || d.Guarded != tc.guarded {
					t.Errorf("path %d: action %v guarded %v, want %v %v", i, SplitAction(d.Action, heads), d.Guarded, SplitAction(tc.want, heads), tc.guarded)
				}
				var lp float64
				off := 0
				for h, c := range SplitAction(d.Action, heads) {
					lp += math.Log(d.Probs[off+c])
					off += heads[h]
				}
				if math.Abs(d.LogProb-lp) > 1e-12 {
					t.Errorf("path %d: log-probability %v, the action's is %v", i, d.LogProb, lp)
				}
			}
		})
	}
}

// TestMetaGuardCheckpoint: the guard survives a checkpoint (a new learner
// from it, a learner restored from it, a frozen copy and its encoding),
// a checkpoint without one removes it, and a learner without a guard
// writes the checkpoint it wrote before guards existed (no "guard" key).
func TestMetaGuardCheckpoint(t *testing.T) {
	m, _, e := guardedMeta(t)
	plain, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte(`"guard"`)) {
		t.Error("a checkpoint without a guard mentions one")
	}
	g := &EmbedGuard{Lo: shifted(e, -1), Hi: shifted(e, 2), Fallback: 3}
	if err := m.SetGuard(g); err != nil {
		t.Fatal(err)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	same := func(name string, got *EmbedGuard) {
		t.Helper()
		if got == nil || !slices.Equal(got.Lo, g.Lo) || !slices.Equal(got.Hi, g.Hi) || got.Fallback != g.Fallback {
			t.Errorf("%s: guard %+v, want %+v", name, got, g)
		}
	}
	n, err := NewMetaPPOFromCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	same("new from checkpoint", n.Guard())
	same("its config", n.Config().Guard)
	r := mustMeta(t, factoredMetaConfig(5))
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	same("restored", r.Guard())
	fb, err := m.Freeze().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f, err := UnmarshalFrozen(fb)
	if err != nil {
		t.Fatal(err)
	}
	same("frozen, encoded", f.Config().Guard)
	f, err = FreezeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	same("frozen from the checkpoint", f.Config().Guard)
	if err := r.UnmarshalBinary(plain); err != nil || r.Guard() != nil {
		t.Errorf("a checkpoint without a guard left %+v (%v)", r.Guard(), err)
	}
	// The returned guard is a copy.
	n.Guard().Lo[0] = math.Inf(1)
	same("after changing a copy", n.Guard())
}

// TestMetaGuardValidate: a guard that does not fit the learner is refused
// and changes nothing.
func TestMetaGuardValidate(t *testing.T) {
	m, _, e := guardedMeta(t)
	lo, hi := shifted(e, -1), shifted(e, 1)
	for _, tc := range []struct {
		name string
		g    *EmbedGuard
	}{
		{"short", &EmbedGuard{Lo: lo[:1], Hi: hi[:1]}},
		{"reversed", &EmbedGuard{Lo: hi, Hi: lo}},
		{"NaN", &EmbedGuard{Lo: append([]float64{math.NaN()}, lo[1:]...), Hi: hi}},
		{"fallback too large", &EmbedGuard{Lo: lo, Hi: hi, Fallback: m.cfg.ActionCount()}},
		{"negative fallback", &EmbedGuard{Lo: lo, Hi: hi, Fallback: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.SetGuard(tc.g); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("SetGuard: %v, want ErrInvalidInput", err)
			}
			if m.Guard() != nil {
				t.Error("a refused guard was installed")
			}
			cfg := m.Config()
			cfg.Guard = tc.g
			if _, err := NewMetaPPO(cfg); err == nil {
				t.Error("NewMetaPPO accepted it")
			}
		})
	}
}

// TestNewEmbedGuard: the range is every embedding's, widened by the margin
// times its width; bad input is an error.
func TestNewEmbedGuard(t *testing.T) {
	g, err := NewEmbedGuard([][]float64{{0, 1}, {2, 1}, {1, 5}}, 0.5, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Lo, []float64{-1, -1}) || !slices.Equal(g.Hi, []float64{3, 7}) || g.Fallback != 7 {
		t.Errorf("guard %+v", g)
	}
	for _, tc := range []struct {
		name   string
		es     [][]float64
		margin float64
	}{
		{"none", nil, 0},
		{"ragged", [][]float64{{0, 1}, {2}}, 0},
		{"infinite", [][]float64{{math.Inf(1)}}, 0},
		{"negative margin", [][]float64{{0}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewEmbedGuard(tc.es, tc.margin, 0); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("err %v, want ErrInvalidInput", err)
			}
		})
	}
}

// TestEmbedGuardEllipse: embeddings along the diagonal give a box that
// holds the anti-diagonal corner, which the ellipsoid excludes; its radius
// holds EllipseQuantile of the embeddings; a checkpoint keeps it.
func TestEmbedGuardEllipse(t *testing.T) {
	rng := newRNG(4)
	var es [][]float64
	for range 1000 {
		x := rng.NormFloat64()
		es = append(es, []float64{x, x + 0.05*rng.NormFloat64()})
	}
	g, err := NewEmbedGuard(es, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	corner := []float64{g.Hi[0] * 0.9, g.Lo[1] * 0.9}
	onLine := []float64{0.5, 0.5}
	if !g.Contains(corner) || !g.Contains(onLine) {
		t.Fatal("the box does not hold its own corner and centre")
	}
	if err := g.AddEllipse(es, 0); err != nil {
		t.Fatal(err)
	}
	if g.Contains(corner) || !g.Contains(onLine) {
		t.Errorf("with the ellipsoid: corner inside %v (want false), diagonal point inside %v (want true)", g.Contains(corner), g.Contains(onLine))
	}
	inside := 0
	for _, e := range es {
		if g.Contains(e) {
			inside++
		}
	}
	if want := int(EllipseQuantile * float64(len(es))); inside < want || inside > want+1 {
		t.Errorf("%d of %d embeddings inside, want %d", inside, len(es), want)
	}
	cfg := factoredMetaConfig(5)
	cfg.EmbedDim = 2
	m := mustMeta(t, cfg)
	if err := m.SetGuard(g); err != nil {
		t.Fatal(err)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewMetaPPOFromCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Guard(); got.Radius != g.Radius || !slices.Equal(got.InvCov, g.InvCov) || !slices.Equal(got.Mean, g.Mean) {
		t.Errorf("the checkpoint's ellipsoid %+v, want %+v", got, g)
	}
	for _, bad := range []*EmbedGuard{
		{Lo: g.Lo, Hi: g.Hi, Radius: 1},
		{Lo: g.Lo, Hi: g.Hi, Mean: g.Mean, InvCov: g.InvCov, Radius: -1},
		{Lo: g.Lo, Hi: g.Hi, Mean: g.Mean, InvCov: g.InvCov[:3], Radius: 1},
		{Lo: g.Lo, Hi: g.Hi, Mean: []float64{math.NaN(), 0}, InvCov: g.InvCov, Radius: 1},
	} {
		if err := n.SetGuard(bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("SetGuard(%+v): %v, want ErrInvalidInput", bad, err)
		}
	}
}

// TestInvertSPD: A·A⁻¹ is the identity for a random symmetric positive
// definite A; a matrix that is not positive definite is an error.
func TestInvertSPD(t *testing.T) {
	rng := newRNG(6)
	const n = 5
	b := make([]float64, n*n)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	a := make([]float64, n*n)
	for i := range n {
		for j := range n {
			for k := range n {
				a[i*n+j] += b[i*n+k] * b[j*n+k]
			}
		}
		a[i*n+i] += 0.1
	}
	inv, err := invertSPD(a, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for j := range n {
			var s float64
			for k := range n {
				s += a[i*n+k] * inv[k*n+j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-9 {
				t.Errorf("(A·A⁻¹)[%d][%d] = %v", i, j, s)
			}
		}
	}
	if _, err := invertSPD([]float64{1, 2, 2, 1}, 2); err == nil {
		t.Error("an indefinite matrix was inverted")
	}
}
