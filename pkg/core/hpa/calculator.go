package hpa

import (
	"errors"
	"fmt"
	"math"
	"time"
)

const (
	// DefaultTolerance is the HPA dead band around a usage ratio of 1.
	DefaultTolerance = 0.1
	// DefaultCPUInitializationPeriod is --horizontal-pod-autoscaler-cpu-initialization-period.
	DefaultCPUInitializationPeriod = 5 * time.Minute
	// DefaultInitialReadinessDelay is --horizontal-pod-autoscaler-initial-readiness-delay.
	DefaultInitialReadinessDelay = 30 * time.Second
)

// ErrNoMetrics is returned when no pod has a usable metric.
var ErrNoMetrics = errors.New("did not receive metrics for any ready pod")

// Tolerances is the dead band [1-ScaleDown, 1+ScaleUp] within which a usage
// ratio causes no scale.
type Tolerances struct {
	ScaleUp   float64
	ScaleDown float64
}

// DefaultTolerances is 10% in both directions.
func DefaultTolerances() Tolerances {
	return Tolerances{ScaleUp: DefaultTolerance, ScaleDown: DefaultTolerance}
}

// IsWithin reports whether ratio falls in the dead band (inclusive, as upstream).
func (t Tolerances) IsWithin(ratio float64) bool {
	return 1-t.ScaleDown <= ratio && ratio <= 1+t.ScaleUp
}

func (t Tolerances) validate() error {
	for _, v := range []float64{t.ScaleUp, t.ScaleDown} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("tolerance must be a finite non-negative number, got %g", v)
		}
	}
	return nil
}

// PodMetric is one pod as the replica calculator sees it.
type PodMetric struct {
	Name string
	// Ready is the pod's Ready condition.
	Ready bool
	// ReadySince is the Ready condition's last transition; zero if unknown
	// (then Started stands in for it).
	ReadySince time.Time
	// Started is the pod's start time; zero if unknown.
	Started time.Time
	// HasValue is false when the metrics pipeline returned nothing for the pod.
	HasValue bool
	// Value is the pod's metric (CPU cores, memory bytes, or a custom value).
	Value float64
	// Request is the pod's summed request of the resource; only utilisation
	// targets read it.
	Request float64
}

// Calculator holds the controller-wide settings of the replica arithmetic.
// The zero value is not useful; use NewCalculator or DefaultCalculator.
type Calculator struct {
	Tolerances              Tolerances
	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
}

// DefaultCalculator returns the kube-controller-manager defaults.
func DefaultCalculator() Calculator {
	return Calculator{
		Tolerances:              DefaultTolerances(),
		CPUInitializationPeriod: DefaultCPUInitializationPeriod,
		InitialReadinessDelay:   DefaultInitialReadinessDelay,
	}
}

// Validate rejects settings the arithmetic cannot use.
func (c *Calculator) Validate() error {
	if err := c.Tolerances.validate(); err != nil {
		return err
	}
	if c.CPUInitializationPeriod < 0 || c.InitialReadinessDelay < 0 {
		return fmt.Errorf("cpu initialization period and initial readiness delay must be >= 0")
	}
	return nil
}

// Result is the outcome of one metric's arithmetic.
type Result struct {
	// Replicas is the proposed count before stabilization and limits.
	Replicas int32
	// UsageRatio is the ratio of current to target before the missing and
	// unready substitutions (what status.currentMetrics reflects).
	UsageRatio float64
	// Utilization is the raw average utilisation of the request (fraction),
	// set only for utilisation targets.
	Utilization float64
	// ReadyPods counts pods whose metric was used as measured.
	ReadyPods int
}

type podGroups struct {
	ready   []int
	unready []int
	missing []int
}

// groupBuf backs a podGroups for up to 16 pods in each group, on the
// caller's stack, so that grouping a small workload allocates nothing (the
// simulator's replays call it every window).
type groupBuf [3][16]int

func (b *groupBuf) groups() podGroups {
	return podGroups{ready: b[0][:0], unready: b[1][:0], missing: b[2][:0]}
}

// group classifies pods as upstream groupPods does. applyCPURule enables the
// CPU initialisation / readiness rule; window is the metric window, used to
// decide whether a freshly ready pod's metric covers readiness. It appends
// to g's (empty) slices, groupBuf's arrays, and returns them.
func (c *Calculator) group(now time.Time, pods []PodMetric, applyCPURule bool, window time.Duration, g podGroups) podGroups {
	for i := range pods {
		p := &pods[i]
		if !p.HasValue {
			// A pod that is neither ready nor reporting is what upstream
			// sees as Pending: unready, not missing.
			if !p.Ready {
				g.unready = append(g.unready, i)
			} else {
				g.missing = append(g.missing, i)
			}
			continue
		}
		if applyCPURule && c.cpuUnready(now, p, window) {
			g.unready = append(g.unready, i)
			continue
		}
		g.ready = append(g.ready, i)
	}
	return g
}

func (c *Calculator) cpuUnready(now time.Time, p *PodMetric, window time.Duration) bool {
	if p.Started.IsZero() {
		// Without a start time we cannot apply the initialisation period;
		// fall back to the Ready condition alone.
		return !p.Ready
	}
	since := p.ReadySince
	if since.IsZero() {
		since = p.Started
	}
	if p.Started.Add(c.CPUInitializationPeriod).After(now) {
		// Within the initialisation period, the sample is ignored if the pod
		// is unready or the metric window started before it became ready.
		return !p.Ready || now.Before(since.Add(window))
	}
	// Afterwards, ignore only a pod that is unready and has never been ready.
	return !p.Ready && p.Started.Add(c.InitialReadinessDelay).After(since)
}

// ResourceUtilizationReplicas proposes a replica count for a resource metric
// with a Utilization target (a fraction: 0.7 = 70%). cpu enables the unready
// rule, which upstream applies to CPU only.
func (c *Calculator) ResourceUtilizationReplicas(now time.Time, current int32, pods []PodMetric, target float64, cpu bool, window time.Duration) (Result, error) {
	if !(target > 0) || math.IsInf(target, 0) {
		return Result{}, fmt.Errorf("target utilization must be a positive number, got %g", target)
	}
	var buf groupBuf
	g := c.group(now, pods, cpu, window, buf.groups())
	if len(g.ready) == 0 {
		return Result{}, ErrNoMetrics
	}
	var use, req float64
	for _, i := range g.ready {
		use += pods[i].Value
		req += pods[i].Request
	}
	if !(req > 0) {
		return Result{}, fmt.Errorf("pods have no request for the resource: utilization is undefined")
	}
	utilization := use / req
	ratio := utilization / target
	res := Result{Replicas: current, UsageRatio: ratio, Utilization: utilization, ReadyPods: len(g.ready)}

	scaleUpWithUnready := len(g.unready) > 0 && ratio > 1
	if !scaleUpWithUnready && len(g.missing) == 0 {
		if !c.Tolerances.IsWithin(ratio) {
			res.Replicas = ceilReplicas(ratio * float64(len(g.ready)))
		}
		return res, nil
	}

	// Substitute values for missing and unready pods and re-run.
	n := len(g.ready)
	if len(g.missing) > 0 {
		switch {
		case ratio < 1:
			// Scale-down: missing pods are assumed at 100% of their request,
			// or at the target when the target is above 100%.
			fallback := math.Max(1, target)
			for _, i := range g.missing {
				use += pods[i].Request * fallback
				req += pods[i].Request
			}
			n += len(g.missing)
		case ratio > 1:
			// Scale-up: missing pods are assumed idle.
			for _, i := range g.missing {
				req += pods[i].Request
			}
			n += len(g.missing)
		}
	}
	if scaleUpWithUnready {
		for _, i := range g.unready {
			req += pods[i].Request
		}
		n += len(g.unready)
	}
	newRatio := (use / req) / target
	res.Replicas = c.recalculated(current, ratio, newRatio, n)
	return res, nil
}

// AverageValueReplicas proposes a replica count for a per-pod metric with an
// AverageValue target: a Pods metric, or a resource metric with an
// AverageValue target. cpu enables the CPU unready rule.
func (c *Calculator) AverageValueReplicas(now time.Time, current int32, pods []PodMetric, target float64, cpu bool, window time.Duration) (Result, error) {
	if !(target > 0) || math.IsInf(target, 0) {
		return Result{}, fmt.Errorf("target average value must be a positive number, got %g", target)
	}
	var buf groupBuf
	g := c.group(now, pods, cpu, window, buf.groups())
	if len(g.ready) == 0 {
		return Result{}, ErrNoMetrics
	}
	var use float64
	for _, i := range g.ready {
		use += pods[i].Value
	}
	ratio := use / (target * float64(len(g.ready)))
	res := Result{Replicas: current, UsageRatio: ratio, ReadyPods: len(g.ready)}

	scaleUpWithUnready := len(g.unready) > 0 && ratio > 1
	if !scaleUpWithUnready && len(g.missing) == 0 {
		if !c.Tolerances.IsWithin(ratio) {
			res.Replicas = ceilReplicas(use / target)
		}
		return res, nil
	}
	n := len(g.ready)
	if len(g.missing) > 0 {
		switch {
		case ratio < 1:
			use += target * float64(len(g.missing))
			n += len(g.missing)
		case ratio > 1:
			n += len(g.missing)
		}
	}
	if scaleUpWithUnready {
		n += len(g.unready)
	}
	newRatio := use / (target * float64(n))
	res.Replicas = c.recalculated(current, ratio, newRatio, n)
	return res, nil
}

// recalculated applies upstream's second pass: cancel when the substituted
// ratio is within tolerance, flips direction, or moves the count the wrong way.
func (c *Calculator) recalculated(current int32, ratio, newRatio float64, n int) int32 {
	if c.Tolerances.IsWithin(newRatio) || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return current
	}
	proposed := ceilReplicas(newRatio * float64(n))
	if (newRatio < 1 && proposed > current) || (newRatio > 1 && proposed < current) {
		return current
	}
	return proposed
}

// ObjectValueReplicas proposes a replica count for an Object or External
// metric with a Value target: the ratio scales the ready pod count.
func (c *Calculator) ObjectValueReplicas(current, readyPods int32, value, target float64) (Result, error) {
	if !(target > 0) || math.IsInf(target, 0) {
		return Result{}, fmt.Errorf("target value must be a positive number, got %g", target)
	}
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 {
		return Result{}, fmt.Errorf("metric value must be finite and non-negative, got %g", value)
	}
	ratio := value / target
	res := Result{Replicas: current, UsageRatio: ratio, ReadyPods: int(readyPods)}
	if current == 0 {
		// Scale from zero: as many pods as the ratio says.
		res.Replicas = ceilReplicas(ratio)
		return res, nil
	}
	if !c.Tolerances.IsWithin(ratio) {
		res.Replicas = ceilReplicas(ratio * float64(readyPods))
	}
	return res, nil
}

// ObjectAverageValueReplicas proposes a replica count for an Object or
// External metric with an AverageValue target: value / target pods.
func (c *Calculator) ObjectAverageValueReplicas(current int32, value, target float64) (Result, error) {
	if !(target > 0) || math.IsInf(target, 0) {
		return Result{}, fmt.Errorf("target average value must be a positive number, got %g", target)
	}
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 {
		return Result{}, fmt.Errorf("metric value must be finite and non-negative, got %g", value)
	}
	res := Result{Replicas: current}
	if current > 0 {
		res.UsageRatio = value / (target * float64(current))
	}
	if current == 0 || !c.Tolerances.IsWithin(res.UsageRatio) {
		res.Replicas = ceilReplicas(value / target)
	}
	return res, nil
}

// ceilReplicas rounds up and saturates at MaxInt32 so absurd ratios cannot
// wrap around to negative counts.
func ceilReplicas(x float64) int32 {
	x = math.Ceil(x)
	switch {
	case math.IsNaN(x) || x <= 0:
		return 0
	case x >= math.MaxInt32:
		return math.MaxInt32
	}
	return int32(x)
}
