package nn

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

// TestMetaActWindowBatchMatchesActWindow: every row of a batched act is
// bit-identical to ActWindow on that row alone, greedy and sampled (with the
// generator advanced row by row), with masks and with windows that are
// empty, shorter than, equal to and longer than Window. The batch sizes
// include one above the BLAS block size (64) and one above the server's
// default MaxBatch (256).
func TestMetaActWindowBatchMatchesActWindow(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(6, 5, 3), Window: 4, EmbedDim: 3}
	m := mustMeta(t, cfg)
	// Saturating gates and a non-uniform actor give the comparison teeth.
	scaleWeights(m.all, 3)
	m.publish()
	for _, tc := range []struct {
		name   string
		n      int
		greedy bool
		masked bool
	}{
		{"one greedy", 1, true, false},
		{"small sampled", 7, false, true},
		{"above block size sampled", 70, false, false},
		{"above max batch greedy", 300, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := newRNG(uint64(tc.n))
			states := make([][]float64, tc.n)
			windows := make([][]Step, tc.n)
			var masks [][]bool
			if tc.masked {
				masks = make([][]bool, tc.n)
			}
			for i := range states {
				states[i] = randomState(rng, cfg.StateDim)
				windows[i] = randomWindow(rng, i%(cfg.Window+3), cfg.StateDim, cfg.NumActions)
				if tc.masked {
					masks[i] = make([]bool, cfg.NumActions)
					for j := range masks[i] {
						masks[i][j] = rng.IntN(3) != 0
					}
					masks[i][rng.IntN(cfg.NumActions)] = true
				}
			}
			batchRNG, singleRNG := newRNG(99), newRNG(99)
			got, err := m.ActWindowBatch(states, windows, masks, tc.greedy, batchRNG)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n {
				t.Fatalf("%d decisions for %d states", len(got), tc.n)
			}
			distinct := map[uint64]bool{}
			for i := range states {
				var mask []bool
				if tc.masked {
					mask = masks[i]
				}
				want, err := m.ActWindow(states[i], windows[i], mask, tc.greedy, singleRNG)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got[i], want) || math.Float64bits(got[i].Value) != math.Float64bits(want.Value) {
					t.Fatalf("row %d: batched %+v, single %+v", i, got[i], want)
				}
				distinct[math.Float64bits(want.Value)] = true
			}
			// Different windows must give different values, or the
			// comparison would not show that each row used its own window.
			if tc.n > 1 && len(distinct) < 2 {
				t.Fatalf("all %d rows have the same value", tc.n)
			}
		})
	}
}

func TestMetaActWindowBatchRejectsBadInput(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(3, 2, 1), Window: 2, EmbedDim: 2}
	m := mustMeta(t, cfg)
	good := []float64{0, 0, 0}
	step := Step{State: good, Action: 1, Reward: 0.5}
	for _, tc := range []struct {
		name    string
		states  [][]float64
		windows [][]Step
		masks   [][]bool
		greedy  bool
	}{
		{"fewer windows than states", [][]float64{good, good}, [][]Step{nil}, nil, true},
		{"fewer masks than states", [][]float64{good}, [][]Step{nil}, [][]bool{}, true},
		{"short state", [][]float64{{0, 0}}, [][]Step{nil}, nil, true},
		{"window step of the wrong length", [][]float64{good}, [][]Step{{step, {State: []float64{0}}}}, nil, true},
		{"window action out of range", [][]float64{good}, [][]Step{{{State: good, Action: 2}}}, nil, true},
		{"non-finite window reward", [][]float64{good}, [][]Step{{{State: good, Reward: math.NaN()}}}, nil, true},
		{"sampling without a generator", [][]float64{good}, [][]Step{{step}}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.ActWindowBatch(tc.states, tc.windows, tc.masks, tc.greedy, nil)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("got %v, want ErrInvalidInput", err)
			}
		})
	}
	if ds, err := m.ActWindowBatch(nil, nil, nil, true, nil); err != nil || ds != nil {
		t.Fatalf("empty batch: %v, %v", ds, err)
	}
}
