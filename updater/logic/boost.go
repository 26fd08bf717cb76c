package logic

import (
	"math"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// boosted reports whether some container of p still runs with its CPU
// start-up boost.
func (p *Pod) boosted() bool {
	return slices.ContainsFunc(p.Containers, func(c Container) bool { return c.Boost != nil })
}

// boostEnd is when p's boost may end: when it became Ready plus the
// longest duration of its boosted containers' policies (a policy removed
// since admission counts 0). ok is false while p is not Ready.
func boostEnd(w *Workload, p *Pod) (time.Time, bool) {
	if p.ReadySince.IsZero() {
		return time.Time{}, false
	}
	var d time.Duration
	for _, ct := range p.Containers {
		if ct.Boost == nil {
			continue
		}
		if b := w.Constraints.ContainerPolicy(ct.Name).StartupBoost; b != nil {
			d = max(d, b.For)
		}
	}
	return p.ReadySince.Add(d), true
}

// boostCandidate decides for a boosted pod. While the boost lasts the pod
// is left alone, except when it was OOM-killed: then it is updated as any
// pod (memory), with its boosted CPU kept. Once the boost ends, its CPU is
// resized back in place in every mode, never by eviction (an eviction
// would bring back a boosted pod, as in VPA's AEP-7862): to the
// recommendation where it sizes the container's CPU, else to the
// unboosted request and limit. A refused resize back is not sent again
// until it changes.
func boostCandidate(now time.Time, cfg VerticalConfig, w *Workload, p *Pod, onlyInPlace bool, plan *VerticalPlan) (candidate, bool) {
	end, ready := boostEnd(w, p)
	if !ready || now.Before(end) {
		c, ok := assess(now, cfg, w, p, false)
		if !ok || c.reason != ReasonOOMKilled {
			plan.Skips = append(plan.Skips, PodSkip{Pod: p.Name, Reason: SkipStartupBoost, Wanted: ReasonStartupBoostEnded})
			return candidate{}, false
		}
		keepBoostedCPU(p, c.res)
		c.action = ActionEvict
		if w.Mode == v1alpha1.UpdateModeInPlace || w.Mode == v1alpha1.UpdateModeInPlaceOrRecreate {
			c.action = ActionResize
		}
		return c, true
	}
	switch p.Resize {
	case ResizeDeferred, ResizeInProgress:
		plan.Skips = append(plan.Skips, PodSkip{Pod: p.Name, Reason: SkipResizePending, Wanted: ReasonStartupBoostEnded})
		return candidate{}, false
	}
	c := candidate{pod: p, reason: ReasonStartupBoostEnded, action: ActionResize}
	for _, ct := range p.Containers {
		if ct.Boost == nil {
			continue
		}
		pol := w.Constraints.ContainerPolicy(ct.Name)
		newReq := ct.Requests
		lim := ct.Limits
		rec, found := w.Recommendation.Container(ct.Name)
		if target := rec.Target.CPU; found && pol.Controls(workload.CPU) && target > 0 && !math.IsInf(target, 0) {
			newReq.CPU = target
			lim, _ = vpa.Limits(pol, ct.Requests, ct.Limits, newReq)
		} else if ct.Boost.Request > 0 {
			newReq.CPU, lim.CPU = ct.Boost.Request, ct.Boost.Limit
		}
		if newReq != ct.Requests {
			c.diff = math.Max(c.diff, math.Abs(ct.Requests.CPU-newReq.CPU)/newReq.CPU)
			c.res = append(c.res, ContainerResources{Name: ct.Name, Requests: newReq, Limits: lim})
		}
	}
	if len(c.res) == 0 {
		return candidate{}, false
	}
	if p.Resize == ResizeInfeasible && slices.Equal(c.res, p.Refused) {
		plan.Skips = append(plan.Skips, PodSkip{Pod: p.Name, Reason: SkipResizeInfeasible, Wanted: c.reason})
		if onlyInPlace {
			plan.Infeasible = append(plan.Infeasible, InfeasibleResize{Pod: p.Name, Message: p.ResizeMessage})
		}
		return candidate{}, false
	}
	return c, true
}

// keepBoostedCPU puts the boosted containers' current CPU back into res,
// so that an update made during the boost does not end it.
func keepBoostedCPU(p *Pod, res []ContainerResources) {
	for i := range res {
		for _, ct := range p.Containers {
			if ct.Name == res[i].Name && ct.Boost != nil {
				res[i].Requests.CPU, res[i].Limits.CPU = ct.Requests.CPU, ct.Limits.CPU
			}
		}
	}
}
