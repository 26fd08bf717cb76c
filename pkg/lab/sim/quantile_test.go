package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bisection is quantile as it was before near() let it skip evaluations:
// 40 bisections of [least shift, timeout], every midpoint evaluated.
// Trained agents and recorded results were computed with it.
func bisection(groups []latGroup, q, lost, timeout float64) float64 {
	var served float64
	lo := timeout
	for i := range groups {
		served += groups[i].weight
		lo = min(lo, groups[i].shift)
	}
	total := served + lost
	if total <= 0 {
		return 0
	}
	if lost == 0 && len(groups) == 1 {
		g := groups[0]
		return min(g.shift-g.mean*math.Log(1-q), timeout)
	}
	target := q * total
	if served < target {
		return timeout
	}
	cdf := func(x float64) float64 {
		var f float64
		for i := range groups {
			g := &groups[i]
			if x > g.shift {
				f += g.weight * (1 - math.Exp(-(x-g.shift)/g.mean))
			}
		}
		return f
	}
	hi := timeout
	if cdf(hi) < target {
		return timeout
	}
	for range 40 {
		mid := (lo + hi) / 2
		if cdf(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TestQuantileIsTheBisection holds quantile to the bisection bit for bit,
// on hand-picked mixtures (kinks, plateaus, point masses, lost requests)
// and on random ones.
func TestQuantileIsTheBisection(t *testing.T) {
	cases := []struct {
		name    string
		groups  []latGroup
		q, lost float64
		timeout float64
	}{
		{"nothing served or lost", nil, 0.95, 0, 30},
		{"only lost requests", nil, 0.95, 5, 30},
		{"one group in closed form", []latGroup{{0.01, 0.1, 7}}, 0.5, 0, 30},
		{"two groups", []latGroup{{0.01, 0.05, 100}, {0.02, 0.2, 20}}, 0.95, 0, 30},
		{"two groups with lost requests", []latGroup{{0.01, 0.05, 100}, {0.02, 0.2, 20}}, 0.95, 3, 30},
		{"lost requests reach the level", []latGroup{{0.01, 0.05, 90}}, 0.95, 10, 30},
		{"one group and lost", []latGroup{{0.01, 0.05, 90}}, 0.5, 10, 30},
		{"quantile past the timeout", []latGroup{{5, 20, 10}, {1, 30, 10}}, 0.99, 0, 10},
		{"a plateau at the level", []latGroup{{0.001, 0.001, 50}, {2, 0.5, 50}}, 0.5, 0, 30},
		{"just past a plateau", []latGroup{{0.001, 0.001, 50}, {2, 0.5, 50}}, 0.5000001, 0, 30},
		{"a heavy tail of little weight", []latGroup{{0.01, 0.02, 1000}, {0.01, 5, 1}}, 0.999, 0, 30},
		{"a point mass", []latGroup{{0.2, 0, 10}, {0.01, 0.1, 10}}, 0.9, 0, 30},
		{"an empty group", []latGroup{{0.2, 0.1, 0}, {0.01, 0.1, 10}}, 0.9, 1, 30},
		{"level 1", []latGroup{{0.01, 0.1, 10}, {0.02, 0.1, 10}}, 1, 0, 30},
		{"eight groups", []latGroup{{0, .1, 1}, {.1, .2, 2}, {.2, .1, 3}, {.3, .4, 1}, {0, 1, .5}, {.5, .05, 4}, {.05, .3, 2}, {1, 1, 1}}, 0.95, 0.1, 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, want := quantile(c.groups, c.q, c.lost, c.timeout), bisection(c.groups, c.q, c.lost, c.timeout)
			if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("quantile = %.17g, the bisection %.17g", got, want)
			}
		})
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50000 {
		n := 1 + rng.IntN(maxGroups*3)
		groups := make([]latGroup, n)
		for j := range groups {
			groups[j] = latGroup{shift: rng.Float64() * 0.5, mean: math.Exp(rng.NormFloat64()*2 - 3), weight: rng.Float64() * 100}
			if rng.IntN(20) == 0 { // pods in the same state across windows
				groups[j].shift = groups[0].shift
			}
		}
		lost := 0.0
		if rng.IntN(3) == 0 {
			lost = rng.Float64() * 10
		}
		q := []float64{0.5, 0.95, 0.99, rng.Float64()}[rng.IntN(4)]
		timeout := []float64{1, 10, 30}[rng.IntN(3)]
		got, want := quantile(groups, q, lost, timeout), bisection(groups, q, lost, timeout)
		if got != want {
			t.Fatalf("draw %d: quantile(%v, q %v, lost %v, timeout %v) = %.17g, the bisection %.17g", i, groups, q, lost, timeout, got, want)
		}
	}
}

// TestNearBrackets: the bracket near() gives is the root's, and is
// refused where Newton has nothing to stand on.
func TestNearBrackets(t *testing.T) {
	groups := []latGroup{{0.01, 0.05, 100}, {0.02, 0.2, 20}}
	target := 0.95 * 120.0
	below, above := near(groups, target, 120)
	if !(below < above) || math.IsInf(below, 0) || math.IsInf(above, 0) {
		t.Fatalf("no bracket: [%v, %v]", below, above)
	}
	if cdf(groups, below) >= target || cdf(groups, above) < target {
		t.Fatalf("[%v, %v] does not bracket the root: cdf %v and %v against %v", below, above, cdf(groups, below), cdf(groups, above), target)
	}
	if w := above - below; w > 1e-6 {
		t.Errorf("bracket %v wide, want it near the root", w)
	}
	for _, c := range []struct {
		name   string
		groups []latGroup
		target float64
	}{
		{"a point mass", []latGroup{{0.2, 0, 10}, {0.01, 0.1, 10}}, 18},
		{"level 1", []latGroup{{0.01, 0.1, 10}}, 10},
		{"a plateau at the level", []latGroup{{0.001, 0.001, 50}, {2, 0.5, 50}}, 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			if below, above := near(c.groups, c.target, sumWeights(c.groups)); !math.IsInf(below, -1) || !math.IsInf(above, 1) {
				t.Fatalf("near = [%v, %v], want no bracket", below, above)
			}
		})
	}
}

func sumWeights(groups []latGroup) float64 {
	var w float64
	for _, g := range groups {
		w += g.weight
	}
	return w
}

// BenchmarkQuantile: the pooled p95 of a 2-minute rate window at a 15-s
// step, eight windows of two groups each.
func BenchmarkQuantile(b *testing.B) {
	var groups []latGroup
	for i := range 8 {
		f := float64(i)
		groups = append(groups, latGroup{0.005, 0.05 + 0.01*f, 20 + f}, latGroup{0.01, 0.3 + 0.02*f, 2})
	}
	b.Run("newton", func(b *testing.B) {
		for b.Loop() {
			quantile(groups, 0.95, 0.5, 30)
		}
	})
	b.Run("bisection", func(b *testing.B) {
		for b.Loop() {
			bisection(groups, 0.95, 0.5, 30)
		}
	})
}
