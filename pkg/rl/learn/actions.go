package learn

import (
	"fmt"
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/reward"
	"github.com/aware-k8s/aware/pkg/rl/safeguard"
)

// Action is one of the agent's discrete decisions.
type Action int

const (
	NoOp Action = iota
	AddReplica
	RemoveReplica
	RaiseCPU
	LowerCPU
	RaiseMemory
	LowerMemory
	// NumActions is the size of the action space.
	NumActions
)

func (a Action) String() string {
	switch a {
	case NoOp:
		return "NoOp"
	case AddReplica:
		return "AddReplica"
	case RemoveReplica:
		return "RemoveReplica"
	case RaiseCPU:
		return "RaiseCPU"
	case LowerCPU:
		return "LowerCPU"
	case RaiseMemory:
		return "RaiseMemory"
	case LowerMemory:
		return "LowerMemory"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// vertical returns the resource and direction (+1 up, -1 down) of a
// vertical action; ok is false for the others.
func (a Action) vertical() (r workload.Resource, dir float64, ok bool) {
	switch a {
	case RaiseCPU:
		return workload.CPU, 1, true
	case LowerCPU:
		return workload.CPU, -1, true
	case RaiseMemory:
		return workload.Memory, 1, true
	case LowerMemory:
		return workload.Memory, -1, true
	}
	return "", 0, false
}

// Steps are the sizes of the vertical actions as fractions of the current
// request.
type Steps struct {
	CPU, Memory float64
}

// DefaultSteps are 10% of the current request: small enough that one wrong
// step costs little, large enough that a few steps reach a new load level.
func DefaultSteps() Steps { return Steps{CPU: 0.1, Memory: 0.1} }

func (s Steps) of(r workload.Resource) float64 {
	if r == workload.Memory {
		return s.Memory
	}
	return s.CPU
}

// Floors below which a downward step is illegal even without minAllowed:
// a request that decays towards zero would starve the pod long before the
// reward noticed.
const (
	MinCPUCores    = 0.01     // 10m
	MinMemoryBytes = 16 << 20 // 16Mi
)

func floor(r workload.Resource) float64 {
	if r == workload.Memory {
		return MinMemoryBytes
	}
	return MinCPUCores
}

// Mask returns the legal actions (true = legal) for obs under c. NoOp is
// always legal. Replica actions respect min/max replicas (min at least 1);
// vertical actions are legal when at least one container controls the
// resource (mode Auto, listed in controlledResources), has a request to step
// from, and is not already at its bound (minAllowed/maxAllowed or floor).
func Mask(obs *workload.Observation, c *workload.Constraints, steps Steps) []bool {
	m := make([]bool, NumActions)
	m[NoOp] = true
	m[AddReplica] = c.MaxReplicas == 0 || obs.Replicas < c.MaxReplicas
	m[RemoveReplica] = obs.Replicas > max(c.MinReplicas, 1)
	for _, a := range []Action{RaiseCPU, LowerCPU, RaiseMemory, LowerMemory} {
		r, dir, _ := a.vertical()
		for _, ct := range obs.Containers {
			p := c.ContainerPolicy(ct.Name)
			cur := ct.Requests.Get(r)
			if !p.Controls(r) || cur <= 0 {
				continue
			}
			if next := stepped(cur, dir, steps.of(r), r, p); math.Abs(next-cur) > 1e-9*cur {
				m[a] = true
				break
			}
		}
	}
	return m
}

// stepped applies one step to cur and clamps it to the container's bounds.
func stepped(cur, dir, step float64, r workload.Resource, p workload.ContainerPolicy) float64 {
	next := cur * (1 + dir*step)
	lo, hi := math.Max(p.MinAllowed.Get(r), floor(r)), p.MaxAllowed.Get(r)
	if dir < 0 && next < lo {
		next = math.Min(lo, cur) // never raise on a downward step
	}
	if dir > 0 && hi > 0 && next > hi {
		next = math.Max(hi, cur) // never lower on an upward step
	}
	return next
}

// Apply returns the allocation after action a: the current replicas and
// requests of every observed container, with a's change applied to the
// controlled containers, and every controlled amount clamped to its bounds. The agent gives point
// decisions, so bounds equal the target. Illegal actions (per Mask) leave
// the allocation unchanged, except replicas, which are clamped to c.
func Apply(obs *workload.Observation, c *workload.Constraints, a Action, steps Steps) workload.Recommendation {
	rec := workload.Recommendation{Replicas: c.ClampReplicas(obs.Replicas)}
	switch a {
	case AddReplica:
		rec.Replicas = c.ClampReplicas(obs.Replicas + 1)
	case RemoveReplica:
		rec.Replicas = c.ClampReplicas(obs.Replicas - 1)
	}
	r, dir, vertical := a.vertical()
	for _, ct := range obs.Containers {
		target := ct.Requests
		p := c.ContainerPolicy(ct.Name)
		if cur := ct.Requests.Get(r); vertical && p.Controls(r) && cur > 0 {
			target = target.With(r, stepped(cur, dir, steps.of(r), r, p))
		}
		// Every controlled amount lands within minAllowed/maxAllowed, even
		// one this action does not touch: the recommender rejects an
		// answer outside the bounds as a whole (pkg/kube/agentclient.Within), and a
		// current request outside them (the bounds changed) should move in.
		for _, res := range []workload.Resource{workload.CPU, workload.Memory} {
			if !p.Controls(res) {
				continue
			}
			v := math.Max(target.Get(res), p.MinAllowed.Get(res))
			if hi := p.MaxAllowed.Get(res); hi > 0 {
				v = math.Min(v, hi)
			}
			target = target.With(res, v)
		}
		rec.Containers = append(rec.Containers, workload.ContainerRecommendation{
			Name: ct.Name, Target: target, LowerBound: target, UpperBound: target, UncappedTarget: target,
		})
	}
	return rec
}

// NearestAction maps a recommendation (typically the default's) to the
// legal action that moves the allocation most like it does: the dimension
// with the largest relative change wins, provided it is at least one
// replica or half a vertical step; otherwise NoOp. It is the teacher's
// label for behaviour cloning and the action recorded for a transition the
// defaults made.
func NearestAction(obs *workload.Observation, c *workload.Constraints, rec workload.Recommendation, steps Steps, mask []bool) Action {
	legal := func(a Action) bool { return mask == nil || (int(a) < len(mask) && mask[a]) }
	best, score := NoOp, 0.0
	consider := func(a Action, s float64) {
		if legal(a) && s > score {
			best, score = a, s
		}
	}
	if rec.Replicas > 0 {
		dr := float64(rec.Replicas - obs.Replicas)
		rel := math.Abs(dr) / float64(max(obs.Replicas, 1))
		if dr >= 1 {
			consider(AddReplica, rel)
		} else if dr <= -1 {
			consider(RemoveReplica, rel)
		}
	}
	cpu, mem := relativeChange(obs, c, rec)
	for _, v := range []struct {
		rel      float64
		step     float64
		up, down Action
	}{{cpu, steps.CPU, RaiseCPU, LowerCPU}, {mem, steps.Memory, RaiseMemory, LowerMemory}} {
		if math.Abs(v.rel) < v.step/2 {
			continue
		}
		if v.rel > 0 {
			consider(v.up, v.rel)
		} else {
			consider(v.down, -v.rel)
		}
	}
	return best
}

// SafeguardThreshold is FaaSRM's rule: a downward vertical step is refused
// when the window's peak usage reached this fraction of the allocation
// (pkg/rl/safeguard's default, whose rule the mask applies).
const SafeguardThreshold = safeguard.DefaultThreshold

// SafeguardRefuses reports whether the safeguard refuses action a in obs:
// a is a downward vertical step and some container it would shrink peaked
// at SafeguardThreshold of its request or more.
func SafeguardRefuses(obs *workload.Observation, c *workload.Constraints, a Action) bool {
	r, dir, ok := a.vertical()
	if !ok || dir > 0 {
		return false
	}
	for _, ct := range obs.Containers {
		req := ct.Requests.Get(r)
		p := c.ContainerPolicy(ct.Name)
		if p.Controls(r) && safeguard.Hot(ct.Peak.Get(r), req, SafeguardThreshold) {
			return true
		}
	}
	return false
}

// SafeguardRecommendation is what the safeguard applies when it refuses a
// step: the allocation in force, as NoOp leaves it (replicas and requests
// unchanged, within the constraints), from SourceSafeguard. The agent knows
// no user allocation other than the one in force, so that is what FaaSRM's
// "restore the user's allocation" keeps. It is not the default's
// recommendation: that may itself shrink the container, by far more than
// one step (the fused default, with no memory sample yet, recommends the
// VPA's pod minimum), and so turn a refused 10% step into a cut of a
// container that is at its limit, the very mistake the rule exists to
// prevent. The action a learner should record for it is NoOp.
func SafeguardRecommendation(obs *workload.Observation, c *workload.Constraints, steps Steps) workload.Recommendation {
	rec := Apply(obs, c, NoOp, steps)
	rec.Source = workload.SourceSafeguard
	return rec
}

// Reward computes AWARE's reward for the window that next describes (the
// outcome of the previous decision), with pkg/rl/reward. Rates stand in for
// counts: only the lost fraction matters.
func Reward(next *workload.Observation, alpha float64) (reward.Terms, error) {
	var in reward.Inputs
	for _, ct := range next.Containers {
		in.CPUUsed += ct.Usage.CPU
		in.CPUAllocated += ct.Requests.CPU
		in.MemoryUsed += ct.Usage.Memory
		in.MemoryAllocated += ct.Requests.Memory
		in.OOMKills += ct.OOMKills
	}
	in.P95, in.SLO = next.Latency.P95, next.SLO
	in.Requests, in.Lost = next.RequestRate, math.Min(next.ErrorRate, next.RequestRate)
	t, err := reward.Compute(in, reward.Options{Alpha: &alpha})
	if err != nil {
		return reward.Terms{}, fmt.Errorf("reward: %w", err)
	}
	return t, nil
}

// DefaultScalingCost is ScalingCost's charge per replica changed, in
// reward units: 3% of a typical window's reward (about 0.65), enough that
// adding a replica in one window and removing it in the next never pays,
// small against the SLO term a needed scale-up protects. It was chosen on
// the demo before the safeguard and default fixes, when it cut the trained
// agent's horizontal changes 3.8x; after them it cuts them only 6% and is
// due to be re-chosen (docs/results/evidence.md, "Churn and retraining"). The
// trainer (pkg/lab/train) and the serving agent's online updates
// (Agent.Outcome) both charge it.
const DefaultScalingCost = 0.02

// ScalingCost is what the learner is charged, in reward units, for the
// replicas a decision adds or removes: perReplica times the change from
// obs to the applied recommendation (0 when it leaves replicas alone or
// names none). AWARE's reward (pkg/rl/reward) scores a window by utilisation
// and SLO only, so a policy that adds a replica in one window and removes
// it in the next loses nothing by it; in a cluster each change starts or
// drains a pod. The HPA avoids that flapping with a tolerance and a
// scale-down stabilization window; the learner gets the same incentive as
// a cost in its training reward, so that it changes replicas only when the
// change pays for itself. Episode rewards and the lifecycle's gates keep
// the paper's reward.
func ScalingCost(obs *workload.Observation, applied workload.Recommendation, perReplica float64) float64 {
	if applied.Replicas <= 0 || perReplica <= 0 {
		return 0
	}
	d := int64(applied.Replicas) - int64(obs.Replicas)
	if d < 0 {
		d = -d
	}
	return perReplica * float64(d)
}

// The residual learner's charges besides ScalingCost, in reward units: per
// decision that resizes the pods, and per window whose p95 latency is above
// the SLO. The trainer's defaults (pkg/lab/train) and the serving agent's
// online updates in the residual action space use the same.
const (
	DefaultVerticalCost = 0.05
	DefaultSLOCost      = 0.5
)

// VerticalChange reports whether applying rec resizes the pods of obs: a
// controlled container's request lies outside rec's bounds and differs
// from its target (workload.ContainerRecommendation.Changes).
func VerticalChange(obs *workload.Observation, c *workload.Constraints, rec workload.Recommendation) bool {
	for _, ct := range obs.Containers {
		cr, ok := rec.Container(ct.Name)
		if !ok {
			continue
		}
		p := c.ContainerPolicy(ct.Name)
		for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
			if p.Controls(r) && cr.Changes(r, ct.Requests.Get(r)) {
				return true
			}
		}
	}
	return false
}

// ViolatesSLO reports whether the window of obs had its p95 latency above
// its SLO.
func ViolatesSLO(obs *workload.Observation) bool {
	return obs.SLO > 0 && obs.RequestRate > 0 && obs.Latency.P95 > obs.SLO
}
