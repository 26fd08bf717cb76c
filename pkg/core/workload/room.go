package workload

import (
	"fmt"
	"math"
)

// Room is what the cluster's nodes can hold of one workload's pods now:
// for every node a pod could be placed on, its allocatable resources less
// the requests of every pod that is not the workload's own. The zero Room
// is unknown, and Fit leaves a recommendation alone with it.
//
// It knows nothing of taints, affinities or a cluster autoscaler that adds
// nodes for pending pods: it is the room of the nodes that exist.
type Room struct {
	Nodes []Resources
}

// Known reports whether the room was measured.
func (r Room) Known() bool { return len(r.Nodes) > 0 }

// slots counts the pods of cpu cores and mem bytes the nodes hold.
func (r Room) slots(cpu, mem float64) int {
	n := 0
	for _, node := range r.Nodes {
		k := math.Inf(1)
		if cpu > 0 {
			k = node.CPU / cpu
		}
		if mem > 0 {
			k = math.Min(k, node.Memory/mem)
		}
		if math.IsInf(k, 1) {
			return math.MaxInt32
		}
		// A pod that fills a node exactly fits: a little slack for the
		// rounding of quantities.
		n += int(math.Floor(k + 1e-9))
	}
	return n
}

// largest is the most one pod can request of r on any node.
func (r Room) largest(res Resource) float64 {
	m := 0.0
	for _, node := range r.Nodes {
		m = math.Max(m, node.Get(res))
	}
	return m
}

// fitFloor is the least Fit leaves a sized container with where its policy
// sets no minAllowed: a request of 0 would read as none.
var fitFloor = Resources{CPU: 0.01, Memory: 16 << 20}

// podSize is a pod of the recommendation: the requests of what it sizes
// (scaled by a factor, never below a container's minAllowed or fitFloor)
// and of what it does not.
type podSize struct {
	fixed Resources
	// sized[i] is rec.Containers[i]'s target for the resources it sizes,
	// floor[i] its minAllowed for them (0 elsewhere).
	sized, floor []Resources
}

func (p *podSize) at(r Resource, f float64) float64 {
	v := p.fixed.Get(r)
	for i := range p.sized {
		if t := p.sized[i].Get(r); t > 0 {
			v += math.Max(p.floor[i].Get(r), f*t)
		}
	}
	return v
}

// Fit fits rec to the room the nodes have for it. current are the pods'
// containers as observed: a container that rec does not size for a
// resource counts with its current request. It never raises the replica
// count.
//
//  1. A pod larger than every node's room never runs: each resource it
//     sizes is scaled down to the largest room, CPU and memory alike.
//  2. rec.Replicas pods must be placeable together. When they are not, the
//     pod size is kept and the replica count is what fits at that size,
//     fewer than run now if need be: the size is what the policy asked for
//     latency (a pod smaller than its SLO floor misses the SLO at any
//     load), and more replicas than fit would only split the same room into
//     smaller pods. Only when fewer than minReplicas fit are the pods' CPU
//     lowered until minReplicas do (never below the containers' minAllowed).
//     Memory is not lowered for the total: too little CPU slows a pod, too
//     little memory kills it.
//
// Bounds follow the lowered targets, so that pods already above them are
// resized down to make room for the others. It returns rec unchanged, and
// an empty note, when the room is unknown, everything fits, or no node has
// room for even one pod (pods then wait for a node, as without the fit).
func Fit(rec Recommendation, room Room, c *Constraints, current []ContainerObservation) (Recommendation, string) {
	if !room.Known() || rec.Replicas <= 0 {
		return rec, ""
	}
	p := podSize{sized: make([]Resources, len(rec.Containers)), floor: make([]Resources, len(rec.Containers))}
	for _, co := range current {
		i := -1
		for j := range rec.Containers {
			if rec.Containers[j].Name == co.Name {
				i = j
			}
		}
		pol := c.ContainerPolicy(co.Name)
		for _, r := range []Resource{CPU, Memory} {
			if i >= 0 && pol.Mode != ContainerModeOff && pol.Controls(r) && rec.Containers[i].Target.Get(r) > 0 {
				p.sized[i] = p.sized[i].With(r, rec.Containers[i].Target.Get(r))
				p.floor[i] = p.floor[i].With(r, math.Max(pol.MinAllowed.Get(r), fitFloor.Get(r)))
				continue
			}
			p.fixed = p.fixed.With(r, p.fixed.Get(r)+co.Requests.Get(r))
		}
	}
	factor := Resources{CPU: 1, Memory: 1}
	// 1. The largest node.
	for _, r := range []Resource{CPU, Memory} {
		if big := room.largest(r); p.at(r, 1) > big {
			factor = factor.With(r, largestFactor(func(f float64) bool { return p.at(r, f) <= big }))
		}
	}
	// 2. All the replicas together: the pod size first, then the count.
	n := rec.Replicas
	mem := p.at(Memory, factor.Memory)
	if fit := room.slots(p.at(CPU, factor.CPU), mem); fit < int(n) {
		if room.slots(p.at(CPU, 0), mem) == 0 {
			return rec, ""
		}
		least := c.ClampReplicas(1)
		n = max(int32(fit), least)
		if fit < int(least) {
			f := largestFactor(func(f float64) bool { return room.slots(p.at(CPU, f), mem) >= int(least) })
			factor.CPU = math.Min(factor.CPU, f)
		}
	}
	if factor == (Resources{CPU: 1, Memory: 1}) && n == rec.Replicas {
		return rec, ""
	}
	out := rec
	out.Replicas = n
	out.Containers = append([]ContainerRecommendation(nil), rec.Containers...)
	for i := range out.Containers {
		co := &out.Containers[i]
		for _, r := range []Resource{CPU, Memory} {
			t := p.sized[i].Get(r)
			if t <= 0 || factor.Get(r) >= 1 {
				continue
			}
			v := math.Max(p.floor[i].Get(r), factor.Get(r)*t)
			co.Target = co.Target.With(r, v)
			co.LowerBound = co.LowerBound.With(r, math.Min(co.LowerBound.Get(r), v))
			co.UpperBound = co.UpperBound.With(r, v)
		}
	}
	note := fmt.Sprintf("FittedToNodes(pod cpu %.3g → %.3g", p.at(CPU, 1), p.at(CPU, factor.CPU))
	if factor.Memory < 1 {
		note += fmt.Sprintf(", memory %.4g → %.4g Mi", p.at(Memory, 1)/(1<<20), p.at(Memory, factor.Memory)/(1<<20))
	}
	if n != rec.Replicas {
		note += fmt.Sprintf(", replicas %d → %d", rec.Replicas, n)
	}
	return out, note + ")"
}

// largestFactor is the largest f in [0, 1] for which ok holds, to 1e-4,
// given that ok is monotone (true below some f) and ok(0) holds; 0 when
// only 0 does.
func largestFactor(ok func(float64) bool) float64 {
	lo, hi := 0.0, 1.0
	for hi-lo > 1e-4 {
		mid := (lo + hi) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
