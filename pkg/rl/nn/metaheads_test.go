package nn

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// factoredMetaConfig is Meta-PPO over factoredConfig's three heads of 3, 2
// and 4 choices.
func factoredMetaConfig(seed uint64) MetaConfig {
	cfg := MetaConfig{Config: factoredConfig(seed), Window: 3, EmbedDim: 4}
	cfg.Hidden = []int{8}
	cfg.MinibatchSize = 8
	return cfg
}

// factoredMetaBatch returns n transitions of cfg's heads: random masks that
// leave every head a legal choice, joint actions legal under them, and
// windows of random joint actions of lengths 0, 1, …, Window+1.
func factoredMetaBatch(t *testing.T, n int, cfg MetaConfig) []MetaTransition {
	t.Helper()
	rng := newRNG(uint64(n))
	heads, count := cfg.heads(), cfg.ActionCount()
	out := make([]MetaTransition, n)
	for i := range out {
		mask := make([]bool, cfg.NumActions)
		choices := make([]int, len(heads))
		off := 0
		for h, k := range heads {
			for j := range k {
				mask[off+j] = rng.IntN(3) != 0
			}
			choices[h] = rng.IntN(k)
			mask[off+choices[h]] = true
			off += k
		}
		win := make([]Step, i%(cfg.Window+2))
		for j := range win {
			win[j] = Step{State: randomState(rng, cfg.StateDim), Action: rng.IntN(count), Reward: rng.NormFloat64()}
		}
		out[i] = MetaTransition{
			Transition: Transition{
				State: randomState(rng, cfg.StateDim), Mask: mask, Action: JoinAction(choices, heads),
				Reward: rng.NormFloat64(), NextState: randomState(rng, cfg.StateDim), Done: i%5 == 4,
			},
			Window: win,
		}
	}
	return out
}

// TestMetaFactoredEncoder: with one head or several, the graph's unrolled
// GRU and the plain-Go encoder agree on factored actions, every head's
// choice reaches the embedding, and an update trains.
func TestMetaFactoredEncoder(t *testing.T) {
	single := factoredMetaConfig(3)
	single.Heads = nil
	for _, tc := range []struct {
		name string
		cfg  MetaConfig
	}{{"one head", single}, {"three heads", factoredMetaConfig(3)}} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMeta(t, tc.cfg)
			scaleWeights(m.all, 3)
			m.mu.Lock()
			m.publish()
			m.mu.Unlock()
			cfg := m.cfg
			batch := factoredMetaBatch(t, cfg.MinibatchSize-1, cfg)
			rows := make([]int, len(batch))
			windows := make([][]Step, len(batch))
			zeros := make([]float64, len(batch))
			for i := range batch {
				rows[i], windows[i] = i, batch[i].Window
			}
			m.graph.fill(batch, rows, zeros, zeros, zeros, cfg)
			if err := m.graph.m.run(); err != nil {
				t.Fatal(err)
			}
			gEmb, err := float64s(m.graph.embed)
			if err != nil {
				t.Fatal(err)
			}
			emb := m.enc.forward(false, windows, cfg)
			for i := range emb {
				if !closeTo(gEmb[i], emb[i], 1e-9) {
					t.Fatalf("embedding entry %d: graph %v, Go %v", i, gEmb[i], emb[i])
				}
			}
			// Two windows that differ in one head's choice of their one
			// step embed differently, for every head.
			st := randomState(newRNG(5), cfg.StateDim)
			heads := cfg.heads()
			for h, k := range heads {
				a, b := make([]int, len(heads)), make([]int, len(heads))
				b[h] = k - 1
				ea, err := m.Embed([]Step{{State: st, Action: JoinAction(a, heads), Reward: 0.5}})
				if err != nil {
					t.Fatal(err)
				}
				eb, err := m.Embed([]Step{{State: st, Action: JoinAction(b, heads), Reward: 0.5}})
				if err != nil {
					t.Fatal(err)
				}
				if slices.Equal(ea, eb) {
					t.Errorf("head %d: choices 0 and %d embed alike: the encoder does not read the head", h, k-1)
				}
			}
			if _, err := m.Update(factoredMetaBatch(t, 40, cfg)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMetaFactoredRejects: actions and masks are checked head by head.
func TestMetaFactoredRejects(t *testing.T) {
	cfg := factoredMetaConfig(1)
	m := mustMeta(t, cfg)
	st := make([]float64, cfg.StateDim)
	ok := []Step{{State: st, Action: cfg.ActionCount() - 1}}
	deadHead := []bool{true, true, true, false, false, true, true, true, true}
	for _, tc := range []struct {
		name   string
		window []Step
		mask   []bool
		want   string
	}{
		{"window action past the joint actions", []Step{{State: st, Action: cfg.ActionCount()}}, nil, "out of range"},
		{"negative window action", []Step{{State: st, Action: -1}}, nil, "out of range"},
		{"a head with no legal choice", ok, deadHead, "head 1"},
		{"mask of the wrong length", ok, make([]bool, cfg.ActionCount()), "mask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.ActWindow(st, tc.window, tc.mask, true, nil)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want invalid input mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := m.ActWindow(st, ok, nil, true, nil); err != nil {
		t.Errorf("the last joint action in a window: %v", err)
	}
}

// TestMetaFactoredInitBias: an initial output bias on choice 0 of every
// head (the residual action space's "follow") makes it the untrained
// learner's greedy action whatever the state and the window, through every
// acting path; without the bias the greedy action varies, so the check can
// fail.
func TestMetaFactoredInitBias(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bias       float64
		wantFollow bool
	}{{"follow bias 3", 3, true}, {"no bias", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := factoredMetaConfig(7)
			if tc.bias != 0 {
				cfg.InitBias = make([]float64, cfg.NumActions)
				off := 0
				for _, k := range cfg.heads() {
					cfg.InitBias[off] = tc.bias
					off += k
				}
			}
			m := mustMeta(t, cfg)
			frozen := m.Freeze()
			batch := factoredMetaBatch(t, 60, cfg)
			var states [][]float64
			var windows [][]Step
			var masks [][]bool
			for _, tr := range batch {
				states, windows, masks = append(states, tr.State), append(windows, tr.Window), append(masks, nil)
			}
			all, err := m.ActWindowBatch(states, windows, masks, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			fz, err := frozen.ActBatch(states, windows, masks, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			followed := 0
			for i := range states {
				d, err := m.ActWindow(states[i], windows[i], nil, true, nil)
				if err != nil {
					t.Fatal(err)
				}
				if d.Action != all[i].Action || d.Action != fz[i].Action {
					t.Fatalf("state %d: ActWindow %d, ActWindowBatch %d, frozen %d", i, d.Action, all[i].Action, fz[i].Action)
				}
				if d.Action == 0 {
					followed++
				}
			}
			if got := followed == len(states); got != tc.wantFollow {
				t.Errorf("%d of %d greedy actions are choice 0 of every head, want all: %v", followed, len(states), tc.wantFollow)
			}
		})
	}
}

// TestMetaFactoredLearns: a contextual bandit whose context is only in the
// window (the sign of the last step's reward) and whose reward is the sum
// of per-head rewards: each head must learn its own best choice from the
// embedding.
func TestMetaFactoredLearns(t *testing.T) {
	cfg := factoredMetaConfig(2)
	cfg.Window, cfg.Hidden, cfg.MinibatchSize, cfg.LearningRate = 1, []int{32}, 64, 3e-3
	m := mustMeta(t, cfg)
	heads := cfg.heads()
	rng := newRNG(2)
	state := []float64{0.5, -0.5, 0.25, 0}
	best := [][]int{{2, 0, 1}, {0, 1, 3}}
	window := func(c int) []Step {
		return []Step{{State: state, Action: rng.IntN(cfg.ActionCount()), Reward: float64(2*c - 1)}}
	}
	for range 60 {
		batch := make([]MetaTransition, 256)
		for i := range batch {
			c := i % 2
			w := window(c)
			d, err := m.ActWindow(state, w, nil, false, rng)
			if err != nil {
				t.Fatal(err)
			}
			var r float64
			for h, ch := range SplitAction(d.Action, heads) {
				if ch == best[c][h] {
					r++
				}
			}
			batch[i] = MetaTransition{Transition: Transition{State: state, Action: d.Action, Reward: r, Done: true}, Window: w}
		}
		if _, err := m.Update(batch); err != nil {
			t.Fatal(err)
		}
	}
	for c := range 2 {
		d, err := m.ActWindow(state, window(c), nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := SplitAction(d.Action, heads); !slices.Equal(got, best[c]) {
			t.Errorf("context %d: greedy %v, want %v", c, got, best[c])
		}
	}
}

// TestMetaFactoredCheckpoint: a checkpoint keeps the heads and the initial
// bias, acts as the learner did, and a single-head learner refuses it.
func TestMetaFactoredCheckpoint(t *testing.T) {
	cfg := factoredMetaConfig(5)
	cfg.InitBias = make([]float64, cfg.NumActions)
	cfg.InitBias[0] = 1
	a := mustMeta(t, cfg)
	batch := factoredMetaBatch(t, 40, cfg)
	if _, err := a.Update(batch); err != nil {
		t.Fatal(err)
	}
	data := mustMarshalMeta(t, a)
	b, err := NewMetaPPOFromCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Config(); !slices.Equal(got.Heads, cfg.Heads) || !slices.Equal(got.InitBias, cfg.InitBias) {
		t.Fatalf("restored heads %v bias %v, want %v %v", got.Heads, got.InitBias, cfg.Heads, cfg.InitBias)
	}
	fz, err := FreezeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range batch[:10] {
		da, err := a.ActWindow(tr.State, tr.Window, tr.Mask, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		db, err := b.ActWindow(tr.State, tr.Window, tr.Mask, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		df, err := fz.ActBatch([][]float64{tr.State}, [][]Step{tr.Window}, [][]bool{tr.Mask}, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if da.Action != db.Action || !slices.Equal(da.Probs, db.Probs) || da.Action != df[0].Action {
			t.Fatalf("transition %d: learner %d, restored %d, frozen %d", i, da.Action, db.Action, df[0].Action)
		}
	}
	single := cfg
	single.Heads, single.InitBias = nil, nil
	if err := mustMeta(t, single).UnmarshalBinary(data); !errors.Is(err, ErrIncompatibleCheckpoint) {
		t.Errorf("a single-head learner loading a factored checkpoint: %v", err)
	}
}
