package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestRatioOfMeans(t *testing.T) {
	for _, tc := range []struct {
		name     string
		num, den []float64
		mean     float64
		lo, hi   float64 // bounds the interval must lie within; NaN: unchecked
		wantErr  string
	}{
		{name: "constant ratio has no spread", num: []float64{1, 2, 3, 4}, den: []float64{2, 4, 6, 8}, mean: 0.5, lo: 0.5, hi: 0.5},
		{name: "one pair", num: []float64{3}, den: []float64{2}, mean: 1.5, lo: 1.5, hi: 1.5},
		{name: "ratio of means, not mean of ratios", num: []float64{1, 9}, den: []float64{1, 1}, mean: 5, lo: 1, hi: 9},
		{name: "zero denominators in some resamples are unbounded", num: []float64{1, 1, 1}, den: []float64{0, 0, 3}, mean: 1, lo: 0.3, hi: Unbounded},
		{name: "denominators sum to zero", num: []float64{1}, den: []float64{0}, wantErr: "sum to zero"},
		{name: "lengths differ", num: []float64{1, 2}, den: []float64{1}, wantErr: "differ in length"},
		{name: "no samples", wantErr: "no samples"},
		{name: "NaN sample", num: []float64{1, math.NaN()}, den: []float64{1, 1}, wantErr: "is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv, err := RatioOfMeans(tc.num, tc.den, 0.95, 2000, 1)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(iv.Mean-tc.mean) > 1e-12 || iv.N != len(tc.num) {
				t.Errorf("mean %v (n %d), want %v", iv.Mean, iv.N, tc.mean)
			}
			if iv.Lo < tc.lo-1e-12 || iv.Hi > tc.hi+1e-12 || iv.Lo > iv.Mean || iv.Hi < iv.Mean {
				t.Errorf("interval [%v, %v] around %v, want within [%v, %v]", iv.Lo, iv.Hi, iv.Mean, tc.lo, tc.hi)
			}
			if tc.hi == Unbounded && iv.Hi != Unbounded {
				t.Errorf("upper end %v, want Unbounded", iv.Hi)
			}
		})
	}
}

// TestRatioOfMeansCoverage: over many samples of pairs whose true ratio of
// means is 2, the 95% interval holds 2 in about 95% of them, and equal
// seeds give equal intervals.
func TestRatioOfMeansCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const trials = 300
	var covered int
	for k := range trials {
		num, den := make([]float64, 40), make([]float64, 40)
		for i := range num {
			den[i] = 1 + 4*rng.Float64()
			num[i] = 2*den[i] + rng.NormFloat64()
		}
		iv, err := RatioOfMeans(num, den, 0.95, 500, uint64(k))
		if err != nil {
			t.Fatal(err)
		}
		if !iv.Excludes(2) {
			covered++
		}
		again, _ := RatioOfMeans(num, den, 0.95, 500, uint64(k))
		if again != iv {
			t.Fatalf("same seed, intervals %+v and %+v", iv, again)
		}
	}
	if f := float64(covered) / trials; f < 0.90 || f > 0.99 {
		t.Errorf("coverage %.3f, want about 0.95", f)
	}
}
