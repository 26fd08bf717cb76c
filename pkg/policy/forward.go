package policy

import (
	"math"

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
func mlpForward(ps []*param, useInfer bool, x []float64, n int) []float64 {
	h := x
	for l := 0; l+1 < len(ps); l += 2 {
		w, b := ps[l], ps[l+1]
		wd, bd := w.data, b.data
		if useInfer {
			wd, bd = w.infer, b.infer
		}
		out := make([]float64, n*w.cols)
		for r := 0; r < n; r++ {
			copy(out[r*w.cols:(r+1)*w.cols], bd)
		}
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
			blas64.General{Rows: n, Cols: w.rows, Stride: w.rows, Data: h},
			blas64.General{Rows: w.rows, Cols: w.cols, Stride: w.cols, Data: wd},
			1,
			blas64.General{Rows: n, Cols: w.cols, Stride: w.cols, Data: out})
		if l+2 < len(ps) {
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
	x := flatten(states, stateDim)
	return mlpForward(ps.actor, useInfer, x, len(states)), mlpForward(ps.critic, useInfer, x, len(states))
}
