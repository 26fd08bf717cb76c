package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// registry is the workload part of the server: the per-workload agents,
// their limit (Options.MaxWorkloads) and the time of each workload's last
// call, for Options.WorkloadTTL (forget.go).
//
// Invariants: at most max agents; every agent is configured with the
// server's steps, retraining bounds and policySpec; the workloads gauge
// counts each agent once under its stage, and the capacity gauge is the
// number of agents over max. mu guards agents; seen is a sync.Map of
// *atomic.Int64 and may briefly hold a workload that has no agent (a call
// racing a forget), which stale drops. While mu is held the registry takes
// only the agents' own locks (learn.Agent), never another part's.
type registry struct {
	max        int
	steps      learn.Steps
	retraining lifecycle.RetrainingBounds
	spec       policySpec
	now        func() time.Time
	metrics    *metrics
	dirty      dirtyMarker

	mu     sync.RWMutex
	agents map[string]*learn.Agent
	// seen holds each workload's last call (key → *atomic.Int64, Unix
	// nanoseconds).
	seen sync.Map
}

func newRegistry(o *Options, spec policySpec, m *metrics, dirty dirtyMarker) *registry {
	return &registry{max: o.MaxWorkloads, steps: o.Steps, retraining: o.Retraining, spec: spec, now: o.Now, metrics: m, dirty: dirty,
		agents: map[string]*learn.Agent{}}
}

// lookup returns key's agent, or nil.
func (r *registry) lookup(key string) *learn.Agent {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.agents[key]
}

// len returns the number of workloads.
func (r *registry) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.agents)
}

// agent returns the workload's agent, creating it in Bootstrapping, and
// records the call for Options.WorkloadTTL.
func (r *registry) agent(key string, gates lifecycle.Gates) (*learn.Agent, error) {
	a := r.lookup(key)
	if a == nil {
		var err error
		if a, err = r.newAgent(key, gates); err != nil {
			return nil, err
		}
	}
	r.touch(key, r.now())
	return a, nil
}

func (r *registry) newAgent(key string, gates lifecycle.Gates) (*learn.Agent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.agents[key]; a != nil {
		return a, nil
	}
	if len(r.agents) >= r.max {
		return nil, fmt.Errorf("%w: limit %d reached", ErrTooManyWorkloads, r.max)
	}
	a, err := learn.NewAgent(key, gates, r.steps, r.now())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := a.SetRetrainingBounds(r.retraining); err != nil {
		return nil, err // validated in New
	}
	r.spec.configure(a)
	r.agents[key] = a
	r.updateCapacity(len(r.agents))
	r.metrics.workloads.WithLabelValues(lifecycle.Bootstrapping.String()).Inc()
	r.dirty.markDirty()
	return a, nil
}

// remove drops key's agent and returns it, or nil if there was none. With
// a non-zero silentSince, it drops it only if the workload made no call
// since then (a call racing the TTL wins). The caller then drops its call
// record (forgetSeen) and counts it.
func (r *registry) remove(key string, silentSince time.Time) *learn.Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.agents[key]
	if a != nil && !silentSince.IsZero() {
		if last, ok := r.lastSeen(key); !ok || last.After(silentSince) {
			a = nil
		}
	}
	if a != nil {
		delete(r.agents, key)
		r.updateCapacity(len(r.agents))
	}
	return a
}

// forgetSeen drops key's call record.
func (r *registry) forgetSeen(key string) { r.seen.Delete(key) }

// stale returns the workloads that made no call after cutoff, and drops
// the call records left by calls that raced a forget.
func (r *registry) stale(cutoff time.Time) []string {
	var stale []string
	r.mu.RLock()
	defer r.mu.RUnlock()
	for key := range r.agents {
		if last, ok := r.lastSeen(key); !ok || !last.After(cutoff) {
			stale = append(stale, key)
		}
	}
	r.seen.Range(func(key, _ any) bool {
		if _, ok := r.agents[key.(string)]; !ok {
			r.seen.Delete(key)
		}
		return true
	})
	return stale
}

// touch records a call of key at t (never moving it back).
func (r *registry) touch(key string, t time.Time) {
	v, ok := r.seen.Load(key)
	if !ok {
		v, _ = r.seen.LoadOrStore(key, new(atomic.Int64))
	}
	last := v.(*atomic.Int64)
	for {
		old := last.Load()
		if old >= t.UnixNano() || last.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

func (r *registry) lastSeen(key string) (time.Time, bool) {
	v, ok := r.seen.Load(key)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, v.(*atomic.Int64).Load()), true
}

// updateCapacity sets the capacity gauge from the number of workloads.
func (r *registry) updateCapacity(n int) {
	r.metrics.capacity.Set(float64(n) / float64(r.max))
}

// known returns the records of rs whose workload the agent still tracks,
// in a new slice.
func (r *registry) known(rs []record) []record {
	out := make([]record, 0, len(rs))
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, rec := range rs {
		if _, ok := r.agents[rec.key]; ok {
			out = append(out, rec)
		}
	}
	return out
}

// states returns every agent's checkpoint state.
func (r *registry) states() []learn.AgentState {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []learn.AgentState
	for _, a := range r.agents {
		out = append(out, a.State())
	}
	return out
}

// serving returns the workloads in stage Serving.
func (r *registry) serving() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for key, a := range r.agents {
		if a.Stage() == lifecycle.Serving {
			out = append(out, key)
		}
	}
	return out
}

// restore adds the agents of a checkpoint; before the server serves.
func (r *registry) restore(states []learn.AgentState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range states {
		a, err := learn.RestoreAgent(st, r.steps)
		if err != nil {
			return fmt.Errorf("restore agent: %w", err)
		}
		if err := a.SetRetrainingBounds(r.retraining); err != nil {
			return fmt.Errorf("restore agent: %w", err)
		}
		// The trajectory is not in the checkpoint: the experience
		// replayed later rebuilds it.
		r.spec.configure(a)
		r.agents[a.Key()] = a
		r.metrics.workloads.WithLabelValues(a.Stage().String()).Inc()
	}
	return nil
}

// restored records, for every agent, its last outcome before the restart
// as its last call, so that restarts do not keep a silent workload
// forever, and sets the capacity gauge.
func (r *registry) restored() {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for key, a := range r.agents {
		r.touch(key, a.Status().LastUpdate)
	}
	r.updateCapacity(len(r.agents))
}

// longestRetraining returns how long, at now, the workload longest in
// Retraining has been in it; 0 when none is. It copies the agents first so
// that mu is not held while each agent's lock is taken.
func (r *registry) longestRetraining(now time.Time) time.Duration {
	r.mu.RLock()
	agents := make([]*learn.Agent, 0, len(r.agents))
	for _, a := range r.agents {
		agents = append(agents, a)
	}
	r.mu.RUnlock()
	var longest time.Duration
	for _, a := range agents {
		if st, since := a.StageSince(); st == lifecycle.Retraining {
			longest = max(longest, now.Sub(since))
		}
	}
	return longest
}
