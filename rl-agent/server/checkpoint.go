package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/store"
)

// Store is what the server needs from its persistence.
type Store interface {
	// Experience returns the records recovered at open.
	Experience() [][]byte
	Append(records [][]byte) error
	Compact(keep [][]byte) error
	SaveCheckpoint(name string, data []byte) error
	LoadCheckpoint(name string) ([]byte, error)
}

var _ Store = (*store.Store)(nil)

// checkpointName is the one atomic checkpoint: policy, version, agents.
const checkpointName = "state"

// snapshotFormat is the version of the snapshot's content, which
// store.FormatVersion (the framing) does not cover. A change that an older
// agent would misread (a field whose meaning changes, or without which
// the state is wrong) increments it; added fields that an older agent may
// ignore do not. An agent refuses a snapshot of a newer format with
// store.ErrUnsupportedVersion rather than start from part of it, and must
// keep reading every older one (checkpoints written before the field have
// none: format 1). docs/operations.md, "Compatibility".
const snapshotFormat = 1

// The checkpointer's consumer-side views of the parts it saves.
type (
	// agentStates is what it needs from the registry.
	agentStates interface{ states() []learn.AgentState }
	// pinStates is what it needs from the pins.
	pinStates interface {
		state() (map[string]int64, []*frozenPolicy)
	}
	// policyStates is what it needs from the trainer.
	policyStates interface {
		policyState() ([]byte, int64, error)
	}
)

var (
	_ agentStates  = (*registry)(nil)
	_ pinStates    = (*pinSet)(nil)
	_ policyStates = (*trainer)(nil)
	_ dirtyMarker  = (*checkpointer)(nil)
)

// checkpointer is the checkpoint part of the server: it writes the
// policy, its version, every agent and the pins with their frozen copies
// as one atomic file, and reads it back at start.
//
// Invariants: checkpoints are written one at a time in the order taken
// (mu), so an older one never overwrites a newer; the agents and pins in
// one are a cut (cut held for writing while copying them), so no stage
// transition is half in it; they are copied before the policy, so a
// pinned version is never newer than the checkpointed policy. dirty is set
// by every change a checkpoint must carry and cleared by the write that
// carries it (set again if that write fails).
//
// Lock order: mu, then cut, then the registry's or the pins' mu; then,
// with cut released, the trainer's mu (policyState). Holders of cut for
// reading (a stage transition and its pin; a forget holds it for writing)
// take the registry's and the pins' locks under it, never the trainer's
// or mu.
type checkpointer struct {
	store   Store
	metrics *metrics
	agents  agentStates
	pins    pinStates
	policy  policyStates

	mu sync.Mutex
	// cut makes an agent's stage transition and its pin, or a forgotten
	// workload's agent and pin, one step as seen by the checkpoint.
	cut   sync.RWMutex
	dirty atomic.Bool
}

func newCheckpointer(st Store, m *metrics) *checkpointer {
	return &checkpointer{store: st, metrics: m}
}

// markDirty makes the next periodic checkpoint write.
func (c *checkpointer) markDirty() { c.dirty.Store(true) }

// snapshot is the checkpoint: the policy, its version, every agent, and the
// frozen policies Serving workloads are pinned to, in one file so that they
// are always consistent with each other.
type snapshot struct {
	// Format is snapshotFormat when written; 0 (absent) in checkpoints
	// written before it existed, which are format 1.
	Format        int                `json:"format,omitempty"`
	PolicyVersion int64              `json:"policyVersion"`
	Policy        []byte             `json:"policy"`
	Agents        []learn.AgentState `json:"agents"`
	// Frozen holds the frozen copies pinned, Pins the version each Serving
	// workload is pinned to. Checkpoints written before frozen weights
	// have neither.
	Frozen []frozenState    `json:"frozen,omitempty"`
	Pins   map[string]int64 `json:"pins,omitempty"`
}

// save writes the checkpoint.
func (c *checkpointer) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap := snapshot{Format: snapshotFormat}
	// The agents and pins first, as one cut (no stage transition half
	// done), then the policy: a pinned version is then never newer than
	// the checkpointed policy, whose version a restarted agent counts on
	// from, so two versions can never share a name.
	c.cut.Lock()
	snap.Agents = c.agents.states()
	pins, copies := c.pins.state()
	c.cut.Unlock()
	if len(pins) > 0 {
		snap.Pins = pins
	}
	for _, fp := range copies {
		b, err := fp.bytes()
		if err != nil {
			return fmt.Errorf("marshal frozen policy %s: %w", fp.name, err)
		}
		snap.Frozen = append(snap.Frozen, frozenState{Version: fp.version, Policy: b})
	}
	p, v, err := c.policy.policyState()
	snap.PolicyVersion = v
	if err != nil {
		return fmt.Errorf("marshal policy: %w", err)
	}
	snap.Policy = p
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := c.store.SaveCheckpoint(checkpointName, b); err != nil {
		c.metrics.persist.WithLabelValues("checkpoint", "failed").Inc()
		return err
	}
	c.metrics.persist.WithLabelValues("checkpoint", "ok").Inc()
	return nil
}

// load reads the checkpoint; nil without error in a fresh state directory.
func (c *checkpointer) load() (*snapshot, error) {
	b, err := c.store.LoadCheckpoint(checkpointName)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("decode checkpoint: %w", err)
	}
	if snap.Format > snapshotFormat {
		return nil, fmt.Errorf("checkpoint %s holds a snapshot of format %d, this agent reads up to %d: %w", checkpointName, snap.Format, snapshotFormat, store.ErrUnsupportedVersion)
	}
	return &snap, nil
}
