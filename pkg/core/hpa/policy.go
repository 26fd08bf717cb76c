package hpa

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// PolicyName is the name the "hpa" policy reports.
const PolicyName = "hpa"

// DefaultTargetCPUUtilization is the policy's default CPU target (70%).
// Upstream's API default is 80% when no metric is given; 70% is the common
// production choice and what AWARE's evaluation uses.
const DefaultTargetCPUUtilization = 0.7

// PolicyOptions configures the "hpa" policy. The zero value means defaults.
type PolicyOptions struct {
	// TargetCPUUtilization is the target average CPU utilisation of the
	// request, as a fraction (0.7 = 70%). Zero means 0.7.
	TargetCPUUtilization float64
	// Tolerance is the dead band in both directions; zero means 0.1.
	// ScalingRules.Tolerance in the constraints overrides it per direction.
	Tolerance float64
	// CPUInitializationPeriod; zero means 5 min.
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay; zero means 30 s.
	InitialReadinessDelay time.Duration
}

// WithDefaults returns o with zero fields replaced by defaults.
func (o PolicyOptions) WithDefaults() PolicyOptions {
	if o.TargetCPUUtilization == 0 {
		o.TargetCPUUtilization = DefaultTargetCPUUtilization
	}
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.CPUInitializationPeriod == 0 {
		o.CPUInitializationPeriod = DefaultCPUInitializationPeriod
	}
	if o.InitialReadinessDelay == 0 {
		o.InitialReadinessDelay = DefaultInitialReadinessDelay
	}
	return o
}

// Validate rejects options that cannot be used (after defaulting).
func (o PolicyOptions) Validate() error {
	o = o.WithDefaults()
	var errs []error
	if !(o.TargetCPUUtilization > 0) || math.IsInf(o.TargetCPUUtilization, 0) {
		errs = append(errs, fmt.Errorf("targetCPUUtilization must be a positive fraction, got %g", o.TargetCPUUtilization))
	}
	if math.IsNaN(o.Tolerance) || math.IsInf(o.Tolerance, 0) || o.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("tolerance must be a finite non-negative number, got %g", o.Tolerance))
	}
	if o.CPUInitializationPeriod < 0 || o.InitialReadinessDelay < 0 {
		errs = append(errs, errors.New("cpuInitializationPeriod and initialReadinessDelay must be >= 0"))
	}
	return errors.Join(errs...)
}

// Calculator returns the replica calculator the options describe.
func (o PolicyOptions) Calculator() Calculator {
	o = o.WithDefaults()
	return Calculator{
		Tolerances:              Tolerances{ScaleUp: o.Tolerance, ScaleDown: o.Tolerance},
		CPUInitializationPeriod: o.CPUInitializationPeriod,
		InitialReadinessDelay:   o.InitialReadinessDelay,
	}
}

// NewPolicyFactory returns a factory for the horizontal-only "hpa" policy:
// replicas from CPU utilisation of the current requests; requests unchanged.
func NewPolicyFactory(opts PolicyOptions) workload.PolicyFactory {
	return func(c workload.Constraints) (workload.Policy, error) {
		if err := opts.Validate(); err != nil {
			return nil, fmt.Errorf("hpa: invalid options: %w", err)
		}
		o := opts.WithDefaults()
		d, err := NewDecider(c, o.Calculator())
		if err != nil {
			return nil, fmt.Errorf("hpa: %w", err)
		}
		return &Policy{opts: o, decider: d}, nil
	}
}

// Policy is the "hpa" workload.Policy.
type Policy struct {
	opts    PolicyOptions
	decider *Decider
	pods    []PodMetric
}

var _ workload.Policy = (*Policy)(nil)

// Name implements workload.Policy.
func (p *Policy) Name() string { return PolicyName }

// ReadsLatency implements workload.LatencyReader: the HPA scales on CPU
// alone and reads no latency percentile.
func (p *Policy) ReadsLatency() workload.Percentiles { return workload.NoPercentiles }

// Recommend implements workload.Policy.
func (p *Policy) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	if err := ctx.Err(); err != nil {
		return workload.Recommendation{}, err
	}
	if err := obs.Validate(); err != nil {
		return workload.Recommendation{}, fmt.Errorf("hpa: invalid observation: %w", err)
	}
	p.pods = PodMetrics(&obs, workload.CPU, nil, p.pods)
	rec := workload.Recommendation{Source: workload.SourceDefault, Containers: UnchangedContainers(&obs)}
	dec, err := p.decider.Decide(obs.Time, obs.Replicas, []Metric{{
		Name: "cpu", Kind: ResourceUtilization, Target: p.opts.TargetCPUUtilization,
		Pods: p.pods, CPU: true, Window: obs.Window,
	}})
	rec.Replicas = dec.Replicas
	if err != nil {
		// Upstream keeps the current scale when metrics are unusable; so do we.
		rec.Reason = "FailedGetResourceMetric: " + err.Error()
		return rec, nil
	}
	rec.Reason = dec.Reason
	return rec, nil
}

// PodMetrics converts an observation into per-pod readings of resource r,
// appending to buf[:0]. When perPodRequest is non-nil it replaces each pod's
// observed request (the fused policy measures against recommended
// requests). Without per-pod samples it synthesises ReadyReplicas ready pods
// at the per-pod mean and the rest as unready pods without metrics.
func PodMetrics(obs *workload.Observation, r workload.Resource, perPodRequest *float64, buf []PodMetric) []PodMetric {
	buf = buf[:0]
	if len(obs.Pods) > 0 {
		for i := range obs.Pods {
			s := &obs.Pods[i]
			req := s.Requests.Get(r)
			if perPodRequest != nil {
				req = *perPodRequest
			}
			buf = append(buf, PodMetric{
				Name: s.Name, Ready: s.Ready, ReadySince: s.ReadySince, Started: s.Started,
				HasValue: s.HasMetrics, Value: s.Usage.Get(r), Request: req,
			})
		}
		return buf
	}
	var use, req float64
	for _, c := range obs.Containers {
		use += c.Usage.Get(r)
		req += c.Requests.Get(r)
	}
	if perPodRequest != nil {
		req = *perPodRequest
	}
	has := obs.Samples > 0
	for i := int32(0); i < obs.ReadyReplicas; i++ {
		buf = append(buf, PodMetric{Ready: true, HasValue: has, Value: use, Request: req})
	}
	for i := obs.ReadyReplicas; i < obs.Replicas; i++ {
		buf = append(buf, PodMetric{Request: req})
	}
	return buf
}

// UnchangedContainers is the vertical half of a horizontal-only
// recommendation: every container keeps its current requests.
func UnchangedContainers(obs *workload.Observation) []workload.ContainerRecommendation {
	out := make([]workload.ContainerRecommendation, len(obs.Containers))
	for i, c := range obs.Containers {
		out[i] = workload.ContainerRecommendation{
			Name: c.Name, Target: c.Requests, LowerBound: c.Requests, UpperBound: c.Requests, UncappedTarget: c.Requests,
		}
	}
	return out
}
