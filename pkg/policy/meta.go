package policy

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	G "gorgonia.org/gorgonia"
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
	if len(c.Heads) > 1 {
		// The encoder reads each step's action one-hot over NumActions,
		// which a factored action does not fit yet.
		errs = append(errs, fmt.Errorf("meta-ppo does not support factored heads (got %v)", c.Heads))
	}
	if c.Window < 1 || c.Window > maxWindow {
		errs = append(errs, fmt.Errorf("window must be in [1, %d], got %d", maxWindow, c.Window))
	}
	if c.EmbedDim < 1 || c.EmbedDim > maxHidden {
		errs = append(errs, fmt.Errorf("embedDim must be in [1, %d], got %d", maxHidden, c.EmbedDim))
	}
	if c.AuxDim < 0 || c.AuxDim > maxHidden {
		errs = append(errs, fmt.Errorf("auxDim must be in [0, %d], got %d", maxHidden, c.AuxDim))
	}
	if !(c.AuxWeight >= 0) || math.IsInf(c.AuxWeight, 0) || (c.AuxWeight > 0 && c.AuxDim == 0) {
		errs = append(errs, fmt.Errorf("auxWeight must be finite and >= 0, and 0 without an auxiliary head (auxDim 0), got %v with auxDim %d", c.AuxWeight, c.AuxDim))
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
	return c
}

func (c MetaConfig) sameArchitecture(o MetaConfig) bool {
	return c.Config.sameArchitecture(o.Config) && c.Window == o.Window && c.EmbedDim == o.EmbedDim && c.AuxDim == o.AuxDim
}

// actorCritic is the configuration of the actor-critic part: its input is
// the state followed by the embedding.
func (c MetaConfig) actorCritic() Config {
	ac := c.Config.clone()
	ac.StateDim = c.StateDim + c.EmbedDim
	return ac
}

// stepDim is the width of one GRU input: state, one-hot action, reward.
func (c MetaConfig) stepDim() int { return c.StateDim + c.NumActions + 1 }

// Step is one step of a workload's trajectory as the encoder reads it.
type Step struct {
	State  []float64
	Action int
	Reward float64
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
	// Aux is the target of the auxiliary head for the embedding of Window
	// (MetaConfig.AuxDim values), or nil: no auxiliary loss on this
	// transition (always so without a head).
	Aux []float64
}

// auxHead is the auxiliary linear head: prediction = embedding·w + b.
type auxHead struct {
	w, b *param
}

func newAuxHead(embed, out int, rng *rand.Rand) *auxHead {
	a := &auxHead{w: newParam("aux/w", embed, out), b: newParam("aux/b", 1, out)}
	scale := math.Sqrt(1 / float64(embed))
	for i := range a.w.data {
		a.w.data[i] = rng.NormFloat64() * scale
	}
	return a
}

func (a *auxHead) params() []*param {
	if a == nil {
		return nil
	}
	return []*param{a.w, a.b}
}

// gru holds the encoder's weights. The gates of the GRU are written
// z = σ(Wz·[h,x] + bz); splitting each Wz into its h-part U and x-part W
// (Wz·[h,x] = h·Uz + x·Wz for row vectors) is the same function and avoids a
// concatenation per step in the graph.
type gru struct {
	uz, wz, bz *param
	ur, wr, br *param
	uh, wh, bh *param
}

func newGRU(embed, stepDim int, rng *rand.Rand) *gru {
	g := &gru{
		uz: newParam("gru/uz", embed, embed), wz: newParam("gru/wz", stepDim, embed), bz: newParam("gru/bz", 1, embed),
		ur: newParam("gru/ur", embed, embed), wr: newParam("gru/wr", stepDim, embed), br: newParam("gru/br", 1, embed),
		uh: newParam("gru/uh", embed, embed), wh: newParam("gru/wh", stepDim, embed), bh: newParam("gru/bh", 1, embed),
	}
	// LeCun normal over the fan-in of the concatenated [h, x], as for the
	// MLPs; biases start at zero.
	scale := math.Sqrt(1 / float64(embed+stepDim))
	for _, p := range []*param{g.uz, g.wz, g.ur, g.wr, g.uh, g.wh} {
		for i := range p.data {
			p.data[i] = rng.NormFloat64() * scale
		}
	}
	return g
}

func (g *gru) params() []*param {
	return []*param{g.uz, g.wz, g.bz, g.ur, g.wr, g.br, g.uh, g.wh, g.bh}
}

// sigmoid is σ(x) = (1 + tanh(x/2))/2, the form the training graph uses.
func sigmoid(x float64) float64 { return 0.5 + 0.5*math.Tanh(0.5*x) }

// forward returns the embeddings (n×embed, row-major) of n windows; only
// the last `window` steps of each are read. useInfer selects the inference
// copy of the weights; the caller holds the lock guarding it.
//
// Padding steps are skipped: in the graph they have mask 0, which makes the
// update h + 0·(…) = h exactly, so skipping computes the same function.
func (g *gru) forward(useInfer bool, windows [][]Step, window, stateDim, numActions int) []float64 {
	e := g.uz.rows
	w := func(p *param) []float64 {
		if useInfer {
			return p.infer
		}
		return p.data
	}
	uz, wz, bz := w(g.uz), w(g.wz), w(g.bz)
	ur, wr, br := w(g.ur), w(g.wr), w(g.br)
	uh, wh, bh := w(g.uh), w(g.wh), w(g.bh)
	out := make([]float64, len(windows)*e)
	z := make([]float64, e)
	r := make([]float64, e)
	rh := make([]float64, e)
	cand := make([]float64, e)
	for n, win := range windows {
		h := out[n*e : (n+1)*e]
		for _, st := range tail(win, window) {
			copy(z, bz)
			copy(r, br)
			copy(cand, bh)
			// x = [state, one-hot action, reward]: the one-hot part selects
			// one row of each W.
			addRowTimes(z, h, uz, e)
			addRowTimes(r, h, ur, e)
			addRowTimes(z, st.State, wz, e)
			addRowTimes(r, st.State, wr, e)
			addRowTimes(cand, st.State, wh, e)
			oneHotRow := stateDim + st.Action
			rewardRow := stateDim + numActions
			for j := 0; j < e; j++ {
				z[j] += wz[oneHotRow*e+j] + st.Reward*wz[rewardRow*e+j]
				r[j] += wr[oneHotRow*e+j] + st.Reward*wr[rewardRow*e+j]
				cand[j] += wh[oneHotRow*e+j] + st.Reward*wh[rewardRow*e+j]
			}
			for j := 0; j < e; j++ {
				z[j] = sigmoid(z[j])
				rh[j] = sigmoid(r[j]) * h[j]
			}
			addRowTimes(cand, rh, uh, e)
			for j := 0; j < e; j++ {
				h[j] += z[j] * (math.Tanh(cand[j]) - h[j])
			}
		}
	}
	return out
}

// addRowTimes adds the row vector x times the len(x)×cols matrix m to dst.
func addRowTimes(dst, x, m []float64, cols int) {
	for i, xi := range x {
		if xi == 0 {
			continue
		}
		row := m[i*cols : (i+1)*cols]
		for j := range dst {
			dst[j] += xi * row[j]
		}
	}
}

func tail(w []Step, n int) []Step {
	if len(w) > n {
		return w[len(w)-n:]
	}
	return w
}

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

// encoder unrolls the GRU over cfg.Window steps of a minibatch. It returns
// the buffers of the step inputs and masks (step Window-1 is the most
// recent), the final state (the embedding, batch×embed) and the encoder's
// weight nodes in enc.params() order.
func (b *builder) encoder(cfg MetaConfig, enc *gru) (steps, stepMask [][]float64, h *G.Node, gw []*G.Node) {
	n, e, d, T := cfg.MinibatchSize, cfg.EmbedDim, cfg.stepDim(), cfg.Window
	gw = b.weights(enc.params())
	uz, wz, bz, ur, wr, br, uh, wh, bh := gw[0], gw[1], gw[2], gw[3], gw[4], gw[5], gw[6], gw[7], gw[8]
	h = b.input("h0", make([]float64, n*e), n, e)
	for t := 0; t < T; t++ {
		steps = append(steps, make([]float64, n*d))
		stepMask = append(stepMask, make([]float64, n*e))
		xt := b.input(fmt.Sprintf("step%d", t), steps[t], n, d)
		mt := b.input(fmt.Sprintf("stepMask%d", t), stepMask[t], n, e)
		z := b.sigmoid(b.addRow(b.add(b.matMul(h, uz), b.matMul(xt, wz)), bz))
		r := b.sigmoid(b.addRow(b.add(b.matMul(h, ur), b.matMul(xt, wr)), br))
		cand := b.tanh(b.addRow(b.add(b.matMul(b.mul(r, h), uh), b.matMul(xt, wh)), bh))
		// h' = (1-z)⊙h + z⊙h̃, written h + z⊙(h̃-h); the mask zeroes the
		// update of padding steps.
		h = b.add(h, b.mul(mt, b.mul(z, b.sub(cand, h))))
	}
	return steps, stepMask, h, gw
}

// sigmoid is built from tanh rather than with G.Sigmoid: Gorgonia's sigmoid
// clamps its input (exactly 1 above 19, off by ~6e-9) and returns 0 under
// the fastmath build tag, which would break the equality with the plain-Go
// forward pass.
func (b *builder) sigmoid(x *G.Node) *G.Node {
	t := b.tanh(b.scale(x, 0.5))
	return b.apply("sigmoid", func() (*G.Node, error) { return G.Add(b.scale(t, 0.5), G.NewConstant(0.5)) })
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

// fillWindows writes the trajectory windows of the selected rows into the
// encoder's step inputs, right-aligned so that the most recent step is
// step Window-1; padding rows and padding steps stay zero.
func fillWindows(steps, stepMask [][]float64, rows []int, window func(i int) []Step, cfg MetaConfig) {
	s, e, d, T, a := cfg.StateDim, cfg.EmbedDim, cfg.stepDim(), cfg.Window, cfg.NumActions
	for t := range T {
		clear(steps[t])
		clear(stepMask[t])
	}
	for r, i := range rows {
		win := tail(window(i), T)
		for j, st := range win {
			t := T - len(win) + j
			row := steps[t][r*d : (r+1)*d]
			copy(row, st.State)
			row[s+st.Action] = 1
			row[s+a] = st.Reward
			m := stepMask[t][r*e : (r+1)*e]
			for k := range m {
				m[k] = 1
			}
		}
	}
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
}

const kindMetaPPO = "meta-ppo"

// NewMetaPPO creates a learner with freshly initialised weights. The same
// config (including Seed) always yields bit-identical weights.
func NewMetaPPO(cfg MetaConfig) (*MetaPPO, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.clone()
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
	m.grads = make([][]float64, len(m.all))
	var err error
	if m.graph, err = newMetaGraph(cfg, m.ac, m.enc, m.aux); err != nil {
		return nil, err
	}
	return m, nil
}

// Config returns a copy of the learner's configuration.
func (m *MetaPPO) Config() MetaConfig { return m.cfg.clone() }

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
		if err := checkAction("action", st.Action, nil, m.cfg.NumActions); err != nil {
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
	flat := m.enc.forward(true, windows, m.cfg.Window, m.cfg.StateDim, m.cfg.NumActions)
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
	emb := m.enc.forward(true, windows, m.cfg.Window, m.cfg.StateDim, m.cfg.NumActions)
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
	e := m.enc.forward(true, [][]Step{window}, m.cfg.Window, m.cfg.StateDim, m.cfg.NumActions)
	logits, values := actorCriticForward(m.ac, true, [][]float64{slices.Concat(state, e)}, m.acCfg.StateDim)
	m.inferMu.RUnlock()
	return decide(logits, values[0], mask, m.cfg.heads(), greedy, rng)
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
	return decideBatch(logits, values, m.cfg.heads(), masks, greedy, rng)
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
	if err := checkMask("mask", mask, m.cfg.NumActions); err != nil {
		return err
	}
	if !greedy && rng == nil {
		return fmt.Errorf("%w: sampling needs a random source", ErrInvalidInput)
	}
	return nil
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

// Update runs PPO on a batch of experience with windows, exactly as
// PPO.Update does on plain transitions (GAE, clipped objective, entropy
// bonus, value loss, Adam, global-norm clipping), with the gradient flowing
// into the encoder. Advantages use the embeddings of the weights at the
// start of the call; the graph recomputes them from the windows at every
// step, so the encoder learns whatever helps actor and critic.
//
// Bad input is rejected before any change; a non-finite loss, gradient or
// weight rolls the whole call back and returns an error wrapping
func (m *MetaPPO) finiteParams() (string, bool) {
	for _, p := range m.all {
		if _, ok := allFinite(p.data); !ok {
			return p.name, false
		}
	}
	return "", true
}

// ErrDiverged.
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
		windows = append(windows, append(w, Step{State: t.State, Action: t.Action, Reward: t.Reward}))
	}
	emb := split(m.enc.forward(false, windows, m.cfg.Window, m.cfg.StateDim, m.cfg.NumActions), 2*n, m.cfg.EmbedDim)
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

// MarshalBinary returns a checkpoint (format as PPO's, kind "meta-ppo") of
// the weights of actor, critic and encoder, the Adam state, the shuffle
// generator and the configuration.
func (m *MetaPPO) MarshalBinary() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng, err := m.shufflePCG.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encoding shuffle state: %w", err)
	}
	return encodeCheckpoint(kindMetaPPO, m.cfg, m.all, rng)
}

// UnmarshalBinary restores a checkpoint taken by MarshalBinary. The
// architecture (StateDim, NumActions, Hidden, Window, EmbedDim) must match,
// otherwise an error wrapping ErrIncompatibleCheckpoint is returned;
// training hyperparameters stay this learner's. Nothing changes on error.
func (m *MetaPPO) UnmarshalBinary(data []byte) error {
	cfg, ck, err := decodeMetaCheckpoint(data)
	if err != nil {
		return err
	}
	if !m.cfg.sameArchitecture(cfg) {
		return fmt.Errorf("%w: checkpoint has stateDim=%d numActions=%d hidden=%v window=%d embedDim=%d, learner has stateDim=%d numActions=%d hidden=%v window=%d embedDim=%d",
			ErrIncompatibleCheckpoint, cfg.StateDim, cfg.NumActions, cfg.Hidden, cfg.Window, cfg.EmbedDim,
			m.cfg.StateDim, m.cfg.NumActions, m.cfg.Hidden, m.cfg.Window, m.cfg.EmbedDim)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.apply(ck); err != nil {
		return err
	}
	m.publish()
	return nil
}

// NewMetaPPOFromCheckpoint creates a learner entirely from a checkpoint,
// including its configuration.
func NewMetaPPOFromCheckpoint(data []byte) (*MetaPPO, error) {
	cfg, ck, err := decodeMetaCheckpoint(data)
	if err != nil {
		return nil, err
	}
	m, err := NewMetaPPO(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.apply(ck); err != nil {
		return nil, err
	}
	m.publish()
	return m, nil
}

func decodeMetaCheckpoint(data []byte) (MetaConfig, *checkpoint, error) {
	return decodeConfigCheckpoint[MetaConfig](data, kindMetaPPO)
}

func (m *MetaPPO) apply(ck *checkpoint) error {
	if err := checkParams(m.all, ck.params); err != nil {
		return err
	}
	if err := restorePCG(m.shufflePCG, ck.rng); err != nil {
		return err
	}
	copyParams(m.all, ck.params)
	return nil
}
