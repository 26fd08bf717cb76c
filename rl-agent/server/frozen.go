package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// Serving workloads act with frozen weights. The shared policy keeps
// training on the episodes of the workloads that still learn, so a
// workload that reached Serving would otherwise drift with every update it
// did not ask for. On entering Serving a workload is pinned to a frozen
// copy of the policy version current at that moment (pinSet.live, set by the trainer), and its
// greedy decisions are answered by that copy until it leaves Serving.
//
// Copies are shared by version and reference-counted: the workloads
// promoted while one version is current share one copy, and the copy is
// dropped when its last workload leaves Serving. At most MaxFrozenPolicies
// are kept: a workload promoted when that many are pinned and none is of
// the current version is pinned to the newest of them. That never changes
// the weights of a workload already pinned, and the newest copy is the one
// nearest to what it was promoted under; the promotion is logged and
// counted (aware_rlagent_frozen_policy_cap_shares_total).
//
// The pins and the copies they reference are part of the checkpoint, so a
// restarted agent serves every Serving workload with the weights it served
// before.

// frozenPolicy is a frozen copy of the shared policy at one version.
type frozenPolicy struct {
	version int64
	name    string // versionString(version), answered with every decision
	policy  *nn.Frozen
	refs    int // workloads pinned to it; guarded by pinSet.mu

	// encoded is the checkpoint form, computed once: the copy never
	// changes, and it is written with every checkpoint while pinned.
	encodeOnce sync.Once
	encoded    []byte
	encodeErr  error
}

func newFrozenPolicy(version int64, f *nn.Frozen) *frozenPolicy {
	return &frozenPolicy{version: version, name: versionString(version), policy: f}
}

func (fp *frozenPolicy) bytes() ([]byte, error) {
	fp.encodeOnce.Do(func() { fp.encoded, fp.encodeErr = fp.policy.MarshalBinary() })
	return fp.encoded, fp.encodeErr
}

// pinSet is the pins part of the server: it maps Serving workloads to
// their frozen copies, and holds the live copy a promotion pins.
//
// Invariants: every copy in copies has refs > 0 and equals the number of
// pins referring to it; a workload has at most one pin; live is set (by
// the trainer, after every training job, and at restore) whenever a
// learner is served, and is never in copies unless pinned. mu guards
// copies, pins and every refs; live is atomic. No other part's lock is
// taken while mu is held.
type pinSet struct {
	max     int
	spec    policySpec
	metrics *metrics

	// live is the frozen copy of the shared policy at its current
	// version, which a promotion pins, replaced after every training job.
	live atomic.Pointer[frozenPolicy]

	mu     sync.RWMutex
	copies map[int64]*frozenPolicy  // by version; every one has refs > 0
	pins   map[string]*frozenPolicy // by workload key
}

func newPinSet(max int, spec policySpec, m *metrics) *pinSet {
	return &pinSet{max: max, spec: spec, metrics: m, copies: map[int64]*frozenPolicy{}, pins: map[string]*frozenPolicy{}}
}

// setLive makes fp the copy promotions pin from now on.
func (ps *pinSet) setLive(fp *frozenPolicy) { ps.live.Store(fp) }

// lookup returns the copy key is pinned to, or nil.
func (ps *pinSet) lookup(key string) *frozenPolicy {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.pins[key]
}

// pin pins key to the copy of cur's version, adding cur if that version has
// none and the cap allows, and otherwise to the newest copy (capped).
func (ps *pinSet) pin(key string, cur *frozenPolicy) (fp *frozenPolicy, capped bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.unpinLocked(key)
	fp = ps.copies[cur.version]
	switch {
	case fp != nil:
	case len(ps.copies) < ps.max:
		fp = cur
		ps.copies[fp.version] = fp
	default:
		fp = ps.copies[slices.Max(slices.Collect(maps.Keys(ps.copies)))]
		capped = true
	}
	fp.refs++
	ps.pins[key] = fp
	return fp, capped
}

// restore pins key to fp as a checkpoint recorded it, whatever the cap: a
// restart must not change the weights a workload serves with. A copy of
// fp's version already present is shared.
func (ps *pinSet) restore(key string, fp *frozenPolicy) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.unpinLocked(key)
	if have := ps.copies[fp.version]; have != nil {
		fp = have
	} else {
		ps.copies[fp.version] = fp
	}
	fp.refs++
	ps.pins[key] = fp
}

// unpin releases key's copy, if any, and reports whether that dropped the
// copy (its last workload left).
func (ps *pinSet) unpin(key string) (dropped *frozenPolicy) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.unpinLocked(key)
}

func (ps *pinSet) unpinLocked(key string) (dropped *frozenPolicy) {
	fp := ps.pins[key]
	if fp == nil {
		return nil
	}
	delete(ps.pins, key)
	if fp.refs--; fp.refs == 0 {
		delete(ps.copies, fp.version)
		return fp
	}
	return nil
}

// len returns the number of frozen copies kept.
func (ps *pinSet) len() int {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return len(ps.copies)
}

// state returns the pins by workload and the copies they reference, for a
// checkpoint.
func (ps *pinSet) state() (map[string]int64, []*frozenPolicy) {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	pins := make(map[string]int64, len(ps.pins))
	for k, fp := range ps.pins {
		pins[k] = fp.version
	}
	copies := slices.SortedFunc(maps.Values(ps.copies), func(a, b *frozenPolicy) int { return int(a.version - b.version) })
	return pins, copies
}

// frozenState is a frozen copy in the checkpoint.
type frozenState struct {
	Version int64  `json:"version"`
	Policy  []byte `json:"policy"`
}

// servingPolicy returns the frozen copy that answers key's greedy
// decisions: its pin, or, in the moment between its promotion being
// recorded by its agent and the pin (a concurrent ReportOutcome), the copy
// of the current version it is being pinned to.
func (ps *pinSet) servingPolicy(key string) *frozenPolicy {
	if fp := ps.lookup(key); fp != nil {
		return fp
	}
	return ps.live.Load()
}

// repin follows a stage transition of key: leaving Serving releases its
// copy, entering Serving pins it to the current version (named current in
// the log). The caller holds the checkpoint's cut for reading, so a
// checkpoint sees the stage and the pin together.
func (ps *pinSet) repin(ctx context.Context, key string, t *lifecycle.Transition, current string) {
	logger := klog.FromContext(ctx)
	if t.From == lifecycle.Serving {
		if fp := ps.unpin(key); fp != nil {
			logger.V(2).Info("Dropped a frozen policy: its last Serving workload left", "workload", key, "version", fp.name)
		}
	}
	if t.To == lifecycle.Serving {
		fp, capped := ps.pin(key, ps.live.Load())
		if capped {
			ps.metrics.frozenCapShares.Inc()
			logger.Info("Frozen policy limit reached; the promoted workload serves with the newest frozen policy instead of the current one",
				"workload", key, "version", fp.name, "current", current, "limit", ps.max)
		} else {
			logger.V(2).Info("Pinned a Serving workload to a frozen policy", "workload", key, "version", fp.name)
		}
	}
	ps.updateGauge()
}

// updateGauge sets the frozen-policies gauge from the copies kept.
func (ps *pinSet) updateGauge() { ps.metrics.frozenPolicies.Set(float64(ps.len())) }

// restorePins pins the restored Serving workloads to the frozen copies of
// the checkpoint. A workload without one (a checkpoint written before
// frozen weights, or one taken between its promotion and its pin) is
// pinned to the restored policy, which is what it would have acted with.
// serving are the restored Serving workloads.
func (ps *pinSet) restorePins(snap *snapshot, serving []string) error {
	copies := make(map[int64]*frozenPolicy, len(snap.Frozen))
	for _, fs := range snap.Frozen {
		f, err := nn.UnmarshalFrozen(fs.Policy)
		if err != nil {
			return fmt.Errorf("frozen policy %s: %w", versionString(fs.Version), err)
		}
		if err := ps.spec.compatibleFrozen(f); err != nil {
			return fmt.Errorf("frozen policy %s: %w", versionString(fs.Version), err)
		}
		copies[fs.Version] = newFrozenPolicy(fs.Version, f)
	}
	var unpinned int
	for _, key := range serving {
		v, ok := snap.Pins[key]
		fp := copies[v]
		if !ok || fp == nil {
			fp = ps.live.Load()
			unpinned++
		}
		ps.restore(key, fp)
	}
	if unpinned > 0 {
		klog.InfoS("Serving workloads without a frozen policy in the checkpoint (written before frozen weights) serve with the restored policy",
			"workloads", unpinned, "version", ps.live.Load().name)
	}
	if n := ps.len(); n > ps.max {
		klog.InfoS("The checkpoint pins more frozen policies than the limit; they are kept, and promotions share the newest until enough are released",
			"frozenPolicies", n, "limit", ps.max)
	}
	return nil
}

// compatibleFrozen checks that a frozen copy from the checkpoint can answer
// the agents: the served kind, the agents' features and actions, and, for
// Meta-PPO, the window the agents keep and whether its steps carry a
// signature.
func (s policySpec) compatibleFrozen(f *nn.Frozen) error {
	want := nn.KindPPO
	if s.meta {
		want = nn.KindMetaPPO
	}
	c := f.Config()
	if f.Kind() != want || c.Window != s.window || (c.SignatureDim > 0) != s.signature {
		return fmt.Errorf("%w: a %s policy of window %d reading %d signature values per step; the agent serves %s with %d, signature %t",
			nn.ErrIncompatibleCheckpoint, f.Kind(), c.Window, c.SignatureDim, want, s.window, s.signature)
	}
	sh, err := learn.ShapeOf(c.Config)
	if err != nil {
		return err
	}
	if sh.String() != s.shape.String() || sh.FeaturesOff != s.shape.FeaturesOff {
		return fmt.Errorf("%w: a policy of the %s action space reading features %v; the agent serves the %s action space reading %v",
			nn.ErrIncompatibleCheckpoint, sh, learn.AllFeatures&^sh.FeaturesOff, s.shape, learn.AllFeatures&^s.shape.FeaturesOff)
	}
	return nil
}
