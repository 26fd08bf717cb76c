package nn

import (
	"errors"
	"math"
	"sync"
	"testing"
)

// biasedPolicy returns a learner cloned to strongly prefer action 0, so that
// masking action 0 is a real test rather than a formality.
func biasedPolicy(t *testing.T) *PPO {
	t.Helper()
	cfg := smallConfig(3, 4, 21)
	cfg.LearningRate = 1e-2
	p := mustPPO(t, cfg)
	rng := newRNG(21)
	demos := make([]Demonstration, 64)
	for i := range demos {
		demos[i] = Demonstration{State: randomState(rng, 3), Action: 0}
	}
	for range 10 {
		if _, err := p.BehaviourClone(demos); err != nil {
			t.Fatal(err)
		}
	}
	d, err := p.Act([]float64{0, 0, 0}, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Probs[0] < 0.9 {
		t.Fatalf("setup: p(action 0) = %v, want a strong preference", d.Probs[0])
	}
	return p
}

func TestMaskedActionsAreNeverChosen(t *testing.T) {
	p := biasedPolicy(t)
	cases := []struct {
		name string
		mask []bool
	}{
		{"preferred action masked", []bool{false, true, true, true}},
		{"only one legal action", []bool{false, false, true, false}},
		{"two legal actions", []bool{false, true, false, true}},
	}
	rng := newRNG(1)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			counts := make([]int, 4)
			for i := 0; i < 500; i++ {
				s := randomState(rng, 3)
				d, err := p.Act(s, tc.mask, false, rng)
				if err != nil {
					t.Fatal(err)
				}
				counts[d.Action]++
				var sum float64
				for a, pr := range d.Probs {
					if !tc.mask[a] && pr != 0 {
						t.Fatalf("masked action %d has probability %v", a, pr)
					}
					sum += pr
				}
				if !closeTo(sum, 1, 1e-12) {
					t.Fatalf("probabilities sum to %v", sum)
				}
				if math.IsInf(d.LogProb, 0) || !closeTo(math.Exp(d.LogProb), d.Probs[d.Action], 1e-12) {
					t.Fatalf("LogProb %v does not match p=%v", d.LogProb, d.Probs[d.Action])
				}
				g, err := p.Act(s, tc.mask, true, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.mask[g.Action] {
					t.Fatalf("greedy chose masked action %d", g.Action)
				}
			}
			for a, c := range counts {
				if !tc.mask[a] && c != 0 {
					t.Errorf("masked action %d sampled %d times", a, c)
				}
			}
			masks := make([][]bool, 20)
			states := make([][]float64, 20)
			for i := range masks {
				masks[i], states[i] = tc.mask, randomState(rng, 3)
			}
			ds, err := p.ActBatch(states, masks, false, rng)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range ds {
				if !tc.mask[d.Action] {
					t.Errorf("ActBatch row %d chose masked action %d", i, d.Action)
				}
			}
		})
	}
}

func TestActBatchEmpty(t *testing.T) {
	p := mustPPO(t, smallConfig(3, 4, 1))
	ds, err := p.ActBatch(nil, nil, true, nil)
	if err != nil || len(ds) != 0 {
		t.Fatalf("ActBatch(nil) = %v, %v; want no decisions and no error", ds, err)
	}
}

func TestSamplingFollowsProbabilities(t *testing.T) {
	p := biasedPolicy(t)
	rng := newRNG(2)
	s := []float64{0.1, -0.2, 0.3}
	mask := []bool{false, true, true, true}
	d0, err := p.Act(s, mask, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	counts := make([]float64, 4)
	for range n {
		d, err := p.Act(s, mask, false, rng)
		if err != nil {
			t.Fatal(err)
		}
		counts[d.Action]++
	}
	for a := range counts {
		// 5 standard deviations of a binomial proportion.
		tol := 5*math.Sqrt(d0.Probs[a]*(1-d0.Probs[a])/n) + 1e-9
		if got := counts[a] / n; math.Abs(got-d0.Probs[a]) > tol {
			t.Errorf("action %d sampled %.4f of the time, probability %.4f", a, got, d0.Probs[a])
		}
	}
}

func TestActRejectsBadInput(t *testing.T) {
	p := mustPPO(t, smallConfig(3, 4, 1))
	rng := newRNG(1)
	cases := []struct {
		name   string
		state  []float64
		mask   []bool
		greedy bool
		noRNG  bool
		want   []error
	}{
		{"NaN state", []float64{0, math.NaN(), 0}, nil, true, false, []error{ErrInvalidInput, ErrNonFinite}},
		{"Inf state", []float64{math.Inf(-1), 0, 0}, nil, false, false, []error{ErrInvalidInput, ErrNonFinite}},
		{"short state", []float64{0, 0}, nil, true, false, []error{ErrInvalidInput}},
		{"nil state", nil, nil, true, false, []error{ErrInvalidInput}},
		{"mask of wrong length", []float64{0, 0, 0}, []bool{true, true}, true, false, []error{ErrInvalidInput}},
		{"all actions masked", []float64{0, 0, 0}, []bool{false, false, false, false}, false, false, []error{ErrInvalidInput, ErrAllActionsMasked}},
		{"sampling without rng", []float64{0, 0, 0}, nil, false, true, []error{ErrInvalidInput}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rng
			if tc.noRNG {
				r = nil
			}
			_, err := p.Act(tc.state, tc.mask, tc.greedy, r)
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("Act: err = %v, want %v", err, want)
				}
			}
			var masks [][]bool
			if tc.mask != nil {
				masks = [][]bool{nil, tc.mask}
			}
			_, err = p.ActBatch([][]float64{{0, 0, 0}, tc.state}, masks, tc.greedy, r)
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("ActBatch: err = %v, want %v", err, want)
				}
			}
		})
	}
}

// TestUpdateRejectsBadInput checks that bad experience is an error and leaves
// the learner bit-for-bit unchanged.
func TestUpdateRejectsBadInput(t *testing.T) {
	cfg := smallConfig(3, 4, 1)
	p := mustPPO(t, cfg)
	before := mustMarshal(t, p)
	good := func() []Transition { return randomBatch(newRNG(4), 10, 3, 4) }
	cases := []struct {
		name   string
		mutate func([]Transition) []Transition
		want   []error
	}{
		{"empty batch", func([]Transition) []Transition { return nil }, []error{ErrInvalidInput}},
		{"NaN reward", func(b []Transition) []Transition { b[3].Reward = math.NaN(); return b }, []error{ErrInvalidInput, ErrNonFinite}},
		{"Inf reward", func(b []Transition) []Transition { b[0].Reward = math.Inf(1); return b }, []error{ErrInvalidInput, ErrNonFinite}},
		{"NaN state", func(b []Transition) []Transition { b[5].State = []float64{0, math.NaN(), 0}; return b }, []error{ErrInvalidInput, ErrNonFinite}},
		{"NaN next state", func(b []Transition) []Transition {
			b[0].Done = false
			b[0].NextState = []float64{math.NaN(), 0, 0}
			return b
		}, []error{ErrInvalidInput, ErrNonFinite}},
		{"missing next state", func(b []Transition) []Transition { b[0].Done = false; b[0].NextState = nil; return b }, []error{ErrInvalidInput}},
		{"action out of range", func(b []Transition) []Transition { b[2].Action = 4; return b }, []error{ErrInvalidInput}},
		{"negative action", func(b []Transition) []Transition { b[2].Action = -1; return b }, []error{ErrInvalidInput}},
		{"masked action taken", func(b []Transition) []Transition {
			b[1].Mask = []bool{true, true, true, true}
			b[1].Mask[b[1].Action] = false
			return b
		}, []error{ErrInvalidInput}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Update(tc.mutate(good()))
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want %v", err, want)
				}
			}
			requireSameBytes(t, "checkpoints before and after the rejected update", before, mustMarshal(t, p))
		})
	}
	t.Run("behaviour cloning", func(t *testing.T) {
		bad := []Demonstration{
			{State: []float64{0, 0, math.NaN()}, Action: 0},
		}
		if _, err := p.BehaviourClone(bad); !errors.Is(err, ErrNonFinite) {
			t.Errorf("NaN state: err = %v, want ErrNonFinite", err)
		}
		masked := []Demonstration{{State: []float64{0, 0, 0}, Mask: []bool{false, true, true, true}, Action: 0}}
		if _, err := p.BehaviourClone(masked); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("masked teacher action: err = %v, want ErrInvalidInput", err)
		}
		if _, err := p.BehaviourClone(nil); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("empty batch: err = %v, want ErrInvalidInput", err)
		}
		requireSameBytes(t, "checkpoints before and after rejected cloning", before, mustMarshal(t, p))
	})
}

// TestUpdateRollsBackOnDivergence feeds finite rewards so large that the
// value loss overflows; the update must fail and leave no trace.
func TestUpdateRollsBackOnDivergence(t *testing.T) {
	p := mustPPO(t, smallConfig(3, 4, 1))
	// A successful update first, so that the Adam moments are non-zero and
	// the rollback has something to restore.
	if _, err := p.Update(randomBatch(newRNG(5), 40, 3, 4)); err != nil {
		t.Fatal(err)
	}
	before := mustMarshal(t, p)
	probe := []float64{0.3, 0.2, 0.1}
	d0, err := p.Act(probe, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := randomBatch(newRNG(6), 40, 3, 4)
	for i := range batch {
		batch[i].Reward = 1e300
	}
	_, err = p.Update(batch)
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("err = %v, want ErrDiverged", err)
	}
	requireSameBytes(t, "checkpoints before and after the diverged update", before, mustMarshal(t, p))
	d1, err := p.Act(probe, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for a := range d0.Probs {
		if d0.Probs[a] != d1.Probs[a] {
			t.Fatalf("inference changed after rollback: %v vs %v", d0.Probs, d1.Probs)
		}
	}
	if _, err := p.Update(randomBatch(newRNG(7), 40, 3, 4)); err != nil {
		t.Fatalf("learner unusable after rollback: %v", err)
	}
}

func TestDeterminism(t *testing.T) {
	cfg := smallConfig(5, 3, 42)
	run := func(seed uint64) []byte {
		c := cfg
		c.Seed = seed
		p := mustPPO(t, c)
		if _, err := p.BehaviourClone([]Demonstration{{State: []float64{1, 0, 0, 0, 0}, Action: 2}, {State: []float64{0, 1, 0, 0, 0}, Action: 1}}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := p.Update(randomBatch(newRNG(uint64(i)), 70, 5, 3)); err != nil {
				t.Fatal(err)
			}
		}
		return mustMarshal(t, p)
	}
	a, b := run(42), run(42)
	requireSameBytes(t, "two runs with the same seed", a, b)
	if c := run(43); string(a) == string(c) {
		t.Fatal("different seeds gave identical weights")
	}
}

// TestLearningRateScale: a scale of 1 is the configured rate; a smaller one
// moves the weights less from the same start on the same batches; a scale
// outside (0, 1] is refused and changes nothing.
func TestLearningRateScale(t *testing.T) {
	cfg := smallConfig(5, 3, 42)
	start := mustMarshal(t, mustPPO(t, cfg))
	run := func(scale float64) []byte {
		p := mustPPO(t, cfg)
		if scale != 0 {
			if err := p.SetLearningRateScale(scale); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if _, err := p.Update(randomBatch(newRNG(uint64(i)), 70, 5, 3)); err != nil {
				t.Fatal(err)
			}
		}
		return mustMarshal(t, p)
	}
	plain := run(0)
	requireSameBytes(t, "scale 1 against no scale", plain, run(1))
	moved := func(b []byte) float64 {
		t.Helper()
		p0, err := NewPPOFromCheckpoint(start)
		if err != nil {
			t.Fatal(err)
		}
		p1, err := NewPPOFromCheckpoint(b)
		if err != nil {
			t.Fatal(err)
		}
		var d float64
		for i, q := range p1.ps.all {
			for j, v := range q.data {
				d += math.Abs(v - p0.ps.all[i].data[j])
			}
		}
		return d
	}
	full, tenth := moved(plain), moved(run(0.1))
	if !(tenth < 0.5*full) {
		t.Errorf("weights moved %v at a tenth of the rate, %v at the full rate: want much less", tenth, full)
	}
	for _, s := range []float64{0, -0.5, 1.5, math.NaN()} {
		p := mustPPO(t, cfg)
		if err := p.SetLearningRateScale(s); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("scale %v: error %v, want ErrInvalidInput", s, err)
		}
	}
}

// TestConcurrentUse exercises acting during training under the race detector.
func TestConcurrentUse(t *testing.T) {
	p := mustPPO(t, smallConfig(3, 4, 1))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := newRNG(uint64(g))
			for range 100 {
				if _, err := p.Act(randomState(rng, 3), nil, false, rng); err != nil {
					errs <- err
					return
				}
				if _, err := p.ActBatch([][]float64{randomState(rng, 3), randomState(rng, 3)}, nil, true, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 3 {
			if _, err := p.Update(randomBatch(newRNG(uint64(i)), 64, 3, 4)); err != nil {
				errs <- err
				return
			}
			if _, err := p.MarshalBinary(); err != nil {
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

func TestTargetKLStopsEarly(t *testing.T) {
	cases := []struct {
		name      string
		targetKL  float64
		wantEarly bool
	}{
		{"disabled", 0, false},
		{"generous", 10, false},
		{"tiny", 1e-12, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallConfig(3, 4, 1)
			cfg.LearningRate = 1e-2
			cfg.TargetKL = tc.targetKL
			p := mustPPO(t, cfg)
			batch := randomBatch(newRNG(1), 128, 3, 4)
			st, err := p.Update(batch)
			if err != nil {
				t.Fatal(err)
			}
			full := cfg.Epochs * 128 / cfg.MinibatchSize
			if st.EarlyStopped != tc.wantEarly {
				t.Fatalf("EarlyStopped = %v, want %v (stats %+v)", st.EarlyStopped, tc.wantEarly, st)
			}
			if tc.wantEarly && (st.Steps < 1 || st.Steps >= full) {
				t.Fatalf("Steps = %d, want between 1 and %d", st.Steps, full-1)
			}
			if !tc.wantEarly && (st.Steps != full || st.Epochs != cfg.Epochs) {
				t.Fatalf("Steps = %d, Epochs = %d, want %d and %d", st.Steps, st.Epochs, full, cfg.Epochs)
			}
		})
	}
}
