package sim

import (
	"cmp"
	"slices"
)

// offer is one pod's part of a window: the seconds it serves (the window's
// for a pod Ready all of it, 0 for one that does not serve), and the
// arrival rate and realised arrivals it is offered over them.
type offer struct {
	dt, rate, arrived float64
}

// offers splits the window [t, t+dt) among the app's pods into s.offered
// (by pod index) and returns the share of the window's arrivals no pod was
// Ready for. ready counts the pods Ready from t.
//
// Without a pod becoming Ready within the window (always without
// Config.ReadyWithinWindow), the pods Ready at t share it evenly. With
// some, each moment's arrivals are shared evenly among the pods Ready at
// it: a pod Ready at r is offered (t+dt−r)/dt of the window less what it
// shares. Invariant: the shares of all pods and the unserved share add up
// to 1.
func (s *Simulator) offers(t float64, ready int, rate, arrivals float64) float64 {
	pods := s.cluster.pods
	s.offered = slices.Grow(s.offered[:0], len(pods))[:len(pods)]
	clear(s.offered)
	end := t + s.dt
	s.joining = s.joining[:0]
	if s.cfg.ReadyWithinWindow {
		for i := range pods {
			if p := &pods[i]; p.phase == podStarting && p.readyAt < end-1e-9 {
				s.joining = append(s.joining, i)
			}
		}
	}
	if len(s.joining) == 0 {
		if ready == 0 {
			return 1
		}
		lam, arrived := rate/float64(ready), arrivals/float64(ready)
		for i := range pods {
			if pods[i].phase == podRunning {
				s.offered[i] = offer{dt: s.dt, rate: lam, arrived: arrived}
			}
		}
		return 0
	}
	slices.SortStableFunc(s.joining, func(a, b int) int { return cmp.Compare(pods[a].readyAt, pods[b].readyAt) })
	// Segment j runs from the j-th joining pod's readyAt (t for j = 0) to
	// the next one's (the window's end), with ready+j pods Ready; the j-th
	// pod gets each Ready pod's share of segments j and on, summed back.
	var share, unserved float64
	for j := len(s.joining); j >= 0; j-- {
		from, to := t, end
		if j > 0 {
			from = pods[s.joining[j-1]].readyAt
		}
		if j < len(s.joining) {
			to = pods[s.joining[j]].readyAt
		}
		part := max(to-from, 0) / s.dt
		if n := ready + j; n > 0 {
			share += part / float64(n)
		} else {
			unserved += part
		}
		if j > 0 {
			i := s.joining[j-1]
			d := end - pods[i].readyAt
			s.offered[i] = offer{dt: d, rate: rate * share * s.dt / d, arrived: arrivals * share}
		}
	}
	for i := range pods {
		if pods[i].phase == podRunning {
			s.offered[i] = offer{dt: s.dt, rate: rate * share, arrived: arrivals * share}
		}
	}
	return unserved
}

// readyBy marks Ready every starting pod whose start-up delay has passed
// by t (Config.ReadyWithinWindow: at the window's end, so that the
// observation counts it, as a kubelet's would).
func (s *Simulator) readyBy(t float64) {
	for i := range s.cluster.pods {
		if p := &s.cluster.pods[i]; p.phase == podStarting && p.readyAt <= t+1e-9 {
			p.phase, p.transition = podRunning, p.readyAt
		}
	}
}
