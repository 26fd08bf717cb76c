package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aware-k8s/aware/pkg/hpa"
	"github.com/aware-k8s/aware/pkg/workload"
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
		d.Metric = q.Spec.Pods.Metric.Name
		sel, err := Matchers(q.Spec.Pods.Metric.Selector)
		if err != nil {
			return r, fmt.Errorf("pods metric %q selector: %w", d.Metric, err)
		}
		d.Selector = sel
	case autoscalingv2.ObjectMetricSourceType:
		if q.Spec.Object == nil {
			return r, errors.New("object metric without spec.object")
		}
		name = qObject
		d.Metric = q.Spec.Object.Metric.Name
		sel, err := Matchers(q.Spec.Object.Metric.Selector)
		if err != nil {
			return r, fmt.Errorf("object metric %q selector: %w", d.Metric, err)
		}
		d.Selector = sel
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
		d.Metric = q.Spec.External.Metric.Name
		sel, err := Matchers(q.Spec.External.Metric.Selector)
		if err != nil {
			return r, fmt.Errorf("external metric %q selector: %w", d.Metric, err)
		}
		d.Selector = sel
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

// HPAMetric converts a goal and its reading into the HPA calculator's
// input, with the autoscaling/v2 target semantics: Pods with an
// AverageValue target (pods without a reading are "missing" to the
// calculator); Object with a Value target (scaled by ready pods) or an
// AverageValue target (value / target pods); External likewise.
func HPAMetric(spec autoscalingv2.MetricSpec, r GoalReading, obs *workload.Observation) (hpa.Metric, error) {
	target := func(t autoscalingv2.MetricTarget) (hpa.MetricKind, float64, error) {
		switch t.Type {
		case autoscalingv2.ValueMetricType:
			if t.Value == nil {
				return 0, 0, errors.New("value target without value")
			}
			return hpa.ObjectValue, t.Value.AsApproximateFloat64(), nil
		case autoscalingv2.AverageValueMetricType:
			if t.AverageValue == nil {
				return 0, 0, errors.New("averageValue target without averageValue")
			}
			return hpa.ObjectAverageValue, t.AverageValue.AsApproximateFloat64(), nil
		}
		return 0, 0, fmt.Errorf("target type %q is not valid here", t.Type)
	}
	switch spec.Type {
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			return hpa.Metric{}, errors.New("pods metric without spec.pods")
		}
		t := spec.Pods.Target
		if t.Type != autoscalingv2.AverageValueMetricType || t.AverageValue == nil {
			return hpa.Metric{}, fmt.Errorf("pods metric %q: only an AverageValue target is valid", spec.Pods.Metric.Name)
		}
		m := hpa.Metric{Name: spec.Pods.Metric.Name, Kind: hpa.PodsAverageValue, Target: t.AverageValue.AsApproximateFloat64(), Window: obs.Window}
		m.Pods = make([]hpa.PodMetric, len(obs.Pods))
		for i, p := range obs.Pods {
			v, ok := r.PerPod[p.Name]
			m.Pods[i] = hpa.PodMetric{Name: p.Name, Ready: p.Ready, ReadySince: p.ReadySince, Started: p.Started, HasValue: ok, Value: v}
		}
		return m, nil
	case autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType:
		var name string
		var t autoscalingv2.MetricTarget
		if spec.Type == autoscalingv2.ObjectMetricSourceType {
			if spec.Object == nil {
				return hpa.Metric{}, errors.New("object metric without spec.object")
			}
			name, t = spec.Object.Metric.Name, spec.Object.Target
		} else {
			if spec.External == nil {
				return hpa.Metric{}, errors.New("external metric without spec.external")
			}
			name, t = spec.External.Metric.Name, spec.External.Target
		}
		kind, tv, err := target(t)
		if err != nil {
			return hpa.Metric{}, fmt.Errorf("%s metric %q: %w", spec.Type, name, err)
		}
		if !r.Value.OK {
			return hpa.Metric{}, fmt.Errorf("%s metric %q: no usable value (%s)", spec.Type, name, r.Value.Problem)
		}
		return hpa.Metric{Name: name, Kind: kind, Target: tv, Value: r.Value.Value, ReadyPods: obs.ReadyReplicas}, nil
	}
	return hpa.Metric{}, fmt.Errorf("%w: %s", ErrNotPrometheusMetric, spec.Type)
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
