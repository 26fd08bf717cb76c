package fusion

import (
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// runningCPU is the CPU the workload's pods run with now: the sum of the
// pods' enacted requests when every pod asked for reports one, else the
// replicas times the observation's per-pod request. A pod whose in-place
// resize is pending or deferred counts at the size it runs.
func runningCPU(obs *workload.Observation, request float64) float64 {
	if int32(len(obs.Pods)) == obs.Replicas && obs.Replicas > 0 {
		sum := 0.0
		for _, p := range obs.Pods {
			if p.Requests.CPU <= 0 {
				return float64(obs.Replicas) * request
			}
			sum += p.Requests.CPU
		}
		return sum
	}
	return float64(obs.Replicas) * request
}

// podsFor is how many pods of podRequest cores give cpu cores of capacity,
// ceil(cpu/podRequest), at least 1 and at most k (the count the caller
// would ask for with pods of the size they run): it only ever lowers a
// count, when the pods are grown in this step. k when either size is
// unknown.
//
// Rules 4, 8 and 11 hold or add replicas as capacity: a replica more, or
// none fewer, at the size the pods run. When the recommended size is
// larger, fewer pods of it give that capacity (docs/real-node-rounds.md, round
// twenty: two 200m pods held as two 679m pods).
func podsFor(cpu, podRequest float64, k int32) int32 {
	if !(cpu > 0) || !(podRequest > 0) || k <= 1 {
		return k
	}
	n := math.Ceil(cpu/podRequest - 1e-9)
	if n >= float64(k) {
		return k
	}
	return max(int32(n), 1)
}
