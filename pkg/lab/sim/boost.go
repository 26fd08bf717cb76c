package sim

import "github.com/aware-k8s/aware/pkg/core/workload"

// The CPU start-up boost (the app's container policy's StartupBoost, which
// the admission controller applies to new pods and the updater ends): a
// new pod requests Boosted(request) CPU, with its limit in proportion
// under RequestsAndLimits, until it is Ready and the boost's duration has
// passed; then its CPU goes back to the unboosted request in place. The
// scheduler reserves the boosted request, so a boosted pod starts only
// where that much CPU is free and is guaranteed it (its CFS share); the
// cost counts it until the boost ends.
//
// What the boost buys is the app's StartupCPUShare: that share of
// StartupDelay (measured at the unboosted request) is CPU-bound and
// shrinks with the CPU the pod gets, the rest (image pull, I/O) does not.

// podBoost is a boosted pod's unboosted request and limit.
type podBoost struct {
	req, lim workload.Resources
}

// admitBoost boosts a pod the admission controller sees: a new one, or one
// recreated by a rollout. It is a no-op without a boost policy.
func (s *Simulator) admitBoost(p *pod) {
	p.boost = nil
	b := s.spec.policy.StartupBoost
	if b == nil {
		return
	}
	base := p.req.CPU
	req, lim := b.Boosted(base), p.lim.CPU
	if lim > 0 {
		if s.spec.policy.ControlledValues != workload.RequestsOnly && base > 0 {
			lim *= req / base
		} else {
			req = min(req, lim)
		}
	}
	if !(req > base) {
		return
	}
	p.boost = &podBoost{req: p.req, lim: p.lim}
	p.req.CPU, p.lim.CPU = req, lim
}

// startDelay is how long pod p takes from scheduling to Ready: the app's
// StartupDelay, its CPU-bound share divided by the boost's factor.
func (s *Simulator) startDelay(p *pod) float64 {
	d := s.app.StartupDelay.Seconds()
	if p.boost == nil || !(p.boost.req.CPU > 0) {
		return d
	}
	share := s.app.StartupCPUShare
	return d * ((1 - share) + share*p.boost.req.CPU/p.req.CPU)
}

// endBoosts ends the boost of every Ready pod whose duration has passed by
// t, as the updater's resize in place does: its CPU request and limit go
// back to the unboosted ones and its node's allocation shrinks.
func (s *Simulator) endBoosts(t float64) {
	var hold float64
	if b := s.spec.policy.StartupBoost; b != nil {
		hold = b.For.Seconds()
	}
	for i := range s.cluster.pods {
		p := &s.cluster.pods[i]
		if p.boost == nil || p.phase != podRunning || p.transition+hold > t+1e-9 {
			continue
		}
		s.endBoost(p)
	}
}

func (s *Simulator) endBoost(p *pod) {
	if p.phase != podPending {
		n := &s.cluster.nodes[p.node]
		n.alloc.CPU -= p.req.CPU - p.boost.req.CPU
	}
	p.req, p.lim, p.boost = p.boost.req, p.boost.lim, nil
}
