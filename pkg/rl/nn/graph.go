package nn

import (
	"errors"
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// maskedLogit is added to the logits of masked actions inside training
// graphs. It is finite on purpose: -Inf would turn p·log p and the softmax
// gradient into 0·Inf = NaN, whereas exp(-1e9) is exactly 0 in float64, so a
// masked action still has probability exactly 0 and contributes nothing.
const maskedLogit = -1e9

// builder chains Gorgonia operations and keeps the first error, so graph
// construction reads as straight-line code without panicking helpers.
type builder struct {
	g   *G.ExprGraph
	err error
}

func (b *builder) apply(name string, f func() (*G.Node, error)) *G.Node {
	if b.err != nil {
		return nil
	}
	n, err := f()
	if err != nil {
		b.err = fmt.Errorf("building %s: %w", name, err)
		return nil
	}
	return n
}

// input creates a matrix or vector node bound to a tensor over backing, so
// that writing into backing changes what the next run reads.
func (b *builder) input(name string, backing []float64, shape ...int) *G.Node {
	if b.err != nil {
		return nil
	}
	t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
	if len(shape) == 1 {
		return G.NewVector(b.g, G.Float64, G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	return G.NewMatrix(b.g, G.Float64, G.WithShape(shape...), G.WithName(name), G.WithValue(t))
}

// weights creates one node per parameter, bound to the tensor over its
// canonical data: every training graph reads the same weights in place, and
// an optimiser step is visible to the next run of any of them.
func (b *builder) weights(ps []*param) []*G.Node {
	nodes := make([]*G.Node, len(ps))
	for i, p := range ps {
		nodes[i] = G.NewMatrix(b.g, G.Float64, G.WithShape(p.rows, p.cols), G.WithName(p.name), G.WithValue(p.dense))
	}
	return nodes
}

func (b *builder) matMul(x, w *G.Node) *G.Node {
	return b.apply("matmul", func() (*G.Node, error) { return G.Mul(x, w) })
}

// addRow adds a 1×n row to every row of a batch×n matrix.
func (b *builder) addRow(x, row *G.Node) *G.Node {
	return b.apply("bias", func() (*G.Node, error) { return G.BroadcastAdd(x, row, nil, []byte{0}) })
}

func (b *builder) add(x, y *G.Node) *G.Node {
	return b.apply("add", func() (*G.Node, error) { return G.Add(x, y) })
}

func (b *builder) sub(x, y *G.Node) *G.Node {
	return b.apply("sub", func() (*G.Node, error) { return G.Sub(x, y) })
}

func (b *builder) mul(x, y *G.Node) *G.Node {
	return b.apply("hadamard", func() (*G.Node, error) { return G.HadamardProd(x, y) })
}

func (b *builder) scale(x *G.Node, k float64) *G.Node {
	return b.apply("scale", func() (*G.Node, error) { return G.Mul(x, G.NewConstant(k)) })
}

func (b *builder) tanh(x *G.Node) *G.Node {
	return b.apply("tanh", func() (*G.Node, error) { return G.Tanh(x) })
}

func (b *builder) exp(x *G.Node) *G.Node {
	return b.apply("exp", func() (*G.Node, error) { return G.Exp(x) })
}

func (b *builder) neg(x *G.Node) *G.Node {
	return b.apply("neg", func() (*G.Node, error) { return G.Neg(x) })
}

func (b *builder) square(x *G.Node) *G.Node {
	return b.apply("square", func() (*G.Node, error) { return G.Square(x) })
}

func (b *builder) sum(x *G.Node, along ...int) *G.Node {
	return b.apply("sum", func() (*G.Node, error) { return G.Sum(x, along...) })
}

func (b *builder) minBetween(x, y *G.Node) *G.Node {
	return b.apply("min", func() (*G.Node, error) { return G.MinBetween(x, y) })
}

func (b *builder) maxBetween(x, y *G.Node) *G.Node {
	return b.apply("max", func() (*G.Node, error) { return G.MaxBetween(x, y) })
}

// logSoftmax is a row-wise log-softmax of a batch×n matrix, built from
// primitive ops: z - m - log Σ exp(z - m) with m the row maximum.
//
// Gorgonia's own LogSoftMax (tensor v0.9.24) must not be used: it takes the
// maximum of the whole tensor's first element instead of each row's, so a
// masked (-1e9) entry in row 0 makes exp overflow in every other row and the
// loss becomes NaN. It also starts one goroutine per row.
func (b *builder) logSoftmax(z *G.Node) *G.Node {
	m := b.apply("rowmax", func() (*G.Node, error) { return G.Max(z, 1) })
	zc := b.subCol(z, m)
	sumExp := b.sum(b.exp(zc), 1)
	lse := b.apply("log", func() (*G.Node, error) { return G.Log(sumExp) })
	return b.subCol(zc, lse)
}

// subCol subtracts a per-row value (a vector with one entry per row) from
// every column of a matrix.
func (b *builder) subCol(x, col *G.Node) *G.Node {
	return b.apply("subcol", func() (*G.Node, error) { return G.BroadcastSub(x, col, nil, []byte{1}) })
}

func (b *builder) reshape(x *G.Node, shape ...int) *G.Node {
	return b.apply("reshape", func() (*G.Node, error) { return G.Reshape(x, tensor.Shape(shape)) })
}

// mlp applies a tanh MLP given its weights as [w0, b0, w1, b1, ...]; the
// output layer is linear.
func (b *builder) mlp(x *G.Node, ws []*G.Node) *G.Node {
	h := x
	for l := 0; l+1 < len(ws); l += 2 {
		h = b.addRow(b.matMul(h, ws[l]), ws[l+1])
		if l+2 < len(ws) {
			h = b.tanh(h)
		}
	}
	return h
}

// weightedMean is Σ w_i·x_i for a vector x. The weights hold 1/n for the n
// real rows of a minibatch and 0 for padding rows, which lets one static
// graph serve minibatches of any size up to its batch dimension.
func (b *builder) weightedMean(w, x *G.Node) *G.Node {
	return b.sum(b.mul(w, x))
}

// machine wraps a Gorgonia TapeMachine. TapeMachines are not safe for
// concurrent use; every run must hold the lock that guards the graph's input
// buffers as well.
type machine struct {
	vm G.VM
}

// run executes the graph once. Gorgonia panics on some internal failures;
// converting them to errors keeps a bad batch from taking the process down.
func (m *machine) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gorgonia panicked: %v", r)
		}
		m.vm.Reset()
	}()
	if err := m.vm.RunAll(); err != nil {
		return fmt.Errorf("running graph: %w", err)
	}
	return nil
}

// read registers n's value to be copied out while the graph runs.
//
// Never read results through Node.Value() after a run: the TapeMachine binds
// nodes to its registers, and a register is reused (or overwritten in place,
// e.g. by Sub) once its last consumer has run, so an intermediate or even an
// output node can show another node's data afterwards. A Read node is a
// consumer itself and copies the value when it executes.
func (b *builder) read(n *G.Node) *G.Value {
	v := new(G.Value)
	if b.err != nil || n == nil {
		return v
	}
	G.Read(n, v)
	return v
}

func (b *builder) readAll(ns []*G.Node) []*G.Value {
	vs := make([]*G.Value, len(ns))
	for i, n := range ns {
		vs[i] = b.read(n)
	}
	return vs
}

func float64s(v *G.Value) ([]float64, error) {
	if v == nil || *v == nil {
		return nil, errors.New("graph output was not computed")
	}
	d, ok := (*v).Data().([]float64)
	if !ok {
		return nil, fmt.Errorf("graph output holds %T, want []float64", (*v).Data())
	}
	return d, nil
}

func scalarOf(v *G.Value) (float64, error) {
	if v == nil || *v == nil {
		return 0, errors.New("graph output was not computed")
	}
	switch d := (*v).Data().(type) {
	case float64:
		return d, nil
	case []float64:
		if len(d) == 1 {
			return d[0], nil
		}
	}
	return 0, fmt.Errorf("graph output holds %T, want a float64 scalar", (*v).Data())
}

// ppoHead holds the loss part shared by every PPO training graph: the
// per-row inputs besides the policy's own input features, and the outputs.
// The graphs differ only in how they compute the features that actor and
// critic read (the plain state for PPO, state and trajectory embedding for
// MetaPPO).
type ppoHead struct {
	batch int

	maskBias []float64 // batch×numActions: 0 for legal, maskedLogit for masked
	oneHot   []float64 // batch×numActions: 1 at the action taken
	oldLogp  []float64 // batch
	adv      []float64 // batch
	ret      []float64 // batch
	w        []float64 // batch: 1/n for real rows, 0 for padding

	logp       *G.Value // batch: new log-probability of the action taken
	value      *G.Value // batch
	policyLoss *G.Value
	valueLoss  *G.Value
	entropy    *G.Value
	total      *G.Value
	grads      []*G.Value // aligned with the parameters passed to finish
	m          machine
}

// ppoGraph computes the PPO loss of one minibatch and its gradient with
// respect to all parameters.
type ppoGraph struct {
	ppoHead
	x []float64 // batch×stateDim
}

// buildLoss allocates the head's input buffers and builds the PPO loss on
// the actor and critic applied to in (batch×features). It returns the total
// loss node, or nil if b has failed.
func (h *ppoHead) buildLoss(b *builder, cfg Config, in *G.Node, actorW, criticW []*G.Node) *G.Node {
	n, a := cfg.MinibatchSize, cfg.NumActions
	h.batch = n
	h.maskBias = make([]float64, n*a)
	h.oneHot = make([]float64, n*a)
	h.oldLogp = make([]float64, n)
	h.adv = make([]float64, n)
	h.ret = make([]float64, n)
	h.w = make([]float64, n)
	lo := make([]float64, n)
	hi := make([]float64, n)
	for i := range lo {
		lo[i], hi[i] = 1-cfg.ClipEpsilon, 1+cfg.ClipEpsilon
	}

	maskBias := b.input("maskBias", h.maskBias, n, a)
	oneHot := b.input("oneHot", h.oneHot, n, a)
	oldLogp := b.input("oldLogp", h.oldLogp, n)
	adv := b.input("adv", h.adv, n)
	ret := b.input("ret", h.ret, n)
	w := b.input("w", h.w, n)
	loN := b.input("clipLo", lo, n)
	hiN := b.input("clipHi", hi, n)

	logpAll := b.logSoftmaxHeads(b.add(b.mlp(in, actorW), maskBias), cfg.heads())
	logp := b.sum(b.mul(logpAll, oneHot), 1)

	// Clipped surrogate: -E[min(r·A, clip(r, 1-ε, 1+ε)·A)].
	ratio := b.exp(b.sub(logp, oldLogp))
	clipped := b.minBetween(b.maxBetween(ratio, loN), hiN)
	surr := b.minBetween(b.mul(ratio, adv), b.mul(clipped, adv))
	policyLoss := b.neg(b.weightedMean(w, surr))

	// Entropy of the masked distribution; masked entries contribute 0·(-1e9).
	probs := b.exp(logpAll)
	entropy := b.neg(b.weightedMean(w, b.sum(b.mul(probs, logpAll), 1)))

	value := b.reshape(b.mlp(in, criticW), n)
	valueLoss := b.weightedMean(w, b.square(b.sub(value, ret)))

	total := b.sub(
		b.add(policyLoss, b.scale(valueLoss, cfg.ValueCoef)),
		b.scale(entropy, cfg.EntropyCoef),
	)
	if b.err != nil {
		return nil
	}
	h.logp, h.value, h.total = b.read(logp), b.read(value), b.read(total)
	h.policyLoss, h.valueLoss, h.entropy = b.read(policyLoss), b.read(valueLoss), b.read(entropy)
	return total
}

// finish differentiates total with respect to params and compiles the
// graph. It must be the last step of building: Read nodes added afterwards
// would not be on the tape.
func (h *ppoHead) finish(b *builder, total *G.Node, params []*G.Node) error {
	grads, err := G.Grad(total, params...)
	if err != nil {
		return fmt.Errorf("gradients: %w", err)
	}
	h.grads = b.readAll(grads)
	if b.err != nil {
		return b.err
	}
	h.m = machine{vm: G.NewTapeMachine(b.g)}
	return nil
}

func newPPOGraph(cfg Config, ps *paramSet) (*ppoGraph, error) {
	n, s := cfg.MinibatchSize, cfg.StateDim
	p := &ppoGraph{x: make([]float64, n*s)}
	b := &builder{g: G.NewGraph()}
	x := b.input("x", p.x, n, s)
	actorW := b.weights(ps.actor)
	criticW := b.weights(ps.critic)
	total := p.buildLoss(b, cfg, x, actorW, criticW)
	if b.err != nil {
		return nil, fmt.Errorf("PPO graph: %w", b.err)
	}
	if err := p.finish(b, total, append(append([]*G.Node{}, actorW...), criticW...)); err != nil {
		return nil, fmt.Errorf("PPO graph: %w", err)
	}
	return p, nil
}

// bcGraph computes the masked cross-entropy between the actor and a
// teacher's actions, and its gradient with respect to the weights cloning
// trains. For PPO that is the actor on the state; for MetaPPO the actor on
// [state, embedding] and the encoder, whose window inputs are steps and
// stepMask (nil for PPO).
type bcGraph struct {
	batch    int
	x        []float64
	maskBias []float64
	oneHot   []float64
	w        []float64
	steps    [][]float64
	stepMask [][]float64

	logpAll *G.Value // batch×numActions
	loss    *G.Value
	grads   []*G.Value // aligned with the actor's params, then those features returned
	m       machine
}

func newBCGraph(cfg Config, ps *paramSet) (*bcGraph, error) {
	return buildBCGraph("behaviour-cloning graph", cfg, ps.actor,
		func(_ *builder, _ *bcGraph, x *G.Node) (*G.Node, []*G.Node) { return x, nil })
}

// buildBCGraph builds a bcGraph over cfg's minibatch. features turns the
// state input x into the actor's input and returns the further weights the
// loss is differentiated by (after the actor's), adding any inputs it needs
// to c; what names the graph in errors.
func buildBCGraph(what string, cfg Config, actor []*param, features func(b *builder, c *bcGraph, x *G.Node) (*G.Node, []*G.Node)) (*bcGraph, error) {
	n, s, a := cfg.MinibatchSize, cfg.StateDim, cfg.NumActions
	c := &bcGraph{
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
	in, extra := features(b, c, x)
	actorW := b.weights(actor)

	logpAll := b.logSoftmaxHeads(b.add(b.mlp(in, actorW), maskBias), cfg.heads())
	loss := b.neg(b.weightedMean(w, b.sum(b.mul(logpAll, oneHot), 1)))
	if b.err != nil {
		return nil, fmt.Errorf("%s: %w", what, b.err)
	}
	grads, err := G.Grad(loss, append(slices.Clone(actorW), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%s gradients: %w", what, err)
	}
	c.logpAll, c.loss, c.grads = b.read(logpAll), b.read(loss), b.readAll(grads)
	if b.err != nil {
		return nil, fmt.Errorf("%s: %w", what, b.err)
	}
	c.m = machine{vm: G.NewTapeMachine(b.g)}
	return c, nil
}

// fill writes the selected demonstrations into the graph's inputs, each
// row weighted 1/len(rows); padding rows stay zero.
func (c *bcGraph) fill(rows []int, demo func(i int) Demonstration, s, a int, heads []int) {
	clear(c.x)
	clear(c.maskBias)
	clear(c.oneHot)
	clear(c.w)
	w := 1 / float64(len(rows))
	for r, i := range rows {
		d := demo(i)
		copy(c.x[r*s:(r+1)*s], d.State)
		fillMaskBias(c.maskBias[r*a:(r+1)*a], d.Mask)
		setOneHot(c.oneHot[r*a:(r+1)*a], d.Action, heads)
		c.w[r] = w
	}
}
