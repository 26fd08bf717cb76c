package controller

import (
	"fmt"
	"math"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

// ownedConditions are the condition types the recommender writes; other
// types (e.g. ConfigDeprecated, or ones another component sets) are left as
// they are.
var ownedConditions = []v1alpha1.MultidimPodAutoscalerConditionType{
	v1alpha1.RecommendationProvided, v1alpha1.LowConfidence, v1alpha1.NoPodsMatched,
	v1alpha1.FetchingHistory, v1alpha1.ConfigUnsupported, v1alpha1.ScalingActive,
	v1alpha1.AbleToScale, v1alpha1.ScalingLimited,
}

// setCondition sets a condition, keeping its lastTransitionTime unless the
// status changes. Reasons and messages must not carry values that change
// every tick (usage numbers, timestamps): they are compared to decide
// whether to write, and a changing message would write every tick.
func setCondition(s *v1alpha1.MultidimPodAutoscalerStatus, t v1alpha1.MultidimPodAutoscalerConditionType, st corev1.ConditionStatus, reason, msg string, now time.Time) {
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != st {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message = st, reason, msg
		return
	}
	s.Conditions = append(s.Conditions, v1alpha1.MultidimPodAutoscalerCondition{
		Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now),
	})
}

// shadowedStatus is the status of m while g, an older autoscaler of the
// same target, governs it (mpa.Shadowed): m recommends nothing, so that no
// component acts on it, and says why.
func shadowedStatus(m, g *v1alpha1.MultidimPodAutoscaler, now time.Time) *v1alpha1.MultidimPodAutoscalerStatus {
	s := m.Status.DeepCopy()
	s.ObservedGeneration = m.Generation
	s.Recommendation, s.DesiredReplicas, s.RL = nil, 0, nil
	r := m.Spec.ScaleTargetRef
	msg := fmt.Sprintf("%s/%s is also the target of the older MultidimPodAutoscaler %s, which governs it: only the oldest autoscaler of a target acts", r.Kind, r.Name, g.Name)
	setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, ReasonAmbiguousTarget, msg, now)
	setCondition(s, v1alpha1.RecommendationProvided, corev1.ConditionFalse, ReasonAmbiguousTarget, "another autoscaler governs the target", now)
	return s
}

// ReasonAmbiguousTarget marks an autoscaler whose target an older one
// governs.
const ReasonAmbiguousTarget = "AmbiguousTarget"

func condition(s *v1alpha1.MultidimPodAutoscalerStatus, t v1alpha1.MultidimPodAutoscalerConditionType) *v1alpha1.MultidimPodAutoscalerCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// sameIgnoringTimes compares the parts of two statuses the recommender
// writes, ignoring timestamps and currentMetrics. currentMetrics changes
// with every reading; writing for it alone would make every tick a write
// (10,000 autoscalers, 167 writes/s) while no consumer acts on it. It is
// refreshed whenever the status is written for another reason and at least
// every status refresh interval.
//
// Lower and upper bounds are compared with boundsTolerance: they widen with
// VPA's confidence, which grows with every sample, so they move a little
// every tick for days. A bound within 10% of the written one is not worth a
// write; the written one is refreshed with the next write.
func sameIgnoringTimes(a, b *v1alpha1.MultidimPodAutoscalerStatus) bool {
	x, y := normalised(a), normalised(b)
	return equality.Semantic.DeepEqual(x, y) && boundsClose(a.Recommendation, b.Recommendation)
}

const boundsTolerance = 0.1

func boundsClose(a, b *v1alpha1.RecommendedPodResources) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.ContainerRecommendations) != len(b.ContainerRecommendations) {
		return false
	}
	for i := range a.ContainerRecommendations {
		x, y := &a.ContainerRecommendations[i], &b.ContainerRecommendations[i]
		if !listsClose(x.LowerBound, y.LowerBound) || !listsClose(x.UpperBound, y.UpperBound) {
			return false
		}
	}
	return true
}

func listsClose(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok {
			return false
		}
		x, y := qa.AsApproximateFloat64(), qb.AsApproximateFloat64()
		if math.Abs(x-y) > boundsTolerance*math.Max(math.Abs(x), math.Abs(y)) {
			return false
		}
	}
	return true
}

// normalised is s without the parts sameIgnoringTimes ignores. It copies
// only what it clears (the condition and container slices, the RL struct)
// and shares the rest with s, so it must only be read: the comparison runs
// for every autoscaler on every loop, and a deep copy of both statuses
// (currentMetrics, every resource list) was most of its cost.
func normalised(s *v1alpha1.MultidimPodAutoscalerStatus) *v1alpha1.MultidimPodAutoscalerStatus {
	out := *s
	out.RecommendationTime, out.LastScaleTime, out.CurrentMetrics = nil, nil, nil
	if s.Conditions != nil {
		out.Conditions = make([]v1alpha1.MultidimPodAutoscalerCondition, len(s.Conditions))
		for i, c := range s.Conditions {
			c.LastTransitionTime = metav1.Time{}
			out.Conditions[i] = c
		}
	}
	if s.RL != nil {
		rl := *s.RL
		rl.LastAgentContactTime = nil
		out.RL = &rl
	}
	if s.Recommendation != nil {
		rec := *s.Recommendation
		if s.Recommendation.ContainerRecommendations != nil {
			rec.ContainerRecommendations = make([]v1alpha1.RecommendedContainerResources, len(s.Recommendation.ContainerRecommendations))
			for i, c := range s.Recommendation.ContainerRecommendations {
				c.LowerBound, c.UpperBound = nil, nil
				rec.ContainerRecommendations[i] = c
			}
		}
		out.Recommendation = &rec
	}
	return &out
}

// merge writes the recommender's fields of ours into dst (a fresh copy of
// the object's status), preserving fields other components own
// (lastScaleTime, conditions the recommender does not set).
func merge(dst, ours *v1alpha1.MultidimPodAutoscalerStatus) {
	dst.ObservedGeneration = ours.ObservedGeneration
	dst.RecommendationTime = ours.RecommendationTime
	dst.CurrentReplicas = ours.CurrentReplicas
	dst.DesiredReplicas = ours.DesiredReplicas
	dst.Recommendation = ours.Recommendation
	dst.CurrentMetrics = ours.CurrentMetrics
	dst.RL = ours.RL
	for _, t := range ownedConditions {
		if c := condition(ours, t); c != nil {
			if d := condition(dst, t); d != nil {
				*d = *c
			} else {
				dst.Conditions = append(dst.Conditions, *c)
			}
		}
	}
}

// setLimitedCondition sets ScalingLimited from the default's reason. An
// autoscaler without maxReplicas is bounded by mpa.DefaultMaxReplicas; the
// message says so whether or not the bound binds now, so that the bound is
// never a surprise.
func setLimitedCondition(s *v1alpha1.MultidimPodAutoscalerStatus, m *v1alpha1.MultidimPodAutoscaler, c *workload.Constraints, recReason string, now time.Time) {
	defaulted := ""
	if mpa.MaxReplicasDefaulted(m) {
		defaulted = fmt.Sprintf("spec.constraints.global.maxReplicas is unset, so the default bound of %d replicas applies; set maxReplicas to choose another", c.MaxReplicas)
	}
	r := limitedReason(recReason)
	switch {
	case r == "":
		setCondition(s, v1alpha1.ScalingLimited, corev1.ConditionFalse, "DesiredWithinRange", defaulted, now)
	case r == "TooManyReplicas" && defaulted != "":
		setCondition(s, v1alpha1.ScalingLimited, corev1.ConditionTrue, r, "the desired replica count was limited by the default maximum: "+defaulted, now)
	default:
		msg := "the desired replica count was limited by the constraints or behavior"
		if defaulted != "" {
			msg += "; " + defaulted
		}
		setCondition(s, v1alpha1.ScalingLimited, corev1.ConditionTrue, r, msg, now)
	}
}

// limitedReason returns the HPA reason for a replica count capped by
// min/max or a behavior rate, or "".
func limitedReason(recReason string) string {
	for _, r := range []string{"TooManyReplicas", "TooFewReplicas", "ScaleUpLimit", "ScaleDownLimit"} {
		if strings.Contains(recReason, r) {
			return r
		}
	}
	return ""
}

// currentMetrics reports mean per-pod CPU and memory of pods with metrics,
// with utilisation against the current requests, as the HPA does.
func currentMetrics(obs *workload.Observation) []autoscalingv2.MetricStatus {
	var use, req workload.Resources
	n := 0
	for _, p := range obs.Pods {
		if p.HasMetrics {
			use, req, n = use.Add(p.Usage), req.Add(p.Requests), n+1
		}
	}
	if n == 0 {
		return nil
	}
	use, req = use.Scale(1/float64(n)), req.Scale(1/float64(n))
	mk := func(name corev1.ResourceName, u, r float64, q *resource.Quantity) autoscalingv2.MetricStatus {
		cur := autoscalingv2.MetricValueStatus{AverageValue: q}
		if r > 0 {
			pct := int32(u / r * 100)
			cur.AverageUtilization = &pct
		}
		return autoscalingv2.MetricStatus{
			Type:     autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: name, Current: cur},
		}
	}
	return []autoscalingv2.MetricStatus{
		mk(corev1.ResourceCPU, use.CPU, req.CPU, resource.NewMilliQuantity(int64(use.CPU*1000), resource.DecimalSI)),
		mk(corev1.ResourceMemory, use.Memory, req.Memory, resource.NewQuantity(int64(use.Memory), resource.BinarySI)),
	}
}
