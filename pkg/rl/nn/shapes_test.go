package nn

import (
	"fmt"
	"testing"
)

// TestDegenerateShapes: Gorgonia treats size-1 dimensions specially in
// places (vectors of length 1, 1×n matrices), so the smallest legal shapes
// must build, act and train.
func TestDegenerateShapes(t *testing.T) {
	cases := []struct {
		stateDim, actions, minibatch, batch int
		hidden                              []int
	}{
		{1, 2, 1, 3, []int{1}},
		{1, 2, 2, 1, []int{3}},
		{2, 3, 1, 1, []int{2, 2}},
		{3, 2, 5, 12, []int{4, 1, 4}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("s%d_a%d_mb%d_n%d_h%v", tc.stateDim, tc.actions, tc.minibatch, tc.batch, tc.hidden), func(t *testing.T) {
			cfg := DefaultConfig(tc.stateDim, tc.actions)
			cfg.Hidden = tc.hidden
			cfg.MinibatchSize = tc.minibatch
			p := mustPPO(t, cfg)
			rng := newRNG(1)
			batch := randomBatch(rng, tc.batch, tc.stateDim, tc.actions)
			st, err := p.Update(batch)
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if want := cfg.Epochs * ((tc.batch + tc.minibatch - 1) / tc.minibatch); st.Steps != want {
				t.Errorf("Steps = %d, want %d", st.Steps, want)
			}
			demos := []Demonstration{{State: batch[0].State, Mask: batch[0].Mask, Action: batch[0].Action}}
			if _, err := p.BehaviourClone(demos); err != nil {
				t.Fatalf("BehaviourClone: %v", err)
			}
			if _, err := p.Act(batch[0].State, batch[0].Mask, false, rng); err != nil {
				t.Fatalf("Act: %v", err)
			}
		})
	}
}
