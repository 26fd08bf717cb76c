package nn

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// ActWindowBatch is ActWindow for many workloads in one forward pass, as a
// server batching the decisions of many workloads needs it: the GRU runs
// over every window, then actor and critic over every [state, embedding]
// row, all under one read lock, so that the whole batch sees one set of
// weights. masks may be nil (all legal everywhere); samples are drawn from
// rng in the order of states.
//
// Each decision is bit-identical to ActWindow on the same row with rng in
// the same state: the encoder computes every window on its own, the rows of
// the actor-critic pass do not mix, and the decisions are made one row at a
// time in order.
func (m *MetaPPO) ActWindowBatch(states [][]float64, windows [][]Step, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error) {
	if len(windows) != len(states) || (masks != nil && len(masks) != len(states)) {
		return nil, fmt.Errorf("%w: %d states, %d windows, %d masks", ErrInvalidInput, len(states), len(windows), len(masks))
	}
	if len(states) == 0 {
		return nil, nil
	}
	for i := range states {
		if err := m.checkWindow("window", windows[i]); err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
		if err := m.checkActInput(states[i], nil, maskAt(masks, i), greedy, rng); err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
	}
	e := m.cfg.EmbedDim
	inputs := make([][]float64, len(states))
	m.inferMu.RLock()
	emb := m.enc.forward(true, windows, m.cfg)
	for i, s := range states {
		inputs[i] = slices.Concat(s, emb[i*e:(i+1)*e])
	}
	logits, values := actorCriticForward(m.ac, true, inputs, m.acCfg.StateDim)
	m.inferMu.RUnlock()
	ds, err := decideBatch(logits, values, m.cfg.heads(), masks, greedy, rng)
	if err != nil {
		return nil, err
	}
	m.applyGuard(ds, emb, masks)
	return ds, nil
}
