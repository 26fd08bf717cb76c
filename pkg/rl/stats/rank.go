package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Ranks returns the 1-based ranks of xs, ties sharing the mean of the
// ranks they span (the convention Spearman's ρ needs).
func Ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case xs[a] < xs[b]:
			return -1
		case xs[a] > xs[b]:
			return 1
		}
		return 0
	})
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && xs[idx[j]] == xs[idx[i]] {
			j++
		}
		// Positions i..j-1 hold equal values: each gets the mean rank.
		mid := float64(i+j+1) / 2
		for k := i; k < j; k++ {
			r[idx[k]] = mid
		}
		i = j
	}
	return r
}

// Spearman returns Spearman's rank correlation of paired samples: the
// Pearson correlation of their ranks (ties at mean ranks). It is NaN when
// either sample has no spread (all values tied) or there are fewer than
// two pairs; an error when the lengths differ or a value is not finite.
func Spearman(x, y []float64) (float64, error) {
	if len(x) != len(y) {
		return 0, fmt.Errorf("%w: %d and %d", ErrLength, len(x), len(y))
	}
	for i := range x {
		if !finite(x[i]) || !finite(y[i]) {
			return 0, fmt.Errorf("stats: pair %d is (%g, %g)", i, x[i], y[i])
		}
	}
	return pearson(Ranks(x), Ranks(y)), nil
}

// Pearson returns the (linear) correlation of paired samples. It is NaN
// when either sample has no spread or there are fewer than two pairs; an
// error when the lengths differ or a value is not finite.
func Pearson(x, y []float64) (float64, error) {
	if len(x) != len(y) {
		return 0, fmt.Errorf("%w: %d and %d", ErrLength, len(x), len(y))
	}
	for i := range x {
		if !finite(x[i]) || !finite(y[i]) {
			return 0, fmt.Errorf("stats: pair %d is (%g, %g)", i, x[i], y[i])
		}
	}
	return pearson(x, y), nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// pearson is the correlation of x and y, NaN without spread.
func pearson(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 {
		return math.NaN()
	}
	var mx, my float64
	for i := range x {
		mx, my = mx+x[i], my+y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy, sxx, syy = sxy+dx*dy, sxx+dx*dx, syy+dy*dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// PairSet is one group of units (e.g. the apps of one seed) with two
// similarity measures between every two of them: A[i][j] and B[i][j] for
// i ≠ j (the diagonal is not read). Only units of one group are compared:
// the similarities of different groups need not share a scale.
type PairSet struct {
	A, B [][]float64
}

func (p PairSet) check() error {
	n := len(p.A)
	if len(p.B) != n {
		return fmt.Errorf("%w: %d and %d units", ErrLength, n, len(p.B))
	}
	if n < 3 {
		return fmt.Errorf("stats: a pair set needs at least 3 units, got %d", n)
	}
	for i := range n {
		if len(p.A[i]) != n || len(p.B[i]) != n {
			return fmt.Errorf("stats: similarity rows %d have %d and %d columns, want %d", i, len(p.A[i]), len(p.B[i]), n)
		}
		for j := range n {
			if i != j && (!finite(p.A[i][j]) || !finite(p.B[i][j])) {
				return fmt.Errorf("stats: similarity (%d, %d) is (%g, %g)", i, j, p.A[i][j], p.B[i][j])
			}
		}
	}
	return nil
}

// rho is Spearman's ρ over the pairs (k, l), k < l, of the units idx
// lists, skipping pairs of one unit drawn twice (a unit's similarity to
// itself is not a pair).
func (p PairSet) rho(idx []int) float64 {
	var a, b []float64
	for k := range idx {
		for l := k + 1; l < len(idx); l++ {
			i, j := idx[k], idx[l]
			if i == j {
				continue
			}
			a, b = append(a, p.A[i][j]), append(b, p.B[i][j])
		}
	}
	return pearson(Ranks(a), Ranks(b))
}

// PairRankCorrelation measures how well similarity A ranks the pairs of
// units as similarity B does: Spearman's ρ over the pairs of units of each
// set, averaged over the sets, with a level percentile-bootstrap interval
// that resamples the units (not the pairs, which share units and are not
// independent) with replacement within each set, resamples times, from a
// PCG source seeded with seed; equal inputs give equal intervals. A set
// whose ρ is undefined (a similarity without spread) is an error; a
// resample in which it is undefined is left out.
func PairRankCorrelation(sets []PairSet, level float64, resamples int, seed uint64) (Interval, error) {
	switch {
	case !(level > 0 && level < 1):
		return Interval{}, fmt.Errorf("stats: confidence level must be in (0, 1), got %g", level)
	case len(sets) == 0:
		return Interval{}, errors.New("stats: no pair sets")
	case resamples < 1:
		return Interval{}, fmt.Errorf("stats: resamples must be > 0, got %d", resamples)
	}
	var units int
	var sum float64
	for s, p := range sets {
		if err := p.check(); err != nil {
			return Interval{}, fmt.Errorf("pair set %d: %w", s, err)
		}
		n := len(p.A)
		units += n
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		r := p.rho(idx)
		if math.IsNaN(r) {
			return Interval{}, fmt.Errorf("stats: pair set %d: a similarity has no spread", s)
		}
		sum += r
	}
	m := sum / float64(len(sets))
	iv := Interval{N: units, Mean: m, Lo: m, Hi: m}
	rng := rand.New(rand.NewPCG(seed, 0x72686f))
	rs := make([]float64, 0, resamples)
	for range resamples {
		var sum float64
		ok := true
		for _, p := range sets {
			n := len(p.A)
			idx := make([]int, n)
			for i := range idx {
				idx[i] = rng.IntN(n)
			}
			r := p.rho(idx)
			if math.IsNaN(r) {
				ok = false
			}
			sum += r
		}
		if ok {
			rs = append(rs, sum/float64(len(sets)))
		}
	}
	if len(rs) == 0 {
		return iv, nil
	}
	slices.Sort(rs)
	q := func(p float64) float64 { return rs[min(len(rs)-1, max(0, int(math.Floor(p*float64(len(rs))))))] }
	iv.Lo, iv.Hi = q((1-level)/2), q((1+level)/2)
	return iv, nil
}
