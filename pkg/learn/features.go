// Package learn is the reinforcement-learning view of a workload: how an
// observation becomes a state vector, what the discrete actions do to an
// allocation and which are legal, how a default recommendation maps to the
// nearest action (for behaviour cloning), the reward, and the per-workload
// Agent that ties them to a shared learner and the lifecycle.
//
// The package is pure: no I/O, no clocks (time is passed in), no gRPC.
package learn

import (
	"math"

	"github.com/aware-k8s/aware/pkg/workload"
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
	StateDim                   // length of the state vector
)

// Input is everything the state is computed from.
type Input struct {
	Observation workload.Observation
	Constraints workload.Constraints
	// Default is the recommendation the recommender would apply. Including
	// it in the state lets the policy start from the defaults' judgement
	// (and makes behaviour cloning learnable) rather than rediscover it.
	Default workload.Recommendation
	// PrevRequestRate is the request rate of the previous window, when
	// HasPrev.
	PrevRequestRate float64
	HasPrev         bool
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
	if in.HasPrev {
		s[FeatRateTrend] = clip((o.RequestRate-in.PrevRequestRate)/math.Max(in.PrevRequestRate, 1), -1, 1)
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
