package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	G "gorgonia.org/gorgonia"
)

// Independent PCG streams derived from Config.Seed, so that changing how
// many random numbers initialisation draws never changes the shuffling.
const (
	streamInit    = 0x5eed_0001
	streamShuffle = 0x5eed_0002
)

// PPO is a proximal-policy-optimisation actor-critic over a discrete, maskable
// action set. Actor and critic are separate tanh MLPs.
//
// PPO is safe for concurrent use. Training calls (Update, BehaviourClone,
// UnmarshalBinary) are serialised with each other and with MarshalBinary;
// acting (Act, ActBatch) runs in parallel with other acting calls and only
// waits for the brief copy that publishes new weights at the end of a
// training call, so a long Update does not stall inference.
type PPO struct {
	cfg Config

	// mu guards the canonical weights and Adam state (ps.*.data, m, v,
	// steps), the shuffle generator and the training graphs, whose
	// TapeMachines are not goroutine-safe. Lock order: mu, then inferMu.
	mu         sync.Mutex
	ps         *paramSet
	shufflePCG *rand.PCG
	shuffle    *rand.Rand
	ppo        *ppoGraph
	bc         *bcGraph
	grads      [][]float64 // scratch, aligned with ps.all
	// rate scales cfg.LearningRate for the next optimiser steps (a
	// schedule set by the trainer); 0 means 1. It is not checkpointed: the
	// checkpoint keeps the configured rate.
	rate float64

	// inferMu guards the inference weight copies (ps.*.infer). Acting only
	// reads them, so many Act calls proceed in parallel.
	inferMu sync.RWMutex
}

// NewPPO creates a PPO learner with freshly initialised weights. The same
// config (including Seed) always yields bit-identical weights.
func NewPPO(cfg Config) (*PPO, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.clone()
	initRNG := rand.New(rand.NewPCG(cfg.Seed, streamInit))
	p := &PPO{
		cfg:        cfg,
		ps:         newActorCriticParams(cfg, initRNG),
		shufflePCG: rand.NewPCG(cfg.Seed, streamShuffle),
	}
	p.shuffle = rand.New(p.shufflePCG)
	p.grads = make([][]float64, len(p.ps.all))
	var err error
	if p.ppo, err = newPPOGraph(cfg, p.ps); err != nil {
		return nil, err
	}
	if p.bc, err = newBCGraph(cfg, p.ps); err != nil {
		return nil, err
	}
	return p, nil
}

// Config returns a copy of the learner's configuration.
func (p *PPO) Config() Config { return p.cfg.clone() }

// Act chooses an action for one state; see DiscreteLearner.
func (p *PPO) Act(state []float64, mask []bool, greedy bool, rng *rand.Rand) (Decision, error) {
	if err := p.checkActInput(state, mask, greedy, rng); err != nil {
		return Decision{}, err
	}
	p.inferMu.RLock()
	logits, values := actorCriticForward(p.ps, true, [][]float64{state}, p.cfg.StateDim)
	p.inferMu.RUnlock()
	return decide(logits, values[0], mask, p.cfg.heads(), greedy, rng)
}

// ActBatch chooses actions for many states in one forward pass; see
// DiscreteLearner.
func (p *PPO) ActBatch(states [][]float64, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error) {
	if masks != nil && len(masks) != len(states) {
		return nil, fmt.Errorf("%w: %d masks for %d states", ErrInvalidInput, len(masks), len(states))
	}
	if len(states) == 0 {
		return nil, nil
	}
	for i, s := range states {
		if err := p.checkActInput(s, maskAt(masks, i), greedy, rng); err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
	}
	p.inferMu.RLock()
	logits, values := actorCriticForward(p.ps, true, states, p.cfg.StateDim)
	p.inferMu.RUnlock()
	return decideBatch(logits, values, p.cfg.heads(), masks, greedy, rng)
}

// decideBatch turns a batched forward pass (len(values) rows of the heads'
// logits each) into one decision per row.
func decideBatch(logits, values []float64, heads []int, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error) {
	numActions := 0
	for _, n := range heads {
		numActions += n
	}
	out := make([]Decision, len(values))
	for i := range out {
		d, err := decide(logits[i*numActions:(i+1)*numActions], values[i], maskAt(masks, i), heads, greedy, rng)
		if err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
		out[i] = d
	}
	return out, nil
}

func (p *PPO) checkActInput(state []float64, mask []bool, greedy bool, rng *rand.Rand) error {
	if err := checkState("state", state, p.cfg.StateDim); err != nil {
		return err
	}
	if err := p.cfg.checkMask("mask", mask); err != nil {
		return err
	}
	if !greedy && rng == nil {
		return fmt.Errorf("%w: sampling needs a random source", ErrInvalidInput)
	}
	return nil
}

func (p *PPO) checkTransitions(batch []Transition) error {
	if len(batch) == 0 {
		return fmt.Errorf("%w: empty batch", ErrInvalidInput)
	}
	for i, t := range batch {
		if err := checkState("state", t.State, p.cfg.StateDim); err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		if err := p.cfg.checkMask("mask", t.Mask); err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		if err := checkHeadsAction("action", t.Action, t.Mask, p.cfg.heads()); err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		if !isFinite(t.Reward) {
			return fmt.Errorf("transition %d: %w: %w: reward is %v", i, ErrInvalidInput, ErrNonFinite, t.Reward)
		}
		if !t.Done {
			if err := checkState("nextState", t.NextState, p.cfg.StateDim); err != nil {
				return fmt.Errorf("transition %d (not done): %w", i, err)
			}
		}
	}
	return nil
}

// Update runs PPO on a batch of experience: advantages by GAE(γ, λ) with the
// current critic, normalised over the batch; then Epochs passes of shuffled
// minibatches, each one Adam step on the clipped surrogate loss plus
// ValueCoef×value loss minus EntropyCoef×entropy, after global-norm clipping.
//
// The "old" policy of the probability ratio is the policy at the start of the
// call, so the batch may come from a slightly older policy (as with
// experience reported with some lag) without unbounded ratios.
//
// Bad input is rejected before any change. If training produces a non-finite
// loss, gradient or weight, every change of the call is rolled back and an
// error wrapping ErrDiverged is returned.
func (p *PPO) Update(batch []Transition) (Stats, error) {
	if err := p.checkTransitions(batch); err != nil {
		return Stats{}, fmt.Errorf("PPO update: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()

	return train(p, "PPO update", "the update", func() (Stats, error) { return p.update(batch) })
}

func (p *PPO) update(batch []Transition) (Stats, error) {
	oldLogp, adv, ret, ev, err := prepareAdvantages(p.ps, p.cfg, batch)
	if err != nil {
		return Stats{}, err
	}
	g := p.ppo
	stats, err := runPPOEpochs(p.cfg, p.shuffle, len(batch), &g.ppoHead,
		func(rows []int) { g.fill(batch, rows, oldLogp, adv, ret, p.cfg) },
		func() (float64, error) { return p.step(g.grads, p.ps.all) })
	stats.ExplainedVariance = ev
	return stats, err
}

// prepareAdvantages evaluates the policy at the start of an update: the old
// log-probabilities of the actions taken, GAE advantages (normalised over the
// batch) and returns under the current critic, and the critic's explained
// variance of those returns. cfg.StateDim is the width of the states in
// batch, which are the actor's and critic's inputs.
func prepareAdvantages(ps *paramSet, cfg Config, batch []Transition) (oldLogp, adv, ret []float64, ev float64, err error) {
	n, a := len(batch), cfg.NumActions
	states := make([][]float64, n)
	var nextStates [][]float64
	var nextIdx []int
	for i, t := range batch {
		states[i] = t.State
		if !t.Done {
			nextStates = append(nextStates, t.NextState)
			nextIdx = append(nextIdx, i)
		}
	}
	logits, values := actorCriticForward(ps, false, states, cfg.StateDim)
	nextValues := make([]float64, n)
	if len(nextStates) > 0 {
		nv := mlpForward(ps.critic, false, flatten(nextStates, cfg.StateDim), len(nextStates))
		for j, i := range nextIdx {
			nextValues[i] = nv[j]
		}
	}
	oldLogp = make([]float64, n)
	rowLogp := make([]float64, a)
	rewards := make([]float64, n)
	dones := make([]bool, n)
	truncs := make([]bool, n)
	for i, t := range batch {
		if err := maskedLogSoftmaxHeads(logits[i*a:(i+1)*a], t.Mask, cfg.heads(), rowLogp); err != nil {
			return nil, nil, nil, 0, fmt.Errorf("%w: old policy of transition %d: %w", ErrDiverged, i, err)
		}
		oldLogp[i] = actionLogProb(rowLogp, t.Action, cfg.heads())
		rewards[i], dones[i], truncs[i] = t.Reward, t.Done, t.Truncated
	}
	if i, ok := allFinite(values); !ok {
		return nil, nil, nil, 0, fmt.Errorf("%w: value of state %d is %v", ErrDiverged, i, values[i])
	}
	if i, ok := allFinite(nextValues); !ok {
		return nil, nil, nil, 0, fmt.Errorf("%w: value of next state %d is %v", ErrDiverged, i, nextValues[i])
	}
	adv, ret, err = ComputeGAE(rewards, values, nextValues, dones, truncs, cfg.Gamma, cfg.Lambda)
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("%w: %w", ErrDiverged, err)
	}
	normalize(adv)
	return oldLogp, adv, ret, explainedVariance(values, ret), nil
}

// runPPOEpochs runs cfg.Epochs shuffled passes over n samples in minibatches
// of the graph's batch size: fill writes the selected rows into the graph's
// inputs, and step applies the optimiser to the gradients of the run. Losses
// and KL are read from h. ExplainedVariance is left to the caller.
func runPPOEpochs(cfg Config, shuffle *rand.Rand, n int, h *ppoHead, fill func(rows []int), step func() (float64, error)) (Stats, error) {
	var stats Stats
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
epochs:
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		shuffle.Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for start := 0; start < n; start += h.batch {
			rows := idx[start:min(start+h.batch, n)]
			fill(rows)
			if err := h.m.run(); err != nil {
				return Stats{}, err
			}
			pl, vl, ent, kl, clipFrac, err := h.readStats(len(rows), cfg.ClipEpsilon)
			if err != nil {
				return Stats{}, err
			}
			if cfg.TargetKL > 0 && kl > 1.5*cfg.TargetKL {
				stats.EarlyStopped = true
				break epochs
			}
			norm, err := step()
			if err != nil {
				return Stats{}, err
			}
			stats.PolicyLoss += pl
			stats.ValueLoss += vl
			stats.Entropy += ent
			stats.ApproxKL += kl
			stats.ClipFraction += clipFrac
			stats.GradNorm += norm
			stats.Steps++
		}
		stats.Epochs++
	}
	if stats.Steps > 0 {
		k := float64(stats.Steps)
		stats.PolicyLoss /= k
		stats.ValueLoss /= k
		stats.Entropy /= k
		stats.ApproxKL /= k
		stats.ClipFraction /= k
		stats.GradNorm /= k
	}
	return stats, nil
}

// fill writes the selected rows into the graph's input buffers; the remaining
// rows are zero with weight 0, so they do not affect losses or gradients.
func (g *ppoGraph) fill(batch []Transition, rows []int, oldLogp, adv, ret []float64, cfg Config) {
	s := cfg.StateDim
	clear(g.x)
	g.fillHead(rows, oldLogp, adv, ret, cfg.heads(),
		func(i int) ([]bool, int) { return batch[i].Mask, batch[i].Action })
	for r, i := range rows {
		copy(g.x[r*s:(r+1)*s], batch[i].State)
	}
}

// fillHead writes the loss inputs of the selected rows (row r holds sample
// rows[r]) and zeroes the padding rows, which get weight 0. maskAction
// returns sample i's mask and action.
func (h *ppoHead) fillHead(rows []int, oldLogp, adv, ret []float64, heads []int, maskAction func(i int) ([]bool, int)) {
	a := 0
	for _, n := range heads {
		a += n
	}
	clear(h.maskBias)
	clear(h.oneHot)
	clear(h.oldLogp)
	clear(h.adv)
	clear(h.ret)
	clear(h.w)
	w := 1 / float64(len(rows))
	for r, i := range rows {
		mask, action := maskAction(i)
		fillMaskBias(h.maskBias[r*a:(r+1)*a], mask)
		setOneHot(h.oneHot[r*a:(r+1)*a], action, heads)
		h.oldLogp[r] = oldLogp[i]
		h.adv[r] = adv[i]
		h.ret[r] = ret[i]
		h.w[r] = w
	}
}

func fillMaskBias(dst []float64, mask []bool) {
	for j := range dst {
		if mask != nil && !mask[j] {
			dst[j] = maskedLogit
		} else {
			dst[j] = 0
		}
	}
}

// readStats reads the losses of the last run and derives approximate KL
// (the k3 estimator E[(r-1) - log r]) and the clip fraction over the n real
// rows.
func (g *ppoHead) readStats(n int, eps float64) (pl, vl, ent, kl, clipFrac float64, err error) {
	if pl, err = scalarOf(g.policyLoss); err != nil {
		return
	}
	if vl, err = scalarOf(g.valueLoss); err != nil {
		return
	}
	if ent, err = scalarOf(g.entropy); err != nil {
		return
	}
	if !isFinite(pl) || !isFinite(vl) || !isFinite(ent) {
		err = fmt.Errorf("%w: losses policy=%v value=%v entropy=%v", ErrDiverged, pl, vl, ent)
		return
	}
	logp, err := float64s(g.logp)
	if err != nil {
		return
	}
	for r := 0; r < n; r++ {
		logRatio := logp[r] - g.oldLogp[r]
		ratio := math.Exp(logRatio)
		kl += (ratio - 1) - logRatio
		if math.Abs(ratio-1) > eps {
			clipFrac++
		}
	}
	kl /= float64(n)
	clipFrac /= float64(n)
	return
}

// step applies one optimiser step to ps from the gradients of the last run.
// The caller holds p.mu.
func (p *PPO) step(gradValues []*G.Value, ps []*param) (float64, error) {
	return applyGradients(gradValues, ps, p.grads, p.cfg.MaxGradNorm, adamConfig{
		lr: scaledRate(p.cfg.LearningRate, p.rate), beta1: p.cfg.AdamBeta1, beta2: p.cfg.AdamBeta2, eps: p.cfg.AdamEpsilon,
	})
}

// SetLearningRateScale multiplies the configured learning rate by s in
// (0, 1] for the optimiser steps that follow (a schedule's current point);
// the checkpoint keeps the configured rate.
func (p *PPO) SetLearningRateScale(s float64) error {
	if err := checkRateScale(s); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = s
	return nil
}

// BehaviourClone trains the actor to imitate a teacher (for bootstrapping
// from the default controller): Epochs passes of shuffled minibatches
// minimising the cross-entropy between the masked policy and the teacher's
// actions, with Adam and global-norm clipping. The critic is not changed.
// Failures roll back like Update.
func (p *PPO) BehaviourClone(batch []Demonstration) (BCStats, error) {
	if len(batch) == 0 {
		return BCStats{}, fmt.Errorf("behaviour cloning: %w: empty batch", ErrInvalidInput)
	}
	for i, d := range batch {
		if err := checkDemonstration(d, p.cfg); err != nil {
			return BCStats{}, fmt.Errorf("behaviour cloning: demonstration %d: %w", i, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()

	return train(p, "behaviour cloning", "behaviour cloning", func() (BCStats, error) { return p.behaviourClone(batch) })
}

// checkDemonstration applies the rules of behaviour cloning's input to one
// demonstration: a finite state of the configured width, a mask of one
// entry per action if any, and a teacher action the mask allows.
func checkDemonstration(d Demonstration, cfg Config) error {
	if err := checkState("state", d.State, cfg.StateDim); err != nil {
		return err
	}
	if err := cfg.checkMask("mask", d.Mask); err != nil {
		return err
	}
	return checkHeadsAction("teacher action", d.Action, d.Mask, cfg.heads())
}

func (p *PPO) behaviourClone(batch []Demonstration) (BCStats, error) {
	return runBCEpochs(p.cfg, p.shuffle, p.bc, len(batch),
		func(i int) Demonstration { return batch[i] }, nil,
		func() (float64, error) { return p.step(p.bc.grads, p.ps.actor) })
}

// runBCEpochs runs cfg.Epochs shuffled passes of behaviour cloning over n
// demonstrations in minibatches of the graph's batch size. demo returns the
// i-th demonstration; fillMore, if not nil, writes the further inputs of
// the selected rows (MetaPPO's windows); step applies the optimiser to the
// gradients of the run. Accuracy is the teacher's agreement with the greedy
// masked policy during the last epoch, measured before each minibatch's
// step.
func runBCEpochs(cfg Config, shuffle *rand.Rand, g *bcGraph, n int, demo func(i int) Demonstration, fillMore func(rows []int), step func() (float64, error)) (BCStats, error) {
	s, a, heads := cfg.StateDim, cfg.NumActions, cfg.heads()
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	var stats BCStats
	var agree int
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		last := epoch == cfg.Epochs-1
		shuffle.Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for start := 0; start < n; start += g.batch {
			rows := idx[start:min(start+g.batch, n)]
			g.fill(rows, demo, s, a, heads)
			if fillMore != nil {
				fillMore(rows)
			}
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
					if greedyAction(logpAll[r*a:(r+1)*a], heads) == demo(i).Action {
						agree++
					}
				}
			}
			norm, err := step()
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

// argmax returns the index of the largest value, the lowest index on ties.
// Masked entries are ~-1e9 and never win against a legal one.
func argmax(xs []float64) int {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return best
}

// learner is what train needs of PPO and MetaPPO; the caller of each
// method holds the learner's mu.
type learner interface {
	snapshot() (*snapshot, error)
	restore(*snapshot) error
	// finiteParams names a parameter that is not finite, if any.
	finiteParams() (name string, ok bool)
	publish()
}

// train runs one training call fn on l as a transaction, the caller holding
// l's mu: if fn fails, or leaves a parameter that is not finite (then the
// error wraps ErrDiverged), l is rolled back to its state before the call;
// else the new weights are published to inference. op prefixes the errors;
// after names the call in the divergence message.
func train[S any](l learner, op, after string, fn func() (S, error)) (S, error) {
	var zero S
	snap, err := l.snapshot()
	if err != nil {
		return zero, fmt.Errorf("%s: %w", op, err)
	}
	stats, err := fn()
	if err == nil {
		if name, ok := l.finiteParams(); !ok {
			err = fmt.Errorf("%w: parameter %s is not finite after %s", ErrDiverged, name, after)
		}
	}
	if err != nil {
		if rerr := l.restore(snap); rerr != nil {
			return zero, fmt.Errorf("%s: %w (rollback failed: %v)", op, err, rerr)
		}
		return zero, fmt.Errorf("%s: %w", op, err)
	}
	l.publish()
	return stats, nil
}

func (p *PPO) finiteParams() (string, bool) { return p.ps.finite() }

// snapshot captures the training state for rollback. The caller holds p.mu.
func (p *PPO) snapshot() (*snapshot, error) {
	s := p.ps.snapshot()
	rng, err := p.shufflePCG.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("saving shuffle state: %w", err)
	}
	s.rng = rng
	return s, nil
}

// restore rolls back to a snapshot. The caller holds p.mu. The inference
// copies were never touched, so they need no refresh.
func (p *PPO) restore(s *snapshot) error {
	p.ps.restore(s)
	if err := p.shufflePCG.UnmarshalBinary(s.rng); err != nil {
		return fmt.Errorf("restoring shuffle state: %w", err)
	}
	return nil
}

func flatten(rows [][]float64, dim int) []float64 {
	x := make([]float64, len(rows)*dim)
	for i, r := range rows {
		copy(x[i*dim:(i+1)*dim], r)
	}
	return x
}

// publish makes the canonical weights visible to inference. The caller holds
// p.mu.
func (p *PPO) publish() {
	p.inferMu.Lock()
	defer p.inferMu.Unlock()
	p.ps.syncInference()
}
