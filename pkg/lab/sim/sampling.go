package sim

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// The percentiles a histogram gives of one window's requests are a
// sample's: from window to window they vary around the distribution's. On
// the real node the p95 of calm 15-s windows (same pods, same load) at 0.2
// core and 10 requests/s spread with a standard deviation of 0.24–0.50 in
// its logarithm (docs/real-node-rounds.md, round eighteen): with a geometric mean
// of 0.76 of the SLO the p95 broke it in 24% of them, where the model's p95,
// the same in every calm window, never did. Config.SampledLatency models
// that spread.

// maxUtilisation bounds the utilisation effectiveSamples reads: a
// saturated pod's requests are still worth a little.
const maxUtilisation = 0.98

// effectiveSamples is how many independent requests done requests served
// at utilisation rho are worth for a percentile. Successive delays in a
// queue are correlated over its relaxation time, which grows as
// (1+rho)/(1−rho)² in an M/M/1 queue; a window holds that many fewer
// independent samples. This is a calibration, checked against the real
// node by TestSampledLatencySpread, not a derivation for the app's queue.
func effectiveSamples(done, rho float64) float64 {
	rho = min(max(rho, 0), maxUtilisation)
	return done * (1 - rho) * (1 - rho) / (1 + rho)
}

// levels are the distribution levels a window's P50, P95 and P99 are read
// at: modelLevels for the distribution's own percentiles.
type levels [3]float64

var modelLevels = levels{0.50, 0.95, 0.99}

// sampledLevels are the levels at which n independent requests show their
// percentiles: the share of n draws at or below the distribution's
// q-quantile is near normal, of mean q and variance q(1−q)/n, and the
// empirical q-quantile lies at the level that share misses by, q plus that
// error with its sign turned. So the level is normal around q, and the
// median window's percentile is the distribution's, as on the real node
// (docs/simulator.md). The order statistic's own law, Beta(q(n+1),
// (1−q)(n+1)), used before, is skewed towards 1 for the few effective
// samples of a busy window: it put the median window's p95 12–15% above
// the distribution's, and the real windows' is not. One uniform u, read
// through the unit normal's quantile, moves the three together.
func sampledLevels(n, u float64) levels {
	if !(n > 0) {
		return modelLevels
	}
	z := distuv.UnitNormal.Quantile(u)
	var l levels
	for i, q := range modelLevels {
		l[i] = min(max(q+z*math.Sqrt(q*(1-q)/n), minLevel), maxLevel)
	}
	return l
}

// pooledLevels are the levels of the percentiles of several windows'
// requests pooled, from each window's levels and samples: the pooled
// empirical distribution is the windows' mixed by their samples, so its
// error at a level is theirs averaged with those weights (for independent
// windows its variance is then q(1−q)/Σn, the pooled sample's). Windows
// that share most of their range share most of their error, as two
// overlapping range queries do.
func pooledLevels(ls []levels, ns []float64) levels {
	var total float64
	var dev levels
	for i, l := range ls {
		for j := range dev {
			dev[j] += ns[i] * (l[j] - modelLevels[j])
		}
		total += ns[i]
	}
	if !(total > 0) {
		return modelLevels
	}
	var out levels
	for j := range out {
		out[j] = min(max(modelLevels[j]+dev[j]/total, minLevel), maxLevel)
	}
	return out
}

// latencyAt is the P50, P95 and P99 of the groups' mixture with lost
// requests at timeout, read at levels l (modelLevels: the mixture's own),
// those of read only: the others are 0. Each percentile is computed alone,
// so one read is the same, bit for bit, whatever else is.
func latencyAt(groups []latGroup, lost, timeout float64, l levels, read workload.Percentiles) workload.Latency {
	var out workload.Latency
	if read.Has(workload.PercentileP50) {
		out.P50 = quantile(groups, l[0], lost, timeout)
	}
	if read.Has(workload.PercentileP95) {
		out.P95 = quantile(groups, l[1], lost, timeout)
	}
	if read.Has(workload.PercentileP99) {
		out.P99 = quantile(groups, l[2], lost, timeout)
	}
	return out
}

// The levels a drawn percentile is kept within: a window of a few requests
// has no percentile beyond its extremes (and the Beta quantile is 0 or 1
// at its ends).
const (
	minLevel = 0.01
	maxLevel = 0.9999
)
