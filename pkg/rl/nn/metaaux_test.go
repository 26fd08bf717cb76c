package nn

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMetaAuxConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dim       int
		weight    float64
		wantError string
	}{
		{name: "no head", dim: 0, weight: 0},
		{name: "head", dim: 4, weight: 0.5},
		{name: "head trained with weight 0", dim: 4, weight: 0},
		{name: "negative dimension", dim: -1, wantError: "auxDim must be in"},
		{name: "weight without a head", dim: 0, weight: 1, wantError: "auxWeight must be"},
		{name: "negative weight", dim: 2, weight: -1, wantError: "auxWeight must be"},
		{name: "NaN weight", dim: 2, weight: math.NaN(), wantError: "auxWeight must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := MetaConfig{Config: smallConfig(3, 4, 1), Window: 3, EmbedDim: 3, AuxDim: tc.dim, AuxWeight: tc.weight}
			err := cfg.Validate()
			if tc.wantError == "" && err != nil || tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantError)
			}
		})
	}
}

// TestMetaAuxGradientCheck: with auxiliary targets, the graph's gradient
// of PPO loss plus auxiliary loss matches finite differences for every
// weight, the head's and the encoder's included.
func TestMetaAuxGradientCheck(t *testing.T) {
	cfg := metaGradCheckConfig(3)
	cfg.AuxDim, cfg.AuxWeight = 2, 0.7
	m := mustMeta(t, cfg)
	scaleWeights(m.all, 2)
	metaFixture(t, m, newRNG(8))
	rng := newRNG(9)
	for i := range m.graph.auxTarget {
		m.graph.auxTarget[i] = rng.NormFloat64()
	}
	// Two rows of three carry a target (the third is the fixture's padding).
	for i := range 2 * cfg.AuxDim {
		m.graph.auxMask[i] = 1 / float64(2*cfg.AuxDim)
	}
	run := func() (float64, [][]float64) { return runGraph(t, &m.graph.m, m.graph.total, m.graph.grads) }
	if _, grads := run(); absSum(grads[len(m.all)-2:]) == 0 {
		t.Fatal("the loss does not depend on the auxiliary head")
	}
	gradCheck(t, m.all, run)
}

// auxTask is a workload whose identity shows only in its rewards, with a
// hidden parameter the head must learn to read from the embedding.
func auxBatch(rng *rand.Rand, cfg MetaConfig, n int) []MetaTransition {
	out := make([]MetaTransition, n)
	for i := range out {
		hidden := float64(rng.IntN(2))*2 - 1 // -1 or +1
		w := make([]Step, cfg.Window)
		for j := range w {
			w[j] = Step{State: []float64{1, 0, 0}, Action: rng.IntN(cfg.NumActions), Reward: hidden + 0.1*rng.NormFloat64()}
		}
		out[i] = MetaTransition{
			Transition: Transition{State: []float64{1, 0, 0}, Action: rng.IntN(cfg.NumActions), Reward: 0, Done: true},
			Window:     w,
			Aux:        []float64{hidden},
		}
	}
	return out
}

// TestMetaAuxLearns: updates with auxiliary targets teach the head to read
// a hidden parameter from the embedding; without targets (Aux nil) the head
// does not move.
func TestMetaAuxLearns(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 3), Window: 4, EmbedDim: 4, AuxDim: 1, AuxWeight: 1}
	mse := func(m *MetaPPO, batch []MetaTransition) float64 {
		ws := make([][]Step, len(batch))
		for i, b := range batch {
			ws[i] = b.Window
		}
		ps, err := m.PredictAux(ws)
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for i, p := range ps {
			s += (p[0] - batch[i].Aux[0]) * (p[0] - batch[i].Aux[0])
		}
		return s / float64(len(ps))
	}
	test := auxBatch(newRNG(100), cfg, 64)

	m := mustMeta(t, cfg)
	before := mse(m, test)
	rng := newRNG(5)
	for range 60 {
		if _, err := m.Update(auxBatch(rng, cfg, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if after := mse(m, test); after > before/4 || after > 0.25 {
		t.Errorf("auxiliary error %.3f before training, %.3f after: not learnt", before, after)
	}

	t.Run("no targets, no auxiliary gradient", func(t *testing.T) {
		m := mustMeta(t, cfg)
		w0 := append([]float64(nil), m.aux.w.data...)
		batch := auxBatch(newRNG(6), cfg, 32)
		for i := range batch {
			batch[i].Aux = nil
		}
		if _, err := m.Update(batch); err != nil {
			t.Fatal(err)
		}
		for i := range w0 {
			if m.aux.w.data[i] != w0[i] {
				t.Fatalf("head weight %d moved from %v to %v without targets", i, w0[i], m.aux.w.data[i])
			}
		}
	})
}

func TestMetaAuxCheckpointAndInput(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 4, 3), Window: 4, EmbedDim: 4, AuxDim: 1, AuxWeight: 1}
	m := mustMeta(t, cfg)
	if _, err := m.Update(auxBatch(newRNG(1), cfg, 32)); err != nil {
		t.Fatal(err)
	}
	data := mustMarshalMeta(t, m)
	back, err := NewMetaPPOFromCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	requireSameBytes(t, "re-marshalled checkpoint", data, mustMarshalMeta(t, back))
	w := [][]Step{auxBatch(newRNG(2), cfg, 1)[0].Window}
	p0, err0 := m.PredictAux(w)
	p1, err1 := back.PredictAux(w)
	if err0 != nil || err1 != nil || p0[0][0] != p1[0][0] {
		t.Errorf("restored head predicts %v (%v), original %v (%v)", p1, err1, p0, err0)
	}
	plain := cfg
	plain.AuxDim, plain.AuxWeight = 0, 0
	if err := mustMeta(t, plain).UnmarshalBinary(data); !errors.Is(err, ErrIncompatibleCheckpoint) {
		t.Errorf("a checkpoint with a head into a learner without: %v, want ErrIncompatibleCheckpoint", err)
	}
	if _, err := mustMeta(t, plain).PredictAux(w); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("PredictAux without a head: %v, want ErrInvalidInput", err)
	}
	// Freezing drops the head: a frozen policy only acts.
	if got := m.Freeze().Config(); got.AuxDim != 0 || got.AuxWeight != 0 {
		t.Errorf("frozen config %+v keeps the head", got)
	}
	for _, tc := range []struct {
		name string
		aux  []float64
		want string
	}{
		{name: "too many values", aux: []float64{1, 2}, want: "aux has 2 values"},
		{name: "NaN", aux: []float64{math.NaN()}, want: "aux [NaN]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := auxBatch(newRNG(3), cfg, 4)
			batch[2].Aux = tc.aux
			if _, err := m.Update(batch); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Update: %v, want ErrInvalidInput containing %q", err, tc.want)
			}
		})
	}
}
