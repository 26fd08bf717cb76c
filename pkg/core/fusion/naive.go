package fusion

import (
	"context"
	"fmt"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// NewNaiveFactory returns a factory for the naive "hpa+vpa" policy: the
// "hpa" and "vpa" policies run side by side on CPU, each reading the
// current requests, exactly as deploying upstream HPA and VPA on the same
// workload would. It exists as a baseline that exhibits the fight.
func NewNaiveFactory(opts Options) workload.PolicyFactory {
	return func(c workload.Constraints) (workload.Policy, error) {
		if err := opts.Validate(); err != nil {
			return nil, fmt.Errorf("hpa+vpa: invalid options: %w", err)
		}
		h, err := hpa.NewPolicyFactory(opts.HPA)(c)
		if err != nil {
			return nil, fmt.Errorf("hpa+vpa: %w", err)
		}
		v, err := vpa.NewPolicyFactory(vpa.PolicyOptions{Options: opts.VPA})(c)
		if err != nil {
			return nil, fmt.Errorf("hpa+vpa: %w", err)
		}
		return &Naive{h: h, v: v}, nil
	}
}

// Naive is the "hpa+vpa" workload.Policy.
type Naive struct {
	h, v workload.Policy
}

var _ workload.Policy = (*Naive)(nil)

// Name implements workload.Policy.
func (n *Naive) Name() string { return NaiveName }

// ReadsLatency implements workload.LatencyReader: what its HPA and VPA
// read.
func (n *Naive) ReadsLatency() workload.Percentiles {
	return workload.ReadsLatency(n.h) | workload.ReadsLatency(n.v)
}

// Recommend implements workload.Policy: replicas from the HPA, requests from
// the VPA, neither aware of the other.
func (n *Naive) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	hr, err := n.h.Recommend(ctx, obs)
	if err != nil {
		return workload.Recommendation{}, fmt.Errorf("hpa+vpa: %w", err)
	}
	vr, err := n.v.Recommend(ctx, obs)
	if err != nil {
		return workload.Recommendation{}, fmt.Errorf("hpa+vpa: %w", err)
	}
	return workload.Recommendation{
		Replicas: hr.Replicas, Containers: vr.Containers, Source: workload.SourceDefault,
		Reason: "hpa: " + hr.Reason + "; vpa: " + vr.Reason,
	}, nil
}
