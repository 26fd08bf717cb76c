package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func metaGradCheckConfig(minibatch int) MetaConfig {
	// Smaller than gradCheckConfig: every weight costs two graph runs, and
	// the unrolled GRU makes each run several times dearer.
	cfg := MetaConfig{Config: gradCheckConfig(), Window: 3, EmbedDim: 3}
	cfg.Hidden = []int{4}
	cfg.MinibatchSize = minibatch
	return cfg
}

func mustMeta(t testing.TB, cfg MetaConfig) *MetaPPO {
	t.Helper()
	m, err := NewMetaPPO(cfg)
	if err != nil {
		t.Fatalf("NewMetaPPO: %v", err)
	}
	return m
}

// randomWindow returns a window of n random steps.
func randomWindow(rng *rand.Rand, n, stateDim, numActions int) []Step {
	w := make([]Step, n)
	for i := range w {
		w[i] = Step{State: randomState(rng, stateDim), Action: rng.IntN(numActions), Reward: rng.NormFloat64()}
	}
	return w
}

// randomMetaBatch attaches windows of lengths 1, 2, …, Window+1, 0, 1, …
// (Window+1 is longer than the window and must be truncated) to a batch.
func randomMetaBatch(rng *rand.Rand, n int, cfg MetaConfig) []MetaTransition {
	plain := randomBatch(rng, n, cfg.StateDim, cfg.NumActions)
	out := make([]MetaTransition, n)
	for i, t := range plain {
		out[i] = MetaTransition{Transition: t, Window: randomWindow(rng, (i+1)%(cfg.Window+2), cfg.StateDim, cfg.NumActions)}
		if cfg.SignatureDim > 0 {
			for j := range out[i].Window {
				out[i].Window[j].Signature = randomState(rng, cfg.SignatureDim)
			}
			out[i].Signature = randomState(rng, cfg.SignatureDim)
		}
	}
	return out
}

// signatureCases are the encoder's step layouts the graph tests cover:
// without signatures, and with signature values between state and action.
var signatureCases = []struct {
	name string
	dim  int
}{{"no signature", 0}, {"signature", 2}}

// scaleWeights moves away from the near-uniform initialisation so that the
// comparisons have teeth (saturating gates, non-trivial embeddings).
func scaleWeights(ps []*param, k float64) {
	for _, q := range ps {
		for i := range q.data {
			q.data[i] = q.data[i]*k + 0.1
		}
	}
}

// metaFixture fills the meta graph with one minibatch (one padding row) and
// returns the batch and the plain-Go reference of each row's embedding,
// log-probability of the action and value.
func metaFixture(t *testing.T, m *MetaPPO, rng *rand.Rand) (batch []MetaTransition, emb []float64, logp, value []float64, oldLogp, adv, ret []float64) {
	t.Helper()
	cfg := m.cfg
	batch = randomMetaBatch(rng, cfg.MinibatchSize-1, cfg)
	rows := make([]int, len(batch))
	windows := make([][]Step, len(batch))
	for i := range batch {
		rows[i] = i
		windows[i] = batch[i].Window
	}
	emb = m.enc.forward(false, windows, cfg)
	for i, tr := range batch {
		in := slices.Concat(tr.State, emb[i*cfg.EmbedDim:(i+1)*cfg.EmbedDim])
		lp := make([]float64, cfg.NumActions)
		if err := maskedLogSoftmax(refMLP(m.ac.actor, in), tr.Mask, lp); err != nil {
			t.Fatal(err)
		}
		logp = append(logp, lp[tr.Action])
		value = append(value, refMLP(m.ac.critic, in)[0])
		oldLogp = append(oldLogp, lp[tr.Action]+rng.Float64()*0.3-0.15)
		adv = append(adv, rng.NormFloat64())
		ret = append(ret, rng.NormFloat64())
	}
	m.graph.fill(batch, rows, oldLogp, adv, ret, cfg)
	return
}

// TestMetaGraphMatchesForward: the GRU unrolled in Gorgonia (with padding
// masks) and the plain-Go encoder used by Embed compute the same embedding,
// and the graph's log-probabilities and values match the plain-Go
// actor-critic on [state, embedding].
func TestMetaGraphMatchesForward(t *testing.T) {
	for _, tc := range signatureCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := metaGradCheckConfig(9)
			cfg.SignatureDim = tc.dim
			testMetaGraphMatchesForward(t, mustMeta(t, cfg))
		})
	}
}

func testMetaGraphMatchesForward(t *testing.T, m *MetaPPO) {
	scaleWeights(m.all, 3)
	m.mu.Lock()
	m.publish()
	m.mu.Unlock()
	batch, emb, logp, value, _, _, _ := metaFixture(t, m, newRNG(4))
	if err := m.graph.m.run(); err != nil {
		t.Fatal(err)
	}
	gEmb, err := float64s(m.graph.embed)
	if err != nil {
		t.Fatal(err)
	}
	gLogp, err := float64s(m.graph.logp)
	if err != nil {
		t.Fatal(err)
	}
	gValue, err := float64s(m.graph.value)
	if err != nil {
		t.Fatal(err)
	}
	e := m.cfg.EmbedDim
	var saturated, nonzero int
	for i := range batch {
		for j := 0; j < e; j++ {
			if !closeTo(gEmb[i*e+j], emb[i*e+j], 1e-9) {
				t.Errorf("row %d (window %d): embedding[%d] graph %v, Go %v", i, len(batch[i].Window), j, gEmb[i*e+j], emb[i*e+j])
			}
			if emb[i*e+j] != 0 {
				nonzero++
			}
			if math.Abs(emb[i*e+j]) > 0.9 {
				saturated++
			}
		}
		if !closeTo(gLogp[i], logp[i], 1e-9) || !closeTo(gValue[i], value[i], 1e-9) {
			t.Errorf("row %d: graph logp %v value %v, Go %v %v", i, gLogp[i], gValue[i], logp[i], value[i])
		}
		// The public path (inference copies) agrees too.
		got, err := m.Embed(batch[i].Window)
		if err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if got[j] != emb[i*e+j] {
				t.Fatalf("Embed differs from the canonical forward: %v vs %v", got, emb[i*e:(i+1)*e])
			}
		}
		d, err := m.ActWindow(batch[i].State, batch[i].Window, batch[i].Mask, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !closeTo(d.Value, value[i], 1e-12) {
			t.Errorf("row %d: ActWindow value %v, want %v", i, d.Value, value[i])
		}
	}
	if nonzero == 0 || saturated == 0 {
		t.Fatalf("degenerate fixture: %d non-zero and %d saturated embedding entries", nonzero, saturated)
	}
	for i, tr := range batch {
		if len(tr.Window) == 0 {
			for j := 0; j < e; j++ {
				if emb[i*e+j] != 0 {
					t.Errorf("empty window embeds to %v, want zeros", emb[i*e:(i+1)*e])
				}
			}
		}
	}
	if m.cfg.SignatureDim == 0 {
		return
	}
	// The signature is read: changing one step's signature moves the
	// embedding.
	w := slices.Clone(batch[1].Window)
	before, err := m.Embed(w)
	if err != nil {
		t.Fatal(err)
	}
	w[len(w)-1].Signature = []float64{w[len(w)-1].Signature[0] + 1, w[len(w)-1].Signature[1]}
	after, err := m.Embed(w)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(before, after) {
		t.Errorf("a different signature embeds to the same %v", before)
	}
}

// TestMetaGradientCheck compares the graph's gradient of the full meta-PPO
// loss with central finite differences for every weight, the GRU's
// included.
func TestMetaGradientCheck(t *testing.T) {
	for _, mb := range []int{2, 5} {
		t.Run(fmt.Sprintf("minibatch=%d", mb), func(t *testing.T) {
			m := mustMeta(t, metaGradCheckConfig(mb))
			gradCheckFixture(t, m)
		})
	}
	t.Run("signature", func(t *testing.T) {
		cfg := metaGradCheckConfig(3)
		cfg.SignatureDim = 2
		gradCheckFixture(t, mustMeta(t, cfg))
	})
}

func gradCheckFixture(t *testing.T, m *MetaPPO) {
	t.Helper()
	scaleWeights(m.all, 2)
	metaFixture(t, m, newRNG(8))
	run := func() (float64, [][]float64) { return runGraph(t, &m.graph.m, m.graph.total, m.graph.grads) }
	if _, grads := run(); absSum(grads[len(m.ac.all):]) == 0 {
		t.Fatal("the loss does not depend on the encoder")
	}
	gradCheck(t, m.all, run)
}

func TestMetaCheckpoint(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 5), Window: 4, EmbedDim: 4}
	a := mustMeta(t, cfg)
	if _, err := a.Update(randomMetaBatch(newRNG(1), 50, cfg)); err != nil {
		t.Fatal(err)
	}
	data := mustMarshalMeta(t, a)
	b, err := NewMetaPPOFromCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	requireSameBytes(t, "re-marshalled checkpoint", data, mustMarshalMeta(t, b))
	other := cfg
	other.Seed = 99
	c := mustMeta(t, other)
	if err := c.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	w := randomWindow(newRNG(2), 3, 3, 4)
	s := []float64{0.1, 0.2, 0.3}
	da, _ := a.ActWindow(s, w, nil, true, nil)
	dc, _ := c.ActWindow(s, w, nil, true, nil)
	if !slices.Equal(da.Probs, dc.Probs) || da.Value != dc.Value {
		t.Fatalf("restored learner acts differently: %v %v vs %v %v", da.Probs, da.Value, dc.Probs, dc.Value)
	}
	// Training continues identically.
	batch := randomMetaBatch(newRNG(3), 40, cfg)
	if _, err := a.Update(batch); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(batch); err != nil {
		t.Fatal(err)
	}
	requireSameBytes(t, "checkpoints after identical training", mustMarshalMeta(t, a), mustMarshalMeta(t, b))

	t.Run("errors", func(t *testing.T) {
		flipped := slices.Clone(data)
		flipped[len(flipped)/2] ^= 1
		if _, err := NewMetaPPOFromCheckpoint(flipped); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Errorf("flipped byte: err = %v, want ErrCorruptCheckpoint", err)
		}
		if _, err := NewMetaPPOFromCheckpoint(data[:len(data)-9]); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Errorf("truncated: err = %v, want ErrCorruptCheckpoint", err)
		}
		ppoData := mustMarshal(t, mustPPO(t, smallConfig(3, 4, 1)))
		if _, err := NewMetaPPOFromCheckpoint(ppoData); !errors.Is(err, ErrIncompatibleCheckpoint) {
			t.Errorf("PPO checkpoint: err = %v, want ErrIncompatibleCheckpoint", err)
		}
		if _, err := NewPPOFromCheckpoint(data); !errors.Is(err, ErrIncompatibleCheckpoint) {
			t.Errorf("meta checkpoint into PPO: err = %v, want ErrIncompatibleCheckpoint", err)
		}
		wider := cfg
		wider.Window = 5
		before := mustMarshalMeta(t, c)
		if err := mustMeta(t, wider).UnmarshalBinary(data); !errors.Is(err, ErrIncompatibleCheckpoint) {
			t.Errorf("other window: err = %v, want ErrIncompatibleCheckpoint", err)
		}
		if err := c.UnmarshalBinary(flipped); err == nil {
			t.Error("corrupt checkpoint accepted")
		}
		requireSameBytes(t, "learner after a failed restore", before, mustMarshalMeta(t, c))
	})
}

func TestMetaDeterminism(t *testing.T) {
	run := func(seed uint64) []byte {
		cfg := MetaConfig{Config: smallConfig(3, 4, seed), Window: 4, EmbedDim: 4}
		m := mustMeta(t, cfg)
		for i := range 2 {
			if _, err := m.Update(randomMetaBatch(newRNG(uint64(i)), 45, cfg)); err != nil {
				t.Fatal(err)
			}
		}
		return mustMarshalMeta(t, m)
	}
	a, b := run(7), run(7)
	requireSameBytes(t, "two runs with the same seed", a, b)
	if string(a) == string(run(8)) {
		t.Fatal("different seeds gave identical weights")
	}
}

func TestMetaRejectsBadInput(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 1), Window: 4, EmbedDim: 2}
	m := mustMeta(t, cfg)
	good := randomMetaBatch(newRNG(1), 10, cfg)
	before := mustMarshalMeta(t, m)
	cases := []struct {
		name   string
		mutate func(b []MetaTransition)
		want   []error
	}{
		{"NaN reward in window", func(b []MetaTransition) { b[3].Window = []Step{{State: []float64{0, 0, 0}, Reward: math.NaN()}} }, []error{ErrInvalidInput, ErrNonFinite}},
		{"Inf state in window", func(b []MetaTransition) {
			b[2].Window = []Step{{State: []float64{0, math.Inf(1), 0}}}
		}, []error{ErrInvalidInput, ErrNonFinite}},
		{"window action out of range", func(b []MetaTransition) { b[2].Window = []Step{{State: []float64{0, 0, 0}, Action: 4}} }, []error{ErrInvalidInput}},
		{"short window state", func(b []MetaTransition) { b[1].Window = []Step{{State: []float64{0, 0}}} }, []error{ErrInvalidInput}},
		{"NaN state", func(b []MetaTransition) { b[0].State = []float64{math.NaN(), 0, 0} }, []error{ErrInvalidInput, ErrNonFinite}},
		{"masked action", func(b []MetaTransition) {
			b[0].Mask = []bool{true, true, true, true}
			b[0].Mask[b[0].Action] = false
		}, []error{ErrInvalidInput}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(good)
			tc.mutate(b)
			requireRefused(t, m, b, tc.want, tc.name != "NaN state" && tc.name != "masked action")
		})
	}
	requireSameBytes(t, "learner after rejected updates", before, mustMarshalMeta(t, m))
	if _, err := m.Act([]float64{0, 0, 0}, []float64{0, math.NaN()}, nil, true, nil); !errors.Is(err, ErrNonFinite) {
		t.Errorf("NaN embedding: err = %v", err)
	}
	if _, err := m.Act([]float64{0, 0, 0}, []float64{0}, nil, true, nil); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("short embedding: err = %v", err)
	}
	if _, err := m.ActWindow([]float64{0, 0, 0}, nil, []bool{false, false, false, false}, true, nil); !errors.Is(err, ErrAllActionsMasked) {
		t.Errorf("all masked: err = %v", err)
	}
	if _, err := m.ActBatch([][]float64{{0, 0, 0}}, nil, nil, true, nil); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("missing embeddings: err = %v", err)
	}
	bad := cfg
	bad.Window = 0
	if _, err := NewMetaPPO(bad); err == nil {
		t.Error("window 0 accepted")
	}
	bad = cfg
	bad.SignatureDim = -1
	if _, err := NewMetaPPO(bad); err == nil {
		t.Error("signatureDim -1 accepted")
	}
}

// requireRefused: Update refuses b with every error of want, and EmbedBatch
// refuses b's windows exactly when badWindow.
func requireRefused(t *testing.T, m *MetaPPO, b []MetaTransition, want []error, badWindow bool) {
	t.Helper()
	_, err := m.Update(b)
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("Update: err = %v, want %v", err, w)
		}
	}
	var windows [][]Step
	for _, tr := range b {
		windows = append(windows, tr.Window)
	}
	if _, err := m.EmbedBatch(windows); badWindow != errors.Is(err, ErrInvalidInput) {
		t.Errorf("EmbedBatch: err = %v, want ErrInvalidInput: %v", err, badWindow)
	}
}

// TestMetaRejectsBadSignature: with signatures, a step or transition whose
// signature is missing, short or not finite is refused and trains nothing.
func TestMetaRejectsBadSignature(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 1), Window: 4, EmbedDim: 2, SignatureDim: 2}
	m := mustMeta(t, cfg)
	good := randomMetaBatch(newRNG(1), 10, cfg)
	before := mustMarshalMeta(t, m)
	cases := []struct {
		name   string
		mutate func(b []MetaTransition)
		want   []error
		window bool // the window itself is bad (Embed refuses it too)
	}{
		{"missing in window", func(b []MetaTransition) { b[3].Window = []Step{{State: []float64{0, 0, 0}}} }, []error{ErrInvalidInput}, true},
		{"short in window", func(b []MetaTransition) { b[3].Window = []Step{{State: []float64{0, 0, 0}, Signature: []float64{1}}} }, []error{ErrInvalidInput}, true},
		{"NaN in window", func(b []MetaTransition) {
			b[2].Window = []Step{{State: []float64{0, 0, 0}, Signature: []float64{math.NaN(), 0}}}
		}, []error{ErrInvalidInput, ErrNonFinite}, true},
		{"missing on the transition", func(b []MetaTransition) { b[0].Signature = nil }, []error{ErrInvalidInput}, false},
		{"Inf on the transition", func(b []MetaTransition) { b[0].Signature = []float64{0, math.Inf(-1)} }, []error{ErrInvalidInput, ErrNonFinite}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(good)
			tc.mutate(b)
			requireRefused(t, m, b, tc.want, tc.window)
		})
	}
	requireSameBytes(t, "learner after rejected updates", before, mustMarshalMeta(t, m))
	if _, err := m.Update(good); err != nil {
		t.Errorf("good batch: %v", err)
	}
}

func TestMetaDivergedUpdateRollsBack(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 3), Window: 4, EmbedDim: 3}
	m := mustMeta(t, cfg)
	before := mustMarshalMeta(t, m)
	w := randomWindow(newRNG(1), 4, 3, 4)
	e0, err := m.Embed(w)
	if err != nil {
		t.Fatal(err)
	}
	batch := randomMetaBatch(newRNG(2), 40, cfg)
	for i := range batch {
		batch[i].Reward = 1e300
	}
	if _, err := m.Update(batch); !errors.Is(err, ErrDiverged) {
		t.Fatalf("err = %v, want ErrDiverged", err)
	}
	requireSameBytes(t, "checkpoints before and after the diverged update", before, mustMarshalMeta(t, m))
	e1, err := m.Embed(w)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e0, e1) {
		t.Fatalf("embedding changed after rollback: %v vs %v", e0, e1)
	}
	if _, err := m.Update(randomMetaBatch(newRNG(3), 40, cfg)); err != nil {
		t.Fatalf("learner unusable after rollback: %v", err)
	}
}

// TestMetaUpdateLeavesWindowsAlone: Update appends each transition's own
// step to its window for the next-state embedding; that must never write
// into the caller's arrays (consecutive transitions usually share one).
func TestMetaUpdateLeavesWindowsAlone(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 3), Window: 4, EmbedDim: 3}
	m := mustMeta(t, cfg)
	traj := randomWindow(newRNG(1), 6, 3, 4)
	shared := make([]Step, 3, 10) // spare capacity invites an in-place append
	copy(shared, traj)
	sentinel := traj[5]
	shared = append(shared[:3], sentinel)[:3]
	batch := []MetaTransition{{Transition: Transition{State: traj[3].State, Action: 1, Reward: 0.5, NextState: traj[4].State}, Window: shared}}
	if _, err := m.Update(batch); err != nil {
		t.Fatal(err)
	}
	if got := shared[:4][3]; got.Action != sentinel.Action || got.Reward != sentinel.Reward {
		t.Fatalf("caller's backing array was overwritten: %+v", got)
	}
}

func mustMarshalMeta(t testing.TB, m *MetaPPO) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

// TestMetaConcurrentUse exercises embedding and acting during training
// under the race detector.
func TestMetaConcurrentUse(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 1), Window: 4, EmbedDim: 3}
	m := mustMeta(t, cfg)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRNG(uint64(g))
			for range 50 {
				w := randomWindow(rng, 3, 3, 4)
				e, err := m.Embed(w)
				if err == nil {
					_, err = m.Act(randomState(rng, 3), e, nil, false, rng)
				}
				if err == nil {
					_, err = m.ActWindow(randomState(rng, 3), w, nil, true, nil)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 2 {
			if _, err := m.Update(randomMetaBatch(newRNG(uint64(i)), 40, cfg)); err != nil {
				errs <- err
				return
			}
			if _, err := m.MarshalBinary(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
