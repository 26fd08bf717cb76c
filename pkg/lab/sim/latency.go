package sim

import "math"

// latGroup is a set of pods with the same latency distribution.
type latGroup struct {
	shift, mean, weight float64
}

const (
	maxGroups = 8
	// rhoMax caps the utilisation in S/(1−ρ); beyond it the fluid backlog
	// carries the overload, so latency stays finite and continuous.
	rhoMax = 0.98
)

// windowLatency is the latency accounting of the window being simulated:
// its served requests as groups of the same distribution, and what its
// percentiles are read from.
type windowLatency struct {
	groups  [maxGroups]latGroup
	ngroups int
	// effective is the window's requests' worth as independent samples for
	// its percentiles (effectiveSamples, summed over the pods, with the
	// lost ones), and levels where its percentiles were read.
	effective float64
	levels    levels
}

func (l *windowLatency) addGroup(shift, mean, w float64) {
	if w <= 0 {
		return
	}
	for i := range l.ngroups {
		g := &l.groups[i]
		if g.shift == shift && g.mean == mean {
			g.weight += w
			return
		}
	}
	if l.ngroups == maxGroups {
		// Rare (pods in many different states): fold into the last group,
		// keeping the mass and the weighted mean.
		g := &l.groups[maxGroups-1]
		tw := g.weight + w
		g.shift = (g.shift*g.weight + shift*w) / tw
		g.mean = (g.mean*g.weight + mean*w) / tw
		g.weight = tw
		return
	}
	l.groups[l.ngroups] = latGroup{shift, mean, w}
	l.ngroups++
}

// quantile is the q-quantile of a mixture of shifted exponentials (the
// groups, by weight) plus a point mass of lost requests at timeout: the
// least point of a 40-step bisection of [least shift, timeout] whose CDF
// reaches the level.
//
// It is the hot path of the pooled percentiles (Config.RateWindow): three
// per window over every pooled window's groups. The bisection's answer is
// kept bit for bit (trained agents and every recorded result depend on
// it), but most of its 40 CDF evaluations are not made: Newton's method
// finds the root first (near), and a midpoint on a side of it that the CDF
// has been seen to clear by a margin is decided without evaluating it,
// since the CDF is monotone. Only the midpoints next to the root are
// evaluated, as the bisection evaluated them.
func quantile(groups []latGroup, q, lost, timeout float64) float64 {
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
	hi := timeout
	if cdf(groups, hi) < target {
		return timeout
	}
	below, above := near(groups, target, served)
	for range 40 {
		mid := (lo + hi) / 2
		var under bool
		switch {
		case mid <= below:
			under = true
		case mid >= above:
			under = false
		default:
			under = cdf(groups, mid) < target
		}
		if under {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// cdf is the groups' CDF at x, in requests. quantile's answer depends on
// its rounding: change it and recorded results move.
func cdf(groups []latGroup, x float64) float64 {
	var f float64
	for i := range groups {
		g := &groups[i]
		if x > g.shift {
			f += g.weight * (1 - math.Exp(-(x-g.shift)/g.mean))
		}
	}
	return f
}

// near brackets the root of cdf = target closely: cdf(below) < target and
// cdf(above) ≥ target, each by a margin far above cdf's rounding, so that
// every point at or below below (at or above above) compares with target
// as they do. Without such a bracket (no density for Newton's steps, a
// CDF flat at the level, a root not found) it returns (−∞, +∞): every
// midpoint is then evaluated.
func near(groups []latGroup, target, served float64) (below, above float64) {
	none := func() (float64, float64) { return math.Inf(-1), math.Inf(1) }
	// The root lies between the components' own quantiles at the level
	// the served requests must reach (a mixture's quantile lies between
	// its components').
	p := target / served
	if !(p < 1) {
		return none()
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range groups {
		g := &groups[i]
		if !(g.mean > 0) || !(g.weight > 0) {
			return none()
		}
		x := g.shift - g.mean*math.Log1p(-p)
		lo, hi = min(lo, x), max(hi, x)
	}
	// From the left end: past the largest shift the CDF is concave, and
	// Newton's steps climb to the root from below without overshooting.
	x := lo
	converged := false
	for range 50 {
		f, d := mixture(groups, x)
		if f < target {
			lo = x
		} else {
			hi = x
		}
		next := x - (f-target)/d
		if !(d > 0) || !(next >= lo && next <= hi) {
			next = lo + (hi-lo)/2
		}
		step := math.Abs(next - x)
		x = next
		if step <= 1e-12*max(math.Abs(x), 1e-6) {
			converged = true
			break
		}
	}
	if !converged {
		return none()
	}
	// A margin in requests 16 times cdf's worst rounding (an ulp of the
	// served requests per group summed), so that two evaluations cannot
	// cross it the wrong way even where math.Exp is not monotone to the
	// ulp.
	margin := 16 * 0x1p-52 * served * float64(len(groups))
	for width := 1e-11 * max(math.Abs(x), 1e-6); width < 1e-3*max(math.Abs(x), 1e-3); width *= 16 {
		below, above = x-width, x+width
		if cdf(groups, below) < target-margin && cdf(groups, above) >= target+margin {
			return below, above
		}
	}
	return none()
}

// mixture is the groups' CDF at x, in requests, and its density.
func mixture(groups []latGroup, x float64) (f, density float64) {
	for i := range groups {
		g := &groups[i]
		if x > g.shift {
			e := math.Exp(-(x - g.shift) / g.mean)
			f += g.weight * (1 - e)
			density += g.weight * e / g.mean
		}
	}
	return f, density
}
