package simside

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// fit is a least-squares solution.
type fit struct {
	coef, se []float64
	r2       float64
	n        int
}

func (f fit) estimate(i int, method string) Estimate {
	return Estimate{Value: f.coef[i], Lo: f.coef[i] - 1.96*f.se[i], Hi: f.coef[i] + 1.96*f.se[i], N: f.n, Method: method}
}

func ones(n int) []float64 {
	o := make([]float64, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

// leastSquares fits y on the columns of x (two of them) by the normal
// equations, with standard errors and the R² about y's mean. It refuses a
// nearly singular system: columns that do not vary independently.
func leastSquares(x [][]float64, y []float64) (fit, error) {
	if len(x) != 2 {
		return fit{}, fmt.Errorf("want 2 regressors, got %d", len(x))
	}
	n := len(y)
	if n <= 2 {
		return fit{}, fmt.Errorf("%d points for 2 coefficients", n)
	}
	var a11, a12, a22, b1, b2 float64
	for i := range y {
		a11 += x[0][i] * x[0][i]
		a12 += x[0][i] * x[1][i]
		a22 += x[1][i] * x[1][i]
		b1 += x[0][i] * y[i]
		b2 += x[1][i] * y[i]
	}
	det := a11*a22 - a12*a12
	if !(a11 > 0 && a22 > 0) || det <= 1e-9*a11*a22 {
		return fit{}, errors.New("the regressors are (nearly) collinear")
	}
	f := fit{n: n, coef: []float64{(a22*b1 - a12*b2) / det, (a11*b2 - a12*b1) / det}}
	var mean, ssRes, ssTot float64
	for _, v := range y {
		mean += v / float64(n)
	}
	for i, v := range y {
		e := v - f.coef[0]*x[0][i] - f.coef[1]*x[1][i]
		ssRes += e * e
		ssTot += (v - mean) * (v - mean)
	}
	s2 := ssRes / float64(n-2)
	f.se = []float64{math.Sqrt(s2 * a22 / det), math.Sqrt(s2 * a11 / det)}
	f.r2 = math.NaN()
	if ssTot > 0 {
		f.r2 = 1 - ssRes/ssTot
	}
	return f, nil
}

// median with the interquartile range (linear interpolation).
func median(v []float64, method string) Estimate {
	s := slices.Clone(v)
	slices.Sort(s)
	q := func(p float64) float64 {
		h := p * float64(len(s)-1)
		lo := int(math.Floor(h))
		hi := min(lo+1, len(s)-1)
		return s[lo] + (h-float64(lo))*(s[hi]-s[lo])
	}
	return Estimate{Value: q(0.5), Lo: q(0.25), Hi: q(0.75), N: len(s), Method: method}
}
