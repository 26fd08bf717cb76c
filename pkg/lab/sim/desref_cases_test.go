package sim

import "fmt"

// around is the band r·(1 ± tol): r the ratio simulator/reference measured
// with -des.scale=10 (20 seeds), tol what covers the default run's two
// seeds as well.
func around(r, tol float64) band { return band{r * (1 - tol), r * (1 + tol)} }

// desCases are TestDESCompare's cases; docs/simulator.md, "An independent
// reference", explains the bands.
func desCases() []desCase {
	var cs []desCase
	steady := func(rho float64, d serviceDist, mean, p95, lost band) {
		c := desCase{name: fmt.Sprintf("steady rho=%.2f %s", rho, d.name), kind: Steady, rho: rho, dist: d, pods: 1,
			windows: 170, skip: 20, mean: mean, p95: p95, lost: lost}
		if rho >= 1 {
			// Overload has no steady state: both start empty and the
			// first 20 minutes are measured.
			c.windows, c.skip = 80, 0
		} else {
			// A window's p95 varies in the reference (its coefficient of
			// variation over windows, measured 0.33-0.95), never in the
			// model.
			c.spread = map[string]band{distExp.name: {0.3, 0.9}, distDet.name: {0.25, 0.7}, distH2.name: {0.5, 1.05}}[d.name]
		}
		cs = append(cs, c)
	}
	// Where the model holds: the mean below ρ = 0.95, for any service
	// distribution (PS is insensitive to it). The p95 is off by what the
	// exponential shape misses: 12-21% low for exponential or heavier
	// tails, 8-31% high for a constant demand.
	for _, rho := range []float64{0.5, 0.7, 0.9} {
		steady(rho, distExp, band{0.94, 1.15}, band{0.72, 0.95}, band{})
		steady(rho, distDet, band{0.94, 1.15}, band{1.0, 1.45}, band{})
		steady(rho, distH2, band{0.94, 1.35}, band{0.68, 1.0}, band{})
	}
	// Near critical the real queue relaxes slower than a trace changes
	// (about 1/(μ(1−√ρ)²) ≈ 1000 s at ρ = 0.98), and heavy tails time out:
	// the simulator's stationary mean is high by 3-60% (exponential or
	// constant demand) or 1.6-3.3x (CV² = 4).
	steady(0.95, distExp, band{0.9, 1.35}, band{0.65, 1.05}, band{})
	steady(0.95, distDet, band{0.85, 1.3}, band{0.85, 1.4}, band{})
	steady(0.95, distH2, band{1.3, 2.1}, band{0.9, 1.5}, band{})
	steady(0.98, distExp, band{1.2, 2.2}, band{0.95, 1.6}, band{})
	steady(0.98, distDet, band{0.8, 1.6}, band{1.0, 1.9}, band{})
	steady(0.98, distH2, band{2.4, 4.4}, band{1.7, 3.0}, band{})
	// Overload: the window's p95 agrees within 4-23% for exponential and
	// constant demand from ρ = 1.05 (both sit near the timeout); the mean
	// and the losses do not: the simulator's backlog is first-come
	// first-served, processor sharing lets short requests through and
	// times long ones out, and with a constant demand every request slows
	// together and most time out.
	steady(1.0, distExp, around(2.26, 0.4), around(1.53, 0.3), band{0, 0.5})
	steady(1.0, distDet, band{0.5, 1.8}, band{1.0, 3.6}, band{})
	steady(1.0, distH2, around(5.7, 0.35), around(2.72, 0.35), band{0, 0.5})
	steady(1.05, distExp, around(3.79, 0.2), around(1.23, 0.15), around(0.588, 0.35))
	steady(1.05, distDet, around(1.33, 0.25), around(1.08, 0.15), around(0.039, 0.5))
	steady(1.05, distH2, around(12.2, 0.25), around(2.76, 0.25), around(2.07, 0.35))
	steady(1.1, distExp, around(3.58, 0.15), around(1.07, 0.1), around(0.856, 0.25))
	steady(1.1, distDet, around(1.80, 0.25), around(1.04, 0.1), around(0.079, 0.4))
	steady(1.1, distH2, around(11.0, 0.25), around(2.11, 0.25), around(3.56, 0.35))

	// The traces, at a mean of ρ = 0.4 (bursts to 1.2, the flash crowd's
	// peak to 2): the share of windows over the SLO, what the evaluator
	// counts, agrees within 2 points for exponential and constant demand
	// and is 10-13 points low for CV² = 4; the mean window p95 within 4-14%
	// (CV² = 4: 28-42%).
	trace := func(kind TraceKind, d serviceDist, mean, p95, lost band, over float64) {
		cs = append(cs, desCase{name: fmt.Sprintf("%s %s", kind, d.name), kind: kind, rho: 0.4, dist: d, pods: 1,
			windows: 400, mean: mean, p95: p95, lost: lost, overSLO: over})
	}
	trace(Bursty, distExp, around(2.48, 0.4), around(1.04, 0.25), around(0.436, 0.5), 0.03)
	trace(Bursty, distDet, around(1.84, 0.4), around(1.11, 0.25), around(0.084, 0.6), 0.03)
	trace(Bursty, distH2, around(5.7, 0.4), around(1.42, 0.3), around(1.63, 0.5), 0.16)
	trace(FlashCrowd, distExp, around(3.26, 0.2), around(1.14, 0.1), around(0.907, 0.2), 0.03)
	trace(FlashCrowd, distDet, around(5.39, 0.4), around(1.11, 0.1), around(0.278, 0.3), 0.03)
	trace(FlashCrowd, distH2, around(4.52, 0.2), around(1.28, 0.1), around(2.51, 0.3), 0.16)

	// Several pods: a random split makes each pod's arrivals Poisson of
	// rate λ/pods, the simulator's assumption, and agrees as one pod does;
	// round-robin, which the package documentation names, makes them less
	// variable, and the simulator's latency is then 1.2-1.6x the
	// reference's.
	pods := func(split desSplit, name string, mean, p95 band) {
		cs = append(cs, desCase{name: "steady rho=0.90 4 pods " + name, kind: Steady, rho: 0.9, dist: distExp, pods: 4,
			split: split, windows: 120, skip: 20, mean: mean, p95: p95, spread: band{0.35, 0.6}})
	}
	pods(splitRandom, "random split", band{0.94, 1.15}, band{0.72, 0.95})
	pods(splitRoundRobin, "round-robin", around(1.59, 0.1), around(1.23, 0.1))
	return cs
}
