package sim

import (
	"strconv"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// cluster is the simulated cluster's state: its nodes and the app's pods,
// which rollout, reconcileReplicas and schedule move as the updater, the
// ReplicaSet and the scheduler would.
type cluster struct {
	nodes []node
	pods  []pod
	// nextID names the next pod created.
	nextID int
}

type podPhase uint8

const (
	podPending podPhase = iota
	podStarting
	podRunning
)

type pod struct {
	name    string
	node    int32
	phase   podPhase
	gen     uint32
	readyAt float64 // seconds since start
	started float64
	// transition is when the Ready condition last changed.
	transition float64
	req        workload.Resources
	lim        workload.Resources
	backlog    float64   // requests queued beyond what the stationary queue holds
	held       HeldQueue // App.ServesTimedOut's queue: the backlog, by cohort
	// pressure is the share of the CPU the pod wanted (up to its limit) that
	// its node did not give it in the window: the simulator's cgroup CPU
	// pressure (PSI), 0 unless the node is oversubscribed.
	pressure float64
	// usage is what the pod's metrics show (PodWindow.MeasuredCPU); the
	// window's own went into StepMetrics.Used.
	usage  workload.Resources
	peak   workload.Resources
	remove bool
	// boost is set while the pod runs with its CPU start-up boost.
	boost *podBoost
	// deferral is the kubelet's hold on an in-place resize its node has
	// no room for (ResizeInPlace).
	deferral deferral
}

// deferral: a resize the node defers waits, at the old size, until room
// frees up (the kubelet retries it) or until resizeDeferredTimeout, when the
// updater falls back to replacing the pod.
type deferral struct {
	waiting bool
	since   float64 // seconds since start
}

// resizeDeferredTimeout is the updater's --resize-deferred-timeout default
// (seconds): how long a deferred resize waits before the pod is replaced.
const resizeDeferredTimeout = 300

// held reports whether the deferral still keeps the pod from being
// replaced at t.
func (d deferral) held(t float64) bool {
	return d.waiting && t-d.since < resizeDeferredTimeout
}

type node struct {
	alloc  workload.Resources
	demand float64 // CPU cores the node's pods and other tenants want this window
	shares float64 // sum of the app's running pods' CPU requests
	others float64 // CPU cores the other tenants request and use (Config.Tenants)
}

// rollout brings pods to the current template generation and returns the
// number of restarts it caused.
func (s *Simulator) rollout(t float64) int {
	var outdated, unavailable int
	for i := range s.cluster.pods {
		p := &s.cluster.pods[i]
		if p.phase != podRunning {
			unavailable++
		}
		if p.gen == s.spec.gen {
			continue
		}
		switch {
		case p.phase == podPending:
			p.req, p.lim, p.gen = s.spec.tmplReq, s.spec.tmplLim, s.spec.gen
			s.admitBoost(p)
		case p.boost != nil:
			// The updater leaves a boosted pod alone until its boost ends.
			continue
		case s.cfg.Resize == ResizeInPlace && s.fitsResize(p):
			n := &s.cluster.nodes[p.node]
			n.alloc = n.alloc.Add(s.spec.tmplReq).Add(p.req.Scale(-1))
			p.req, p.lim, p.gen = s.spec.tmplReq, s.spec.tmplLim, s.spec.gen
			p.deferral = deferral{}
		case s.cfg.Resize == ResizeInPlace && (!p.deferral.waiting || p.deferral.held(t)):
			// Deferred: the pod keeps its size and is retried each step.
			if !p.deferral.waiting {
				p.deferral = deferral{waiting: true, since: t}
			}
		default:
			outdated++
		}
	}
	if outdated == 0 {
		return 0
	}
	budget := max(1, int(s.cfg.MaxUnavailable*float64(s.spec.desired))) - unavailable
	var restarts int
	for i := range s.cluster.pods {
		p := &s.cluster.pods[i]
		// A deferral still waiting is not replaced with the pods whose
		// deferral timed out.
		if p.gen == s.spec.gen || p.deferral.held(t) {
			continue
		}
		// A pod that is not Ready costs no availability to replace.
		if p.phase == podRunning {
			if budget <= 0 {
				continue
			}
			budget--
		}
		s.unbind(p, t)
		p.req, p.lim, p.gen = s.spec.tmplReq, s.spec.tmplLim, s.spec.gen
		s.admitBoost(p)
		restarts++
	}
	return restarts
}

func (s *Simulator) fitsResize(p *pod) bool {
	n := &s.cluster.nodes[p.node]
	after := n.alloc.Add(s.spec.tmplReq).Add(p.req.Scale(-1))
	return after.CPU <= s.cfg.NodeCapacity.CPU+1e-9 && after.Memory <= s.cfg.NodeCapacity.Memory+1e-3
}

// unbind returns a pod to Pending (evicted, recreated by its controller).
func (s *Simulator) unbind(p *pod, t float64) {
	if p.phase != podPending {
		n := &s.cluster.nodes[p.node]
		n.alloc = n.alloc.Add(p.req.Scale(-1))
	}
	if p.phase == podRunning {
		p.transition = t
	}
	p.phase, p.node, p.backlog = podPending, -1, 0
	p.held.reset()
	p.deferral = deferral{}
}

// reconcileReplicas creates or deletes pods to match the desired count,
// deleting Pending, then not-Ready, then the newest pods first, as a
// ReplicaSet does.
func (s *Simulator) reconcileReplicas(t float64) {
	n := int(s.spec.desired)
	for len(s.cluster.pods) < n {
		s.cluster.pods = append(s.cluster.pods, pod{
			name: s.app.Name + "-" + strconv.Itoa(s.cluster.nextID),
			node: -1, phase: podPending, gen: s.spec.gen, req: s.spec.tmplReq, lim: s.spec.tmplLim, transition: t,
		})
		s.admitBoost(&s.cluster.pods[len(s.cluster.pods)-1])
		s.cluster.nextID++
	}
	surplus := len(s.cluster.pods) - n
	if surplus <= 0 {
		return
	}
	for _, ph := range [...]podPhase{podPending, podStarting, podRunning} {
		for i := len(s.cluster.pods) - 1; i >= 0 && surplus > 0; i-- {
			if p := &s.cluster.pods[i]; !p.remove && p.phase == ph {
				p.remove = true
				surplus--
			}
		}
	}
	k := 0
	for i := range s.cluster.pods {
		if s.cluster.pods[i].remove {
			s.unbind(&s.cluster.pods[i], t)
			continue
		}
		s.cluster.pods[k] = s.cluster.pods[i]
		k++
	}
	clear(s.cluster.pods[k:])
	s.cluster.pods = s.cluster.pods[:k]
}

// schedule binds Pending pods to the least-allocated node they fit on, like
// the default scheduler's spreading; a pod that fits nowhere stays Pending.
func (s *Simulator) schedule(t float64) {
	capa := s.cfg.NodeCapacity
	for i := range s.cluster.pods {
		p := &s.cluster.pods[i]
		if p.phase != podPending {
			continue
		}
		best, bestFree := -1, -1.0
		for j := range s.cluster.nodes {
			a := s.cluster.nodes[j].alloc
			if a.CPU+p.req.CPU > capa.CPU+1e-9 || a.Memory+p.req.Memory > capa.Memory+1e-3 {
				continue
			}
			if free := (capa.CPU-a.CPU)/capa.CPU + (capa.Memory-a.Memory)/capa.Memory; free > bestFree+1e-12 {
				best, bestFree = j, free
			}
		}
		if best < 0 {
			continue
		}
		s.cluster.nodes[best].alloc = s.cluster.nodes[best].alloc.Add(p.req)
		p.node = int32(best)
		p.phase = podStarting
		p.started = t
		p.readyAt = t + s.startDelay(p)
	}
}

// queued is what the pod holds beyond its stationary queue: its backlog,
// or its held queue's requests, live and lost.
func (p *pod) queued() float64 {
	return max(p.backlog, p.held.Len())
}
