package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
)

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
//
// heads are the action's heads (Config.heads): the action part of a step is
// one one-hot per head, concatenated (the heads' choices of the factored
// action), which with one head is the plain one-hot of the action.
func (g *gru) forward(useInfer bool, windows [][]Step, cfg MetaConfig) []float64 {
	window, stateDim, heads := cfg.Window, cfg.StateDim, cfg.heads()
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
	hot := make([]int, len(heads)) // each head's one-hot row, times e
	for n, win := range windows {
		h := out[n*e : (n+1)*e]
		for _, st := range tail(win, window) {
			copy(z, bz)
			copy(r, br)
			copy(cand, bh)
			// x = [state, signature, one-hot action per head, reward]: each head's
			// one-hot selects one row of each W.
			addRowTimes(z, h, uz, e)
			addRowTimes(r, h, ur, e)
			addRowTimes(z, st.State, wz, e)
			addRowTimes(r, st.State, wr, e)
			addRowTimes(cand, st.State, wh, e)
			// The signature's rows follow the state's (stepDim).
			if sig := st.Signature; len(sig) > 0 {
				at := stateDim * e
				addRowTimes(z, sig, wz[at:], e)
				addRowTimes(r, sig, wr[at:], e)
				addRowTimes(cand, sig, wh[at:], e)
			}
			off, a := stateDim+cfg.SignatureDim, st.Action
			for h, n := range heads {
				hot[h] = (off + a%n) * e
				a /= n
				off += n
			}
			rewardRow := off * e
			// With one head this is the sum the plain one-hot gave before
			// heads existed, operation for operation, so paper-space
			// embeddings are bit-identical to theirs.
			for j := 0; j < e; j++ {
				vz, vr, vh := wz[hot[0]+j], wr[hot[0]+j], wh[hot[0]+j]
				for _, row := range hot[1:] {
					vz, vr, vh = vz+wz[row+j], vr+wr[row+j], vh+wh[row+j]
				}
				z[j] += vz + st.Reward*wz[rewardRow+j]
				r[j] += vr + st.Reward*wr[rewardRow+j]
				cand[j] += vh + st.Reward*wh[rewardRow+j]
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

// fillWindows writes the trajectory windows of the selected rows into the
// encoder's step inputs, right-aligned so that the most recent step is
// step Window-1; padding rows and padding steps stay zero.
func fillWindows(steps, stepMask [][]float64, rows []int, window func(i int) []Step, cfg MetaConfig) {
	s, e, d, T, a, heads := cfg.StateDim+cfg.SignatureDim, cfg.EmbedDim, cfg.stepDim(), cfg.Window, cfg.NumActions, cfg.heads()
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
			copy(row[cfg.StateDim:s], st.Signature)
			setOneHot(row[s:s+a], st.Action, heads)
			row[s+a] = st.Reward
			m := stepMask[t][r*e : (r+1)*e]
			for k := range m {
				m[k] = 1
			}
		}
	}
}
