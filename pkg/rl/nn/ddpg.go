package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	G "gorgonia.org/gorgonia"
)

const kindDDPG = "ddpg"

// DDPGConfig configures a DDPG learner, the FIRM baseline: a deterministic
// actor for continuous actions in [-1, 1]^ActionDim and a Q critic, each with
// a slowly tracking target network.
type DDPGConfig struct {
	StateDim  int   `json:"stateDim"`
	ActionDim int   `json:"actionDim"`
	Hidden    []int `json:"hidden"`

	ActorLearningRate  float64 `json:"actorLearningRate"`
	CriticLearningRate float64 `json:"criticLearningRate"`
	Gamma              float64 `json:"gamma"`
	// Tau is the soft target update rate: θ' ← τθ + (1-τ)θ' after every
	// minibatch step.
	Tau         float64 `json:"tau"`
	MaxGradNorm float64 `json:"maxGradNorm"`
	// MinibatchSize fixes the shape of the training graphs; Update splits its
	// batch into minibatches of this size.
	MinibatchSize int `json:"minibatchSize"`

	AdamBeta1   float64 `json:"adamBeta1"`
	AdamBeta2   float64 `json:"adamBeta2"`
	AdamEpsilon float64 `json:"adamEpsilon"`

	// Seed determines the initial weights.
	Seed uint64 `json:"seed"`
}

// DefaultDDPGConfig returns the DDPG paper's defaults, scaled to small
// networks.
func DefaultDDPGConfig(stateDim, actionDim int) DDPGConfig {
	return DDPGConfig{
		StateDim:           stateDim,
		ActionDim:          actionDim,
		Hidden:             []int{64, 64},
		ActorLearningRate:  1e-4,
		CriticLearningRate: 1e-3,
		Gamma:              0.99,
		Tau:                0.005,
		MaxGradNorm:        1,
		MinibatchSize:      64,
		AdamBeta1:          0.9,
		AdamBeta2:          0.999,
		AdamEpsilon:        1e-8,
		Seed:               1,
	}
}

// Validate reports every problem with the configuration at once.
func (c DDPGConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.StateDim < 1 || c.StateDim > maxStateDim {
		bad("stateDim must be in [1, %d], got %d", maxStateDim, c.StateDim)
	}
	if c.ActionDim < 1 || c.ActionDim > maxActions {
		bad("actionDim must be in [1, %d], got %d", maxActions, c.ActionDim)
	}
	if len(c.Hidden) < 1 || len(c.Hidden) > maxLayers {
		bad("hidden must list between 1 and %d layer widths, got %d", maxLayers, len(c.Hidden))
	}
	for i, h := range c.Hidden {
		if h < 1 || h > maxHidden {
			bad("hidden[%d] must be in [1, %d], got %d", i, maxHidden, h)
		}
	}
	for _, f := range []struct {
		name   string
		v      float64
		lo, hi float64
		openLo bool
	}{
		{"actorLearningRate", c.ActorLearningRate, 0, 1, true},
		{"criticLearningRate", c.CriticLearningRate, 0, 1, true},
		{"gamma", c.Gamma, 0, 1, false},
		{"tau", c.Tau, 0, 1, true},
		{"maxGradNorm", c.MaxGradNorm, 0, math.MaxFloat64, true},
		{"adamEpsilon", c.AdamEpsilon, 0, 1, true},
	} {
		if !isFinite(f.v) || f.v < f.lo || f.v > f.hi || (f.openLo && f.v == f.lo) {
			bad("%s out of range: %v", f.name, f.v)
		}
	}
	if c.MinibatchSize < 1 || c.MinibatchSize > maxBatchSize {
		bad("minibatchSize must be in [1, %d], got %d", maxBatchSize, c.MinibatchSize)
	}
	if !isFinite(c.AdamBeta1) || c.AdamBeta1 < 0 || c.AdamBeta1 >= 1 {
		bad("adamBeta1 must be in [0, 1), got %v", c.AdamBeta1)
	}
	if !isFinite(c.AdamBeta2) || c.AdamBeta2 < 0 || c.AdamBeta2 >= 1 {
		bad("adamBeta2 must be in [0, 1), got %v", c.AdamBeta2)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid DDPG config: %w", err)
	}
	return nil
}

func (c DDPGConfig) sameArchitecture(o DDPGConfig) bool {
	return c.StateDim == o.StateDim && c.ActionDim == o.ActionDim && slices.Equal(c.Hidden, o.Hidden)
}

// ContinuousTransition is one step of experience for DDPG.
type ContinuousTransition struct {
	State []float64
	// Action is the action applied, each component in [-1, 1].
	Action []float64
	Reward float64
	// NextState is required unless Done.
	NextState []float64
	// Done marks a terminal transition (no bootstrapping). A time limit is
	// not terminal: leave Done false and supply NextState.
	Done bool
}

// DDPGStats summarises one DDPG Update; values are means over its steps.
type DDPGStats struct {
	CriticLoss float64
	// ActorLoss is -mean Q(s, μ(s)).
	ActorLoss      float64
	CriticGradNorm float64
	ActorGradNorm  float64
	Steps          int
}

// ContinuousLearner is a trainable deterministic policy over continuous
// actions in [-1, 1]^d. Implementations are safe for concurrent use.
type ContinuousLearner interface {
	// Act returns μ(state) plus Gaussian exploration noise of standard
	// deviation noiseStd, clipped to [-1, 1]. rng is needed only when
	// noiseStd > 0.
	Act(state []float64, noiseStd float64, rng *rand.Rand) ([]float64, error)
	// Update takes one critic step, one actor step and one soft target
	// update per minibatch of the batch. Callers sample the batch from their
	// replay memory.
	Update(batch []ContinuousTransition) (DDPGStats, error)
	MarshalBinary() ([]byte, error)
	UnmarshalBinary(data []byte) error
}

var _ ContinuousLearner = (*DDPG)(nil)

// DDPG is deep deterministic policy gradient (Lillicrap et al.), used as the
// FIRM baseline. Locking follows PPO: training calls hold mu; Act only takes
// a read lock on the published copy of the actor.
type DDPG struct {
	cfg DDPGConfig

	mu           sync.Mutex
	actor        []*param
	critic       []*param
	targetActor  []*param // only data is used
	targetCritic []*param // only data is used
	criticG      *ddpgCriticGraph
	actorG       *ddpgActorGraph
	grads        [][]float64

	inferMu sync.RWMutex // guards actor[*].infer
}

// NewDDPG creates a DDPG learner; the targets start as copies of the online
// networks. The same config gives bit-identical weights.
func NewDDPG(cfg DDPGConfig) (*DDPG, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Hidden = slices.Clone(cfg.Hidden)
	rng := rand.New(rand.NewPCG(cfg.Seed, streamInit))
	actorWidths := append(append([]int{cfg.StateDim}, cfg.Hidden...), cfg.ActionDim)
	criticWidths := append(append([]int{cfg.StateDim + cfg.ActionDim}, cfg.Hidden...), 1)
	// A small actor output layer keeps tanh away from saturation at the
	// start, where its gradient would vanish.
	d := &DDPG{
		cfg:    cfg,
		actor:  mlpParams("actor", actorWidths, 0.1, rng),
		critic: mlpParams("critic", criticWidths, 1, rng),
	}
	d.targetActor = cloneParams("target/", d.actor)
	d.targetCritic = cloneParams("target/", d.critic)
	d.grads = make([][]float64, max(len(d.actor), len(d.critic)))
	var err error
	if d.criticG, err = newDDPGCriticGraph(cfg, d.critic); err != nil {
		return nil, err
	}
	if d.actorG, err = newDDPGActorGraph(cfg, d.actor, d.critic); err != nil {
		return nil, err
	}
	d.publish()
	return d, nil
}

// Config returns a copy of the learner's configuration.
func (d *DDPG) Config() DDPGConfig {
	c := d.cfg
	c.Hidden = slices.Clone(c.Hidden)
	return c
}

func (d *DDPG) all() []*param {
	return slices.Concat(d.actor, d.critic, d.targetActor, d.targetCritic)
}

// Act returns the actor's action for state with optional exploration noise;
// see ContinuousLearner.
func (d *DDPG) Act(state []float64, noiseStd float64, rng *rand.Rand) ([]float64, error) {
	if err := checkState("state", state, d.cfg.StateDim); err != nil {
		return nil, err
	}
	if !isFinite(noiseStd) || noiseStd < 0 {
		return nil, fmt.Errorf("%w: noise standard deviation %v", ErrInvalidInput, noiseStd)
	}
	if noiseStd > 0 && rng == nil {
		return nil, fmt.Errorf("%w: exploration noise needs a random source", ErrInvalidInput)
	}
	d.inferMu.RLock()
	out := mlpForward(d.actor, true, state, 1)
	d.inferMu.RUnlock()
	for i, v := range out {
		a := math.Tanh(v)
		if noiseStd > 0 {
			a += noiseStd * rng.NormFloat64()
		}
		out[i] = math.Max(-1, math.Min(1, a))
	}
	if i, ok := allFinite(out); !ok {
		return nil, fmt.Errorf("%w: action component %d is %v", ErrNonFinite, i, out[i])
	}
	return out, nil
}

func (d *DDPG) checkTransitions(batch []ContinuousTransition) error {
	if len(batch) == 0 {
		return fmt.Errorf("%w: empty batch", ErrInvalidInput)
	}
	for i, t := range batch {
		if err := checkState("state", t.State, d.cfg.StateDim); err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		if err := checkState("action", t.Action, d.cfg.ActionDim); err != nil {
			return fmt.Errorf("transition %d: %w", i, err)
		}
		for j, a := range t.Action {
			if a < -1 || a > 1 {
				return fmt.Errorf("transition %d: %w: action[%d] = %v outside [-1, 1]", i, ErrInvalidInput, j, a)
			}
		}
		if !isFinite(t.Reward) {
			return fmt.Errorf("transition %d: %w: %w: reward is %v", i, ErrInvalidInput, ErrNonFinite, t.Reward)
		}
		if !t.Done {
			if err := checkState("nextState", t.NextState, d.cfg.StateDim); err != nil {
				return fmt.Errorf("transition %d (not done): %w", i, err)
			}
		}
	}
	return nil
}

// Update trains on batch in order, one minibatch at a time: a critic step
// towards r + γ·Q'(s', μ'(s')), an actor step up the critic's gradient, and
// a soft update of both targets. Bad input changes nothing; divergence rolls
// everything back and returns an error wrapping ErrDiverged.
func (d *DDPG) Update(batch []ContinuousTransition) (DDPGStats, error) {
	if err := d.checkTransitions(batch); err != nil {
		return DDPGStats{}, fmt.Errorf("DDPG update: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	all := d.all()
	snap := snapshotParams(all)
	stats, err := d.update(batch)
	if err == nil {
		for _, q := range all {
			if _, ok := allFinite(q.data); !ok {
				err = fmt.Errorf("%w: parameter %s is not finite after the update", ErrDiverged, q.name)
				break
			}
		}
	}
	if err != nil {
		restoreParams(all, snap)
		return DDPGStats{}, fmt.Errorf("DDPG update: %w", err)
	}
	d.publish()
	return stats, nil
}

func (d *DDPG) update(batch []ContinuousTransition) (DDPGStats, error) {
	var stats DDPGStats
	mb := d.cfg.MinibatchSize
	for start := 0; start < len(batch); start += mb {
		rows := batch[start:min(start+mb, len(batch))]
		if err := d.criticG.fill(rows, d.targets(rows), d.cfg); err != nil {
			return DDPGStats{}, err
		}
		if err := d.criticG.m.run(); err != nil {
			return DDPGStats{}, err
		}
		closs, err := scalarOf(d.criticG.loss)
		if err != nil {
			return DDPGStats{}, err
		}
		if !isFinite(closs) {
			return DDPGStats{}, fmt.Errorf("%w: critic loss is %v", ErrDiverged, closs)
		}
		cnorm, err := applyGradients(d.criticG.grads, d.critic, d.grads, d.cfg.MaxGradNorm, d.adam(d.cfg.CriticLearningRate))
		if err != nil {
			return DDPGStats{}, err
		}

		// The actor step uses the critic just updated, as in the paper.
		d.actorG.fill(rows, d.cfg)
		if err := d.actorG.m.run(); err != nil {
			return DDPGStats{}, err
		}
		aloss, err := scalarOf(d.actorG.loss)
		if err != nil {
			return DDPGStats{}, err
		}
		if !isFinite(aloss) {
			return DDPGStats{}, fmt.Errorf("%w: actor loss is %v", ErrDiverged, aloss)
		}
		anorm, err := applyGradients(d.actorG.grads, d.actor, d.grads, d.cfg.MaxGradNorm, d.adam(d.cfg.ActorLearningRate))
		if err != nil {
			return DDPGStats{}, err
		}

		softUpdate(d.targetCritic, d.critic, d.cfg.Tau)
		softUpdate(d.targetActor, d.actor, d.cfg.Tau)
		stats.CriticLoss += closs
		stats.ActorLoss += aloss
		stats.CriticGradNorm += cnorm
		stats.ActorGradNorm += anorm
		stats.Steps++
	}
	k := float64(stats.Steps)
	stats.CriticLoss /= k
	stats.ActorLoss /= k
	stats.CriticGradNorm /= k
	stats.ActorGradNorm /= k
	return stats, nil
}

func (d *DDPG) adam(lr float64) adamConfig {
	return adamConfig{lr: lr, beta1: d.cfg.AdamBeta1, beta2: d.cfg.AdamBeta2, eps: d.cfg.AdamEpsilon}
}

// targets computes r + γ·Q'(s', μ'(s')) with the target networks (zero
// bootstrap for terminal transitions). The caller holds d.mu.
func (d *DDPG) targets(rows []ContinuousTransition) []float64 {
	s, a := d.cfg.StateDim, d.cfg.ActionDim
	var next [][]float64
	for _, t := range rows {
		if !t.Done {
			next = append(next, t.NextState)
		}
	}
	var q []float64
	if len(next) > 0 {
		mu := mlpForward(d.targetActor, false, flatten(next, s), len(next))
		xa := make([]float64, len(next)*(s+a))
		for i, ns := range next {
			copy(xa[i*(s+a):], ns)
			for j := 0; j < a; j++ {
				xa[i*(s+a)+s+j] = math.Tanh(mu[i*a+j])
			}
		}
		q = mlpForward(d.targetCritic, false, xa, len(next))
	}
	y := make([]float64, len(rows))
	k := 0
	for i, t := range rows {
		y[i] = t.Reward
		if !t.Done {
			y[i] += d.cfg.Gamma * q[k]
			k++
		}
	}
	return y
}

// cloneParams copies the weights of ps into new parameters named prefix+name.
func cloneParams(prefix string, ps []*param) []*param {
	out := make([]*param, len(ps))
	for i, p := range ps {
		out[i] = newParam(prefix+p.name, p.rows, p.cols)
		copy(out[i].data, p.data)
	}
	return out
}

func softUpdate(target, online []*param, tau float64) {
	for i, t := range target {
		for j, v := range online[i].data {
			t.data[j] = tau*v + (1-tau)*t.data[j]
		}
	}
}

// publish makes the actor's weights visible to Act. The caller holds d.mu
// (or is the constructor).
func (d *DDPG) publish() {
	d.inferMu.Lock()
	defer d.inferMu.Unlock()
	for _, q := range d.actor {
		copy(q.infer, q.data)
	}
}

// MarshalBinary returns a checkpoint of the online and target weights, the
// Adam state and the configuration.
func (d *DDPG) MarshalBinary() ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return encodeCheckpoint(kindDDPG, d.cfg, d.all(), nil)
}

// UnmarshalBinary restores a checkpoint of a DDPG learner with the same
// architecture; hyperparameters stay this learner's. Nothing changes on
// error.
func (d *DDPG) UnmarshalBinary(data []byte) error {
	cfg, ck, err := decodeDDPGCheckpoint(data)
	if err != nil {
		return err
	}
	if !d.cfg.sameArchitecture(cfg) {
		return fmt.Errorf("%w: checkpoint has stateDim=%d actionDim=%d hidden=%v, learner has stateDim=%d actionDim=%d hidden=%v",
			ErrIncompatibleCheckpoint, cfg.StateDim, cfg.ActionDim, cfg.Hidden, d.cfg.StateDim, d.cfg.ActionDim, d.cfg.Hidden)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	all := d.all()
	if err := checkParams(all, ck.params); err != nil {
		return err
	}
	copyParams(all, ck.params)
	d.publish()
	return nil
}

// NewDDPGFromCheckpoint creates a DDPG learner entirely from a checkpoint.
func NewDDPGFromCheckpoint(data []byte) (*DDPG, error) {
	cfg, _, err := decodeDDPGCheckpoint(data)
	if err != nil {
		return nil, err
	}
	d, err := NewDDPG(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	if err := d.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	return d, nil
}

func decodeDDPGCheckpoint(data []byte) (DDPGConfig, *checkpoint, error) {
	return decodeConfigCheckpoint[DDPGConfig](data, kindDDPG)
}

// ddpgCriticGraph computes the critic's squared TD error and its gradient.
type ddpgCriticGraph struct {
	batch int
	xa    []float64 // batch×(stateDim+actionDim): state then action
	y     []float64 // batch: TD targets
	w     []float64 // batch: 1/n for real rows, 0 for padding

	loss  *G.Value
	grads []*G.Value // aligned with the critic's params
	m     machine
}

func newDDPGCriticGraph(cfg DDPGConfig, critic []*param) (*ddpgCriticGraph, error) {
	n, in := cfg.MinibatchSize, cfg.StateDim+cfg.ActionDim
	c := &ddpgCriticGraph{batch: n, xa: make([]float64, n*in), y: make([]float64, n), w: make([]float64, n)}
	b := &builder{g: G.NewGraph()}
	xa := b.input("xa", c.xa, n, in)
	y := b.input("y", c.y, n)
	w := b.input("w", c.w, n)
	criticW := b.weights(critic)
	q := b.reshape(b.mlp(xa, criticW), n)
	loss := b.weightedMean(w, b.square(b.sub(q, y)))
	if b.err != nil {
		return nil, fmt.Errorf("DDPG critic graph: %w", b.err)
	}
	grads, err := G.Grad(loss, criticW...)
	if err != nil {
		return nil, fmt.Errorf("DDPG critic graph gradients: %w", err)
	}
	c.loss, c.grads = b.read(loss), b.readAll(grads)
	c.m = machine{vm: G.NewTapeMachine(b.g)}
	return c, nil
}

func (c *ddpgCriticGraph) fill(rows []ContinuousTransition, y []float64, cfg DDPGConfig) error {
	if len(rows) > c.batch || len(y) != len(rows) {
		return fmt.Errorf("minibatch of %d rows (%d targets) does not fit graph batch %d", len(rows), len(y), c.batch)
	}
	s, in := cfg.StateDim, cfg.StateDim+cfg.ActionDim
	clear(c.xa)
	clear(c.y)
	clear(c.w)
	for r, t := range rows {
		copy(c.xa[r*in:], t.State)
		copy(c.xa[r*in+s:], t.Action)
		c.y[r] = y[r]
		c.w[r] = 1 / float64(len(rows))
	}
	return nil
}

// ddpgActorGraph computes -mean Q(s, μ(s)) and its gradient with respect to
// the actor only; the critic's weights are inputs here.
type ddpgActorGraph struct {
	batch int
	x     []float64 // batch×stateDim
	w     []float64 // batch

	loss  *G.Value
	grads []*G.Value // aligned with the actor's params
	m     machine
}

func newDDPGActorGraph(cfg DDPGConfig, actor, critic []*param) (*ddpgActorGraph, error) {
	n := cfg.MinibatchSize
	a := &ddpgActorGraph{batch: n, x: make([]float64, n*cfg.StateDim), w: make([]float64, n)}
	b := &builder{g: G.NewGraph()}
	x := b.input("x", a.x, n, cfg.StateDim)
	w := b.input("w", a.w, n)
	actorW := b.weights(actor)
	criticW := b.weights(critic)
	mu := b.tanh(b.mlp(x, actorW))
	xa := b.apply("concat", func() (*G.Node, error) { return G.Concat(1, x, mu) })
	q := b.reshape(b.mlp(xa, criticW), n)
	loss := b.neg(b.weightedMean(w, q))
	if b.err != nil {
		return nil, fmt.Errorf("DDPG actor graph: %w", b.err)
	}
	grads, err := G.Grad(loss, actorW...)
	if err != nil {
		return nil, fmt.Errorf("DDPG actor graph gradients: %w", err)
	}
	a.loss, a.grads = b.read(loss), b.readAll(grads)
	a.m = machine{vm: G.NewTapeMachine(b.g)}
	return a, nil
}

func (a *ddpgActorGraph) fill(rows []ContinuousTransition, cfg DDPGConfig) {
	s := cfg.StateDim
	clear(a.x)
	clear(a.w)
	for r, t := range rows {
		copy(a.x[r*s:], t.State)
		a.w[r] = 1 / float64(len(rows))
	}
}
