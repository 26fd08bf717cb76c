package faas

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/safeguard"
)

// Floors of a harvested allocation: a function harvested to nothing would
// never finish the invocation that should tell the safeguard it is busy.
const (
	MinCPU = 0.1
)

// harvester is the rule, each window:
//  1. every function's donor level: a function whose recent peak usage
//     (Options.PeakWindows) stays under Threshold × its user allocation in
//     a resource gets Headroom × that peak, within [recent peak, user]
//     (and at least MinCPU, or memory for one invocation); otherwise its
//     user allocation;
//  2. the safeguard (pkg/rl/safeguard, with Restore) gives a function its
//     user allocation back, whatever step 1 said, when the allocation in
//     force is below the user's and its recent peak reached Threshold of
//     it;
//  3. the node's free room (capacity minus the allocations of steps 1–2)
//     goes to functions whose last window needed more than that (running
//     and waiting invocations, a core and their memory each), in
//     proportion to the shortfall and at most up to the need.
type harvester struct {
	n        *Node
	o        Options
	guards   []workload.Policy
	allocs   []workload.Resources
	restores int
}

// rule is step 1 as a workload.Policy of one function, so that the
// safeguard wraps it as it wraps any policy.
type rule struct {
	f     *Function
	o     Options
	peaks []workload.Resources // ring of the last PeakWindows peaks
	next  int
}

func (r *rule) Name() string { return "faasrm-rule" }

func (r *rule) Recommend(_ context.Context, obs workload.Observation) (workload.Recommendation, error) {
	c := obs.Containers[0]
	if len(r.peaks) < r.o.PeakWindows {
		r.peaks = append(r.peaks, c.Peak)
	} else {
		r.peaks[r.next] = c.Peak
		r.next = (r.next + 1) % r.o.PeakWindows
	}
	var peak workload.Resources
	for _, p := range r.peaks {
		peak.CPU, peak.Memory = math.Max(peak.CPU, p.CPU), math.Max(peak.Memory, p.Memory)
	}
	user := r.f.User
	donor := func(peak, user, floor float64) float64 {
		if peak >= r.o.Threshold*user {
			return user
		}
		return math.Min(user, math.Max(math.Max(peak*r.o.Headroom, peak), floor))
	}
	t := workload.Resources{
		CPU:    donor(peak.CPU, user.CPU, MinCPU),
		Memory: donor(peak.Memory, user.Memory, r.f.BaseMemory+r.f.InvocationMemory),
	}
	return workload.Recommendation{
		Replicas: obs.Replicas, Source: workload.SourceAgent, Reason: "harvest rule",
		Containers: []workload.ContainerRecommendation{{Name: c.Name, Target: t, LowerBound: t, UpperBound: t, UncappedTarget: t}},
	}, nil
}

// newHarvester returns the rule, behind the safeguard when guarded.
func newHarvester(n *Node, o Options, guarded bool) (*harvester, error) {
	h := &harvester{n: n, o: o, allocs: make([]workload.Resources, len(n.Functions))}
	for i := range n.Functions {
		f := &n.Functions[i]
		r := &rule{f: f, o: o}
		if !guarded {
			h.guards = append(h.guards, r)
			h.allocs[i] = f.User
			continue
		}
		g, err := safeguard.Wrap(r, safeguard.Options{
			Threshold: o.Threshold, Window: o.SafeguardWindows, Restore: true,
			UserAllocation: func(string) (workload.Resources, bool) { return f.User, true },
		})
		if err != nil {
			return nil, fmt.Errorf("faas: %w", err)
		}
		h.guards = append(h.guards, g)
		h.allocs[i] = f.User
	}
	return h, nil
}

// allocate returns the allocations for window w from the stats of w−1.
func (h *harvester) allocate(w int, stats []windowStats) ([]workload.Resources, error) {
	t0 := time.Unix(0, 0).UTC()
	base := make([]workload.Resources, len(h.allocs))
	var sum workload.Resources
	for i, g := range h.guards {
		cur := h.allocs[i]
		obs := workload.Observation{
			Time: t0.Add(time.Duration(w) * h.o.Step), Window: h.o.Step, Replicas: 1, ReadyReplicas: 1, Samples: 1,
			Containers: []workload.ContainerObservation{{
				Name: "function", Requests: cur, Limits: cur,
				Usage: workload.Resources{CPU: stats[i].meanCPU, Memory: stats[i].peakUsed.Memory},
				Peak:  stats[i].peakUsed,
			}},
		}
		rec, err := g.Recommend(context.Background(), obs)
		if err != nil {
			return nil, fmt.Errorf("faas: function %s, window %d: %w", h.n.Functions[i].Name, w, err)
		}
		if rec.Source == workload.SourceSafeguard && (cur.CPU < h.n.Functions[i].User.CPU || cur.Memory < h.n.Functions[i].User.Memory) {
			h.restores++ // a harvested function given its allocation back
		}
		base[i] = rec.Containers[0].Target
		sum = sum.Add(base[i])
	}
	// Step 3, one resource at a time.
	for _, res := range []workload.Resource{workload.CPU, workload.Memory} {
		free := h.n.Capacity.Get(res) - sum.Get(res)
		short, total := make([]float64, len(base)), 0.0
		for i := range base {
			short[i] = math.Max(stats[i].peakNeed.Get(res)-base[i].Get(res), 0)
			total += short[i]
		}
		if free <= 0 || total <= 0 {
			continue
		}
		share := math.Min(1, free/total)
		for i := range base {
			if short[i] > 0 {
				base[i] = base[i].With(res, base[i].Get(res)+share*short[i])
			}
		}
	}
	copy(h.allocs, base)
	return base, nil
}
