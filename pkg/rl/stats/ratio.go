package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Unbounded stands for an interval end the resamples could not bound (a
// resample whose denominator summed to zero): the largest float, so that
// the interval still encodes as JSON.
const Unbounded = math.MaxFloat64

// RatioOfMeans returns mean(num)/mean(den) over paired samples (num[i] and
// den[i] measured on the same unit) with a level percentile-bootstrap
// interval: resamples draws of the pairs with replacement, from a PCG
// source seeded with seed, so equal inputs give equal intervals. It is
// the interval of a speed-up or of a ratio of violation counts, where
// a t-interval of the difference (Paired) says whether they differ but
// not by what factor. A resample whose den sums to zero has an infinite
// ratio (Unbounded when it decides an end). An error when den sums to
// zero, the samples differ in length, or any sample is not finite.
func RatioOfMeans(num, den []float64, level float64, resamples int, seed uint64) (Interval, error) {
	switch {
	case !(level > 0 && level < 1):
		return Interval{}, fmt.Errorf("stats: confidence level must be in (0, 1), got %g", level)
	case len(num) != len(den):
		return Interval{}, fmt.Errorf("%w: %d and %d", ErrLength, len(num), len(den))
	case len(num) == 0:
		return Interval{}, errors.New("stats: no samples")
	case resamples < 1:
		return Interval{}, fmt.Errorf("stats: resamples must be > 0, got %d", resamples)
	}
	var sn, sd float64
	for i := range num {
		for _, x := range []float64{num[i], den[i]} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return Interval{}, fmt.Errorf("stats: sample %d is %g", i, x)
			}
		}
		sn, sd = sn+num[i], sd+den[i]
	}
	if sd == 0 {
		return Interval{}, errors.New("stats: the denominators sum to zero")
	}
	n := len(num)
	iv := Interval{N: n, Mean: sn / sd, Lo: sn / sd, Hi: sn / sd}
	if n < 2 {
		return iv, nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x726174696f))
	rs := make([]float64, resamples)
	for k := range rs {
		var a, b float64
		for range n {
			i := rng.IntN(n)
			a, b = a+num[i], b+den[i]
		}
		switch {
		case b != 0:
			rs[k] = a / b
		case a == 0:
			rs[k] = math.NaN() // 0/0: no ratio, left out below
		default:
			rs[k] = math.Copysign(math.Inf(1), a)
		}
	}
	rs = slices.DeleteFunc(rs, math.IsNaN)
	if len(rs) == 0 {
		return iv, nil
	}
	slices.Sort(rs)
	q := func(p float64) float64 {
		x := rs[min(len(rs)-1, max(0, int(math.Floor(p*float64(len(rs))))))]
		return math.Max(-Unbounded, math.Min(Unbounded, x))
	}
	iv.Lo, iv.Hi = q((1-level)/2), q((1+level)/2)
	return iv, nil
}
