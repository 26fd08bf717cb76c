package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// ErrNotPrometheusMetric is returned for goal metrics Prometheus does not
// serve here: Resource and ContainerResource goals come from the usage
// source.
var ErrNotPrometheusMetric = errors.New("metric type is not read from Prometheus")

// GoalQuery asks for the current value of one spec.goals.metrics entry.
type GoalQuery struct {
	Namespace string
	Spec      autoscalingv2.MetricSpec
}

// GoalReading is the value of one goal metric.
type GoalReading struct {
	Type autoscalingv2.MetricSourceType
	// PerPod holds the valid per-pod values of a Pods metric, by pod name.
	PerPod map[string]float64
	// Value is the value of an Object or External metric (OK false when
	// there was none, Problem says why).
	Value Reading
	// Dropped counts invalid samples discarded.
	Dropped Drops
}

// Goal reads one Pods, Object or External goal metric with
// autoscaling/v2 semantics: Pods is the metric per pod of the namespace
// (the caller picks its pods), Object the metric of the described object
// (Prometheus label: the object's kind in lower case, value its name),
// External the named metric with its selector.
func (p *Prometheus) Goal(ctx context.Context, q GoalQuery) (GoalReading, error) {
	r := GoalReading{Type: q.Spec.Type, Dropped: Drops{}}
	if err := validNamespace(q.Namespace); err != nil {
		return r, err
	}
	d := QueryData{Namespace: q.Namespace, PodRegex: ".+", Window: Window(p.window)}
	var name string
	switch q.Spec.Type {
	case autoscalingv2.PodsMetricSourceType:
		if q.Spec.Pods == nil {
			return r, errors.New("pods metric without spec.pods")
		}
		name = qPods
		if err := d.setMetric("pods", q.Spec.Pods.Metric); err != nil {
			return r, err
		}
	case autoscalingv2.ObjectMetricSourceType:
		if q.Spec.Object == nil {
			return r, errors.New("object metric without spec.object")
		}
		name = qObject
		if err := d.setMetric("object", q.Spec.Object.Metric); err != nil {
			return r, err
		}
		d.ObjectKind = strings.ToLower(q.Spec.Object.DescribedObject.Kind)
		d.ObjectName = quote(q.Spec.Object.DescribedObject.Name)
		if !labelName.MatchString(d.ObjectKind) || d.ObjectName == "" {
			return r, fmt.Errorf("object metric %q: described object %s/%s cannot be a Prometheus label", d.Metric,
				q.Spec.Object.DescribedObject.Kind, q.Spec.Object.DescribedObject.Name)
		}
	case autoscalingv2.ExternalMetricSourceType:
		if q.Spec.External == nil {
			return r, errors.New("external metric without spec.external")
		}
		name = qExternal
		if err := d.setMetric("external", q.Spec.External.Metric); err != nil {
			return r, err
		}
		if !p.clusterWide[q.Namespace] {
			d.Selector = scopeToNamespace(q.Namespace, d.Selector)
		}
	default:
		return r, fmt.Errorf("%w: %s", ErrNotPrometheusMetric, q.Spec.Type)
	}
	if err := ValidMetricName(d.Metric); err != nil {
		return r, fmt.Errorf("%s goal metric: %w", q.Spec.Type, err)
	}
	query, err := p.Render(name, d)
	if err != nil {
		return r, err
	}
	vec, err := p.instant(ctx, name, query)
	if err != nil {
		return r, err
	}
	if q.Spec.Type != autoscalingv2.PodsMetricSourceType {
		r.Value = aggregate(vec, sum, r.Dropped)
		return r, nil
	}
	r.PerPod = map[string]float64{}
	for _, s := range vec {
		pod := string(s.Metric["pod"])
		if pod == "" {
			continue
		}
		x := float64(s.Value)
		if pr := problem(x); pr != "" {
			r.Dropped[pr]++
			continue
		}
		r.PerPod[pod] += x
	}
	return r, nil
}

// Problems of a goal that cannot drive scaling (workload.Goal.Problem),
// besides NoData and the Drop* reasons of its reading.
const (
	// GoalNotRead: the goal needs Prometheus and none is configured.
	GoalNotRead = "NotRead"
	// GoalQueryFailed: Prometheus could not be asked or failed to answer.
	GoalQueryFailed = "QueryFailed"
	// GoalInvalidSpec: the target is missing, of a type the source does not
	// take, or not positive.
	GoalInvalidSpec = "InvalidSpec"
	// GoalUnsupported: a source type or resource AWARE does not scale on
	// (ContainerResource; resources other than cpu and memory).
	GoalUnsupported = "Unsupported"
)

// ToGoal converts one spec.goals.metrics entry, with its reading, into a
// policy's input, with the autoscaling/v2 target semantics. Resource goals
// need no reading: policies read the pods' usage from the observation
// (Utilization as a fraction of the request, or AverageValue). Pods goals
// take an AverageValue target over r.PerPod; Object and External goals a
// Value target (scaling the ready pods by value/target) or an
// AverageValue target (value/target pods). r is the Prometheus reading
// (nil when it was not read) and err the reading's failure. A goal that
// cannot drive scaling carries a Problem (GoalNotRead, GoalQueryFailed,
// GoalInvalidSpec, GoalUnsupported, NoData or a Drop* reason): policies
// then treat it as a missing metric.
func ToGoal(spec autoscalingv2.MetricSpec, r *GoalReading, err error) workload.Goal {
	g, needsReading := goalSpec(spec)
	switch {
	case g.Problem != "" || !needsReading:
		return g
	case err != nil:
		g.Problem = GoalQueryFailed
	case r == nil:
		g.Problem = GoalNotRead
	case g.Kind == workload.GoalAverageValue:
		if len(r.PerPod) == 0 {
			g.Problem = NoData
			for _, pr := range []string{DropNaN, DropInfinite, DropNegative} {
				if r.Dropped[pr] > 0 {
					g.Problem = pr
					break
				}
			}
			return g
		}
		g.PerPod = r.PerPod
	default:
		if !r.Value.OK {
			g.Problem = r.Value.Problem
			return g
		}
		g.Value = r.Value.Value
	}
	return g
}

// goalSpec is the goal of spec without its reading, and whether it needs
// one from Prometheus.
func goalSpec(spec autoscalingv2.MetricSpec) (workload.Goal, bool) {
	invalid := func(name string) (workload.Goal, bool) {
		return workload.Goal{Name: name, Kind: workload.GoalValue, Problem: GoalInvalidSpec}, false
	}
	quantity := func(q *resource.Quantity) (float64, bool) {
		if q == nil {
			return 0, false
		}
		x := q.AsApproximateFloat64()
		return x, x > 0 && !math.IsInf(x, 0)
	}
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			return invalid("resource")
		}
		name := string(spec.Resource.Name)
		var res workload.Resource
		switch spec.Resource.Name {
		case "cpu":
			res = workload.CPU
		case "memory":
			res = workload.Memory
		default:
			return workload.Goal{Name: name, Kind: workload.GoalValue, Problem: GoalUnsupported}, false
		}
		t := spec.Resource.Target
		switch t.Type {
		case autoscalingv2.UtilizationMetricType:
			if t.AverageUtilization == nil || *t.AverageUtilization <= 0 {
				return invalid(name)
			}
			return workload.Goal{Name: name, Kind: workload.GoalUtilization, Resource: res, Target: float64(*t.AverageUtilization) / 100}, false
		case autoscalingv2.AverageValueMetricType:
			v, ok := quantity(t.AverageValue)
			if !ok {
				return invalid(name)
			}
			return workload.Goal{Name: name, Kind: workload.GoalAverageValue, Resource: res, Target: v}, false
		}
		return invalid(name)
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			return invalid("pods")
		}
		name, t := spec.Pods.Metric.Name, spec.Pods.Target
		v, ok := quantity(t.AverageValue)
		if t.Type != autoscalingv2.AverageValueMetricType || !ok {
			return invalid(name)
		}
		return workload.Goal{Name: name, Kind: workload.GoalAverageValue, Target: v}, true
	case autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType:
		var name string
		var t autoscalingv2.MetricTarget
		switch {
		case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
			name, t = spec.Object.Metric.Name, spec.Object.Target
		case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
			name, t = spec.External.Metric.Name, spec.External.Target
		default:
			return invalid(strings.ToLower(string(spec.Type)))
		}
		switch t.Type {
		case autoscalingv2.ValueMetricType:
			if v, ok := quantity(t.Value); ok {
				return workload.Goal{Name: name, Kind: workload.GoalValue, Target: v}, true
			}
		case autoscalingv2.AverageValueMetricType:
			if v, ok := quantity(t.AverageValue); ok {
				return workload.Goal{Name: name, Kind: workload.GoalTotalAverageValue, Target: v}, true
			}
		}
		return invalid(name)
	}
	return workload.Goal{Name: strings.ToLower(string(spec.Type)), Kind: workload.GoalValue, Problem: GoalUnsupported}, false
}

// MetricStatus is the status.currentMetrics entry of a goal and its
// reading (Pods: the mean over the workload's pods with a value), or false
// when there is nothing to report.
func MetricStatus(spec autoscalingv2.MetricSpec, r GoalReading, pods []string) (autoscalingv2.MetricStatus, bool) {
	q := func(x float64) *resource.Quantity {
		// Readings are finite and non-negative; saturate absurd ones.
		return resource.NewMilliQuantity(int64(min(x*1000, math.MaxInt64/2)), resource.DecimalSI)
	}
	switch spec.Type {
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			return autoscalingv2.MetricStatus{}, false
		}
		total, n := 0.0, 0
		for _, p := range pods {
			if v, ok := r.PerPod[p]; ok {
				total, n = total+v, n+1
			}
		}
		if n == 0 {
			return autoscalingv2.MetricStatus{}, false
		}
		return autoscalingv2.MetricStatus{Type: spec.Type, Pods: &autoscalingv2.PodsMetricStatus{
			Metric: spec.Pods.Metric, Current: autoscalingv2.MetricValueStatus{AverageValue: q(total / float64(n))}}}, true
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil || !r.Value.OK {
			return autoscalingv2.MetricStatus{}, false
		}
		cur := autoscalingv2.MetricValueStatus{Value: q(r.Value.Value)}
		if spec.Object.Target.Type == autoscalingv2.AverageValueMetricType && len(pods) > 0 {
			cur = autoscalingv2.MetricValueStatus{AverageValue: q(r.Value.Value / float64(len(pods)))}
		}
		return autoscalingv2.MetricStatus{Type: spec.Type, Object: &autoscalingv2.ObjectMetricStatus{
			Metric: spec.Object.Metric, DescribedObject: spec.Object.DescribedObject, Current: cur}}, true
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil || !r.Value.OK {
			return autoscalingv2.MetricStatus{}, false
		}
		cur := autoscalingv2.MetricValueStatus{Value: q(r.Value.Value)}
		if spec.External.Target.Type == autoscalingv2.AverageValueMetricType && len(pods) > 0 {
			cur = autoscalingv2.MetricValueStatus{AverageValue: q(r.Value.Value / float64(len(pods)))}
		}
		return autoscalingv2.MetricStatus{Type: spec.Type, External: &autoscalingv2.ExternalMetricStatus{
			Metric: spec.External.Metric, Current: cur}}, true
	}
	return autoscalingv2.MetricStatus{}, false
}

// scopeToNamespace puts a namespace matcher ahead of sel. PromQL ANDs
// matchers, so a selector that names another namespace (or matches any)
// still reads only ns's series.
func scopeToNamespace(ns, sel string) string {
	m := `namespace="` + quote(ns) + `"`
	if sel == "" {
		return m
	}
	return m + ", " + sel
}

// setMetric fills d's metric name and label matchers from a goal's metric
// identifier; kind names the goal type in errors.
func (d *QueryData) setMetric(kind string, id autoscalingv2.MetricIdentifier) error {
	d.Metric = id.Name
	sel, err := Matchers(id.Selector)
	if err != nil {
		return fmt.Errorf("%s metric %q selector: %w", kind, id.Name, err)
	}
	d.Selector = sel
	return nil
}
