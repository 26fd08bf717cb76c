package logic

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

// SmallWorkloadPolicy says what happens to a workload that cannot keep
// MinReplicas pods alive while one of its pods is evicted: every
// single-replica workload, and any workload with at most MinReplicas
// configured replicas.
type SmallWorkloadPolicy string

const (
	// SmallWorkloadNever never evicts such pods (the default, as VPA's
	// --min-replicas): they get new resources by in-place resize
	// (InPlaceOrRecreate) or when they are next recreated for another
	// reason (a rollout), through the admission controller.
	SmallWorkloadNever SmallWorkloadPolicy = "Never"
	// SmallWorkloadOutsideBounds accepts a short outage to fix a pod that
	// is badly sized: outside [lowerBound, upperBound], OOM-killed, or whose
	// in-place resize failed. One pod at a time, only while every configured
	// replica is alive, never for drift alone.
	SmallWorkloadOutsideBounds SmallWorkloadPolicy = "OutsideBounds"
)

// UpdateReason says why a pod is updated; it labels metrics and events.
type UpdateReason string

const (
	ReasonOutsideBounds    UpdateReason = "OutsideBounds"
	ReasonOOMKilled        UpdateReason = "OOMKilled"
	ReasonDrift            UpdateReason = "Drift"
	ReasonResizeInfeasible UpdateReason = "ResizeInfeasible"
	ReasonResizeDeferred   UpdateReason = "ResizeDeferred"
	// ReasonStartupBoostEnded: the pod is Ready and its CPU start-up
	// boost's duration has passed; its CPU goes back, in place.
	ReasonStartupBoostEnded UpdateReason = "StartupBoostEnded"
)

// urgent reasons bypass the drift age and come first.
func (r UpdateReason) urgent() bool { return r != ReasonDrift }

// Action is how a pod is updated.
type Action string

const (
	ActionEvict  Action = "Evict"
	ActionResize Action = "Resize"
)

// VerticalConfig holds the updater-wide rules for vertical changes.
type VerticalConfig struct {
	// MinReplicas: an eviction never leaves fewer alive pods than this.
	MinReplicas int32
	// SmallWorkloads is the policy for workloads that cannot satisfy
	// MinReplicas during an eviction.
	SmallWorkloads SmallWorkloadPolicy
	// DriftThreshold is the relative difference |request-target|/target
	// above which a pod within bounds is updated once it is DriftMinAge old.
	DriftThreshold float64
	DriftMinAge    time.Duration
	// OOMWindow: an OOM kill this recent makes a pod urgent when the
	// recommended memory exceeds its request.
	OOMWindow time.Duration
	// ResizeDeferredTimeout: a resize deferred this long falls back to
	// eviction; an infeasible one falls back at once.
	ResizeDeferredTimeout time.Duration
}

// DefaultVerticalConfig returns the defaults the flags document.
func DefaultVerticalConfig() VerticalConfig {
	return VerticalConfig{
		MinReplicas:           2,
		SmallWorkloads:        SmallWorkloadNever,
		DriftThreshold:        0.1,
		DriftMinAge:           12 * time.Hour,
		OOMWindow:             10 * time.Minute,
		ResizeDeferredTimeout: 5 * time.Minute,
	}
}

// Validate reports every invalid field.
func (c VerticalConfig) Validate() error {
	var errs []error
	if c.MinReplicas < 1 {
		errs = append(errs, fmt.Errorf("min replicas must be >= 1, got %d", c.MinReplicas))
	}
	switch c.SmallWorkloads {
	case SmallWorkloadNever, SmallWorkloadOutsideBounds:
	default:
		errs = append(errs, fmt.Errorf("small-workload policy must be %s or %s, got %q", SmallWorkloadNever, SmallWorkloadOutsideBounds, c.SmallWorkloads))
	}
	if !(c.DriftThreshold > 0) || math.IsInf(c.DriftThreshold, 0) {
		errs = append(errs, fmt.Errorf("drift threshold must be > 0, got %g", c.DriftThreshold))
	}
	if c.DriftMinAge < 0 || c.OOMWindow < 0 || c.ResizeDeferredTimeout < 0 {
		errs = append(errs, errors.New("durations must be >= 0"))
	}
	return errors.Join(errs...)
}

// ContainerResources are the values a resize sets on one container.
type ContainerResources struct {
	Name     string
	Requests workload.Resources
	Limits   workload.Resources
}

// PodUpdate is one decided change to a pod.
type PodUpdate struct {
	Pod    string
	Action Action
	Reason UpdateReason
	// Resources lists the containers whose values change (resizes use it;
	// an evicted pod gets them from the admission controller).
	Resources []ContainerResources
}

// PodSkip is a pod that needs an update but did not get one this time.
type PodSkip struct {
	Pod    string
	Reason SkipReason
	// Wanted is why it needed an update.
	Wanted UpdateReason
}

// VerticalPlan is the outcome of Vertical.Decide, in priority order.
type VerticalPlan struct {
	Updates []PodUpdate
	Skips   []PodSkip
	// Skip is set when the whole workload was skipped.
	Skip SkipReason
	// Infeasible lists, in InPlace mode, the pods whose resize to the
	// current recommendation is infeasible and is not sent again, by
	// name; the controller reports them in the ResizeInfeasible condition.
	Infeasible []InfeasibleResize
}

// InfeasibleResize is a pod whose in-place resize cannot be done.
type InfeasibleResize struct {
	Pod     string
	Message string
}

// Guards are the cluster-wide conditions of one loop.
type Guards struct {
	// AdmissionFresh: the admission controller's heartbeat is current.
	// Without it an evicted pod would come back unchanged, so evictions
	// stop; in-place resizes do not need it and continue.
	AdmissionFresh bool
	// Global is shared by every workload; Workload is this one's bucket.
	// Each eviction takes a token from both.
	Global, Workload *TokenBucket
	// Resize is shared by every workload; each in-place resize takes a
	// token. Nil means unlimited.
	Resize *TokenBucket
}

type candidate struct {
	pod    *Pod
	reason UpdateReason
	diff   float64
	res    []ContainerResources
	action Action
}

// DecideVertical decides, at now, which pods of w to update and how. It
// assumes the recommendation is fresh (the caller applies the staleness
// guard to both dimensions) and consumes rate-limit tokens for the
// evictions it returns.
func DecideVertical(now time.Time, cfg VerticalConfig, w *Workload, g Guards) VerticalPlan {
	var plan VerticalPlan
	switch w.Mode {
	case v1alpha1.UpdateModeRecreate, v1alpha1.UpdateModeAuto, v1alpha1.UpdateModeInPlaceOrRecreate, v1alpha1.UpdateModeInPlace:
	default:
		plan.Skip = SkipUpdateModeOff
		return plan
	}
	if !w.HasRecommendation || len(w.Recommendation.Containers) == 0 {
		plan.Skip = SkipNoRecommendation
		return plan
	}
	// onlyInPlace (InPlace mode) never evicts: what InPlaceOrRecreate
	// would fall back to eviction for waits (a deferred resize, which the
	// kubelet retries) or is reported (an infeasible one).
	onlyInPlace := w.Mode == v1alpha1.UpdateModeInPlace
	inPlace := onlyInPlace || w.Mode == v1alpha1.UpdateModeInPlaceOrRecreate

	var cands []candidate
	for i := range w.Pods {
		p := &w.Pods[i]
		if p.Terminating {
			continue
		}
		if p.boosted() {
			if c, ok := boostCandidate(now, cfg, w, p, onlyInPlace, &plan); ok {
				cands = append(cands, c)
			}
			continue
		}
		c, ok := assess(now, cfg, w, p, inPlace)
		if !ok {
			continue
		}
		c.action = ActionEvict
		if inPlace && !onlyInPlace && !p.Alive && c.reason == ReasonOOMKilled {
			// A pod dead of OOM is replaced, not resized: kubelets up to
			// at least 1.36 raise a container's memory limit resized
			// while it is not running but leave the pod's cgroup at the
			// old limit, so every restart is killed again
			// (kubernetes/kubernetes#138760; on the real node, e2e-node:
			// a 160Mi app resized from 128Mi to 2Gi OOM-looped for 6
			// minutes under a pod cgroup still at 128Mi). Its
			// replacement is admitted with the raised memory, and it
			// serves nothing meanwhile.
			cands = append(cands, c)
			continue
		}
		if inPlace {
			switch p.Resize {
			case ResizeInfeasible:
				c.reason = ReasonResizeInfeasible
				if onlyInPlace {
					// The spec holds the infeasible request (the kubelet's
					// case), or Refused does (the API server's): the same
					// request again would fail again. A new recommendation
					// is a new request, worth one more try.
					if len(c.res) == 0 || slices.Equal(c.res, p.Refused) {
						plan.Skips = append(plan.Skips, PodSkip{Pod: p.Name, Reason: SkipResizeInfeasible, Wanted: c.reason})
						plan.Infeasible = append(plan.Infeasible, InfeasibleResize{Pod: p.Name, Message: p.ResizeMessage})
						continue
					}
					c.action = ActionResize
				}
			case ResizeDeferred:
				switch {
				case asksLess(p, c.res):
					// The recommendation fell below the deferred request:
					// the smaller resize may fit where that one did not.
					// The kubelet retries only the request in the spec; on
					// the real node a second pod's resize to 662m waited
					// out the run at 200m, saturated, beside a target of
					// 527–631m the node had room for (docs/real-node-rounds.md,
					// round eighteen).
					c.action = ActionResize
				case !onlyInPlace && now.Sub(p.ResizeSince) >= cfg.ResizeDeferredTimeout:
					c.reason = ReasonResizeDeferred
				default:
					plan.Skips = append(plan.Skips, PodSkip{Pod: p.Name, Reason: SkipResizePending, Wanted: c.reason})
					continue
				}
			case ResizeInProgress:
				plan.Skips = append(plan.Skips, PodSkip{Pod: p.Name, Reason: SkipResizeInProgress, Wanted: c.reason})
				continue
			default:
				if len(c.res) > 0 {
					c.action = ActionResize
				}
			}
		}
		if onlyInPlace && c.action != ActionResize {
			plan.Skips = append(plan.Skips, PodSkip{Pod: p.Name, Reason: SkipEvictionDisabled, Wanted: c.reason})
			continue
		}
		cands = append(cands, c)
	}
	// Priority: urgent reasons (outside bounds, OOM, failed resize) first,
	// then the largest relative difference, then the oldest pod; the name
	// makes the order total so decisions are reproducible.
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if ua, ub := a.reason.urgent(), b.reason.urgent(); ua != ub {
			if ua {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.diff, a.diff); c != 0 {
			return c
		}
		if c := a.pod.Started.Compare(b.pod.Started); c != 0 {
			return c
		}
		return cmp.Compare(a.pod.Name, b.pod.Name)
	})

	alive := int32(0)
	for i := range w.Pods {
		if w.Pods[i].Alive {
			alive++
		}
	}
	small := w.Replicas <= cfg.MinReplicas
	// unplaced: a pod of the workload waits for a node. The cluster has
	// no room for it; a pod evicted now would come back with the same
	// recommendation and wait too, and the workload would lose a serving
	// replica instead of gaining a resized one.
	unplaced := slices.ContainsFunc(w.Pods, func(p Pod) bool { return p.Unschedulable && !p.Terminating })
	for _, c := range cands {
		if c.action == ActionResize {
			// An in-place resize keeps the pod: no live-replica floor, no
			// eviction budget, no dependency on the admission controller.
			// It has its own budget: one loop must not resize every pod of
			// a large fleet at once (a burst of API writes, and of kubelet
			// work across the nodes).
			if !g.Resize.Ready(now) {
				plan.Skips = append(plan.Skips, PodSkip{Pod: c.pod.Name, Reason: SkipResizeRateLimit, Wanted: c.reason})
				continue
			}
			g.Resize.Take(now)
			plan.Updates = append(plan.Updates, PodUpdate{Pod: c.pod.Name, Action: ActionResize, Reason: c.reason, Resources: c.res})
			continue
		}
		skip := func(r SkipReason) {
			plan.Skips = append(plan.Skips, PodSkip{Pod: c.pod.Name, Reason: r, Wanted: c.reason})
		}
		if !g.AdmissionFresh {
			skip(SkipAdmissionStale)
			continue
		}
		after := alive
		if c.pod.Alive {
			after--
		}
		// A pod OOM-killed into CrashLoopBackOff serves nothing: evicting it
		// takes nothing from the live replicas, and its replacement is
		// admitted with the raised memory. The live-replica guards below
		// would otherwise hold it at the memory it dies at for as long as
		// it, or the other replicas, are down.
		deadOOM := !c.pod.Alive && c.reason == ReasonOOMKilled
		// Evicting a pod that holds no room on a node (it is itself
		// unplaced) or serves nothing (dead of OOM) loses nothing.
		if unplaced && !deadOOM && !c.pod.Unschedulable {
			skip(SkipUnschedulable)
			continue
		}
		switch {
		case deadOOM:
		case small:
			if cfg.SmallWorkloads != SmallWorkloadOutsideBounds || !c.reason.urgent() || alive < w.Replicas || evictions(plan) > 0 {
				skip(SkipMinReplicas)
				continue
			}
		case after < cfg.MinReplicas:
			skip(SkipMinReplicas)
			continue
		}
		if !g.Global.Ready(now) {
			skip(SkipGlobalRateLimit)
			continue
		}
		if !g.Workload.Ready(now) {
			skip(SkipWorkloadRateLimit)
			continue
		}
		g.Global.Take(now)
		g.Workload.Take(now)
		alive = after
		plan.Updates = append(plan.Updates, PodUpdate{Pod: c.pod.Name, Action: ActionEvict, Reason: c.reason, Resources: c.res})
	}
	return plan
}

func evictions(p VerticalPlan) int {
	n := 0
	for _, u := range p.Updates {
		if u.Action == ActionEvict {
			n++
		}
	}
	return n
}

// assess decides whether pod p needs an update and computes the resources
// it should get. ok is false when it needs none. Resize conditions count
// only in the in-place modes (InPlaceOrRecreate, InPlace), where the
// updater issued the resize.
// asksLess reports whether res, the resources a resize of p would send,
// asks for less of some resource than p's spec and for more of none.
func asksLess(p *Pod, res []ContainerResources) bool {
	less := false
	for _, r := range res {
		i := slices.IndexFunc(p.Containers, func(c Container) bool { return c.Name == r.Name })
		if i < 0 {
			return false
		}
		spec := p.Containers[i].Requests
		for _, k := range []workload.Resource{workload.CPU, workload.Memory} {
			switch want, has := r.Requests.Get(k), spec.Get(k); {
			case want > has:
				return false
			case want < has:
				less = true
			}
		}
	}
	return less
}

func assess(now time.Time, cfg VerticalConfig, w *Workload, p *Pod, inPlace bool) (candidate, bool) {
	c := candidate{pod: p}
	var outside, oom bool
	for _, ct := range p.Containers {
		rec, found := w.Recommendation.Container(ct.Name)
		if !found {
			continue
		}
		pol := w.Constraints.ContainerPolicy(ct.Name)
		if pol.Mode == workload.ContainerModeOff {
			continue
		}
		newReq := ct.Requests
		for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
			if !pol.Controls(r) {
				continue
			}
			target := rec.Target.Get(r)
			if !(target > 0) || math.IsInf(target, 0) {
				continue
			}
			req := ct.Requests.Get(r)
			lo, hi := rec.LowerBound.Get(r), rec.UpperBound.Get(r)
			if (lo > 0 && req < lo) || (hi > 0 && req > hi) || req == 0 {
				outside = true
			}
			if r == workload.Memory && !ct.LastOOMKill.IsZero() && now.Sub(ct.LastOOMKill) <= cfg.OOMWindow && target > req {
				oom = true
			}
			c.diff = math.Max(c.diff, math.Abs(req-target)/target)
			newReq = newReq.With(r, target)
		}
		if newReq != ct.Requests {
			lim, _ := vpa.Limits(pol, ct.Requests, ct.Limits, newReq)
			c.res = append(c.res, ContainerResources{Name: ct.Name, Requests: newReq, Limits: lim})
		}
	}
	switch {
	case inPlace && (p.Resize == ResizeInfeasible || p.Resize == ResizeDeferred):
		// The spec already holds what a resize asked for, so the pod may
		// look up to date; what matters is that the kubelet has not
		// applied it. The caller decides between waiting and falling back.
		c.reason = ReasonResizeInfeasible
		if p.Resize == ResizeDeferred {
			c.reason = ReasonResizeDeferred
		}
		return c, true
	case oom:
		c.reason = ReasonOOMKilled
	case outside:
		c.reason = ReasonOutsideBounds
	case c.diff >= cfg.DriftThreshold && now.Sub(p.Started) >= cfg.DriftMinAge:
		c.reason = ReasonDrift
	default:
		return c, false
	}
	if len(c.res) == 0 {
		// Nothing would change (e.g. bounds inconsistent with the target):
		// evicting would bring the pod back identical.
		return c, false
	}
	return c, true
}
