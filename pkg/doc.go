// Package pkg documents how the project's libraries are layered; it holds
// no code. Each directory below is one layer, and a layer imports only the
// layers listed before it (layers_test.go checks this on every file):
//
//   - core: the product's pure decision logic, shared by every binary and the
//     simulator: the workload vocabulary (workload), the HPA and VPA
//     algorithms (hpa, vpa), their fusion into one default (fusion) and the
//     agent's stage machine (lifecycle). Standard library only.
//   - rl: the learning core: the reward, the agent's state and actions
//     (learn), the neural networks (nn, the only Gorgonia code), the
//     experience store, the baselines' learners (qlearn, safeguard) and the
//     statistics results are reported with. Imports core.
//   - kube: the adapters to Kubernetes and the outside world: API clients,
//     leader election, informers and indexes, metrics sources, the MPA's
//     reading, the agent's gRPC client, certificates, HTTP serving and the
//     binaries' command runner. Imports core, never rl or lab.
//   - lab: the simulator and its experiments: sim, oracle, eval, train, demo
//     and the SVG charts. Imports core and rl, never kube.
//
// apis and generated hold the MultidimPodAutoscaler API and its generated
// clients; version is the build's stamped version. The gRPC contract's
// generated code and its conversions to and from the core's vocabulary
// live beside it, in proto/aware/rlagent.
package pkg
