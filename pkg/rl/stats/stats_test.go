package stats

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestTQuantile(t *testing.T) {
	// Two-sided 95% critical values from standard tables.
	for _, tc := range []struct {
		df, want float64
	}{
		{1, 12.7062}, {2, 4.3027}, {3, 3.1824}, {5, 2.5706}, {10, 2.2281},
		{30, 2.0423}, {100, 1.9840}, {1e6, 1.9600},
	} {
		if got := TQuantile(0.975, tc.df); math.Abs(got-tc.want) > 1e-4 {
			t.Errorf("t(0.975, %g) = %.5f, want %.4f", tc.df, got, tc.want)
		}
		if got := TQuantile(0.025, tc.df); math.Abs(got+tc.want) > 1e-4 {
			t.Errorf("t(0.025, %g) = %.5f, want %.4f", tc.df, got, -tc.want)
		}
	}
	if got := TQuantile(0.995, 7); math.Abs(got-3.4995) > 1e-4 {
		t.Errorf("t(0.995, 7) = %.5f, want 3.4995", got)
	}
	for _, bad := range [][2]float64{{0, 5}, {1, 5}, {0.5, 0}, {math.NaN(), 3}} {
		if !math.IsNaN(TQuantile(bad[0], bad[1])) {
			t.Errorf("TQuantile(%g, %g) is not NaN", bad[0], bad[1])
		}
	}
}

func TestPaired(t *testing.T) {
	a := []float64{0.70, 0.68, 0.72, 0.66, 0.71}
	b := []float64{0.66, 0.66, 0.69, 0.65, 0.66}
	iv, err := Paired(a, b, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	// d = 0.04, 0.02, 0.03, 0.01, 0.05: mean 0.03, sd 0.0158114,
	// half-width 2.7764·0.0158114/√5 = 0.019632.
	if iv.N != 5 || math.Abs(iv.Mean-0.03) > 1e-12 || math.Abs(iv.StdDev-0.0158114) > 1e-6 ||
		math.Abs(iv.Lo-(0.03-0.019632)) > 1e-5 || math.Abs(iv.Hi-(0.03+0.019632)) > 1e-5 {
		t.Errorf("paired = %+v", iv)
	}
	if !iv.Excludes(0) || iv.Excludes(0.03) {
		t.Errorf("Excludes: %+v", iv)
	}
	if got := iv.Format("%.3f"); got != "0.030 [0.010, 0.050]" {
		t.Errorf("Format = %q", got)
	}
	for _, tc := range []struct {
		name    string
		a, b    []float64
		level   float64
		wantErr string
	}{
		{"length", []float64{1}, []float64{1, 2}, 0.95, "differ in length"},
		{"empty", nil, nil, 0.95, "no samples"},
		{"NaN", []float64{1, math.NaN()}, []float64{1, 1}, 0.95, "sample 1 is NaN"},
		{"level", []float64{1}, []float64{1}, 1, "confidence level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Paired(tc.a, tc.b, tc.level)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
	if _, err := Paired([]float64{1}, nil, 0.9); !errors.Is(err, ErrLength) {
		t.Errorf("error %v is not ErrLength", err)
	}
	one, err := Paired([]float64{2}, []float64{1}, 0.95)
	if err != nil || one.Lo != 1 || one.Hi != 1 {
		t.Errorf("one pair: %+v %v", one, err)
	}
}

// TestCoverage: over many samples of a known mean, the 95% interval covers
// it about 95% of the time (a check of the quantile and the formula
// together). Deterministic: the samples come from a fixed generator.
func TestCoverage(t *testing.T) {
	var x uint64 = 88172645463325252
	uniform := func() float64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return float64(x>>11) / (1 << 53)
	}
	normal := func() float64 {
		return math.Sqrt(-2*math.Log(1-uniform())) * math.Cos(2*math.Pi*uniform())
	}
	covered, trials := 0, 4000
	for range trials {
		xs := make([]float64, 6)
		for i := range xs {
			xs[i] = 3 + normal()
		}
		iv, err := Mean(xs, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		if !iv.Excludes(3) {
			covered++
		}
	}
	if f := float64(covered) / float64(trials); f < 0.935 || f > 0.965 {
		t.Errorf("coverage %.3f, want 0.95 ± 0.015", f)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
		ok   bool
	}{
		{"empty", nil, 0, false},
		{"one", []float64{3}, 3, true},
		{"odd", []float64{5, 1, 3}, 3, true},
		{"even", []float64{4, 1, 3, 2}, 2.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.xs)
			got, ok := Median(in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Median(%v) = %g, %v; want %g, %v", tc.xs, got, ok, tc.want, tc.ok)
			}
			if !slices.Equal(in, tc.xs) {
				t.Errorf("Median sorted its argument: %v", in)
			}
		})
	}
}
