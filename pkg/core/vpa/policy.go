package vpa

import (
	"context"
	"fmt"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// PolicyName is the name the "vpa" policy reports.
const PolicyName = "vpa"

// PolicyOptions configures the "vpa" policy. The zero value means defaults.
type PolicyOptions struct {
	Options
}

// Validate rejects unusable options.
func (o PolicyOptions) Validate() error { return o.Options.Validate() }

// NewPolicyFactory returns a factory for the vertical-only "vpa" policy:
// per-container requests from decaying histograms of per-pod usage; the
// replica count is left as it is (only brought within min/max).
func NewPolicyFactory(opts PolicyOptions) workload.PolicyFactory {
	return func(c workload.Constraints) (workload.Policy, error) {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("vpa: invalid constraints: %w", err)
		}
		r, err := NewRecommender(opts.Options)
		if err != nil {
			return nil, fmt.Errorf("vpa: %w", err)
		}
		return &Policy{rec: r, c: c}, nil
	}
}

// Policy is the "vpa" workload.Policy.
type Policy struct {
	rec *Recommender
	c   workload.Constraints
}

var _ workload.Policy = (*Policy)(nil)

// Name implements workload.Policy.
func (p *Policy) Name() string { return PolicyName }

// ReadsLatency implements workload.LatencyReader: the VPA sizes requests
// from usage alone and reads no latency percentile.
func (p *Policy) ReadsLatency() workload.Percentiles { return workload.NoPercentiles }

// Recommender exposes the histograms, e.g. for checkpointing.
func (p *Policy) Recommender() *Recommender { return p.rec }

// Recommend implements workload.Policy.
func (p *Policy) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	if err := ctx.Err(); err != nil {
		return workload.Recommendation{}, err
	}
	if err := obs.Validate(); err != nil {
		return workload.Recommendation{}, fmt.Errorf("vpa: invalid observation: %w", err)
	}
	if err := p.rec.Observe(&obs, &p.c, 1); err != nil {
		return workload.Recommendation{}, fmt.Errorf("vpa: %w", err)
	}
	replicas := obs.Replicas
	if replicas > 0 {
		replicas = p.c.ClampReplicas(replicas)
	}
	return workload.Recommendation{
		Replicas:   replicas,
		Containers: p.rec.Recommend(&obs, &p.c),
		Source:     workload.SourceDefault,
		Reason:     "VerticalOnly",
	}, nil
}
