// Package hpa is the horizontal half of AWARE's default recommendation: the
// replica arithmetic of the upstream HorizontalPodAutoscaler controller
// (kube-controller-manager, pkg/controller/podautoscaler), rewritten as a
// pure decider. Nothing here reads a clock, starts a goroutine or talks to an
// API server: every method that depends on time takes `now`, so the same code
// runs in the simulator and in the recommender.
//
// Mapping to upstream:
//
//   - Calculator.ResourceUtilizationReplicas is ReplicaCalculator
//     .GetResourceReplicas: desired = ceil(ready × usageRatio) with
//     usageRatio = (Σ usage / Σ request) / targetUtilisation. Upstream
//     truncates the utilisation to an integer percentage; we keep the float,
//     which differs only within 1 percentage point.
//   - Calculator.AverageValueReplicas is GetRawResourceReplicas and
//     GetMetricReplicas (calcPlainMetricReplicas): usageRatio = mean per-pod
//     value / target average value.
//   - Calculator.ObjectValueReplicas is GetObjectMetricReplicas / External
//     with a Value target (getUsageRatioReplicaCount); ObjectAverageValue-
//     Replicas is the AverageValue form (GetObjectMetricPerPodReplicas):
//     desired = ceil(value / targetAverageValue).
//   - Pod grouping follows groupPods: a pod that is not ready and has no
//     metrics is treated like a Pending pod (unready); a pod without metrics
//     is missing; for CPU, a pod is unready if it is not ready, or if it is
//     still within the CPU initialisation period (default 5 min) and its
//     metric window does not yet cover a full window of readiness, or if it
//     has never been ready within the initial readiness delay (30 s).
//   - Missing pods count as 0 usage on a scale-up and as 100% of their
//     request (or of the target, when the target exceeds 100%) on a
//     scale-down; for value metrics, as the target value on a scale-down.
//     Unready pods count as 0 usage on a scale-up and are ignored on a
//     scale-down. After substitution the ratio is recomputed, and the scale
//     is cancelled when the new ratio is within tolerance or flips direction,
//     or when the new count moves opposite to the ratio.
//   - Tolerance is the dead band [1-down, 1+up] around a ratio of 1
//     (default 0.1 both ways; ScalingRules.Tolerance overrides per
//     direction, as in autoscaling/v2 since Kubernetes 1.33).
//   - Decider.Decide is computeReplicasForMetrics (max over metrics; if any
//     metric is invalid and the rest would scale down, nothing changes) plus
//     normalizeDesiredReplicasWithBehaviors: the stabilization windows over
//     the recommendation history (scale-up: min over the window, default
//     0 s; scale-down: max over the window, default 300 s, pre-seeded with
//     the current replicas so a fresh decider does not scale down at once),
//     then the behavior rate limits from the scale-event history, then
//     min/max replicas. A nil Behavior is treated as the defaulted
//     autoscaling/v2 behavior (scale-up: max of 100%/15 s and 4 pods/15 s;
//     scale-down: 100%/15 s), not as the legacy v1 path.
//   - GoalMetric turns a workload.Goal (spec.goals.metrics with its
//     reading) into one more Metric; a goal without a usable reading fails
//     with ErrGoalUnavailable, so like any invalid metric it blocks a
//     scale-down but not a scale-up (Metric.Err).
//   - Outside the metric path, as upstream: spec.replicas = 0 disables
//     scaling; a current count above max (below min) is brought to max
//     (min) without consulting metrics.
//
// Scale events are recorded when Decide returns a count different from the
// current one: the caller is expected to apply what it is given, as the
// controller records an event after a successful scale update.
package hpa
