package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Covariance returns the mean and the sample covariance (divided by
// n − 1) of points, all of one dimension. An error when there are fewer
// than two points, the dimensions differ, or a value is not finite.
func Covariance(points [][]float64) (mean []float64, cov [][]float64, err error) {
	n := len(points)
	if n < 2 {
		return nil, nil, fmt.Errorf("stats: a covariance needs at least 2 points, got %d", n)
	}
	d := len(points[0])
	mean = make([]float64, d)
	for i, p := range points {
		if len(p) != d {
			return nil, nil, fmt.Errorf("%w: point %d has %d dimensions, point 0 %d", ErrLength, i, len(p), d)
		}
		for j, x := range p {
			if !finite(x) {
				return nil, nil, fmt.Errorf("stats: point %d coordinate %d is %g", i, j, x)
			}
			mean[j] += x / float64(n)
		}
	}
	cov = make([][]float64, d)
	for a := range cov {
		cov[a] = make([]float64, d)
		for b := range d {
			for _, p := range points {
				cov[a][b] += (p[a] - mean[a]) * (p[b] - mean[b])
			}
			cov[a][b] /= float64(n - 1)
		}
	}
	return mean, cov, nil
}

// Projection is points projected on their first principal components.
type Projection struct {
	// Points holds each point's coordinates on the components, in input
	// order.
	Points [][]float64 `json:"points"`
	// Explained is the fraction of the total variance each component
	// carries (0 when the points have no spread).
	Explained []float64 `json:"explained"`
}

// PCA projects points (all of one dimension) on their k principal
// components: the eigenvectors of the sample covariance with the largest
// eigenvalues, found by cyclic Jacobi rotations. Each component's sign is
// fixed so that its largest-magnitude entry is positive, so equal input
// gives equal output. An error when there are fewer than two points, the
// dimensions differ, k is not in [1, dimension], or a value is not finite.
func PCA(points [][]float64, k int) (Projection, error) {
	if len(points) < 2 {
		return Projection{}, fmt.Errorf("stats: PCA needs at least 2 points, got %d", len(points))
	}
	d := len(points[0])
	if k < 1 || k > d {
		return Projection{}, fmt.Errorf("stats: PCA components must be in [1, %d], got %d", d, k)
	}
	mean, cov, err := Covariance(points)
	if err != nil {
		return Projection{}, fmt.Errorf("stats: PCA: %w", err)
	}
	vals, vecs, err := symmetricEigen(cov)
	if err != nil {
		return Projection{}, err
	}
	order := make([]int, d)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case vals[a] > vals[b]:
			return -1
		case vals[a] < vals[b]:
			return 1
		}
		return 0
	})
	var total float64
	for _, v := range vals {
		total += math.Max(v, 0)
	}
	out := Projection{Points: make([][]float64, len(points)), Explained: make([]float64, k)}
	comps := make([][]float64, k)
	for c := range k {
		v := make([]float64, d)
		big := 0
		for a := range d {
			v[a] = vecs[a][order[c]]
			if math.Abs(v[a]) > math.Abs(v[big]) {
				big = a
			}
		}
		if v[big] < 0 {
			for a := range v {
				v[a] = -v[a]
			}
		}
		comps[c] = v
		if total > 0 {
			out.Explained[c] = math.Max(vals[order[c]], 0) / total
		}
	}
	for i, p := range points {
		out.Points[i] = make([]float64, k)
		for c, v := range comps {
			for a := range d {
				out.Points[i][c] += (p[a] - mean[a]) * v[a]
			}
		}
	}
	return out, nil
}

// symmetricEigen returns the eigenvalues of the symmetric matrix m and its
// eigenvectors as the columns of vecs, by cyclic Jacobi rotations (m is
// not changed).
func symmetricEigen(m [][]float64) (vals []float64, vecs [][]float64, err error) {
	d := len(m)
	a := make([][]float64, d)
	vecs = make([][]float64, d)
	for i := range d {
		a[i] = slices.Clone(m[i])
		vecs[i] = make([]float64, d)
		vecs[i][i] = 1
	}
	off := func() float64 {
		var s float64
		for i := range d {
			for j := range d {
				if i != j {
					s += a[i][j] * a[i][j]
				}
			}
		}
		return s
	}
	var scale float64
	for i := range d {
		for j := range d {
			scale += a[i][j] * a[i][j]
		}
	}
	converged := false
	for sweep := 0; sweep < 100; sweep++ {
		if off() <= 1e-30*scale || scale == 0 {
			converged = true
			break
		}
		for p := range d {
			for q := p + 1; q < d; q++ {
				if a[p][q] == 0 {
					continue
				}
				// The rotation that zeroes a[p][q] (Golub & Van Loan, 8.4).
				theta := (a[q][q] - a[p][p]) / (2 * a[p][q])
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range d {
					akp, akq := a[k][p], a[k][q]
					a[k][p], a[k][q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range d {
					apk, aqk := a[p][k], a[q][k]
					a[p][k], a[q][k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := range d {
					vkp, vkq := vecs[k][p], vecs[k][q]
					vecs[k][p], vecs[k][q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	if !converged {
		return nil, nil, errors.New("stats: eigen decomposition did not converge")
	}
	vals = make([]float64, d)
	for i := range d {
		vals[i] = a[i][i]
	}
	return vals, vecs, nil
}
