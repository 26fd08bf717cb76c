package policy

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

// metaBCGraph is the masked cross-entropy between the actor on [state,
// embedding] and a teacher's actions, with its gradient with respect to the
// actor's and the encoder's weights: cloning the defaults also shapes the
// embedding, so the encoder starts from features that help imitate them.
type metaBCGraph struct {
	batch    int
	x        []float64
	maskBias []float64
	oneHot   []float64
	w        []float64
	steps    [][]float64
	stepMask [][]float64

	logpAll *G.Value
	loss    *G.Value
	grads   []*G.Value // aligned with MetaPPO.bcParams()
	m       machine
}

func newMetaBCGraph(cfg MetaConfig, ac *paramSet, enc *gru) (*metaBCGraph, error) {
	n, s, a := cfg.MinibatchSize, cfg.StateDim, cfg.NumActions
	c := &metaBCGraph{
		batch:    n,
		x:        make([]float64, n*s),
		maskBias: make([]float64, n*a),
		oneHot:   make([]float64, n*a),
		w:        make([]float64, n),
	}
	b := &builder{g: G.NewGraph()}
	x := b.input("x", c.x, n, s)
	maskBias := b.input("maskBias", c.maskBias, n, a)
	oneHot := b.input("oneHot", c.oneHot, n, a)
	w := b.input("w", c.w, n)
	var h *G.Node
	var gw []*G.Node
	c.steps, c.stepMask, h, gw = b.encoder(cfg, enc)
	in := b.apply("concat", func() (*G.Node, error) { return G.Concat(1, x, h) })
	actorW := b.weights(ac.actor)
	logpAll := b.logSoftmax(b.add(b.mlp(in, actorW), maskBias))
	loss := b.neg(b.weightedMean(w, b.sum(b.mul(logpAll, oneHot), 1)))
	if b.err != nil {
		return nil, fmt.Errorf("meta behaviour-cloning graph: %w", b.err)
	}
	grads, err := G.Grad(loss, append(slices.Clone(actorW), gw...)...)
	if err != nil {
		return nil, fmt.Errorf("meta behaviour-cloning graph gradients: %w", err)
	}
	c.logpAll, c.loss, c.grads = b.read(logpAll), b.read(loss), b.readAll(grads)
	if b.err != nil {
		return nil, fmt.Errorf("meta behaviour-cloning graph: %w", b.err)
	}
	c.m = machine{vm: G.NewTapeMachine(b.g)}
	return c, nil
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
		if err := checkState("state", d.State, m.cfg.StateDim); err != nil {
			return BCStats{}, fmt.Errorf("meta behaviour cloning: demonstration %d: %w", i, err)
		}
		if err := checkMask("mask", d.Mask, m.cfg.NumActions); err != nil {
			return BCStats{}, fmt.Errorf("meta behaviour cloning: demonstration %d: %w", i, err)
		}
		if err := checkAction("teacher action", d.Action, d.Mask, m.cfg.NumActions); err != nil {
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
	snap, err := m.snapshot()
	if err != nil {
		return BCStats{}, fmt.Errorf("meta behaviour cloning: %w", err)
	}
	stats, err := m.behaviourClone(batch)
	if err == nil {
		for _, p := range m.all {
			if _, ok := allFinite(p.data); !ok {
				err = fmt.Errorf("%w: parameter %s is not finite after behaviour cloning", ErrDiverged, p.name)
				break
			}
		}
	}
	if err != nil {
		if rerr := m.restore(snap); rerr != nil {
			return BCStats{}, fmt.Errorf("meta behaviour cloning: %w (rollback failed: %v)", err, rerr)
		}
		return BCStats{}, fmt.Errorf("meta behaviour cloning: %w", err)
	}
	m.publish()
	return stats, nil
}

func (m *MetaPPO) behaviourClone(batch []MetaDemonstration) (BCStats, error) {
	n, s, a := len(batch), m.cfg.StateDim, m.cfg.NumActions
	g := m.bc
	params := m.bcParams()
	opt := adamConfig{lr: m.cfg.LearningRate, beta1: m.cfg.AdamBeta1, beta2: m.cfg.AdamBeta2, eps: m.cfg.AdamEpsilon}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	var stats BCStats
	var agree int
	for epoch := 0; epoch < m.cfg.Epochs; epoch++ {
		last := epoch == m.cfg.Epochs-1
		m.shuffle.Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for start := 0; start < n; start += g.batch {
			rows := idx[start:min(start+g.batch, n)]
			clear(g.x)
			clear(g.maskBias)
			clear(g.oneHot)
			clear(g.w)
			w := 1 / float64(len(rows))
			for r, i := range rows {
				d := batch[i]
				copy(g.x[r*s:(r+1)*s], d.State)
				fillMaskBias(g.maskBias[r*a:(r+1)*a], d.Mask)
				g.oneHot[r*a+d.Action] = 1
				g.w[r] = w
			}
			fillWindows(g.steps, g.stepMask, rows, func(i int) []Step { return batch[i].Window }, m.cfg)
			if err := g.m.run(); err != nil {
				return BCStats{}, err
			}
			loss, err := scalarOf(g.loss)
			if err != nil {
				return BCStats{}, err
			}
			if !isFinite(loss) {
				return BCStats{}, fmt.Errorf("%w: loss is %v", ErrDiverged, loss)
			}
			if last {
				logpAll, err := float64s(g.logpAll)
				if err != nil {
					return BCStats{}, err
				}
				for r, i := range rows {
					if argmax(logpAll[r*a:(r+1)*a]) == batch[i].Action {
						agree++
					}
				}
			}
			norm, err := applyGradients(g.grads, params, m.grads, m.cfg.MaxGradNorm, opt)
			if err != nil {
				return BCStats{}, err
			}
			stats.Loss += loss
			stats.GradNorm += norm
			stats.Steps++
		}
	}
	stats.Loss /= float64(stats.Steps)
	stats.GradNorm /= float64(stats.Steps)
	stats.Accuracy = float64(agree) / float64(n)
	return stats, nil
}
