package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestRanks(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want []float64
	}{
		{name: "distinct", xs: []float64{3, 1, 2}, want: []float64{3, 1, 2}},
		{name: "ties share the mean rank", xs: []float64{5, 1, 5, 0}, want: []float64{3.5, 2, 3.5, 1}},
		{name: "all tied", xs: []float64{2, 2, 2}, want: []float64{2, 2, 2}},
		{name: "empty", xs: nil, want: []float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Ranks(tc.xs); !slices.Equal(got, tc.want) {
				t.Errorf("Ranks(%v) = %v, want %v", tc.xs, got, tc.want)
			}
		})
	}
}

func TestSpearman(t *testing.T) {
	for _, tc := range []struct {
		name    string
		x, y    []float64
		want    float64 // NaN: undefined
		wantErr string
	}{
		{name: "monotone, not linear", x: []float64{1, 2, 3, 4}, y: []float64{1, 8, 27, 1000}, want: 1},
		{name: "reversed", x: []float64{1, 2, 3, 4}, y: []float64{0.4, 0.3, 0.2, -9}, want: -1},
		// Ranks (1,2,3,4) and (2,1,4,3): d² sums to 4, ρ = 1 − 6·4/(4·15) = 0.6.
		{name: "two swaps", x: []float64{1, 2, 3, 4}, y: []float64{2, 1, 4, 3}, want: 0.6},
		{name: "no spread", x: []float64{1, 2, 3}, y: []float64{7, 7, 7}, want: math.NaN()},
		{name: "lengths differ", x: []float64{1, 2}, y: []float64{1}, wantErr: "differ in length"},
		{name: "infinite value", x: []float64{1, math.Inf(1)}, y: []float64{1, 2}, wantErr: "pair 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Spearman(tc.x, tc.y)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-12) {
				t.Errorf("ρ = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPearson(t *testing.T) {
	for _, tc := range []struct {
		name    string
		x, y    []float64
		want    float64 // NaN: undefined
		wantErr string
	}{
		{name: "linear", x: []float64{1, 2, 3, 4}, y: []float64{3, 5, 7, 9}, want: 1},
		// Monotone but not linear: below Spearman's 1.
		{name: "monotone, not linear", x: []float64{1, 2, 3, 4}, y: []float64{1, 8, 27, 1000}, want: 0.78799},
		{name: "two swaps", x: []float64{1, 2, 3, 4}, y: []float64{2, 1, 4, 3}, want: 0.6},
		{name: "no spread", x: []float64{1, 2, 3}, y: []float64{7, 7, 7}, want: math.NaN()},
		{name: "one pair", x: []float64{1}, y: []float64{2}, want: math.NaN()},
		{name: "lengths differ", x: []float64{1, 2}, y: []float64{1}, wantErr: "differ in length"},
		{name: "NaN value", x: []float64{1, 2}, y: []float64{math.NaN(), 2}, wantErr: "pair 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Pearson(tc.x, tc.y)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-4) {
				t.Errorf("r = %v, want %v", got, tc.want)
			}
		})
	}
}

// similarities returns the n×n matrix f(i, j).
func similarities(n int, f func(i, j int) float64) [][]float64 {
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, n)
		for j := range m[i] {
			m[i][j] = f(i, j)
		}
	}
	return m
}

func TestPairRankCorrelation(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	pos := make([]float64, 20)
	noise := make([]float64, 20)
	for i := range pos {
		pos[i], noise[i] = rng.Float64(), rng.Float64()
	}
	dist := func(xs []float64) [][]float64 {
		return similarities(len(xs), func(i, j int) float64 { return -math.Abs(xs[i] - xs[j]) })
	}
	// A monotone transform of B ranks every pair alike.
	same := PairSet{A: dist(pos), B: similarities(20, func(i, j int) float64 { return math.Exp(-3 * math.Abs(pos[i]-pos[j])) })}
	unrelated := PairSet{A: dist(pos), B: dist(noise)}
	opposite := PairSet{A: dist(pos), B: similarities(20, func(i, j int) float64 { return math.Abs(pos[i] - pos[j]) })}
	for _, tc := range []struct {
		name    string
		sets    []PairSet
		mean    float64
		lo, hi  float64 // the interval must lie within
		wantErr string
	}{
		{name: "same ranking", sets: []PairSet{same}, mean: 1, lo: 1, hi: 1},
		{name: "opposite ranking", sets: []PairSet{opposite}, mean: -1, lo: -1, hi: -1},
		{name: "unrelated similarities are near 0", sets: []PairSet{unrelated}, mean: math.NaN(), lo: -0.4, hi: 0.4},
		{name: "sets are averaged", sets: []PairSet{same, opposite}, mean: 0, lo: 0, hi: 0},
		{name: "no sets", wantErr: "no pair sets"},
		{name: "too few units", sets: []PairSet{{A: dist(pos[:2]), B: dist(pos[:2])}}, wantErr: "at least 3"},
		{name: "ragged", sets: []PairSet{{A: dist(pos[:3]), B: dist(pos[:4])}}, wantErr: "differ in length"},
		{name: "no spread", sets: []PairSet{{A: dist(pos[:4]), B: similarities(4, func(int, int) float64 { return 1 })}}, wantErr: "no spread"},
		{name: "NaN similarity", sets: []PairSet{{A: dist(pos[:3]), B: similarities(3, func(i, j int) float64 { return math.NaN() })}}, wantErr: "is (-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv, err := PairRankCorrelation(tc.sets, 0.95, 500, 1)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !math.IsNaN(tc.mean) && math.Abs(iv.Mean-tc.mean) > 1e-9 {
				t.Errorf("ρ = %v, want %v", iv.Mean, tc.mean)
			}
			if iv.Lo < tc.lo-1e-9 || iv.Hi > tc.hi+1e-9 || iv.Lo > iv.Mean+1e-9 || iv.Hi < iv.Mean-1e-9 {
				t.Errorf("interval %s, want within [%v, %v] around the mean", iv.Format("%.3f"), tc.lo, tc.hi)
			}
		})
	}
}

// TestPairRankCorrelationCoverage checks the interval's purpose: for units
// whose similarities are a noisy function of a hidden position, the
// bootstrap interval, over many draws, mostly covers the ρ of a very large
// draw.
func TestPairRankCorrelationCoverage(t *testing.T) {
	draw := func(rng *rand.Rand, n int) PairSet {
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
			y[i] = x[i] + rng.NormFloat64()
		}
		d := func(v []float64) [][]float64 {
			return similarities(n, func(i, j int) float64 { return -math.Abs(v[i] - v[j]) })
		}
		return PairSet{A: d(x), B: d(y)}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	truth, err := PairRankCorrelation([]PairSet{draw(rng, 300)}, 0.95, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	covered, trials := 0, 60
	for k := range trials {
		iv, err := PairRankCorrelation([]PairSet{draw(rng, 20)}, 0.95, 200, uint64(k))
		if err != nil {
			t.Fatal(err)
		}
		if !iv.Excludes(truth.Mean) {
			covered++
		}
	}
	// A percentile bootstrap of a pair statistic is approximate; below 80%
	// it would be no 95% interval at all.
	if covered < trials*8/10 {
		t.Errorf("the interval covered ρ = %.3f in %d of %d draws", truth.Mean, covered, trials)
	}
}
