package nn

import (
	"math"
	"sync"
	"testing"
)

// TestForwardIndependentOfScratch holds the pooled forward pass to give
// bit-identical answers whatever the pool holds: after batches of other
// sizes have left garbage in the scratch buffers, from concurrent callers,
// and with short state rows zero-padded as flatten pads them.
func TestForwardIndependentOfScratch(t *testing.T) {
	cfg := smallConfig(7, 5, 3)
	cfg.Hidden = []int{16, 9, 12} // odd widths and three layers: both halves are reused
	p := mustPPO(t, cfg)
	rng := newRNG(9)
	batch := func(n int) [][]float64 {
		s := make([][]float64, n)
		for i := range s {
			s[i] = randomState(rng, cfg.StateDim)
		}
		return s
	}
	states := batch(13)
	wantLogits, wantValues := actorCriticForward(p.ps, true, states, cfg.StateDim)

	same := func(t *testing.T, logits, values []float64) {
		t.Helper()
		if len(logits) != len(wantLogits) || len(values) != len(wantValues) {
			t.Fatalf("got %d logits and %d values, want %d and %d", len(logits), len(values), len(wantLogits), len(wantValues))
		}
		for i := range wantLogits {
			if math.Float64bits(logits[i]) != math.Float64bits(wantLogits[i]) {
				t.Fatalf("logit %d = %v, want %v", i, logits[i], wantLogits[i])
			}
		}
		for i := range wantValues {
			if math.Float64bits(values[i]) != math.Float64bits(wantValues[i]) {
				t.Fatalf("value %d = %v, want %v", i, values[i], wantValues[i])
			}
		}
	}

	t.Run("after larger and smaller batches", func(t *testing.T) {
		for _, n := range []int{200, 1, 40} {
			actorCriticForward(p.ps, true, batch(n), cfg.StateDim)
		}
		logits, values := actorCriticForward(p.ps, true, states, cfg.StateDim)
		same(t, logits, values)
	})
	t.Run("concurrent callers", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make([][2][]float64, 8)
		for g := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					l, v := actorCriticForward(p.ps, true, states, cfg.StateDim)
					results[g] = [2][]float64{l, v}
				}
			}()
		}
		wg.Wait()
		for _, r := range results {
			same(t, r[0], r[1])
		}
	})
	t.Run("short rows are zero-padded", func(t *testing.T) {
		actorCriticForward(p.ps, true, batch(50), cfg.StateDim) // dirty the pool
		short := [][]float64{states[0][:3]}
		padded := [][]float64{append(append([]float64(nil), states[0][:3]...), make([]float64, cfg.StateDim-3)...)}
		gl, gv := actorCriticForward(p.ps, true, short, cfg.StateDim)
		wl, wv := actorCriticForward(p.ps, true, padded, cfg.StateDim)
		for i := range wl {
			if math.Float64bits(gl[i]) != math.Float64bits(wl[i]) {
				t.Fatalf("logit %d = %v for a short row, %v padded", i, gl[i], wl[i])
			}
		}
		if math.Float64bits(gv[0]) != math.Float64bits(wv[0]) {
			t.Fatalf("value %v for a short row, %v padded", gv[0], wv[0])
		}
	})
	t.Run("output is not scratch", func(t *testing.T) {
		logits, values := actorCriticForward(p.ps, true, states, cfg.StateDim)
		actorCriticForward(p.ps, true, batch(100), cfg.StateDim)
		same(t, logits, values)
	})
}
