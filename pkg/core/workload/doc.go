// Package workload holds the vocabulary shared by every decision maker in
// AWARE: what a workload looks like at one instant (Observation), what it is
// allowed to become (Constraints), and what a policy proposes
// (Recommendation).
//
// The same types are produced by the simulator and by the recommender from
// real metrics, so one policy implementation runs unchanged in both. The
// package is pure: it imports neither client-go nor gRPC, and it carries no
// clock of its own — time arrives inside the Observation.
//
// Units are fixed so that arithmetic never converts: CPU in cores, memory in
// bytes, latency in seconds, rates per second. A zero Resources field means
// "unset" (no request, no limit), never "zero cores".
package workload
