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
// groups, by weight) plus a point mass of lost requests at timeout.
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
