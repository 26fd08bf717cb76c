package nn

import (
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
)

// MetaDemonstration is a teacher's choice together with the trajectory that
// preceded State (oldest first), for MetaPPO.BehaviourClone.
type MetaDemonstration struct {
	Demonstration
	Window []Step
}

// newMetaBCGraph builds the behaviour-cloning graph of the actor on [state,
// embedding], with the gradient with respect to the actor's and the
// encoder's weights: cloning the defaults also shapes the embedding, so the
// encoder starts from features that help imitate them. The gradients are
// aligned with MetaPPO.bcParams().
func newMetaBCGraph(cfg MetaConfig, ac *paramSet, enc *gru) (*bcGraph, error) {
	return buildBCGraph("meta behaviour-cloning graph", cfg.Config, ac.actor,
		func(b *builder, c *bcGraph, x *G.Node) (*G.Node, []*G.Node) {
			var h *G.Node
			var gw []*G.Node
			c.steps, c.stepMask, h, gw = b.encoder(cfg, enc)
			return b.apply("concat", func() (*G.Node, error) { return G.Concat(1, x, h) }), gw
		})
}

// bcParams are the parameters behaviour cloning trains: the actor, then the
// encoder. The critic is left alone, as in PPO.BehaviourClone.
func (m *MetaPPO) bcParams() []*param {
	return append(slices.Clone(m.ac.actor), m.enc.params()...)
}

// BehaviourClone trains the actor and the encoder to imitate a teacher, as
// PPO.BehaviourClone does for the actor alone: Epochs passes of shuffled
// minibatches of masked cross-entropy, Adam and global-norm clipping. The
// training graph is built on the first call. Bad input is rejected before
// any change; failures roll back like Update.
func (m *MetaPPO) BehaviourClone(batch []MetaDemonstration) (BCStats, error) {
	if len(batch) == 0 {
		return BCStats{}, fmt.Errorf("meta behaviour cloning: %w: empty batch", ErrInvalidInput)
	}
	for i, d := range batch {
		if err := checkDemonstration(d.Demonstration, m.cfg.Config); err != nil {
			return BCStats{}, fmt.Errorf("meta behaviour cloning: demonstration %d: %w", i, err)
		}
		if err := m.checkWindow("window", d.Window); err != nil {
			return BCStats{}, fmt.Errorf("meta behaviour cloning: demonstration %d: %w", i, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bc == nil {
		g, err := newMetaBCGraph(m.cfg, m.ac, m.enc)
		if err != nil {
			return BCStats{}, err
		}
		m.bc = g
	}
	return train(m, "meta behaviour cloning", "behaviour cloning", func() (BCStats, error) { return m.behaviourClone(batch) })
}

func (m *MetaPPO) behaviourClone(batch []MetaDemonstration) (BCStats, error) {
	g := m.bc
	params := m.bcParams()
	opt := adamConfig{lr: scaledRate(m.cfg.LearningRate, m.rate), beta1: m.cfg.AdamBeta1, beta2: m.cfg.AdamBeta2, eps: m.cfg.AdamEpsilon}
	return runBCEpochs(m.cfg.Config, m.shuffle, g, len(batch),
		func(i int) Demonstration { return batch[i].Demonstration },
		func(rows []int) {
			fillWindows(g.steps, g.stepMask, rows, func(i int) []Step { return batch[i].Window }, m.cfg)
		},
		func() (float64, error) { return applyGradients(g.grads, params, m.grads, m.cfg.MaxGradNorm, opt) })
}
