package nn

import (
	"errors"
	"math"
	"testing"
)

func closeTo(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestComputeGAE(t *testing.T) {
	cases := []struct {
		name                  string
		rewards, values, next []float64
		dones, truncated      []bool
		gamma, lambda         float64
		wantAdv, wantRet      []float64
	}{
		{
			// δ2 = 2 - 0.3 = 1.7; δ1 = 0 + 0.9·0.3 - 0.4 = -0.13; δ0 = 1 + 0.9·0.4 - 0.5 = 0.86
			// A2 = 1.7; A1 = -0.13 + 0.72·1.7 = 1.094; A0 = 0.86 + 0.72·1.094 = 1.64768
			name:    "episode ending in a terminal step",
			rewards: []float64{1, 0, 2}, values: []float64{0.5, 0.4, 0.3}, next: []float64{0.4, 0.3, 0.9},
			dones: []bool{false, false, true}, gamma: 0.9, lambda: 0.8,
			wantAdv: []float64{1.64768, 1.094, 1.7},
			wantRet: []float64{2.14768, 1.494, 2.0},
		},
		{
			// Every δ = 1 + 0.5·2 - 1 = 1. Step 1 is truncated and step 3 is last,
			// so only steps 0 and 2 chain: A = 1 + 0.25·1.
			name:    "truncation cuts the chain but bootstraps",
			rewards: []float64{1, 1, 1, 1}, values: []float64{1, 1, 1, 1}, next: []float64{2, 2, 2, 2},
			dones: []bool{false, false, false, false}, truncated: []bool{false, true, false, false},
			gamma: 0.5, lambda: 0.5,
			wantAdv: []float64{1.25, 1, 1.25, 1},
			wantRet: []float64{2.25, 2, 2.25, 2},
		},
		{
			// δ2 = 0.5 - 0.1 = 0.4; δ1 = 1 - 0.3 = 0.7 (terminal: next value 99 ignored);
			// δ0 = 0.3 - 0.2 = 0.1, A0 = 0.1 + 0.7 = 0.8.
			name:    "terminal step in the middle",
			rewards: []float64{0, 1, 0}, values: []float64{0.2, 0.3, 0.1}, next: []float64{0.3, 99, 0.5},
			dones: []bool{false, true, false}, gamma: 1, lambda: 1,
			wantAdv: []float64{0.8, 0.7, 0.4},
			wantRet: []float64{1.0, 1.0, 0.5},
		},
		{
			// λ = 0 reduces GAE to the one-step TD error.
			name:    "lambda zero is TD(0)",
			rewards: []float64{1, 2}, values: []float64{0, 1}, next: []float64{1, 3},
			dones: []bool{false, false}, gamma: 0.5, lambda: 0,
			wantAdv: []float64{1.5, 2.5},
			wantRet: []float64{1.5, 3.5},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			adv, ret, err := ComputeGAE(tc.rewards, tc.values, tc.next, tc.dones, tc.truncated, tc.gamma, tc.lambda)
			if err != nil {
				t.Fatalf("ComputeGAE: %v", err)
			}
			for i := range tc.wantAdv {
				if !closeTo(adv[i], tc.wantAdv[i], 1e-12) || !closeTo(ret[i], tc.wantRet[i], 1e-12) {
					t.Errorf("step %d: adv=%v ret=%v, want adv=%v ret=%v", i, adv[i], ret[i], tc.wantAdv[i], tc.wantRet[i])
				}
			}
		})
	}
}

func TestComputeGAEErrors(t *testing.T) {
	cases := []struct {
		name          string
		rewards       []float64
		dones         []bool
		gamma, lambda float64
		want          error
	}{
		{"length mismatch", []float64{1, 2}, []bool{false}, 0.9, 0.9, ErrInvalidInput},
		{"gamma above one", []float64{1}, []bool{false}, 1.5, 0.9, ErrInvalidInput},
		{"NaN lambda", []float64{1}, []bool{false}, 0.9, math.NaN(), ErrInvalidInput},
		{"overflowing reward", []float64{math.MaxFloat64, math.MaxFloat64}, []bool{false, false}, 1, 1, ErrNonFinite},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.rewards)
			_, _, err := ComputeGAE(tc.rewards, make([]float64, n), make([]float64, n), tc.dones, nil, tc.gamma, tc.lambda)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestClipGlobalNorm(t *testing.T) {
	cases := []struct {
		name     string
		grads    [][]float64
		maxNorm  float64
		wantNorm float64
		want     [][]float64
	}{
		{"3-4-5 scaled to unit norm", [][]float64{{3}, {4}}, 1, 5, [][]float64{{0.6}, {0.8}}},
		// norm sqrt(1+4+4) = 3, scale 1.5/3 = 0.5 applies to every tensor alike.
		{"joint norm across tensors", [][]float64{{1, 2}, {2}}, 1.5, 3, [][]float64{{0.5, 1}, {1}}},
		{"below threshold untouched", [][]float64{{0.3, 0.4}}, 1, 0.5, [][]float64{{0.3, 0.4}}},
		{"exactly at threshold untouched", [][]float64{{0, 2}}, 2, 2, [][]float64{{0, 2}}},
		{"zero gradient", [][]float64{{0, 0}, {}}, 1, 0, [][]float64{{0, 0}, {}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			norm := ClipGlobalNorm(tc.grads, tc.maxNorm)
			if !closeTo(norm, tc.wantNorm, 1e-12) {
				t.Errorf("norm = %v, want %v", norm, tc.wantNorm)
			}
			for i := range tc.want {
				for j := range tc.want[i] {
					if !closeTo(tc.grads[i][j], tc.want[i][j], 1e-12) {
						t.Errorf("grads[%d][%d] = %v, want %v", i, j, tc.grads[i][j], tc.want[i][j])
					}
				}
			}
		})
	}
	t.Run("non-finite norm is reported, not spread", func(t *testing.T) {
		g := [][]float64{{math.Inf(1), 1}}
		if norm := ClipGlobalNorm(g, 1); !math.IsInf(norm, 1) {
			t.Errorf("norm = %v, want +Inf", norm)
		}
		if g[0][1] != 1 {
			t.Errorf("finite entry changed to %v", g[0][1])
		}
	})
}

func TestMaskedLogSoftmax(t *testing.T) {
	cases := []struct {
		name   string
		logits []float64
		mask   []bool
		want   []float64 // probabilities
		err    error
	}{
		{"no mask", []float64{0, math.Log(3)}, nil, []float64{0.25, 0.75}, nil},
		{"masked entry has probability zero", []float64{5, 0, math.Log(3)}, []bool{false, true, true}, []float64{0, 0.25, 0.75}, nil},
		{"large logits stay finite", []float64{1000, 1000}, nil, []float64{0.5, 0.5}, nil},
		{"all masked", []float64{1, 2}, []bool{false, false}, nil, ErrAllActionsMasked},
		{"NaN logit", []float64{math.NaN(), 1}, nil, nil, ErrNonFinite},
		{"NaN logit of a masked action is irrelevant", []float64{math.NaN(), 1}, []bool{false, true}, []float64{0, 1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]float64, len(tc.logits))
			err := maskedLogSoftmax(tc.logits, tc.mask, out)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			for i, w := range tc.want {
				if got := math.Exp(out[i]); !closeTo(got, w, 1e-12) {
					t.Errorf("p[%d] = %v, want %v", i, got, w)
				}
				if w == 0 && !math.IsInf(out[i], -1) {
					t.Errorf("log p[%d] = %v, want -Inf", i, out[i])
				}
			}
		})
	}
}
