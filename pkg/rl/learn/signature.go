package learn

import (
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Indices of the signature: what a Meta-PPO encoder may read, besides the
// state, to tell one workload from another (nn.Step.Signature). The
// state holds ratios only, so that one actor serves workloads of every
// size; a workload's amounts per request and its pods' start-up delay are
// then visible only through how those ratios move, which an hour of steady
// load seldom shows. The signature gives them to the encoder directly, from
// one observation: each entry is a logarithm or a duration, centred and
// scaled to within about [-3, 3], and 0 when the window has nothing to
// read it from (the matching "seen" entry then says so).
const (
	SigCPUPerRequest  = iota // (ln CPU seconds per request + 3) / 2; 0 without traffic or usage
	SigMemoryPerPod          // (ln bytes of memory per pod − 18) / 1.5; 0 without usage
	SigInFlightPerPod        // ln(1 + requests in flight per ready pod) / 2: rate per pod × p50 latency
	SigStartupDelay          // the ready pods' median start-up delay (workload.MedianStartupDelay), seconds / 40, at most 4
	SigStartupSeen           // 1 when a pod told SigStartupDelay
	SignatureDim             // length of the signature
)

// Signature returns the workload's signature at obs (see SigCPUPerRequest).
// It never returns NaN or ±Inf, whatever obs holds.
func Signature(obs *workload.Observation) []float64 {
	s := make([]float64, SignatureDim)
	_, use, _ := totals(obs, nil)
	ready := float64(max(obs.ReadyReplicas, 0))
	if ready == 0 {
		ready = float64(max(obs.Replicas, 1))
	}
	perPod := obs.RequestRate / ready
	if perPod > 0 && use.CPU > 0 {
		s[SigCPUPerRequest] = clip((math.Log(use.CPU/perPod)+3)/2, -3, 3)
	}
	if use.Memory > 0 {
		s[SigMemoryPerPod] = clip((math.Log(use.Memory)-18)/1.5, -3, 3)
	}
	if perPod > 0 && obs.Latency.P50 > 0 {
		s[SigInFlightPerPod] = clip(math.Log1p(perPod*obs.Latency.P50)/2, 0, 3)
	}
	// From the pods where the observation has them (the simulator), else
	// the aggregate the recommender computed from its pods (the agent
	// contract carries no pods): the same median either way, computed
	// only here, for the learners that read it, rather than in every
	// simulated window.
	d, seen := obs.StartupDelay, obs.StartupDelay > 0
	if len(obs.Pods) > 0 {
		d, seen = workload.MedianStartupDelay(obs.Pods)
	}
	if seen {
		s[SigStartupDelay] = clip(d.Seconds()/40, 0, 4)
		s[SigStartupSeen] = 1
	}
	return s
}
