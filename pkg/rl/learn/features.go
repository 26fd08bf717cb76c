// Package learn is the reinforcement-learning view of a workload: how an
// observation becomes a state vector, what the discrete actions do to an
// allocation and which are legal, how a default recommendation maps to the
// nearest action (for behaviour cloning), the reward, and the per-workload
// Agent that ties them to a shared learner and the lifecycle.
//
// The package is pure: no I/O, no clocks (time is passed in), no gRPC.
package learn

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Feature indices of the state vector. Every feature is bounded (mostly in
// [0, 1] or [-1, 1], utilisation up to 2), so that one network serves
// workloads of any size: absolute amounts never enter the state.
const (
	FeatCPUUtil         = iota // mean CPU usage / request, clipped to [0, 2]
	FeatMemoryUtil             // mean memory usage / request, clipped to [0, 2]
	FeatCPUPeak                // peak CPU usage / request, clipped to [0, 2]
	FeatMemoryPeak             // peak memory usage / request, clipped to [0, 2]
	FeatRateLevel              // log1p(request rate per replica) / 10, clipped to [0, 1]
	FeatRateTrend              // relative change of the request rate since the previous window, [-1, 1]
	FeatLatencyVsSLO           // p95 / SLO / 2, clipped to [0, 1]; 0 without SLO or traffic
	FeatReplicaPosition        // (replicas - min) / (max - min); tanh(replicas/10) when unbounded
	FeatAtMinReplicas          // 1 when no replica can be removed
	FeatAtMaxReplicas          // 1 when no replica can be added
	FeatOOM                    // OOM kills in the window / 3, clipped to [0, 1]
	FeatErrorFraction          // failed / arriving requests, clipped to [0, 1]
	FeatReadyFraction          // ready / desired replicas
	FeatDefaultReplicas        // default's relative replica change, [-1, 1]
	FeatDefaultCPU             // default's relative CPU request change, [-1, 1]
	FeatDefaultMemory          // default's relative memory request change, [-1, 1]
	FeatRateTrend4             // relative change of the rate against the mean of the last 4 windows, [-1, 1]
	FeatRateTrend20            // relative change of the rate against the mean of the last 20 windows, [-1, 1]
	FeatRatePeakToMean         // log(peak / mean rate) over the last 20 windows and this one, / log 4, [0, 1]
	StateDim                   // length of the state vector
)

// RateHistoryLen is how many past windows' request rates the state reads
// (FeatRateTrend20, FeatRatePeakToMean): five minutes of 15-second windows.
const RateHistoryLen = 20

// Features is a set of optional feature groups, for ablations: a group that
// is off reads as 0 in every state, so the network's shape stays the same.
type Features uint8

const (
	// FeaturesTrend is the rate trend over 4 and 20 windows.
	FeaturesTrend Features = 1 << iota
	// FeaturesPeak is the recent peak-to-mean rate ratio.
	FeaturesPeak

	// AllFeatures is every optional group.
	AllFeatures = FeaturesTrend | FeaturesPeak
)

var featureNames = []struct {
	name string
	f    Features
}{{"trend", FeaturesTrend}, {"peak", FeaturesPeak}}

// ParseFeatures reads a comma-separated list of feature groups ("trend",
// "peak"), "all" or "none".
func ParseFeatures(s string) (Features, error) {
	switch s {
	case "all", "":
		return AllFeatures, nil
	case "none":
		return 0, nil
	}
	var f Features
	for part := range strings.SplitSeq(s, ",") {
		i := slices.IndexFunc(featureNames, func(n struct {
			name string
			f    Features
		}) bool {
			return n.name == strings.TrimSpace(part)
		})
		if i < 0 {
			return 0, fmt.Errorf("unknown feature group %q (want trend, peak, all or none)", part)
		}
		f |= featureNames[i].f
	}
	return f, nil
}

// String is the list ParseFeatures reads.
func (f Features) String() string {
	switch f {
	case AllFeatures:
		return "all"
	case 0:
		return "none"
	}
	var names []string
	for _, n := range featureNames {
		if f&n.f != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// RateHistory is the request rates of the last RateHistoryLen windows, a
// fixed-size ring so that keeping it costs nothing per window. The zero
// value is empty and ready to use.
type RateHistory struct {
	rates [RateHistoryLen]float64
	n     int // how many are held, up to RateHistoryLen
	next  int // where the next one goes
}

// Push records a window's rate; a negative or non-finite rate records as 0.
func (h *RateHistory) Push(rate float64) {
	if !(rate >= 0) || math.IsInf(rate, 0) {
		rate = 0
	}
	h.rates[h.next] = rate
	h.next = (h.next + 1) % RateHistoryLen
	h.n = min(h.n+1, RateHistoryLen)
}

// Rates returns the held rates, oldest first, in a new slice.
func (h *RateHistory) Rates() []float64 {
	out := make([]float64, 0, h.n)
	for i := range h.n {
		out = append(out, h.rates[(h.next-h.n+i+RateHistoryLen)%RateHistoryLen])
	}
	return out
}

// RestoreRateHistory rebuilds a history from Rates' output; only the last
// RateHistoryLen count.
func RestoreRateHistory(rates []float64) RateHistory {
	var h RateHistory
	for _, r := range rates {
		h.Push(r)
	}
	return h
}

// Input is everything the state is computed from.
type Input struct {
	Observation workload.Observation
	Constraints workload.Constraints
	// Default is the recommendation the recommender would apply. Including
	// it in the state lets the policy start from the defaults' judgement
	// (and makes behaviour cloning learnable) rather than rediscover it.
	Default workload.Recommendation
	// Rates are the request rates of the previous windows, oldest first
	// (RateHistory.Rates); only the last RateHistoryLen are read. Empty for
	// a workload's first window.
	Rates []float64
	// Off turns feature groups off (ablations); the zero value keeps all.
	Off Features
}

// Encode returns the normalised state vector of length StateDim. It never
// returns NaN or ±Inf for valid (finite, non-negative) input.
func Encode(in Input) []float64 {
	o, c := &in.Observation, &in.Constraints
	s := make([]float64, StateDim)
	req, use, peak := totals(o, c)
	s[FeatCPUUtil] = clip(ratio(use.CPU, req.CPU), 0, 2)
	s[FeatMemoryUtil] = clip(ratio(use.Memory, req.Memory), 0, 2)
	s[FeatCPUPeak] = clip(ratio(peak.CPU, req.CPU), 0, 2)
	s[FeatMemoryPeak] = clip(ratio(peak.Memory, req.Memory), 0, 2)

	replicas := float64(max(o.Replicas, 1))
	s[FeatRateLevel] = clip(math.Log1p(o.RequestRate/replicas)/10, 0, 1)
	hist := in.Rates[max(len(in.Rates)-RateHistoryLen, 0):]
	if n := len(hist); n > 0 {
		s[FeatRateTrend] = trend(o.RequestRate, hist[n-1:])
		if in.Off&FeaturesTrend == 0 {
			s[FeatRateTrend4] = trend(o.RequestRate, hist[max(n-4, 0):])
			s[FeatRateTrend20] = trend(o.RequestRate, hist)
		}
		if in.Off&FeaturesPeak == 0 {
			peak, sum := o.RequestRate, o.RequestRate
			for _, r := range hist {
				peak, sum = math.Max(peak, r), sum+r
			}
			if mean := sum / float64(n+1); mean > 0 {
				s[FeatRatePeakToMean] = clip(math.Log(peak/mean)/math.Log(4), 0, 1)
			}
		}
	}
	if o.SLO > 0 && o.RequestRate > 0 {
		s[FeatLatencyVsSLO] = clip(o.Latency.P95/o.SLO/2, 0, 1)
	}

	lo := float64(max(c.MinReplicas, 1))
	if c.MaxReplicas > 0 {
		if hi := float64(c.MaxReplicas); hi > lo {
			s[FeatReplicaPosition] = clip((float64(o.Replicas)-lo)/(hi-lo), 0, 1)
		} else {
			s[FeatReplicaPosition] = 1
		}
	} else {
		s[FeatReplicaPosition] = math.Tanh(float64(o.Replicas) / 10)
	}
	if float64(o.Replicas) <= lo {
		s[FeatAtMinReplicas] = 1
	}
	if c.MaxReplicas > 0 && o.Replicas >= c.MaxReplicas {
		s[FeatAtMaxReplicas] = 1
	}

	ooms := 0
	for _, ct := range o.Containers {
		ooms += ct.OOMKills
	}
	s[FeatOOM] = clip(float64(ooms)/3, 0, 1)
	if o.RequestRate > 0 {
		s[FeatErrorFraction] = clip(o.ErrorRate/o.RequestRate, 0, 1)
	}
	if o.Replicas > 0 {
		s[FeatReadyFraction] = clip(float64(o.ReadyReplicas)/float64(o.Replicas), 0, 1)
	}

	if in.Default.Replicas > 0 {
		s[FeatDefaultReplicas] = clip(float64(in.Default.Replicas-o.Replicas)/replicas, -1, 1)
	}
	cpu, mem := relativeChange(o, c, in.Default)
	s[FeatDefaultCPU] = clip(cpu, -1, 1)
	s[FeatDefaultMemory] = clip(mem, -1, 1)
	return s
}

// totals sums requests, mean usage and peak usage over the containers of one
// pod. Containers the autoscaler does not control still count: they share
// the pod and its utilisation.
func totals(o *workload.Observation, _ *workload.Constraints) (req, use, peak workload.Resources) {
	for _, ct := range o.Containers {
		req = req.Add(ct.Requests)
		use = use.Add(ct.Usage)
		peak = peak.Add(ct.Peak)
	}
	return req, use, peak
}

// relativeChange is the relative change of the summed CPU and memory
// requests of the controlled containers that rec proposes; 0 for a resource
// that no container both controls and requests.
func relativeChange(o *workload.Observation, c *workload.Constraints, rec workload.Recommendation) (cpu, mem float64) {
	var out [2]float64
	for i, r := range []workload.Resource{workload.CPU, workload.Memory} {
		var cur, tgt float64
		for _, ct := range o.Containers {
			p := c.ContainerPolicy(ct.Name)
			cr, ok := rec.Container(ct.Name)
			if !p.Controls(r) || !ok || ct.Requests.Get(r) <= 0 || cr.Target.Get(r) <= 0 {
				continue
			}
			cur += ct.Requests.Get(r)
			tgt += cr.Target.Get(r)
		}
		if cur > 0 {
			out[i] = tgt/cur - 1
		}
	}
	return out[0], out[1]
}

// trend is the relative change of rate against the mean of past (not
// empty), in [-1, 1]; rates below 1 request/s count as 1 in the
// denominator, so that an idle workload's noise is not a trend.
func trend(rate float64, past []float64) float64 {
	var sum float64
	for _, r := range past {
		sum += r
	}
	mean := sum / float64(len(past))
	return clip((rate-mean)/math.Max(mean, 1), -1, 1)
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func clip(x, lo, hi float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return math.Min(math.Max(x, lo), hi)
}
