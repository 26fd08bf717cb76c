// Package mpa converts between the MultidimPodAutoscaler API and the pure
// workload vocabulary, so the recommender, updater and admission controller
// read an object's meaning the same way.
//
// Two parts of the API bound a container: the VPA-style
// spec.resourcePolicy.containerPolicies and the MPA-style
// spec.constraints.container (plus spec.constraints.containerControlledResources).
// Where both speak about a container, the tighter bound wins: the larger
// minimum, the smaller maximum, Off over Auto, the intersection of the
// controlled resources. If the merged minimum exceeds the merged maximum,
// the maximum wins, because exceeding a user's ceiling costs money or
// capacity while a low floor only costs headroom.
package mpa

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Wildcard is the container name that matches containers without their own
// policy.
const Wildcard = "*"

// UpdateMode returns the object's update mode, defaulting to Auto.
func UpdateMode(m *v1alpha1.MultidimPodAutoscaler) v1alpha1.UpdateMode {
	if p := m.Spec.Policy; p != nil && p.UpdateMode != nil && *p.UpdateMode != "" {
		return *p.UpdateMode
	}
	return v1alpha1.UpdateModeAuto
}

// ScalesHorizontally reports whether the update mode lets the updater set
// the replica count.
func ScalesHorizontally(mode v1alpha1.UpdateMode) bool {
	switch mode {
	case v1alpha1.UpdateModeRecreate, v1alpha1.UpdateModeInPlaceOrRecreate, v1alpha1.UpdateModeInPlace, v1alpha1.UpdateModeAuto:
		return true
	}
	return false
}

// RecommenderName returns the recommender named by the object, or "" for
// the default recommender.
func RecommenderName(m *v1alpha1.MultidimPodAutoscaler) string {
	if len(m.Spec.Recommenders) == 0 {
		return ""
	}
	return m.Spec.Recommenders[0].Name
}

// ErrQuantityRange marks a quantity too large to convert: its CPU
// millicores or memory bytes do not fit in an int64.
var ErrQuantityRange = errors.New("quantity beyond the int64 range")

// Largest amounts ParseResources converts exactly.
var (
	maxCPUQuantity    = resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	maxMemoryQuantity = resource.NewQuantity(math.MaxInt64, resource.BinarySI)
)

// ParseResources converts a ResourceList to cores and bytes; other
// resources are ignored and a missing resource is 0. A CPU amount beyond
// math.MaxInt64 millicores or a memory amount beyond math.MaxInt64 bytes
// (e.g. "100E") is an ErrQuantityRange error naming the resource:
// Quantity.MilliValue and Value read such amounts as 0 or wrap them
// negative, which would turn a maxAllowed into "unbounded".
func ParseResources(rl corev1.ResourceList) (workload.Resources, error) {
	var r workload.Resources
	var errs []error
	if q, ok := rl[corev1.ResourceCPU]; ok {
		if q.CmpInt64(0) > 0 && q.Cmp(*maxCPUQuantity) > 0 {
			errs = append(errs, fmt.Errorf("cpu %s: %w (at most %s)", q.String(), ErrQuantityRange, maxCPUQuantity.String()))
			r.CPU = maxCPUQuantity.AsApproximateFloat64()
		} else {
			r.CPU = float64(q.MilliValue()) / 1000
		}
	}
	if q, ok := rl[corev1.ResourceMemory]; ok {
		if q.CmpInt64(0) > 0 && q.Cmp(*maxMemoryQuantity) > 0 {
			errs = append(errs, fmt.Errorf("memory %s: %w (at most %s)", q.String(), ErrQuantityRange, maxMemoryQuantity.String()))
			r.Memory = math.MaxInt64
		} else {
			r.Memory = float64(q.Value())
		}
	}
	return r, errors.Join(errs...)
}

// Resources is ParseResources for quantities already validated, or read
// from objects the API server holds (pods, status): an amount beyond the
// int64 range saturates at the largest one, so it never reads as 0.
// Specs a user writes are checked with CheckQuantities first.
func Resources(rl corev1.ResourceList) workload.Resources {
	r, _ := ParseResources(rl)
	return r
}

// CheckQuantities reports every quantity of m's spec bounds (resource
// policy and constraints) that ParseResources refuses, by field path; the
// recommender reports it in ConfigUnsupported instead of reading such a
// bound as another value.
func CheckQuantities(m *v1alpha1.MultidimPodAutoscaler) error {
	var errs []error
	check := func(field string, rl corev1.ResourceList) {
		if _, err := ParseResources(rl); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	if rp := m.Spec.ResourcePolicy; rp != nil {
		for i, p := range rp.ContainerPolicies {
			check(fmt.Sprintf("spec.resourcePolicy.containerPolicies[%d].minAllowed", i), p.MinAllowed)
			check(fmt.Sprintf("spec.resourcePolicy.containerPolicies[%d].maxAllowed", i), p.MaxAllowed)
		}
	}
	if sc := m.Spec.Constraints; sc != nil {
		for i, c := range sc.Container {
			if c.Requests != nil {
				check(fmt.Sprintf("spec.constraints.container[%d].requests.minAllowed", i), c.Requests.MinAllowed)
				check(fmt.Sprintf("spec.constraints.container[%d].requests.maxAllowed", i), c.Requests.MaxAllowed)
			}
		}
	}
	return errors.Join(errs...)
}

// ResourceList converts cores and bytes to a ResourceList with CPU rounded
// up to whole millicores and memory up to whole bytes (rounding up so a
// recommendation never lands just below what was computed). Zero, negative
// and non-finite amounts are omitted: an absent entry means "unset".
func ResourceList(r workload.Resources) corev1.ResourceList {
	rl := corev1.ResourceList{}
	if ok(r.CPU) {
		rl[corev1.ResourceCPU] = *resource.NewMilliQuantity(ceilInt64(r.CPU*1000-1e-9), resource.DecimalSI)
	}
	if ok(r.Memory) {
		rl[corev1.ResourceMemory] = *resource.NewQuantity(ceilInt64(r.Memory-1e-9), resource.BinarySI)
	}
	return rl
}

// ceilInt64 rounds x up, saturating at math.MaxInt64: converting a larger
// float to int64 overflows, and a huge amount written to status would read
// back negative.
func ceilInt64(x float64) int64 {
	c := math.Ceil(x)
	if c >= math.MaxInt64 { // float64(math.MaxInt64) is 2^63, already out of range
		return math.MaxInt64
	}
	return int64(c)
}

func ok(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

// DefaultMaxReplicas bounds the replica count of an autoscaler whose spec
// sets no maxReplicas (or minReplicas, if that is higher), so that a bad
// metric or agent answer cannot scale a workload without limit. The
// recommender says so in the ScalingLimited condition.
const DefaultMaxReplicas int32 = 100

// MaxReplicasDefaulted reports whether m sets no maxReplicas, so that
// Constraints bounds it by DefaultMaxReplicas.
func MaxReplicasDefaulted(m *v1alpha1.MultidimPodAutoscaler) bool {
	sc := m.Spec.Constraints
	return sc == nil || sc.Global == nil || sc.Global.MaxReplicas == nil
}

// Constraints returns the object's bounds in workload terms. MaxReplicas is
// never unbounded: unset, it is DefaultMaxReplicas, or minReplicas if that
// is higher.
func Constraints(m *v1alpha1.MultidimPodAutoscaler) workload.Constraints {
	c := workload.Constraints{MinReplicas: 1}
	var global []corev1.ResourceName
	var mpaContainers []v1alpha1.VerticalScalingConstraints
	if sc := m.Spec.Constraints; sc != nil {
		if g := sc.Global; g != nil {
			if g.MinReplicas != nil {
				c.MinReplicas = *g.MinReplicas
			}
			if g.MaxReplicas != nil {
				c.MaxReplicas = *g.MaxReplicas
			}
			c.Behavior = Behavior(g.Behavior)
		}
		global = sc.ContainerControlledResources
		mpaContainers = sc.Container
	}
	var vpaPolicies []v1alpha1.ContainerResourcePolicy
	if rp := m.Spec.ResourcePolicy; rp != nil {
		vpaPolicies = rp.ContainerPolicies
	}

	names := []string{}
	for _, p := range vpaPolicies {
		names = appendName(names, p.ContainerName)
	}
	for _, p := range mpaContainers {
		names = appendName(names, p.Name)
	}
	if len(global) > 0 {
		names = appendName(names, Wildcard)
	}
	for _, name := range names {
		p := workload.ContainerPolicy{Name: name, Mode: workload.ContainerModeAuto, ControlledValues: workload.RequestsAndLimits}
		if len(global) > 0 {
			p.ControlledResources = resourceNames(global)
		}
		if v := lookupVPA(vpaPolicies, name); v != nil {
			if v.Mode != nil && *v.Mode == v1alpha1.ContainerScalingModeOff {
				p.Mode = workload.ContainerModeOff
			}
			tighten(&p, Resources(v.MinAllowed), Resources(v.MaxAllowed))
			if v.ControlledResources != nil {
				p.ControlledResources = intersect(p.ControlledResources, resourceNames(*v.ControlledResources))
			}
			if v.ControlledValues != nil && *v.ControlledValues == v1alpha1.ContainerControlledValuesRequestsOnly {
				p.ControlledValues = workload.RequestsOnly
			}
			p.StartupBoost = cpuBoost(v.StartupBoost)
		}
		if v := lookupMPA(mpaContainers, name); v != nil {
			if v.Mode != nil && *v.Mode == v1alpha1.ContainerScalingModeOff {
				p.Mode = workload.ContainerModeOff
			}
			if v.Requests != nil {
				tighten(&p, Resources(v.Requests.MinAllowed), Resources(v.Requests.MaxAllowed))
			}
		}
		c.Containers = append(c.Containers, p)
	}
	if MaxReplicasDefaulted(m) {
		c.MaxReplicas = max(DefaultMaxReplicas, c.MinReplicas)
	}
	return c
}

func appendName(names []string, n string) []string {
	if n == "" {
		n = Wildcard
	}
	if slices.Contains(names, n) {
		return names
	}
	return append(names, n)
}

func lookupVPA(ps []v1alpha1.ContainerResourcePolicy, name string) *v1alpha1.ContainerResourcePolicy {
	var wild *v1alpha1.ContainerResourcePolicy
	for i := range ps {
		n := ps[i].ContainerName
		if n == name {
			return &ps[i]
		}
		if n == Wildcard || n == "" {
			wild = &ps[i]
		}
	}
	return wild
}

func lookupMPA(ps []v1alpha1.VerticalScalingConstraints, name string) *v1alpha1.VerticalScalingConstraints {
	var wild *v1alpha1.VerticalScalingConstraints
	for i := range ps {
		n := ps[i].Name
		if n == name {
			return &ps[i]
		}
		if n == Wildcard || n == "" {
			wild = &ps[i]
		}
	}
	return wild
}

// tighten merges bounds into p: larger minimum, smaller (non-zero) maximum,
// and the maximum wins a conflict.
func tighten(p *workload.ContainerPolicy, lo, hi workload.Resources) {
	for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
		minV := math.Max(p.MinAllowed.Get(r), lo.Get(r))
		maxV := p.MaxAllowed.Get(r)
		if h := hi.Get(r); h > 0 && (maxV == 0 || h < maxV) {
			maxV = h
		}
		if maxV > 0 && minV > maxV {
			minV = maxV
		}
		p.MinAllowed = p.MinAllowed.With(r, minV)
		p.MaxAllowed = p.MaxAllowed.With(r, maxV)
	}
}

func resourceNames(names []corev1.ResourceName) []workload.Resource {
	out := make([]workload.Resource, 0, len(names))
	for _, n := range names {
		switch n {
		case corev1.ResourceCPU:
			out = append(out, workload.CPU)
		case corev1.ResourceMemory:
			out = append(out, workload.Memory)
		}
	}
	return out
}

// intersect returns the resources in both lists; an empty (nil) list means
// "both resources".
func intersect(a, b []workload.Resource) []workload.Resource {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := []workload.Resource{}
	for _, r := range a {
		if slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

// Behavior converts autoscaling/v2 behavior; nil stays nil (HPA defaults).
func Behavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) *workload.Behavior {
	if b == nil {
		return nil
	}
	return &workload.Behavior{ScaleUp: rules(b.ScaleUp), ScaleDown: rules(b.ScaleDown)}
}

func rules(r *autoscalingv2.HPAScalingRules) *workload.ScalingRules {
	if r == nil {
		return nil
	}
	out := &workload.ScalingRules{Select: workload.SelectMax}
	if r.StabilizationWindowSeconds != nil {
		d := time.Duration(*r.StabilizationWindowSeconds) * time.Second
		out.StabilizationWindow = &d
	}
	if r.SelectPolicy != nil {
		out.Select = workload.SelectPolicy(*r.SelectPolicy)
	}
	if r.Tolerance != nil {
		t := r.Tolerance.AsApproximateFloat64()
		out.Tolerance = &t
	}
	for _, p := range r.Policies {
		out.Policies = append(out.Policies, workload.ScalingPolicy{
			Type:   workload.ScalingPolicyType(p.Type),
			Value:  p.Value,
			Period: time.Duration(p.PeriodSeconds) * time.Second,
		})
	}
	return out
}

// Recommendation reads the recommendation in an object's status; ok is
// false when there is none.
func Recommendation(s *v1alpha1.MultidimPodAutoscalerStatus) (rec workload.Recommendation, ok bool) {
	if s.Recommendation == nil && s.DesiredReplicas == 0 {
		return workload.Recommendation{}, false
	}
	rec.Replicas = s.DesiredReplicas
	if s.Recommendation != nil {
		for _, c := range s.Recommendation.ContainerRecommendations {
			rec.Containers = append(rec.Containers, workload.ContainerRecommendation{
				Name:           c.ContainerName,
				Target:         Resources(c.Target),
				LowerBound:     Resources(c.LowerBound),
				UpperBound:     Resources(c.UpperBound),
				UncappedTarget: Resources(c.UncappedTarget),
			})
		}
	}
	if s.RL != nil && s.RL.Source != "" {
		rec.Source = workload.Source(s.RL.Source)
		rec.Reason = s.RL.Reason
	} else {
		rec.Source = workload.SourceDefault
	}
	return rec, true
}

// RecommendedPodResources converts a recommendation's containers to the
// status form.
func RecommendedPodResources(rec workload.Recommendation) *v1alpha1.RecommendedPodResources {
	out := &v1alpha1.RecommendedPodResources{}
	for _, c := range rec.Containers {
		out.ContainerRecommendations = append(out.ContainerRecommendations, v1alpha1.RecommendedContainerResources{
			ContainerName:  c.Name,
			Target:         ResourceList(c.Target),
			LowerBound:     ResourceList(c.LowerBound),
			UpperBound:     ResourceList(c.UpperBound),
			UncappedTarget: ResourceList(c.UncappedTarget),
		})
	}
	return out
}
