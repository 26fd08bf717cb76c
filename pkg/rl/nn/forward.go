package nn

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Inference does not run Gorgonia. TapeMachine.RunAll locks the OS thread
// and hands every run to a fresh goroutine, which costs ~200µs of futex
// wake-ups per call regardless of the network size; the direct forward pass
// below computes the same function (tests hold the two to 1e-12) in a few
// microseconds, needs no static batch size and can run concurrently.
// Gorgonia stays where it pays: the training graphs and their gradients.

// mlpForward evaluates a tanh MLP given as [w0, b0, w1, b1, ...] on n input
// rows x (n×in, row-major) and returns the n×out output. useInfer selects the
// inference copy of the weights instead of the canonical one; the caller
// holds the lock guarding whichever it reads.
//
// Only the output is allocated: the hidden activations, which are most of
// what a forward pass would allocate (two 64-wide layers per network per
// state), live in a pooled scratch buffer that is free again when the
// function returns. The arithmetic is the same as with fresh slices: every
// row of a layer's output is set to the bias before Gemm adds to it.
func mlpForward(ps []*param, useInfer bool, x []float64, n int) []float64 {
	widest := 0
	for l := 0; l+3 < len(ps); l += 2 {
		widest = max(widest, ps[l].cols)
	}
	var scratch *[]float64
	var halves [2][]float64
	if widest > 0 {
		scratch = getFloats(2 * n * widest)
		halves[0], halves[1] = (*scratch)[:n*widest], (*scratch)[n*widest:]
		defer putFloats(scratch)
	}
	h := x
	for l, k := 0, 0; l+1 < len(ps); l, k = l+2, k+1 {
		w, b := ps[l], ps[l+1]
		wd, bd := w.data, b.data
		if useInfer {
			wd, bd = w.infer, b.infer
		}
		last := l+2 >= len(ps)
		var out []float64
		if last {
			out = make([]float64, n*w.cols)
		} else {
			// Alternate halves: a layer reads the previous one's.
			out = halves[k%2][:n*w.cols]
		}
		for r := 0; r < n; r++ {
			copy(out[r*w.cols:(r+1)*w.cols], bd)
		}
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
			blas64.General{Rows: n, Cols: w.rows, Stride: w.rows, Data: h},
			blas64.General{Rows: w.rows, Cols: w.cols, Stride: w.cols, Data: wd},
			1,
			blas64.General{Rows: n, Cols: w.cols, Stride: w.cols, Data: out})
		if !last {
			for i, v := range out {
				out[i] = math.Tanh(v)
			}
		}
		h = out
	}
	return h
}

// actorCriticForward returns the logits (n×numActions) and values (n) of n
// states.
func actorCriticForward(ps *paramSet, useInfer bool, states [][]float64, stateDim int) (logits, values []float64) {
	// The flattened input, like the hidden layers, is scratch: both
	// networks only read it.
	xs := getFloats(len(states) * stateDim)
	defer putFloats(xs)
	x := *xs
	for i, r := range states {
		row := x[i*stateDim : (i+1)*stateDim]
		clear(row[copy(row, r):]) // as flatten: a short row is zero-padded
	}
	return mlpForward(ps.actor, useInfer, x, len(states)), mlpForward(ps.critic, useInfer, x, len(states))
}

// floatPool holds scratch buffers for forward passes, which run
// concurrently under a read lock, so each takes its own.
var floatPool sync.Pool

// maxPooledFloats bounds what the pool keeps (a 256-state batch of 64-wide
// layers needs 32768); a rare larger pass allocates and lets it go.
const maxPooledFloats = 1 << 16

// getFloats returns a buffer of length n with unspecified contents.
func getFloats(n int) *[]float64 {
	if b, ok := floatPool.Get().(*[]float64); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]float64, n)
	return &b
}

func putFloats(b *[]float64) {
	if cap(*b) <= maxPooledFloats {
		floatPool.Put(b)
	}
}
