package nn

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// TestMetaBCGradientCheck compares the gradient of the meta
// behaviour-cloning loss with central finite differences for every actor
// and encoder weight.
func TestMetaBCGradientCheck(t *testing.T) {
	cfg := metaGradCheckConfig(4)
	m := mustMeta(t, cfg)
	scaleWeights(m.all, 2)
	g, err := newMetaBCGraph(cfg, m.ac, m.enc)
	if err != nil {
		t.Fatal(err)
	}
	rng := newRNG(9)
	rows := []int{0, 1, 2} // one padding row
	demos := make([]MetaDemonstration, len(rows))
	for i := range demos {
		mask := []bool{true, true, true, true}
		mask[(i+1)%4] = false
		demos[i] = MetaDemonstration{
			Demonstration: Demonstration{State: randomState(rng, cfg.StateDim), Mask: mask, Action: (i + 2) % 4},
			Window:        randomWindow(rng, i+1, cfg.StateDim, cfg.NumActions),
		}
	}
	g.fill(rows, func(i int) Demonstration { return demos[i].Demonstration }, cfg.StateDim, cfg.NumActions, cfg.heads())
	fillWindows(g.steps, g.stepMask, rows, func(i int) []Step { return demos[i].Window }, cfg)
	run := func() (float64, [][]float64) { return runGraph(t, &g.m, g.loss, g.grads) }
	if _, grads := run(); absSum(grads[len(m.ac.actor):]) == 0 {
		t.Fatal("the cloning loss does not depend on the encoder")
	}
	gradCheck(t, m.bcParams(), run)
}

// TestMetaBehaviourCloneUsesTheWindow clones a teacher whose action is the
// previous step's action: the state is constant, so only the embedding of
// the window can tell which action the teacher wants. A policy that ignored
// the window could not beat 1/numActions accuracy.
func TestMetaBehaviourCloneUsesTheWindow(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(2, 3, 4), Window: 2, EmbedDim: 4}
	cfg.LearningRate = 1e-2
	cfg.Hidden = []int{16}
	m := mustMeta(t, cfg)
	rng := newRNG(5)
	var demos []MetaDemonstration
	for range 96 {
		prev := rng.IntN(cfg.NumActions)
		demos = append(demos, MetaDemonstration{
			Demonstration: Demonstration{State: []float64{1, 0.5}, Action: prev},
			Window:        []Step{{State: []float64{1, 0.5}, Action: prev, Reward: 0.3}},
		})
	}
	var st BCStats
	for range 25 {
		var err error
		if st, err = m.BehaviourClone(demos); err != nil {
			t.Fatal(err)
		}
	}
	if st.Accuracy < 0.95 {
		t.Errorf("accuracy %.2f after cloning, want >= 0.95 (chance is %.2f)", st.Accuracy, 1/float64(cfg.NumActions))
	}
	// Acting agrees: the greedy action follows the window.
	for a := range cfg.NumActions {
		d, err := m.ActWindow([]float64{1, 0.5}, []Step{{State: []float64{1, 0.5}, Action: a, Reward: 0.3}}, nil, true, nil)
		if err != nil || d.Action != a {
			t.Errorf("after action %d the clone chose %d (%v)", a, d.Action, err)
		}
	}
}

func TestMetaBehaviourCloneRejectsBadInput(t *testing.T) {
	cfg := MetaConfig{Config: smallConfig(2, 3, 4), Window: 2, EmbedDim: 2}
	good := MetaDemonstration{Demonstration: Demonstration{State: []float64{1, 0}, Action: 1}, Window: []Step{{State: []float64{0, 1}, Action: 2}}}
	for _, tc := range []struct {
		name   string
		mutate func(*MetaDemonstration)
	}{
		{"NaN state", func(d *MetaDemonstration) { d.State = []float64{math.NaN(), 0} }},
		{"masked teacher action", func(d *MetaDemonstration) { d.Mask = []bool{true, false, true} }},
		{"short window state", func(d *MetaDemonstration) { d.Window = []Step{{State: []float64{1}}} }},
		{"window action out of range", func(d *MetaDemonstration) { d.Window = []Step{{State: []float64{1, 0}, Action: 3}} }},
		{"infinite window reward", func(d *MetaDemonstration) {
			d.Window = []Step{{State: []float64{1, 0}, Reward: math.Inf(1)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMeta(t, cfg)
			before := mustMarshalMeta(t, m)
			bad := good
			tc.mutate(&bad)
			if _, err := m.BehaviourClone([]MetaDemonstration{good, bad}); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("error %v, want ErrInvalidInput", err)
			}
			if !bytes.Equal(before, mustMarshalMeta(t, m)) {
				t.Error("a rejected call changed the learner")
			}
		})
	}
	if _, err := mustMeta(t, cfg).BehaviourClone(nil); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("empty batch: %v, want ErrInvalidInput", err)
	}
}

func TestCheckpointKind(t *testing.T) {
	p := mustPPO(t, smallConfig(3, 2, 1))
	m := mustMeta(t, MetaConfig{Config: smallConfig(3, 2, 1), Window: 2, EmbedDim: 2})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"ppo", mustMarshal(t, p), KindPPO},
		{"meta-ppo", mustMarshalMeta(t, m), KindMetaPPO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckpointKind(tc.data)
			if err != nil || got != tc.want {
				t.Errorf("kind %q, %v; want %q", got, err, tc.want)
			}
			if _, err := CheckpointKind(tc.data[:len(tc.data)-1]); !errors.Is(err, ErrCorruptCheckpoint) {
				t.Errorf("truncated: %v, want ErrCorruptCheckpoint", err)
			}
		})
	}
}
