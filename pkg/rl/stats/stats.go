// Package stats holds the statistics the project reports learning results
// with: paired differences with Student-t confidence intervals. It is pure
// Go with no dependencies, so the evaluator and the evidence share one
// implementation.
package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Interval is a mean with a two-sided confidence interval.
type Interval struct {
	// N is the number of samples (pairs).
	N int `json:"n"`
	// Mean is the sample mean; Lo and Hi bound the interval. With fewer
	// than two samples, or no spread, Lo = Hi = Mean.
	Mean float64 `json:"mean"`
	Lo   float64 `json:"lo"`
	Hi   float64 `json:"hi"`
	// StdDev is the sample standard deviation (n − 1 in the denominator).
	StdDev float64 `json:"stdDev"`
}

// Format formats the interval as "mean [lo, hi]" with the verb for each
// number, e.g. "%+.3f".
func (i Interval) Format(verb string) string {
	return fmt.Sprintf(verb+" ["+verb+", "+verb+"]", i.Mean, i.Lo, i.Hi)
}

// Excludes reports whether x lies outside the interval.
func (i Interval) Excludes(x float64) bool { return x < i.Lo || x > i.Hi }

// ErrLength is returned when paired samples differ in length.
var ErrLength = errors.New("stats: paired samples differ in length")

// Median returns the median of xs (the mean of the middle two for an even
// count), and false when xs is empty. xs is not modified; callers drop the
// values they do not count (NaN, missing) first.
func Median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	v := slices.Clone(xs)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2, true
	}
	return v[len(v)/2], true
}

// Mean returns the mean of xs with a level (e.g. 0.95) Student-t interval.
// NaN samples are an error: a missing measurement must not silently shrink
// the sample.
func Mean(xs []float64, level float64) (Interval, error) {
	if !(level > 0 && level < 1) {
		return Interval{}, fmt.Errorf("stats: confidence level must be in (0, 1), got %g", level)
	}
	n := len(xs)
	if n == 0 {
		return Interval{}, errors.New("stats: no samples")
	}
	var sum float64
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Interval{}, fmt.Errorf("stats: sample %d is %g", i, x)
		}
		sum += x
	}
	mean := sum / float64(n)
	iv := Interval{N: n, Mean: mean, Lo: mean, Hi: mean}
	if n < 2 {
		return iv, nil
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	iv.StdDev = math.Sqrt(ss / float64(n-1))
	half := TQuantile(0.5+level/2, float64(n-1)) * iv.StdDev / math.Sqrt(float64(n))
	iv.Lo, iv.Hi = mean-half, mean+half
	return iv, nil
}

// Paired returns the mean of a[i] − b[i] with a level Student-t interval:
// the paired comparison of two policies run on the same (app, trace, seed).
func Paired(a, b []float64, level float64) (Interval, error) {
	if len(a) != len(b) {
		return Interval{}, fmt.Errorf("%w: %d and %d", ErrLength, len(a), len(b))
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return Mean(d, level)
}

// TQuantile returns the p-quantile of Student's t distribution with df
// degrees of freedom (df > 0), by bisection on TCDF; accurate to 1e-10.
func TQuantile(p, df float64) float64 {
	switch {
	case !(p > 0 && p < 1) || !(df > 0):
		return math.NaN()
	case p == 0.5:
		return 0
	case p < 0.5:
		return -TQuantile(1-p, df)
	}
	lo, hi := 0.0, 1.0
	for TCDF(hi, df) < p {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := (lo + hi) / 2
		if TCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-12*math.Max(1, hi) {
			break
		}
	}
	return (lo + hi) / 2
}

// TCDF is the cumulative distribution function of Student's t with df
// degrees of freedom: 1 − I_x(df/2, 1/2)/2 for t > 0, x = df/(df + t²).
func TCDF(t, df float64) float64 {
	x := df / (df + t*t)
	tail := 0.5 * regIncBeta(df/2, 0.5, x)
	if t > 0 {
		return 1 - tail
	}
	return tail
}

// regIncBeta is the regularised incomplete beta function I_x(a, b), by its
// continued fraction (Lentz's method), using the symmetry relation where
// the fraction converges slowly.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log(1-x))
	if x > (a+1)/(a+b+2) {
		return 1 - front*betaFraction(b, a, 1-x)/b
	}
	return front * betaFraction(a, b, x) / a
}

func betaFraction(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		num := fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm))
		for k := range 2 {
			if k == 1 {
				num = -(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1))
			}
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < eps {
			break
		}
	}
	return h
}
