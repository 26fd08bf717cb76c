// Package sim is AWARE's embedded workload simulator: synthetic serverless-style
// applications composed from function-segment profiles, load traces, and a
// cluster of nodes running each application's pods.
//
// The simulator is a fluid, per-window model rather than a per-request event
// simulation, so that it steps millions of pods per second per core. The
// app's initial deployment is already scheduled and Ready at step 0, as when
// an autoscaler is attached to a running workload. Every window of length dt
// (Config.Step) it does, in this order:
//
//  1. Roll out the pod template: under ResizeRestart, outdated Ready pods are
//     replaced at most max(1, MaxUnavailable·replicas) − unavailable at a
//     time; under ResizeInPlace they are resized where their node has room,
//     and elsewhere the resize is deferred: the pod keeps its size, the
//     resize is retried every step and, deferred for 5 minutes (the
//     updater's --resize-deferred-timeout), the pod is replaced as under
//     ResizeRestart. Observations report the deferral
//     (PodSample.ResizeDeferredSince).
//     Then reconcile the replica count: missing pods are created Pending,
//     surplus pods are deleted (Pending first, then not-ready, then newest).
//
//  2. Schedule Pending pods by requests onto the least-allocated node they
//     fit on (the default scheduler's spreading); a pod that fits nowhere
//     stays Pending. A scheduled pod becomes Ready after the app's start-up
//     delay.
//
//  3. Draw the window's arrivals A ~ Poisson(λ·dt) from the trace rate λ and
//     split them evenly over Ready pods (round-robin load balancing): each
//     pod is offered the rate λi = λ/ready and receives Ai = A/ready. With no
//     Ready pod every arrival fails.
//
//  4. Serve each Ready pod as an M/G/1 processor-sharing queue whose capacity
//     c is its CPU limit in cores (a request's work may use all of it). On a
//     node whose pods want more CPU than it has, each pod gets at most its
//     request's share of the node (CFS shares); with Config.Tenants, other
//     workloads first take that fraction of what the app's pods did not
//     request, and the pods share the rest (a pod cut below what it wants,
//     up to its limit, reports the share it did not get as its CPU
//     pressure). With W the I/O wait and
//     ρmax = 0.98:
//
//     S  = cpuSeconds / c                      service time alone
//     ρ  = λi·S                                utilisation of the limit
//     O  = λi·dt if ρ ≤ ρmax, else Ai          what the fluid backlog sees
//     B' = max(0, B + O − dt/S)                fluid backlog beyond capacity
//     C  = Ai + B − B' − dropped               completed requests
//     R  = W + S/(1 − min(ρ, ρmax)) + S·(B+B')/2   mean response time
//     N  = C/dt · R                            requests in flight (Little)
//     ws = base + perRequest·N                 memory working set
//     CPU usage = (O + B − B' − dropped)·cpuSeconds/dt ≤ c
//
//     The response time follows the rate λi, not the window's sampled
//     arrivals: the stationary formula already accounts for Poisson noise,
//     and feeding it the sample would count that noise twice (latency is
//     convex in load). For the same reason, below ρmax a window's Poisson
//     surplus is held by the stationary queue and the backlog only drains;
//     from ρmax on, capacity runs out and the realised arrivals beyond it
//     queue as backlog, whose random walk carries near-critical and
//     overloaded queues. The validation suite (validate_test.go) checks
//     that the code computes these formulas, within 5%; a discrete-event
//     processor-sharing queue (des_test.go, desref_test.go) is the
//     independent reference for the model, which holds in the mean below
//     ρ = 0.95 and differs in the p95's shape and in overload
//     (docs/simulator.md).
//
//     PS mean response time is insensitive to the service distribution, so
//     S/(1−ρ) holds for any CPU-seconds distribution. Percentiles assume the
//     queueing part is exponential with mean S/(1−ρ) (exact for M/M/1 FCFS,
//     an approximation for PS), shifted by W and the backlog delay: p95 =
//     W + S·(B+B')/2 + ln(20)·S/(1−ρ). A request that would wait longer than
//     Config.Timeout is dropped (B' is capped at Timeout/S) and counted as
//     timed out.
//
//  5. If a pod's peak working set in the window, base + perRequest·(N +
//     (1+|Z|)·√N) with Z standard normal, exceeds its memory limit, it is
//     OOM-killed: its in-flight requests fail and it is Ready again after the
//     start-up delay (there is no CrashLoopBackOff).
//
// With App.ServesTimedOut, a pod that is overloaded (ρ > ρmax), or still
// holds requests from an overload, is served by a held queue instead of
// steps 4 and 5's fluid backlog (held.go): its requests in one-second
// cohorts share the CPU equally (or, with App.HeldQuantum, take turns
// around a ring, as Go's run queues give a server's requests), a request
// not answered within the timeout is lost to its client but served to the
// end, and the pod is OOM-killed at the second its peak working set passes
// its limit.
//
// With Config.ReadyWithinWindow, a pod that becomes Ready within a window
// serves from that moment: each moment's arrivals are shared evenly among
// the pods Ready at it (ready.go), and the observation at the window's end
// counts the pod Ready. Off, a pod serves from the next window's start.
//
// Latency percentiles of a window are those of the mixture over pods,
// weighted by completed requests, with failed and timed-out requests counted
// at the timeout; so a window where more than 5% of requests fail violates
// any SLO below the timeout.
//
// Everything is derived from explicit seeds (math/rand/v2 PCG sources, with
// arrivals and per-pod noise on separate streams so that policies run on one
// seed see the same arrivals); the simulator reads no clock and iterates no
// maps, so equal seeds give equal results, bit for bit. Step does not
// allocate once the pods exist, and keeps no history unless
// Config.KeepHistory is set.
package sim
