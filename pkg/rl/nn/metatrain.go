package nn

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
)

// metaGraph is the PPO loss of MetaPPO: the GRU unrolled over Window steps,
// its final state concatenated to the state, then the usual PPO head.
type metaGraph struct {
	ppoHead
	x []float64 // batch×stateDim
	// auxTarget and auxMask (batch×auxDim) feed the auxiliary loss; the
	// mask holds 1/(rows with a target · auxDim) for rows with a target
	// and 0 elsewhere, so the masked sum is the mean squared error.
	auxTarget, auxMask []float64
	steps              [][]float64 // Window × (batch×stepDim); step Window-1 is the most recent
	stepMask           [][]float64 // Window × (batch×embed): 1 for real steps, 0 for padding
	embed              *G.Value    // batch×embed, for tests
}

func newMetaGraph(cfg MetaConfig, ac *paramSet, enc *gru, aux *auxHead) (*metaGraph, error) {
	n, s := cfg.MinibatchSize, cfg.StateDim
	g := &metaGraph{x: make([]float64, n*s)}
	b := &builder{g: G.NewGraph()}
	x := b.input("x", g.x, n, s)
	var h *G.Node
	var gw []*G.Node
	g.steps, g.stepMask, h, gw = b.encoder(cfg, enc)
	in := b.apply("concat", func() (*G.Node, error) { return G.Concat(1, x, h) })
	actorW := b.weights(ac.actor)
	criticW := b.weights(ac.critic)
	total := g.buildLoss(b, cfg.actorCritic(), in, actorW, criticW)
	var auxW []*G.Node
	if aux != nil && b.err == nil {
		k := cfg.AuxDim
		g.auxTarget, g.auxMask = make([]float64, n*k), make([]float64, n*k)
		target := b.input("auxTarget", g.auxTarget, n, k)
		mask := b.input("auxMask", g.auxMask, n, k)
		auxW = b.weights(aux.params())
		pred := b.addRow(b.matMul(h, auxW[0]), auxW[1])
		mse := b.sum(b.mul(mask, b.square(b.sub(pred, target))))
		total = b.add(total, b.scale(mse, cfg.AuxWeight))
		// The head's total read the PPO loss alone; read the sum.
		g.total = b.read(total)
	}
	g.embed = b.read(h)
	if b.err != nil {
		return nil, fmt.Errorf("meta-PPO graph: %w", b.err)
	}
	params := append(append(append(append([]*G.Node{}, actorW...), criticW...), gw...), auxW...)
	if err := g.finish(b, total, params); err != nil {
		return nil, fmt.Errorf("meta-PPO graph: %w", err)
	}
	return g, nil
}

// fill writes the selected rows; padding rows and padding steps stay zero.
func (g *metaGraph) fill(batch []MetaTransition, rows []int, oldLogp, adv, ret []float64, cfg MetaConfig) {
	s := cfg.StateDim
	clear(g.x)
	g.fillHead(rows, oldLogp, adv, ret, cfg.heads(),
		func(i int) ([]bool, int) { return batch[i].Mask, batch[i].Action })
	for r, i := range rows {
		copy(g.x[r*s:(r+1)*s], batch[i].State)
	}
	fillWindows(g.steps, g.stepMask, rows, func(i int) []Step { return batch[i].Window }, cfg)
	if g.auxTarget == nil {
		return
	}
	clear(g.auxTarget)
	clear(g.auxMask)
	k := cfg.AuxDim
	var with int
	for _, i := range rows {
		if batch[i].Aux != nil {
			with++
		}
	}
	for r, i := range rows {
		if batch[i].Aux == nil {
			continue
		}
		copy(g.auxTarget[r*k:(r+1)*k], batch[i].Aux)
		m := g.auxMask[r*k : (r+1)*k]
		for j := range m {
			m[j] = 1 / float64(with*k)
		}
	}
}

func (m *MetaPPO) checkTransitions(batch []MetaTransition) error {
	if len(batch) == 0 {
		return fmt.Errorf("%w: empty batch", ErrInvalidInput)
	}
	plain := make([]Transition, len(batch))
	for i, t := range batch {
		plain[i] = t.Transition
		if err := m.checkWindow("window", t.Window); err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		if err := checkState("signature", t.Signature, m.cfg.SignatureDim); err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		if t.Aux != nil {
			if len(t.Aux) != m.cfg.AuxDim {
				return fmt.Errorf("%w: transition %d: aux has %d values, the auxiliary head predicts %d", ErrInvalidInput, i, len(t.Aux), m.cfg.AuxDim)
			}
			if _, ok := allFinite(t.Aux); !ok {
				return fmt.Errorf("%w: %w: transition %d: aux %v", ErrInvalidInput, ErrNonFinite, i, t.Aux)
			}
		}
	}
	// The state, mask, action and reward rules are PPO's.
	p := PPO{cfg: m.cfg.Config}
	return p.checkTransitions(plain)
}

func (m *MetaPPO) finiteParams() (string, bool) {
	for _, p := range m.all {
		if _, ok := allFinite(p.data); !ok {
			return p.name, false
		}
	}
	return "", true
}

// ErrDiverged.
// Update runs PPO on a batch of experience with windows, exactly as
// PPO.Update does on plain transitions (GAE, clipped objective, entropy
// bonus, value loss, Adam, global-norm clipping), with the gradient flowing
// into the encoder. Advantages use the embeddings of the weights at the
// start of the call; the graph recomputes them from the windows at every
// step, so the encoder learns whatever helps actor and critic.
//
// Bad input is rejected before any change; a non-finite loss, gradient or
// weight rolls the whole call back and returns an error wrapping
func (m *MetaPPO) Update(batch []MetaTransition) (Stats, error) {
	if err := m.checkTransitions(batch); err != nil {
		return Stats{}, fmt.Errorf("meta-PPO update: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()

	return train(m, "meta-PPO update", "the update", func() (Stats, error) { return m.update(batch) })
}

func (m *MetaPPO) update(batch []MetaTransition) (Stats, error) {
	n := len(batch)
	windows := make([][]Step, 0, 2*n)
	for _, t := range batch {
		windows = append(windows, t.Window)
	}
	for _, t := range batch {
		// Full slice expression: appending must never write into the
		// caller's backing array.
		w := t.Window[:len(t.Window):len(t.Window)]
		windows = append(windows, append(w, Step{State: t.State, Signature: t.Signature, Action: t.Action, Reward: t.Reward}))
	}
	emb := split(m.enc.forward(false, windows, m.cfg), 2*n, m.cfg.EmbedDim)
	aug := make([]Transition, n)
	for i, t := range batch {
		aug[i] = t.Transition
		aug[i].State = slices.Concat(t.State, emb[i])
		if !t.Done {
			aug[i].NextState = slices.Concat(t.NextState, emb[n+i])
		}
	}
	oldLogp, adv, ret, ev, err := prepareAdvantages(m.ac, m.acCfg, aug)
	if err != nil {
		return Stats{}, err
	}
	g := m.graph
	stats, err := runPPOEpochs(m.cfg.Config, m.shuffle, n, &g.ppoHead,
		func(rows []int) { g.fill(batch, rows, oldLogp, adv, ret, m.cfg) },
		func() (float64, error) {
			return applyGradients(g.grads, m.all, m.grads, m.cfg.MaxGradNorm, adamConfig{
				lr: scaledRate(m.cfg.LearningRate, m.rate), beta1: m.cfg.AdamBeta1, beta2: m.cfg.AdamBeta2, eps: m.cfg.AdamEpsilon,
			})
		})
	stats.ExplainedVariance = ev
	return stats, err
}

func (m *MetaPPO) snapshot() (*snapshot, error) {
	s := snapshotParams(m.all)
	rng, err := m.shufflePCG.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("saving shuffle state: %w", err)
	}
	s.rng = rng
	return s, nil
}

func (m *MetaPPO) restore(s *snapshot) error {
	restoreParams(m.all, s)
	if err := m.shufflePCG.UnmarshalBinary(s.rng); err != nil {
		return fmt.Errorf("restoring shuffle state: %w", err)
	}
	return nil
}

// publish makes the canonical weights visible to inference. The caller
// holds m.mu.
func (m *MetaPPO) publish() {
	m.inferMu.Lock()
	defer m.inferMu.Unlock()
	for _, p := range m.all {
		copy(p.infer, p.data)
	}
}
