package learn

import (
	"context"
	"fmt"
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// GuidedResidualPolicy acts in the residual action space on a default
// policy's recommendations, steered by a guide's allocation. Each window it
// takes the legal replica and CPU choices whose CPU capacity (replicas ×
// summed CPU request, ChoiceValue) is nearest the guide's, and the memory
// choice nearest the guide's memory per pod scaled up by the load each pod
// then carries above the guide's (guide replicas / replicas, at least 1);
// of equals, the earlier choices (follow first). The two must be chosen
// together: a guide that runs fewer, larger pods than the default is
// followed by neither dimension alone. With the oracle as the guide it
// approximates what the residual space allows a policy that knew the
// future load; it is a heuristic, not a bound.
type GuidedResidualPolicy struct {
	name        string
	def, guide  workload.Policy
	constraints workload.Constraints
	space       ResidualSpace
}

var _ workload.Policy = (*GuidedResidualPolicy)(nil)

// NewGuidedResidualPolicy steers def towards guide within
// DefaultResidualSpace, for a workload under c.
func NewGuidedResidualPolicy(name string, def, guide workload.Policy, c workload.Constraints) *GuidedResidualPolicy {
	return &GuidedResidualPolicy{name: name, def: def, guide: guide, constraints: c, space: DefaultResidualSpace()}
}

// Name implements workload.Policy.
func (p *GuidedResidualPolicy) Name() string { return p.name }

// Recommend implements workload.Policy.
func (p *GuidedResidualPolicy) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	def, err := p.def.Recommend(ctx, obs)
	if err != nil {
		return workload.Recommendation{}, err
	}
	g, err := p.guide.Recommend(ctx, obs)
	if err != nil {
		return workload.Recommendation{}, fmt.Errorf("guide: %w", err)
	}
	if !HasOpinion(def) {
		return def, nil
	}
	var gCPU, gMem float64
	for _, cr := range g.Containers {
		gCPU += cr.Target.Get(workload.CPU)
		gMem += cr.Target.Get(workload.Memory)
	}
	mask := ResidualMask(&obs, &p.constraints, def, &p.space)
	ch := [NumDimensions]Choice{Follow, Follow, Follow}
	value := func(d Dimension, c Choice) float64 { return ChoiceValue(&obs, &p.constraints, def, d, c) }
	if g.Replicas > 0 && gCPU > 0 {
		want, best := float64(g.Replicas)*gCPU, math.Inf(1)
		for i, rc := range p.space[DimReplicas] {
			if !mask[DimReplicas][i] {
				continue
			}
			n := value(DimReplicas, rc)
			for j, cc := range p.space[DimCPU] {
				if !mask[DimCPU][j] {
					continue
				}
				if dist := math.Abs(n*value(DimCPU, cc) - want); dist < best {
					best, ch[DimReplicas], ch[DimCPU] = dist, rc, cc
				}
			}
		}
	}
	if gMem > 0 {
		want, best := gMem, math.Inf(1)
		if n := value(DimReplicas, ch[DimReplicas]); n > 0 && g.Replicas > 0 {
			want *= math.Max(1, float64(g.Replicas)/n)
		}
		for i, c := range p.space[DimMemory] {
			if !mask[DimMemory][i] {
				continue
			}
			if dist := math.Abs(value(DimMemory, c) - want); dist < best {
				best, ch[DimMemory] = dist, c
			}
		}
	}
	return ApplyResidual(&obs, &p.constraints, def, ch), nil
}
