package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// Meta-PPO (AWARE's meta-learner): a GRU encoder reads the workload's recent
// trajectory and produces a small embedding that is concatenated to the
// state at the input of both actor and critic. One policy then serves many
// workloads, and on a new workload the embedding, not a gradient step, does
// most of the adapting. The encoder is trained end to end with the PPO loss:
// its gradient flows back from both the surrogate and the value loss.

const maxWindow = 1 << 10

// MetaConfig configures a MetaPPO learner. The embedded Config holds the
// problem (StateDim and NumActions are those of the plain state) and the PPO
// hyperparameters; its Hidden widths apply to the actor and the critic,
// whose input is the state followed by the embedding.
type MetaConfig struct {
	Config
	// Window is the number of recent steps the encoder reads. It fixes the
	// length of the unrolled GRU in the training graph; shorter histories are
	// padded and the padding leaves the GRU state untouched.
	Window int `json:"window"`
	// EmbedDim is the size of the GRU state, which is the embedding.
	EmbedDim int `json:"embedDim"`
	// AuxDim, when > 0, adds an auxiliary linear head that predicts AuxDim
	// values from the embedding (MetaTransition.Aux: e.g. the workload's
	// hidden parameters), trained jointly with the PPO loss with weight
	// AuxWeight on its mean squared error, so that the encoder must carry
	// what identifies the workload rather than only what the RL loss
	// happens to reward. The head is part of the architecture (its
	// weights are in the checkpoint) but not of acting. 0: no head, the
	// original Meta-PPO.
	AuxDim    int     `json:"auxDim,omitempty"`
	AuxWeight float64 `json:"auxWeight,omitempty"`
	// SignatureDim, when > 0, widens every encoder step by SignatureDim
	// values that only the encoder reads (Step.Signature): quantities that
	// identify the workload, such as its amounts per request, which the
	// state leaves out so that one actor serves workloads of every size.
	// 0: the steps are state, action and reward, as before signatures.
	SignatureDim int `json:"signatureDim,omitempty"`
	// Guard, when set, is the learner's embedding guard (EmbedGuard): the
	// range of embeddings seen where it learnt. It is not architecture: a
	// learner's guard is MetaPPO.Guard, set by SetGuard or a checkpoint.
	Guard *EmbedGuard `json:"guard,omitempty"`
}

// DefaultMetaConfig returns DefaultConfig with a 16-step window and an
// 8-dimensional embedding.
func DefaultMetaConfig(stateDim, numActions int) MetaConfig {
	return MetaConfig{Config: DefaultConfig(stateDim, numActions), Window: 16, EmbedDim: 8}
}

// Validate reports every problem with the configuration at once.
func (c MetaConfig) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Window < 1 || c.Window > maxWindow {
		errs = append(errs, fmt.Errorf("window must be in [1, %d], got %d", maxWindow, c.Window))
	}
	if c.EmbedDim < 1 || c.EmbedDim > maxHidden {
		errs = append(errs, fmt.Errorf("embedDim must be in [1, %d], got %d", maxHidden, c.EmbedDim))
	}
	if c.SignatureDim < 0 || c.SignatureDim > maxStateDim {
		errs = append(errs, fmt.Errorf("signatureDim must be in [0, %d], got %d", maxStateDim, c.SignatureDim))
	}
	if c.AuxDim < 0 || c.AuxDim > maxHidden {
		errs = append(errs, fmt.Errorf("auxDim must be in [0, %d], got %d", maxHidden, c.AuxDim))
	}
	if !(c.AuxWeight >= 0) || math.IsInf(c.AuxWeight, 0) || (c.AuxWeight > 0 && c.AuxDim == 0) {
		errs = append(errs, fmt.Errorf("auxWeight must be finite and >= 0, and 0 without an auxiliary head (auxDim 0), got %v with auxDim %d", c.AuxWeight, c.AuxDim))
	}
	if err := c.Guard.validate(c); err != nil {
		errs = append(errs, err)
	}
	if c.StateDim+c.EmbedDim > maxStateDim {
		errs = append(errs, fmt.Errorf("stateDim+embedDim must be at most %d, got %d", maxStateDim, c.StateDim+c.EmbedDim))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid meta-policy config: %w", err)
	}
	return nil
}

func (c MetaConfig) clone() MetaConfig {
	c.Config = c.Config.clone()
	c.Guard = c.Guard.clone()
	return c
}

func (c MetaConfig) sameArchitecture(o MetaConfig) bool {
	return c.Config.sameArchitecture(o.Config) && c.Window == o.Window && c.EmbedDim == o.EmbedDim && c.AuxDim == o.AuxDim && c.SignatureDim == o.SignatureDim
}

// actorCritic is the configuration of the actor-critic part: its input is
// the state followed by the embedding.
func (c MetaConfig) actorCritic() Config {
	ac := c.Config.clone()
	ac.StateDim = c.StateDim + c.EmbedDim
	return ac
}

// stepDim is the width of one GRU input: state, signature, the action as
// one one-hot per head (NumActions entries in all), reward.
func (c MetaConfig) stepDim() int { return c.StateDim + c.SignatureDim + c.NumActions + 1 }

// Step is one step of a workload's trajectory as the encoder reads it.
type Step struct {
	State []float64
	// Signature is what identifies the workload at State (MetaConfig.
	// SignatureDim values; nil without signatures). Only the encoder
	// reads it.
	Signature []float64
	Action    int
	Reward    float64
}

// MetaTransition is a Transition together with the trajectory that preceded
// State (oldest first). Only the last Window steps are read.
//
// The embedding of NextState is computed from Window followed by this
// transition's own step (State, Action, Reward), which is exactly the
// trajectory that precedes NextState.
type MetaTransition struct {
	Transition
	Window []Step
	// Signature is the signature at State (Step.Signature), for the step
	// this transition appends to Window to embed NextState.
	Signature []float64
	// Aux is the target of the auxiliary head for the embedding of Window
	// (MetaConfig.AuxDim values), or nil: no auxiliary loss on this
	// transition (always so without a head).
	Aux []float64
}

// MetaPPO is PPO with a GRU trajectory encoder (see MetaConfig). Acting is
// two plain-Go forward passes: Embed turns a window into an embedding, and
// Act decides from a state and an embedding, so a caller can embed a
// workload's window once and reuse it, or call ActWindow for both at once.
//
// MetaPPO is safe for concurrent use, with the same locking as PPO.
// Embed and Act are separate calls, so a training call may publish new
// weights between them; the decision then uses an embedding from the
// previous weights, which is no worse than the lag of experience itself.
type MetaPPO struct {
	cfg   MetaConfig
	acCfg Config // cfg.actorCritic()

	// mu guards the canonical weights and Adam state, the shuffle generator
	// and the training graph. Lock order: mu, then inferMu.
	mu         sync.Mutex
	ac         *paramSet
	enc        *gru
	aux        *auxHead // nil without an auxiliary head
	all        []*param // ac.all, then enc.params(), then aux.params(): the checkpoint order
	shufflePCG *rand.PCG
	shuffle    *rand.Rand
	graph      *metaGraph
	bc         *bcGraph // built by the first BehaviourClone
	grads      [][]float64
	rate       float64 // as PPO.rate

	// inferMu guards the inference copies of the weights.
	inferMu sync.RWMutex
	// guard is the embedding guard (nil: none); cfg.Guard is always nil,
	// so that a guard set after construction is the only one.
	guard atomic.Pointer[EmbedGuard]
}

const kindMetaPPO = "meta-ppo"

// NewMetaPPO creates a learner with freshly initialised weights. The same
// config (including Seed) always yields bit-identical weights.
func NewMetaPPO(cfg MetaConfig) (*MetaPPO, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.clone()
	guard := cfg.Guard
	cfg.Guard = nil
	initRNG := rand.New(rand.NewPCG(cfg.Seed, streamInit))
	m := &MetaPPO{
		cfg:        cfg,
		acCfg:      cfg.actorCritic(),
		shufflePCG: rand.NewPCG(cfg.Seed, streamShuffle),
	}
	m.ac = newActorCriticParams(m.acCfg, initRNG)
	m.enc = newGRU(cfg.EmbedDim, cfg.stepDim(), initRNG)
	// The head draws its weights last, so a learner without one is
	// initialised bit-identically to one from before heads existed.
	if cfg.AuxDim > 0 {
		m.aux = newAuxHead(cfg.EmbedDim, cfg.AuxDim, initRNG)
	}
	m.all = append(append(append([]*param{}, m.ac.all...), m.enc.params()...), m.aux.params()...)
	for _, p := range append(m.enc.params(), m.aux.params()...) {
		copy(p.infer, p.data)
	}
	m.shuffle = rand.New(m.shufflePCG)
	m.guard.Store(guard)
	m.grads = make([][]float64, len(m.all))
	var err error
	if m.graph, err = newMetaGraph(cfg, m.ac, m.enc, m.aux); err != nil {
		return nil, err
	}
	return m, nil
}

// Config returns a copy of the learner's configuration, its guard
// included.
func (m *MetaPPO) Config() MetaConfig {
	c := m.cfg.clone()
	c.Guard = m.Guard()
	return c
}

// SetLearningRateScale is PPO.SetLearningRateScale.
func (m *MetaPPO) SetLearningRateScale(s float64) error {
	if err := checkRateScale(s); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rate = s
	return nil
}

func (m *MetaPPO) checkWindow(what string, w []Step) error {
	for i, st := range w {
		// Plain names: formatting one per step would allocate on every Embed.
		if err := checkState("state", st.State, m.cfg.StateDim); err != nil {
			return fmt.Errorf("%s[%d]: %w", what, i, err)
		}
		if err := checkState("signature", st.Signature, m.cfg.SignatureDim); err != nil {
			return fmt.Errorf("%s[%d]: %w", what, i, err)
		}
		if err := checkHeadsAction("action", st.Action, nil, m.cfg.heads()); err != nil {
			return fmt.Errorf("%s[%d]: %w", what, i, err)
		}
		if !isFinite(st.Reward) {
			return fmt.Errorf("%w: %w: %s[%d].reward is %v", ErrInvalidInput, ErrNonFinite, what, i, st.Reward)
		}
	}
	return nil
}

// Embed returns the embedding (EmbedDim values) of a trajectory window,
// oldest step first; only the last Window steps are read, and an empty
// window embeds to zeros.
func (m *MetaPPO) Embed(window []Step) ([]float64, error) {
	es, err := m.EmbedBatch([][]Step{window})
	if err != nil {
		return nil, err
	}
	return es[0], nil
}

// EmbedBatch is Embed for many windows.
func (m *MetaPPO) EmbedBatch(windows [][]Step) ([][]float64, error) {
	for i, w := range windows {
		if err := m.checkWindow("window", w); err != nil {
			return nil, fmt.Errorf("window %d: %w", i, err)
		}
	}
	m.inferMu.RLock()
	flat := m.enc.forward(true, windows, m.cfg)
	m.inferMu.RUnlock()
	return split(flat, len(windows), m.cfg.EmbedDim), nil
}

func split(flat []float64, n, dim int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return out
}

// PredictAux returns the auxiliary head's predictions (AuxDim values) for
// the embeddings of the windows; an error without a head.
func (m *MetaPPO) PredictAux(windows [][]Step) ([][]float64, error) {
	if m.aux == nil {
		return nil, fmt.Errorf("%w: the learner has no auxiliary head", ErrInvalidInput)
	}
	for i, w := range windows {
		if err := m.checkWindow("window", w); err != nil {
			return nil, fmt.Errorf("window %d: %w", i, err)
		}
	}
	e, k := m.cfg.EmbedDim, m.cfg.AuxDim
	m.inferMu.RLock()
	defer m.inferMu.RUnlock()
	emb := m.enc.forward(true, windows, m.cfg)
	out := make([][]float64, len(windows))
	for n := range out {
		out[n] = slices.Clone(m.aux.b.infer)
		addRowTimes(out[n], emb[n*e:(n+1)*e], m.aux.w.infer, k)
	}
	return out, nil
}

// Act chooses an action for a state given the workload's embedding (from
// Embed). Masks, greedy and rng work as in PPO.Act.
func (m *MetaPPO) Act(state, embedding []float64, mask []bool, greedy bool, rng *rand.Rand) (Decision, error) {
	ds, err := m.ActBatch([][]float64{state}, [][]float64{embedding}, [][]bool{mask}, greedy, rng)
	if err != nil {
		return Decision{}, err
	}
	return ds[0], nil
}

// ActWindow embeds window and acts on state in one call, with one consistent
// set of weights.
func (m *MetaPPO) ActWindow(state []float64, window []Step, mask []bool, greedy bool, rng *rand.Rand) (Decision, error) {
	if err := m.checkWindow("window", window); err != nil {
		return Decision{}, err
	}
	if err := m.checkActInput(state, nil, mask, greedy, rng); err != nil {
		return Decision{}, err
	}
	m.inferMu.RLock()
	e := m.enc.forward(true, [][]Step{window}, m.cfg)
	logits, values := actorCriticForward(m.ac, true, [][]float64{slices.Concat(state, e)}, m.acCfg.StateDim)
	m.inferMu.RUnlock()
	d, err := decide(logits, values[0], mask, m.cfg.heads(), greedy, rng)
	if err != nil {
		return Decision{}, err
	}
	ds := []Decision{d}
	m.applyGuard(ds, e, [][]bool{mask})
	return ds[0], nil
}

// ActBatch is Act for many states, each with its own embedding, in one
// forward pass. masks may be nil (all legal everywhere).
func (m *MetaPPO) ActBatch(states, embeddings [][]float64, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error) {
	if len(embeddings) != len(states) || (masks != nil && len(masks) != len(states)) {
		return nil, fmt.Errorf("%w: %d states, %d embeddings, %d masks", ErrInvalidInput, len(states), len(embeddings), len(masks))
	}
	if len(states) == 0 {
		return nil, nil
	}
	inputs := make([][]float64, len(states))
	for i := range states {
		if err := m.checkActInput(states[i], embeddings[i], maskAt(masks, i), greedy, rng); err != nil {
			return nil, fmt.Errorf("state %d: %w", i, err)
		}
		inputs[i] = slices.Concat(states[i], embeddings[i])
	}
	m.inferMu.RLock()
	logits, values := actorCriticForward(m.ac, true, inputs, m.acCfg.StateDim)
	m.inferMu.RUnlock()
	ds, err := decideBatch(logits, values, m.cfg.heads(), masks, greedy, rng)
	if err != nil {
		return nil, err
	}
	m.applyGuard(ds, slices.Concat(embeddings...), masks)
	return ds, nil
}

// checkActInput validates one acting input; a nil embedding is not checked
// (ActWindow computes its own).
func (m *MetaPPO) checkActInput(state, embedding []float64, mask []bool, greedy bool, rng *rand.Rand) error {
	if err := checkState("state", state, m.cfg.StateDim); err != nil {
		return err
	}
	if embedding != nil {
		if err := checkState("embedding", embedding, m.cfg.EmbedDim); err != nil {
			return err
		}
	}
	if err := m.cfg.checkMask("mask", mask); err != nil {
		return err
	}
	if !greedy && rng == nil {
		return fmt.Errorf("%w: sampling needs a random source", ErrInvalidInput)
	}
	return nil
}
