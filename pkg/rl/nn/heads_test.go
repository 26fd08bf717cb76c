package nn

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// factoredConfig has three heads of 3, 2 and 4 choices.
func factoredConfig(seed uint64) Config {
	cfg := smallConfig(4, 9, seed)
	cfg.Heads = []int{3, 2, 4}
	return cfg
}

func TestSplitJoinAction(t *testing.T) {
	heads := []int{3, 2, 4}
	seen := map[int]bool{}
	for a0 := range 3 {
		for a1 := range 2 {
			for a2 := range 4 {
				a := JoinAction([]int{a0, a1, a2}, heads)
				if got := SplitAction(a, heads); !slices.Equal(got, []int{a0, a1, a2}) {
					t.Errorf("split(join(%d,%d,%d)) = %v", a0, a1, a2, got)
				}
				seen[a] = true
			}
		}
	}
	if len(seen) != 24 || !seen[0] || !seen[23] {
		t.Errorf("joined actions do not cover [0, 24): %d distinct", len(seen))
	}
	if got := (Config{NumActions: 9, Heads: heads}).ActionCount(); got != 24 {
		t.Errorf("ActionCount = %d, want 24", got)
	}
}

func TestFactoredDecide(t *testing.T) {
	cfg := factoredConfig(1)
	cfg.InitBias = []float64{0, 4, 0, 0, 0, 0, 0, 0, 4}
	p := mustPPO(t, cfg)
	state := []float64{0.1, -0.2, 0.3, 0}
	mask := []bool{true, true, true, true, false, true, true, true, true}
	d, err := p.Act(state, mask, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The initial bias makes choice 1 of head 0 and choice 3 of head 2
	// greedy; head 1 has one legal choice.
	if got := SplitAction(d.Action, cfg.Heads); !slices.Equal(got, []int{1, 0, 3}) {
		t.Errorf("greedy choices %v, want [1 0 3]", got)
	}
	if len(d.Probs) != 9 || d.Probs[4] != 0 || d.Probs[3] != 1 {
		t.Fatalf("probs %v: want 9 entries, the masked one 0, its head's other 1", d.Probs)
	}
	var lp float64
	off := 0
	for _, n := range cfg.Heads {
		var sum float64
		for _, pr := range d.Probs[off : off+n] {
			sum += pr
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("a head's probabilities add up to %g", sum)
		}
		off += n
	}
	for h, c := range SplitAction(d.Action, cfg.Heads) {
		lp += math.Log(d.Probs[[]int{0, 3, 5}[h]+c])
	}
	if math.Abs(lp-d.LogProb) > 1e-9 {
		t.Errorf("log-prob %g, want the sum of the heads' %g", d.LogProb, lp)
	}
	// Sampling never picks a masked choice.
	rng := newRNG(3)
	for range 300 {
		d, err := p.Act(state, mask, false, rng)
		if err != nil {
			t.Fatal(err)
		}
		if SplitAction(d.Action, cfg.Heads)[1] != 0 {
			t.Fatal("sampled a masked choice")
		}
	}
	// A mask that leaves a head no choice is refused.
	dead := []bool{true, true, true, false, false, true, true, true, true}
	if _, err := p.Act(state, dead, true, nil); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "head 1") {
		t.Errorf("error %v, want invalid input naming head 1", err)
	}
}

// TestFactoredPPOLearns: a contextual bandit whose reward is the sum of
// independent per-head rewards; each head must learn its own best choice.
func TestFactoredPPOLearns(t *testing.T) {
	cfg := factoredConfig(2)
	cfg.Hidden = []int{32}
	cfg.LearningRate = 3e-3
	p := mustPPO(t, cfg)
	rng := newRNG(2)
	best := func(s []float64) []int { // context 0 wants [2 0 1], context 1 [0 1 3]
		if s[0] > 0 {
			return []int{2, 0, 1}
		}
		return []int{0, 1, 3}
	}
	state := func(i int) []float64 { return []float64{float64(i % 2), float64(1 - i%2), 0.5, -0.5} }
	for u := range 60 {
		batch := make([]Transition, 256)
		for i := range batch {
			s := state(i + u)
			d, err := p.Act(s, nil, false, rng)
			if err != nil {
				t.Fatal(err)
			}
			var r float64
			for h, c := range SplitAction(d.Action, cfg.Heads) {
				if c == best(s)[h] {
					r++
				}
			}
			batch[i] = Transition{State: s, Action: d.Action, Reward: r, Done: true}
		}
		if _, err := p.Update(batch); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		d, err := p.Act(state(i), nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := SplitAction(d.Action, cfg.Heads); !slices.Equal(got, best(state(i))) {
			t.Errorf("context %d: greedy %v, want %v", i, got, best(state(i)))
		}
	}
}

func TestFactoredBehaviourClone(t *testing.T) {
	cfg := factoredConfig(4)
	cfg.Hidden = []int{32}
	cfg.LearningRate = 3e-3
	cfg.Epochs = 8
	p := mustPPO(t, cfg)
	teacher := func(i int) int { return JoinAction([]int{i % 3, (i / 3) % 2, 3 - i%4}, cfg.Heads) }
	state := func(i int) []float64 { return []float64{float64(i % 3), float64((i / 3) % 2), float64(i % 4), 1} }
	var demos []Demonstration
	for i := range 240 {
		demos = append(demos, Demonstration{State: state(i % 24), Action: teacher(i % 24)})
	}
	var st BCStats
	for range 30 {
		var err error
		if st, err = p.BehaviourClone(demos); err != nil {
			t.Fatal(err)
		}
	}
	if st.Accuracy < 0.9 {
		t.Errorf("cloning accuracy %.2f, want >= 0.9", st.Accuracy)
	}
	bad := Demonstration{State: state(0), Action: 24}
	if _, err := p.BehaviourClone([]Demonstration{bad}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("out-of-range factored action: error %v", err)
	}
}

func TestFactoredConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"heads must add up", func(c *Config) { c.Heads = []int{3, 3} }, "must add up to numActions 9"},
		{"empty head", func(c *Config) { c.Heads = []int{9, 0} }, "heads[1] must be >= 1"},
		{"init bias length", func(c *Config) { c.InitBias = []float64{1} }, "initBias must have numActions"},
		{"init bias finite", func(c *Config) { c.InitBias = make([]float64, 9); c.InitBias[2] = math.NaN() }, "initBias[2] is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := factoredConfig(1)
			tc.mutate(&cfg)
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
	// A checkpoint keeps the heads, and a single-head learner refuses it.
	p := mustPPO(t, factoredConfig(1))
	data := mustMarshal(t, p)
	q := mustPPO(t, factoredConfig(9))
	if err := q.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	single := mustPPO(t, smallConfig(4, 9, 1))
	if err := single.UnmarshalBinary(data); !errors.Is(err, ErrIncompatibleCheckpoint) {
		t.Errorf("single head loading a factored checkpoint: %v", err)
	}
}
