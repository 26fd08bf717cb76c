package stats

import (
	"math"
	"strings"
	"testing"
)

func TestPCA(t *testing.T) {
	for _, tc := range []struct {
		name      string
		points    [][]float64
		k         int
		want      [][]float64 // NaN: unchecked
		explained []float64
		wantErr   string
	}{
		{
			// Along (1, 1, 0)/√2, centred on (1, 1, 5): coordinates are the
			// signed distances from the mean, all the variance on one axis.
			name:      "points on a line",
			points:    [][]float64{{0, 0, 5}, {1, 1, 5}, {2, 2, 5}},
			k:         1,
			want:      [][]float64{{-math.Sqrt2}, {0}, {math.Sqrt2}},
			explained: []float64{1},
		},
		{
			// Variance 4 along x, 1 along y: x is the first component.
			name:      "axis-aligned ellipse",
			points:    [][]float64{{-2, 0}, {2, 0}, {0, -1}, {0, 1}},
			k:         2,
			want:      [][]float64{{-2, 0}, {2, 0}, {0, -1}, {0, 1}},
			explained: []float64{0.8, 0.2},
		},
		{
			name:      "no spread",
			points:    [][]float64{{3, 3}, {3, 3}},
			k:         2,
			want:      [][]float64{{0, 0}, {0, 0}},
			explained: []float64{0, 0},
		},
		{name: "one point", points: [][]float64{{1}}, k: 1, wantErr: "at least 2"},
		{name: "k too large", points: [][]float64{{1}, {2}}, k: 2, wantErr: "components"},
		{name: "ragged", points: [][]float64{{1, 2}, {2}}, k: 1, wantErr: "dimensions"},
		{name: "NaN", points: [][]float64{{1}, {math.NaN()}}, k: 1, wantErr: "is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PCA(tc.points, tc.k)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				for c := range tc.want[i] {
					if math.Abs(p.Points[i][c]-tc.want[i][c]) > 1e-9 {
						t.Errorf("point %d = %v, want %v", i, p.Points[i], tc.want[i])
					}
				}
			}
			for c := range tc.explained {
				if math.Abs(p.Explained[c]-tc.explained[c]) > 1e-9 {
					t.Errorf("explained %v, want %v", p.Explained, tc.explained)
				}
			}
		})
	}
}

// TestPCAPreservesDistances checks that a full projection is a rotation:
// distances between points are unchanged.
func TestPCAPreservesDistances(t *testing.T) {
	points := [][]float64{{1, 2, 3}, {-1, 0.5, 2}, {4, -2, 0}, {0, 0, 1}, {2, 2, -3}}
	p, err := PCA(points, 3)
	if err != nil {
		t.Fatal(err)
	}
	dist := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += (a[i] - b[i]) * (a[i] - b[i])
		}
		return math.Sqrt(s)
	}
	for i := range points {
		for j := range points {
			if d0, d1 := dist(points[i], points[j]), dist(p.Points[i], p.Points[j]); math.Abs(d0-d1) > 1e-9 {
				t.Errorf("distance (%d, %d) %v became %v", i, j, d0, d1)
			}
		}
	}
	if p.Explained[0] < p.Explained[1] || p.Explained[1] < p.Explained[2] {
		t.Errorf("components not in decreasing variance: %v", p.Explained)
	}
}

func TestCovariance(t *testing.T) {
	tests := []struct {
		name     string
		points   [][]float64
		wantMean []float64
		wantCov  [][]float64
		wantErr  bool
	}{
		{name: "two points on a line", points: [][]float64{{0, 0}, {2, 4}},
			wantMean: []float64{1, 2}, wantCov: [][]float64{{2, 4}, {4, 8}}},
		{name: "independent axes", points: [][]float64{{1, 0}, {-1, 0}, {0, 1}, {0, -1}},
			wantMean: []float64{0, 0}, wantCov: [][]float64{{2.0 / 3, 0}, {0, 2.0 / 3}}},
		{name: "one point", points: [][]float64{{1, 2}}, wantErr: true},
		{name: "ragged", points: [][]float64{{1, 2}, {3}}, wantErr: true},
		{name: "not finite", points: [][]float64{{1, 2}, {math.NaN(), 0}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, cov, err := Covariance(tt.points)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			for i := range tt.wantMean {
				if math.Abs(mean[i]-tt.wantMean[i]) > 1e-12 {
					t.Errorf("mean[%d] = %g, want %g", i, mean[i], tt.wantMean[i])
				}
				for j := range tt.wantCov[i] {
					if math.Abs(cov[i][j]-tt.wantCov[i][j]) > 1e-12 {
						t.Errorf("cov[%d][%d] = %g, want %g", i, j, cov[i][j], tt.wantCov[i][j])
					}
				}
			}
		})
	}
}
