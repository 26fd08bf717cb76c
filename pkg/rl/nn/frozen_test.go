package nn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// frozenSubject is a learner of either kind seen through what the frozen
// copy must reproduce: its batched act, its single act, and training.
type frozenSubject struct {
	cfg    MetaConfig // Window and EmbedDim are 0 for PPO
	freeze func() *Frozen
	act    func(states [][]float64, windows [][]Step, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error)
	act1   func(state []float64, window []Step, mask []bool, greedy bool, rng *rand.Rand) (Decision, error)
	train  func(t *testing.T, rng *rand.Rand)
	// update is one training call (one publication of new weights).
	update  func(rng *rand.Rand) error
	marshal func(t *testing.T) []byte
}

func frozenSubjects(t *testing.T) map[string]frozenSubject {
	t.Helper()
	pcfg := smallConfig(6, 4, 3)
	p := mustPPO(t, pcfg)
	mcfg := MetaConfig{Config: smallConfig(6, 4, 4), Window: 4, EmbedDim: 3}
	m := mustMeta(t, mcfg)
	subjects := map[string]frozenSubject{
		"PPO": {
			cfg:    MetaConfig{Config: pcfg},
			freeze: p.Freeze,
			act: func(states [][]float64, _ [][]Step, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error) {
				return p.ActBatch(states, masks, greedy, rng)
			},
			act1: func(state []float64, _ []Step, mask []bool, greedy bool, rng *rand.Rand) (Decision, error) {
				return p.Act(state, mask, greedy, rng)
			},
			train: func(t *testing.T, rng *rand.Rand) {
				t.Helper()
				if _, err := p.BehaviourClone([]Demonstration{{State: randomState(rng, 6), Action: 1}, {State: randomState(rng, 6), Action: 2}}); err != nil {
					t.Fatal(err)
				}
				if _, err := p.Update(randomBatch(rng, 40, 6, 4)); err != nil {
					t.Fatal(err)
				}
			},
			update: func(rng *rand.Rand) error {
				_, err := p.Update(randomBatch(rng, 40, 6, 4))
				return err
			},
			marshal: func(t *testing.T) []byte { return mustMarshal(t, p) },
		},
		"MetaPPO": {
			cfg:    mcfg,
			freeze: m.Freeze,
			act:    m.ActWindowBatch,
			act1:   m.ActWindow,
			train: func(t *testing.T, rng *rand.Rand) {
				t.Helper()
				demos := []MetaDemonstration{
					{Demonstration: Demonstration{State: randomState(rng, 6), Action: 1}, Window: randomWindow(rng, 3, 6, 4)},
					{Demonstration: Demonstration{State: randomState(rng, 6), Action: 3}, Window: randomWindow(rng, 5, 6, 4)},
				}
				if _, err := m.BehaviourClone(demos); err != nil {
					t.Fatal(err)
				}
				if _, err := m.Update(randomMetaBatch(rng, 40, mcfg)); err != nil {
					t.Fatal(err)
				}
			},
			update: func(rng *rand.Rand) error {
				_, err := m.Update(randomMetaBatch(rng, 40, mcfg))
				return err
			},
			marshal: func(t *testing.T) []byte { return mustMarshalMeta(t, m) },
		},
	}
	// Train once first, so the weights are not the near-uniform
	// initialisation and the comparisons have teeth.
	for _, s := range subjects {
		s.train(t, newRNG(11))
	}
	return subjects
}

// frozenInputs are n states with windows of lengths 0..Window+1 and random
// masks, one of them nil (all legal).
func frozenInputs(seed uint64, n int, cfg MetaConfig) (states [][]float64, windows [][]Step, masks [][]bool) {
	rng := newRNG(seed)
	for i := range n {
		states = append(states, randomState(rng, cfg.StateDim))
		windows = append(windows, randomWindow(rng, i%(cfg.Window+2), cfg.StateDim, cfg.NumActions))
		var mask []bool
		if i != 2 {
			mask = make([]bool, cfg.NumActions)
			for j := range mask {
				mask[j] = rng.IntN(3) != 0
			}
			mask[rng.IntN(cfg.NumActions)] = true
		}
		masks = append(masks, mask)
	}
	return states, windows, masks
}

// sameDecisions reports whether a and b are equal bit for bit.
func sameDecisions(a, b []Decision) bool {
	if len(a) != len(b) {
		return false
	}
	bits := func(xs []float64) []uint64 {
		out := make([]uint64, len(xs))
		for i, x := range xs {
			out[i] = math.Float64bits(x)
		}
		return out
	}
	for i := range a {
		if a[i].Action != b[i].Action || math.Float64bits(a[i].LogProb) != math.Float64bits(b[i].LogProb) ||
			math.Float64bits(a[i].Value) != math.Float64bits(b[i].Value) || !slices.Equal(bits(a[i].Probs), bits(b[i].Probs)) {
			return false
		}
	}
	return true
}

// decideAll runs act greedily and sampling (from a fixed seed) and returns
// both sets of decisions.
func decideAll(t *testing.T, act func(states [][]float64, windows [][]Step, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error), states [][]float64, windows [][]Step, masks [][]bool) []Decision {
	t.Helper()
	greedy, err := act(states, windows, masks, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	sampled, err := act(states, windows, masks, false, newRNG(77))
	if err != nil {
		t.Fatal(err)
	}
	return append(greedy, sampled...)
}

func TestFrozenDecidesAsLearner(t *testing.T) {
	for name, s := range frozenSubjects(t) {
		t.Run(name, func(t *testing.T) {
			states, windows, masks := frozenInputs(5, 9, s.cfg)
			f := s.freeze()
			if f.Kind() != map[string]string{"PPO": KindPPO, "MetaPPO": KindMetaPPO}[name] {
				t.Fatalf("kind %q", f.Kind())
			}
			t.Run("batched", func(t *testing.T) {
				want := decideAll(t, s.act, states, windows, masks)
				if got := decideAll(t, f.ActBatch, states, windows, masks); !sameDecisions(got, want) {
					t.Fatalf("frozen decisions\n%v\ndiffer from the learner's\n%v", got, want)
				}
			})
			t.Run("single", func(t *testing.T) {
				for i := range states {
					for _, greedy := range []bool{true, false} {
						want, err := s.act1(states[i], windows[i], masks[i], greedy, newRNG(uint64(i)))
						if err != nil {
							t.Fatal(err)
						}
						got, err := f.ActBatch(states[i:i+1], windows[i:i+1], masks[i:i+1], greedy, newRNG(uint64(i)))
						if err != nil {
							t.Fatal(err)
						}
						if !sameDecisions(got, []Decision{want}) {
							t.Fatalf("state %d greedy=%v: frozen %+v, learner %+v", i, greedy, got[0], want)
						}
					}
				}
			})
			t.Run("after the learner trains", func(t *testing.T) {
				before := decideAll(t, s.act, states, windows, masks)
				f := s.freeze()
				s.train(t, newRNG(12))
				after := decideAll(t, s.act, states, windows, masks)
				if sameDecisions(after, before) {
					t.Fatal("training did not change the learner's decisions: the test has no teeth")
				}
				if got := decideAll(t, f.ActBatch, states, windows, masks); !sameDecisions(got, before) {
					t.Fatalf("frozen decisions moved with the learner:\n%v\nwant\n%v", got, before)
				}
			})
		})
	}
}

func TestFrozenSerialisation(t *testing.T) {
	for name, s := range frozenSubjects(t) {
		t.Run(name, func(t *testing.T) {
			states, windows, masks := frozenInputs(6, 7, s.cfg)
			f := s.freeze()
			want := decideAll(t, f.ActBatch, states, windows, masks)
			data, err := f.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			g, err := UnmarshalFrozen(data)
			if err != nil {
				t.Fatal(err)
			}
			if got := decideAll(t, g.ActBatch, states, windows, masks); !sameDecisions(got, want) {
				t.Fatal("decoded frozen policy decides differently")
			}
			again, err := g.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			requireSameBytes(t, "re-marshalled frozen policy", data, again)
			if g.Kind() != f.Kind() || fmt.Sprint(g.Config()) != fmt.Sprint(f.Config()) || g.Weights() != f.Weights() {
				t.Errorf("decoded %s %+v (%d weights), want %s %+v (%d)", g.Kind(), g.Config(), g.Weights(), f.Kind(), f.Config(), f.Weights())
			}

			// A learner checkpoint freezes to the same policy, graphs unbuilt.
			h, err := FreezeCheckpoint(s.marshal(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := decideAll(t, h.ActBatch, states, windows, masks); !sameDecisions(got, want) {
				t.Fatal("frozen learner checkpoint decides differently")
			}
		})
	}
}

// TestFrozenLayout holds the parameter list UnmarshalFrozen expects to the
// one the learners create.
func TestFrozenLayout(t *testing.T) {
	for name, s := range frozenSubjects(t) {
		t.Run(name, func(t *testing.T) {
			f := s.freeze()
			want := f.params()
			got := frozenLayout(f.Kind(), f.Config())
			if len(got) != len(want) {
				t.Fatalf("layout has %d parameters, the learner %d", len(got), len(want))
			}
			for i := range got {
				if got[i].name != want[i].name || got[i].rows != want[i].rows || got[i].cols != want[i].cols {
					t.Errorf("parameter %d: layout %s %dx%d, learner %s %dx%d", i, got[i].name, got[i].rows, got[i].cols, want[i].name, want[i].rows, want[i].cols)
				}
			}
		})
	}
}

func TestFrozenDecodeErrors(t *testing.T) {
	f := frozenSubjects(t)["MetaPPO"].freeze()
	data, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	mutated := func(edit func([]byte) []byte) []byte { return edit(slices.Clone(data)) }
	versionOff := len(frozenMagic)
	kindOff := versionOff + 4 + 2
	cfgLenOff := kindOff + len(KindMetaPPO)
	cfgLen := int(binary.LittleEndian.Uint32(data[cfgLenOff:]))
	firstParamOff := cfgLenOff + 4 + cfgLen + 4
	firstName := len("actor/w0")
	firstWeightOff := firstParamOff + 2 + firstName + 8
	learnerCkpt := frozenSubjects(t)["PPO"].marshal(t)
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrCorruptCheckpoint},
		{"truncated by one byte", data[:len(data)-1], ErrCorruptCheckpoint},
		{"truncated to half", data[:len(data)/2], ErrCorruptCheckpoint},
		{"flipped bit", mutated(func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }), ErrCorruptCheckpoint},
		{"bad magic", mutated(func(b []byte) []byte { b[0] = 'X'; return b }), ErrCorruptCheckpoint},
		{"a learner checkpoint", learnerCkpt, ErrCorruptCheckpoint},
		{"trailing garbage", reseal(append(slices.Clone(data[:len(data)-4]), 1, 2, 3, 0, 0, 0, 0)), ErrCorruptCheckpoint},
		{"future format version", mutated(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[versionOff:], frozenVersion+1)
			return reseal(b)
		}), ErrIncompatibleCheckpoint},
		{"unknown kind", mutated(func(b []byte) []byte { b[kindOff] = 'x'; return reseal(b) }), ErrIncompatibleCheckpoint},
		{"shape unlike the config", mutated(func(b []byte) []byte {
			// actor/w0 claims one row fewer than its input width.
			off := firstParamOff + 2 + firstName
			binary.LittleEndian.PutUint32(b[off:], binary.LittleEndian.Uint32(b[off:])-1)
			return reseal(b)
		}), ErrCorruptCheckpoint},
		{"NaN weight", mutated(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[firstWeightOff:], math.Float64bits(math.NaN()))
			return reseal(b)
		}), ErrCorruptCheckpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := UnmarshalFrozen(tc.data); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("frozen bytes are no learner checkpoint", func(t *testing.T) {
		if _, err := FreezeCheckpoint(data); !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("err = %v, want ErrCorruptCheckpoint", err)
		}
	})
}

// TestFrozenRejectsInputAsLearner: bad input gets the learner's very error.
func TestFrozenRejectsInputAsLearner(t *testing.T) {
	for name, s := range frozenSubjects(t) {
		t.Run(name, func(t *testing.T) {
			f := s.freeze()
			states, windows, masks := frozenInputs(8, 3, s.cfg)
			nan := slices.Clone(states[1])
			nan[0] = math.NaN()
			cases := []struct {
				name            string
				states          [][]float64
				windows         [][]Step
				masks           [][]bool
				greedy          bool
				metaOnly, wrapI bool
			}{
				{name: "NaN state", states: [][]float64{states[0], nan, states[2]}, windows: windows, masks: masks, greedy: true, wrapI: true},
				{name: "short state", states: [][]float64{states[0], states[1][:2], states[2]}, windows: windows, masks: masks, greedy: true, wrapI: true},
				{name: "masks for fewer states", states: states, windows: windows, masks: masks[:2], greedy: true, wrapI: true},
				{name: "short mask", states: states, windows: windows, masks: [][]bool{masks[0], {true}, masks[2]}, greedy: true, wrapI: true},
				{name: "sampling without a generator", states: states, windows: windows, masks: masks},
				{name: "every action masked", states: states, windows: windows, masks: [][]bool{masks[0], make([]bool, s.cfg.NumActions), masks[2]}, greedy: true},
				{name: "windows for fewer states", states: states, windows: windows[:1], masks: masks, greedy: true, metaOnly: true, wrapI: true},
				{name: "window action out of range", states: states, windows: [][]Step{windows[0], {{State: states[0], Action: 99}}, windows[2]}, masks: masks, greedy: true, metaOnly: true, wrapI: true},
				{name: "infinite window reward", states: states, windows: [][]Step{windows[0], {{State: states[0], Reward: math.Inf(1)}}, windows[2]}, masks: masks, greedy: true, metaOnly: true, wrapI: true},
			}
			for _, tc := range cases {
				if tc.metaOnly && f.Kind() != KindMetaPPO {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					_, want := s.act(tc.states, tc.windows, tc.masks, tc.greedy, nil)
					_, got := f.ActBatch(tc.states, tc.windows, tc.masks, tc.greedy, nil)
					if want == nil || got == nil || got.Error() != want.Error() {
						t.Fatalf("frozen error %v, learner's %v", got, want)
					}
					if tc.wrapI && !errors.Is(got, ErrInvalidInput) {
						t.Fatalf("%v does not wrap ErrInvalidInput", got)
					}
				})
			}
		})
	}
}

// TestFrozenWeights counts what a frozen copy of the production
// architecture holds: its weights and nothing else.
func TestFrozenWeights(t *testing.T) {
	pcfg := DefaultConfig(12, 7)
	mlp := func(in, out int) int { return in*64 + 64 + 64*64 + 64 + 64*out + out }
	ppo := mlp(12, 7) + mlp(12, 1)
	if got := mustPPO(t, pcfg).Freeze().Weights(); got != ppo {
		t.Errorf("PPO: %d weights, want %d", got, ppo)
	}
	mcfg := DefaultMetaConfig(12, 7)
	e, d := mcfg.EmbedDim, 12+7+1
	meta := mlp(12+e, 7) + mlp(12+e, 1) + 3*(e*e+d*e+e)
	if got := mustMeta(t, mcfg).Freeze().Weights(); got != meta {
		t.Errorf("MetaPPO: %d weights, want %d", got, meta)
	}
}

// BenchmarkFreeze measures a frozen copy of the production architecture:
// B/op is what one copy costs in memory.
func BenchmarkFreeze(b *testing.B) {
	for name, freeze := range map[string]func() *Frozen{
		"PPO":     mustPPO(b, benchConfig()).Freeze,
		"MetaPPO": mustMeta(b, benchMetaConfig()).Freeze,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var f *Frozen
			for b.Loop() {
				f = freeze()
			}
			b.ReportMetric(float64(8*f.Weights()), "weight-bytes")
		})
	}
}

// TestFreezeDuringTraining: a copy taken while the learner trains holds
// the weights from before or after the training call (one Update, one
// publication), never a mix.
func TestFreezeDuringTraining(t *testing.T) {
	for name, s := range frozenSubjects(t) {
		t.Run(name, func(t *testing.T) {
			states, windows, masks := frozenInputs(9, 6, s.cfg)
			before := decideAll(t, s.act, states, windows, masks)
			done := make(chan error)
			var copies []*Frozen
			go func() { done <- s.update(newRNG(13)) }()
			for running := true; running; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					running = false
				default:
				}
				copies = append(copies, s.freeze())
			}
			after := decideAll(t, s.act, states, windows, masks)
			if sameDecisions(before, after) {
				t.Fatal("training did not change the learner's decisions: the test has no teeth")
			}
			for i, f := range copies {
				got := decideAll(t, f.ActBatch, states, windows, masks)
				if !sameDecisions(got, before) && !sameDecisions(got, after) {
					t.Fatalf("copy %d of %d holds weights from neither before nor after training", i, len(copies))
				}
			}
		})
	}
}
