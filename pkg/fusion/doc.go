// Package fusion is AWARE's fused default: one recommendation for both
// dimensions of a workload, built from pkg/vpa (vertical) and pkg/hpa
// (horizontal) so that the two never fight over CPU.
//
// # The rule, in order of precedence
//
//  1. Measure per-pod usage normalised to ready pods: per-pod = total usage
//     / ready replicas (total = mean per-pod usage × pods with metrics).
//     This is the histogram input for CPU and memory.
//  2. Vertical first: the per-container requests come from VPA's decaying
//     histograms of that per-pod usage (percentiles, minimums, OOM bump,
//     confidence bounds, capping to the container policy). Memory keeps
//     VPA's 15% margin. For CPU the HPA target utilisation is the margin:
//     target = p90(per-pod CPU) / targetUtilisation. Applying both the VPA
//     margin and the HPA headroom would stack headroom, and — see below —
//     makes the two loops disagree forever.
//  3. Horizontal second: the HPA arithmetic (tolerance, missing/unready
//     pods, stabilization, behavior) measures current CPU usage against the
//     *recommended* requests, not the current ones, with the HPA target
//     utilisation applying to the recommended request. A vertical change
//     therefore never shows up as a utilisation jump that the horizontal
//     loop would then compensate.
//  4. SLO override: if the observed p95 latency exceeds the SLO, horizontal
//     wins: the replica proposal is at least current+1 (still subject to
//     behavior limits and maxReplicas), and no vertical target is reduced
//     below the current request in that step.
//  5. Bounds: when the horizontal proposal exceeds maxReplicas, replicas
//     stay at max and the unmet factor (proposal / max) is moved to the
//     vertical CPU target (capped by maxAllowed), so the capacity the HPA
//     arithmetic asked for is provided by bigger pods. At minReplicas
//     nothing is moved: replicas stay at min and the vertical target keeps
//     following the histogram, so pods shrink towards the per-pod demand at
//     min (the user's availability floor is honoured; the cost of it is
//     minimised). A scale limited by a behavior rate is not moved to the
//     vertical side: it is delayed, not refused.
//
// # Why this settles (the feedback argument)
//
// Let D be the total CPU demand, n the ready replicas, u = D/n the per-pod
// usage, τ the target utilisation and r the recommended per-pod request.
// The vertical loop sets r = k·p90(u) and the horizontal loop proposes
// n' = ceil(n·u/(τ·r)). Once the histogram reflects the current u,
// n'/n = 1/(k·τ): the loops are neutral only if k·τ = 1. Naive HPA+VPA has
// k = 1.15 and τ = 0.7, so n'/n ≈ 1.24 — outside the 10% tolerance — on
// every round: each scale-out lowers u, the VPA lowers r, utilisation
// against the new r is again 87%, and the HPA scales out again; reading the
// current (stale) requests adds a lag, so replicas and requests chase each
// other instead of converging. With k = 1/τ (rule 2) and the ratio measured
// against the recommended r (rule 3), n'/n = u/p90(u). The percentile is
// the end of the bucket holding u, at most one bucket width above it; with
// VPA's layout a bucket is at most 10% wide from 0.2 cores up, so the ratio
// sits within the tolerance band and neither loop moves the other: every (n, r) with r·n·τ ≈ D is a
// fixed point, and the one reached is the current replica count with the
// request right-sized. A change in D moves u at once; the horizontal loop
// answers within a tick (ratio = new u / p90 of old u), which brings u back
// to the level the histogram knows, so the vertical target barely moves;
// only a persistent change in per-pod behaviour (e.g. the app got heavier
// per request) reshapes the histogram and the request.
//
// Normalising by ready pods is what makes each scale-out count once. The
// ready pods serve the whole demand, so total/ready is the load a serving
// pod carries. Dividing by spec replicas would lower the histogram input as
// soon as a scale-out is requested, before the new pods serve anything: the
// vertical loop would shrink pods for capacity that does not exist yet while
// the horizontal loop still sees the excess — the same demand accounted
// twice, once in each dimension. A plain mean over pods with metrics has the
// same flaw in milder form, since starting pods report little usage.
// With total/ready the input falls exactly when, and by exactly as much as,
// added replicas take load.
//
// Below 0.2 cores per pod buckets are relatively wider (12% at 0.1 cores)
// and the bias can exceed the tolerance: a scale-in by a replica, after
// which u rises into the histogram again. There the 25 m floor and
// minReplicas dominate the sizing anyway.
//
// Residual risk: with noisy load, ticks whose usage exceeds 1.1·p90 still
// trigger scale-outs (as with plain HPA); the scale-down window (300 s, max
// over the window) keeps those from turning into a cycle.
package fusion
