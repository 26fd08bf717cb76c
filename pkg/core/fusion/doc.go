// Package fusion is AWARE's fused default: one recommendation for both
// dimensions of a workload, built from pkg/core/vpa (vertical) and pkg/core/hpa
// (horizontal) so that the two never fight over CPU.
//
// # The rule, in order of precedence
//
//  1. Measure per-pod usage normalised to ready pods: per-pod = total usage
//     / ready replicas (total = mean per-pod usage × pods with metrics).
//     This is the histogram input for CPU, and for memory in windows that
//     describe the operating point (rule 6). From the same windows, unless
//     the pods are CPU-saturated, estimate the CPU-seconds per request
//     s = Σ total CPU / Σ request rate (sums decayed with a one-hour
//     half-life). When the rate averages over a longer period than the
//     observation (Observation.RateWindow: a Prometheus rate() over
//     minutes), the total CPU in that sum is the mean over the same period,
//     and a window counts only once the policy's own samples cover it, all
//     measured and none saturated: a rate lagging the usage after a load
//     step, or at the start of traffic, would overstate s (measured on the
//     real node: twice, and a 0.6-core pod sized at 1 core). Until then,
//     with an SLO and no estimate, the CPU request is not lowered (reason
//     SLORateWindowFilling). The estimate, its gain and these samples are
//     carried over a spec change (CarryOver).
//  2. Vertical first: the per-container requests come from VPA's decaying
//     histograms of that per-pod usage (percentiles, minimums, OOM bump,
//     confidence bounds, capping to the container policy). Memory keeps
//     VPA's 15% margin. For CPU the HPA target utilisation is the margin:
//     target = p90(per-pod CPU) / targetUtilisation. Applying both the VPA
//     margin and the HPA headroom would stack headroom, and — see below —
//     makes the two loops disagree forever.
//  3. SLO floor (when an SLO and the request rate are observed): a request
//     of s CPU-seconds on a pod with spare capacity x cores has a p95 of
//     about ln(20)·s/x (processor sharing, exponential tail). The horizontal
//     loop lets utilisation reach τ(1+tolerance) of the request r, so with
//     limit/request ratio q the spare is (q − τ(1+tol))·r, and the pod's CPU
//     request must be at least
//     floor = g · ln(20)·s/SLO / max(q − τ(1+tol), 0.1).
//     The CPU target is raised to the floor (lower bound within 10% of it,
//     so the updater applies it). g ≥ 1 is learned: when the p95 exceeds the
//     SLO while utilisation is within the HPA target (and the pods are not
//     CPU-saturated, not OOM-killed in the window, and all run the current
//     requests, and have for the whole window the p95 is read over: a
//     Prometheus histogram_quantile over RateWindow still holds the
//     smaller pod's latencies after a resize), the pod size — not the load — is the bottleneck (latency
//     the floor does not see, such as I/O wait W, needs g = SLO/(SLO−W)):
//     g grows so that the floor is 1.25× the current request, capped at 10.
//     g never decreases. Before any unsaturated window has estimated s
//     (every window so far at the CPU limit, as at the start of a pod too
//     small for its load), the window's usage over its request rate is a
//     lower bound of s (usage is capped at the limit, arrivals are not),
//     and the floor it gives is applied as a lower bound of the size the
//     SLO needs (reason SLOCPUFloor(saturated, at least …)); it is not kept
//     in the estimate, but the largest such bound stands until the estimate
//     exists: a window just under the saturation mark whose rate's window
//     still holds saturated ones gives neither (on the real node, round
//     thirty-three, a learner's consolidated pod lost its floor there and
//     the default sized it back to 200m: a minute of lost requests). With
//     Options.UsageFloor (off by default; the variant setting floor=usage)
//     the floor is at most what the usage the pod carries needs: its limit
//     must keep ln(20)·s/SLO (times g) spare
//     above that usage U (the histogram's, target times target
//     utilisation), so floor = min(the floor above, (U + g·ln(20)·s/SLO)/q).
//     The floor above sizes a pod for utilisation τ(1+tol), which a pod of
//     that size reaches only with far more load than it has when s/SLO is
//     large: on the real node (s = 17 ms, SLO 250 ms, q = 1) it is 1.7
//     cores for 0.2 cores of load.
//  4. Never shrink while the SLO is violated: neither a request nor the
//     CPU capacity the replicas run with (rule 8: pods grown in the step
//     give it with fewer of them; unless a resize the node defers is the
//     cause, rule 12).
//  5. Bounds: the upper bound is capped at 1.5× the target, so over-sized
//     pods (e.g. the user's initial requests) are resized without waiting
//     for a day of histogram confidence; a request within [lower, upper]
//     is kept and the target is set to it, so the target is always the
//     request that will be in effect (and what new pods get). With
//     Options.ShrinkAfter (off by default) nothing is lowered before a
//     container's history spans that long (VPA's confidence measure): on
//     a real cluster the first minute of usage still holds the idle start
//     in metrics-server's window (measured: a 400m pod cut to 158m from
//     two samples, below the 0.2 cores its load then used).
//  6. Memory: a window whose p95 exceeds the SLO or whose pods are
//     CPU-saturated (usage or peak ≥ 90% of the CPU limit, or a CPU
//     pressure of at least 5%: starved below the limit by the node's other
//     pods, ContainerObservation.CPUPressure) adds no memory
//     sample, and an OOM kill of CPU-saturated pods records no OOM bump: in
//     such windows the working set is the backlog of requests queued for
//     CPU (each holding memory), a symptom the horizontal loop removes, not
//     the workload's need. Upstream VPA would keep that peak for a day (one
//     peak per 24 h interval) and compound OOM bumps across restarts, so
//     every burst left memory requests at many times the need. OOM kills
//     outside CPU saturation are bumped as upstream does, and the request
//     the container was killed at is not kept by rule 5: the memory target
//     and lower bound are at least the kill's bumped memory, so the updater
//     applies the raise (upstream's updater applies a quick OOM's
//     recommendation whatever its bounds). A container killed at start,
//     before it reports any usage, gets the same raise.
//  7. Horizontal: the HPA arithmetic (tolerance, missing/unready pods,
//     stabilization, behavior) measures current CPU usage against the
//     *recommended* requests, not the current ones, with the HPA target
//     utilisation applying to the recommended request. A vertical change
//     therefore never shows up as a utilisation jump that the horizontal
//     loop would then compensate. For the same reason the stabilization
//     windows hold capacity, not counts: a count proposed for pods of
//     another recommended size (more than 10% apart) counts as the pods
//     of the current size that give the same CPU (hpa.Decider.SetUnit), so
//     pods grown after a scale-out are not held at the scale-out's count
//     for the scale-down window. A second metric expresses the same target
//     in requests: desired = ceil(request rate · s / (τ · r)); the HPA takes
//     the larger proposal. In steady state both agree (usage = rate·s); in
//     an overload CPU usage saturates at the limit while the request rate
//     does not, so the rate metric scales out to the real demand at once.
//  8. SLO override: if the observed p95 exceeds the SLO, replicas never
//     go down in that step; unless rule 3 classified the violation as
//     size-bound, the proposal is at least current+1 (still subject to
//     behavior limits and maxReplicas). The replicas held and the one more
//     are capacity at the size the pods run (C, the sum of the pods'
//     enacted CPU requests): when this step's recommended pod CPU r is
//     larger (rule 3's floor grew them), the hold is ceil(C/r) pods and
//     the one more ceil(C·(n+1)/n / r), never more than n and n+1 (reason
//     note CapacityInGrownPods when the hold is below n). Asking for both
//     put a new 1-core replica beside a 200m pod whose resize to 1 core
//     the real node could then not hold, and a few saturated windows
//     before s was known left 3–5 pods of the floor's size for the
//     scale-down window (docs/real-node-rounds.md, round ten); holding n
//     replicas kept two 200m pods, added while the rate's window filled,
//     as two pods of the floor's size (round twenty). When the p95 covers the rate's
//     window (Observation.RateWindow longer than Window, a
//     histogram_quantile over Prometheus' range) the one more replica is
//     asked only for a violation of the pods serving now: every pod the
//     spec asks for is Ready, and the Ready pods have not grown in number,
//     nor in the CPU they run with (a resize), nor in the smallest pod's
//     CPU (a small pod shed, a bigger one kept), within the window;
//     otherwise replicas are held (reason note SLOWindowBeforeScaleOut).
//     Such a p95 still holds an answered violation for a whole window: on
//     the real node the default added a replica every 15 s up to 8 after a
//     load step three pods served, pods 4–8 unschedulable (round
//     seventeen), and a third pod the node could not schedule 91 s after
//     the second was resized from 200m to 585m (round twenty-one), and a
//     second 703m pod the node could not place two minutes after a
//     deferred 200m pod was shed beside a grown one (round twenty-five).
//  9. maxReplicas: when the horizontal proposal exceeds maxReplicas,
//     replicas stay at max and the unmet factor (proposal / max) is moved
//     to the vertical CPU target (capped by maxAllowed), so the capacity the
//     HPA arithmetic asked for is provided by bigger pods. At minReplicas
//     nothing is moved: replicas stay at min and the vertical target keeps
//     following the histogram (and the floor), so pods shrink towards the
//     per-pod demand at min (the user's availability floor is honoured; the
//     cost of it is minimised). A scale limited by a behavior rate is not
//     moved to the vertical side: it is delayed, not refused.
//  10. Goals (spec.goals.metrics, workload.Observation.Goals; only the
//     recommender sets them): a Resource CPU goal with a Utilization
//     target replaces the CPU target utilisation of rules 2, 3 and 7 (as a
//     second CPU metric it would fight the vertical loop, which sizes the
//     request for the other target). Every other goal is one more HPA
//     metric in rule 7 (Resource utilisation against the recommended
//     request, like CPU): each proposes a count, the largest proposal
//     wins, within the tolerance, then behavior and min/max. A goal
//     without a usable reading proposes nothing and, as in the HPA,
//     blocks a scale-down (reason FailedGetGoalMetric). Rule 9 moves only
//     the CPU and request-rate factor to the vertical side: bigger pods
//     need not answer a goal such as a queue length.
//  11. Saturation at the CPU limit: a pod at its limit shows the limit,
//     not its demand, so the usage the histograms and the HPA arithmetic
//     read is only a lower bound (with the limit equal to the request,
//     the common setting, the utilisation can never pass 100%). When the
//     mean usage of the pods with metrics is at least 90% of the pod's
//     CPU limit (every controlled container limited), the CPU target is
//     never below the current request: the decaying histogram still
//     remembers lighter load and would otherwise shrink the pods that are
//     short of CPU (measured on a real kubelet: 50m recommended for a pod
//     at 93% of 100m). When the same holds of the serving pods — Ready
//     ones, and ones that lost readiness after becoming Ready in their
//     current start, as a probe times out under load — the proposal is at
//     least current+1, as in rule 8 (and as there, in capacity: pods
//     grown in the step count as that replica), unless a pod asked
//     for has not started (not Ready, no usage, no container start:
//     unscheduled, or not running yet; or not created yet: fewer pods
//     than the spec's replicas), when it is held at current
//     (reason note CPUSaturatedPodsNotStarted: one more pod would wait
//     beside it); rule 9 turns it into vertical growth at maxReplicas. The HPA ignores the usage of a pod within
//     its CPU initialisation period that is not Ready, so a saturated
//     pod whose probe timed out was not scaled out for five minutes; pods
//     still starting (never Ready since their start) are left out here
//     too, so that a runtime burning its limit at start does not scale
//     the workload out. With the request rate known, the rate metric of
//     rule 7 already scales to the real demand; this rule is what acts
//     without it.
//  12. A resize the node defers (a pod's PodResizePending condition with
//     reason Deferred, for at least a minute: the kubelet retries one
//     whenever a pod leaves the node, so a longer wait is the node's lack
//     of room): rules 8 and 11 add no replica (one more pod would not fit
//     either) and, when the HPA arithmetic of rule 7 at the recommended
//     request proposes fewer replicas than run, neither the floor of rules
//     4, 8 and 11 nor the scale-down stabilization window holds the
//     scale-in (the behavior's rate limits and min/max still apply; reason
//     ScaleDownShedding, note ResizeDeferred). The pod waiting for its
//     resize runs its old size and is the one violating the SLO, so the
//     violation cannot tell the workload needs more pods; the replica shed
//     frees room, and the kubelet then applies the resize. Measured on the
//     real node: a second pod's resize to 679m deferred (OutOfcpu) left it
//     at 200m, saturated, for the rest of the run, while rule 4 held two
//     replicas that the arithmetic at 679m sized as one, and the floor's
//     count in the stabilization history would have held them five
//     minutes more (docs/real-node-rounds.md, round twenty).
//
// Options.TargetOfLimit (off by default; a measurement aid of the
// simulator's evidence) reads the target utilisation of rules 2, 3 and 7 as
// a fraction of the pods' CPU limit: with limit/request ratio q the request
// is sized for, and the HPA holds, utilisation q·τ of it, so pods with
// limits above their requests run above their requests. That is cheaper by
// the requests' measure but counts on CPU the scheduler did not reserve,
// which a node shared with other workloads may not have. Two gates put the
// target back on the request: Options.PressureHold, for a while after the
// pods were starved of CPU by their node, and Options.BurstRatio, while the
// request rate is bursty (its decayed peak at least that many times its
// decayed mean), where a pod running above its request has too little room
// below its limit for the windows it takes to add pods.
//
// Everything is computed from workload.Observation fields (usage, peaks,
// request rate, latency, SLO, replicas, requests and limits): the same rule
// runs on real metrics. Without a request rate (or without an SLO) rules 3
// and the rate metric of rule 7 are off and the policy is the
// utilisation-only fusion.
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
// The SLO floor does not disturb this. It depends on s (CPU-seconds per
// request) and the SLO, which are properties of a request, not of how many
// pods share the load, so no horizontal move changes it. When it binds
// (r = floor > u/τ), the horizontal loop sees utilisation below target and
// scales in to ceil(n·u/(τ·floor)) — by the HPA's ceiling, to a count at
// which u ≤ τ·floor — and the histogram target p90(u)/τ then stays at or
// below the floor: a fixed point with few pods of floor size. That is also
// the cheapest way to meet the SLO: the SLO demands absolute spare capacity
// ln(20)·s/SLO per pod, so n pods cost D + n·spare, least with the fewest
// pods the target utilisation allows. The rate metric proposes the same
// count as the CPU metric whenever usage = rate·s, so it only acts when CPU
// usage is capped (or s changed, until the one-hour estimate follows).
//
// Residual risk: with noisy load, ticks whose usage exceeds 1.1·p90 still
// trigger scale-outs (as with plain HPA); the scale-down window (300 s, max
// over the window) keeps those from turning into a cycle. A load step large
// enough to saturate pods within one window (e.g. a 5× burst) still OOM-kills
// pods whose memory was sized for the operating point (rule 6 trades those
// kills for not keeping burst-sized memory for a day). The learned gain g
// only grows, so a transient violation at low utilisation (e.g. noise near
// the floor) leaves pods 25% larger for the rest of the workload's life.
package fusion
