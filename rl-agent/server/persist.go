package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	"k8s.io/klog/v2"
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

// record is one experience record and the workload it belongs to, so that
// the records of a forgotten workload can be left out of the log.
type record struct {
	key string
	b   []byte
}

func recordBytes(rs []record) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r.b
	}
	return out
}

func (s *Server) addExperience(key string, rec []byte) {
	s.expMu.Lock()
	s.pending = append(s.pending, record{key: key, b: rec})
	n := len(s.pending)
	s.expMu.Unlock()
	if n >= s.opts.FlushRecords {
		select {
		case s.flushC <- struct{}{}:
		default:
		}
	}
}

// persister flushes experience when enough is pending and checkpoints every
// FlushInterval, until Close. (Stage transitions checkpoint at once.)
func (s *Server) persister() {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.FlushInterval)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-s.stop:
			return
		case <-s.flushC:
			// Only a failure counts here: a checkpoint may still be
			// failing, which the next persist reports either way.
			if err = s.flushExperience(); err != nil {
				s.persistHealth(err)
			}
		case <-tick.C:
			s.expireSilent(s.opts.Now())
			err = s.persist(false)
		}
		if err != nil {
			klog.ErrorS(err, "Persisting agent state failed; will retry")
		}
	}
}

// persist flushes experience and, if anything changed (or force), writes
// the checkpoint.
func (s *Server) persist(force bool) error {
	if s.opts.Store == nil {
		return nil
	}
	err := s.flushExperience()
	if force || s.dirty.Swap(false) {
		if cerr := s.checkpoint(); cerr != nil {
			s.dirty.Store(true)
			err = errors.Join(err, cerr)
		}
	}
	s.persistHealth(err)
	return err
}

// persistHealth records the outcome of a write to the state directory:
// after a failure the server is not ready (Ready, and the gRPC health
// service reports NOT_SERVING), so that the recommender moves to its
// defaults rather than feed an agent that would lose what it learns; the
// next successful write makes it ready again. Failed writes are retried by
// the persister (pending experience and the dirty checkpoint are kept).
func (s *Server) persistHealth(err error) {
	if err == nil {
		if s.persistErr.Swap(nil) != nil {
			klog.InfoS("Persisting agent state works again; ready")
			s.setServing(true)
		}
		return
	}
	if s.persistErr.Swap(&err) == nil {
		klog.ErrorS(err, "Cannot persist agent state; not ready until a write succeeds")
		s.setServing(false)
	}
}

func (s *Server) flushExperience() error {
	// flushMu orders flushes (and compactions); expMu is held only to take
	// the pending batch, so ReportOutcome never waits for an fsync.
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.expMu.Lock()
	batch := s.pending
	s.pending = nil
	s.expMu.Unlock()
	if s.opts.Store == nil {
		return nil
	}
	// Records of workloads forgotten since they were recorded are not
	// worth writing.
	batch = s.registry.known(batch)
	if len(batch) > 0 {
		if err := s.opts.Store.Append(recordBytes(batch)); err != nil {
			s.metrics.persist.WithLabelValues("experience", "failed").Inc()
			// Keep the batch, ahead of what arrived meanwhile, for the next try.
			s.expMu.Lock()
			s.pending = append(batch, s.pending...)
			s.expMu.Unlock()
			return fmt.Errorf("append experience: %w", err)
		}
		s.metrics.persist.WithLabelValues("experience", "ok").Inc()
		s.recent = append(s.recent, batch...)
		s.written += len(batch)
		if over := len(s.recent) - s.opts.KeepRecords; over > 0 {
			s.recent = append(s.recent[:0], s.recent[over:]...)
		}
	}
	// Compact once the log holds four times what we keep, so that the log
	// stays bounded and compaction costs O(1) amortised per record; and
	// after workloads were forgotten, so that their experience leaves the
	// state directory too.
	forgotten := s.forgottenSinceCompaction.Swap(0)
	if s.written >= 4*s.opts.KeepRecords || forgotten > 0 {
		keep := s.registry.known(s.recent)
		if err := s.opts.Store.Compact(recordBytes(keep)); err != nil {
			s.forgottenSinceCompaction.Add(forgotten)
			return fmt.Errorf("compact experience: %w", err)
		}
		s.recent = keep
		s.written = len(keep)
	}
	return nil
}

// snapshot is the checkpoint: the policy, its version, every agent, and the
// frozen policies Serving workloads are pinned to, in one file so that they
// are always consistent with each other.
type snapshot struct {
	PolicyVersion int64              `json:"policyVersion"`
	Policy        []byte             `json:"policy"`
	Agents        []learn.AgentState `json:"agents"`
	// Frozen holds the frozen copies pinned, Pins the version each Serving
	// workload is pinned to. Checkpoints written before frozen weights
	// have neither.
	Frozen []frozenState    `json:"frozen,omitempty"`
	Pins   map[string]int64 `json:"pins,omitempty"`
}

func (s *Server) checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	var snap snapshot
	// The agents and pins first, as one cut (no stage transition half
	// done), then the policy: a pinned version is then never newer than
	// the checkpointed policy, whose version a restarted agent counts on
	// from, so two versions can never share a name.
	s.cutMu.Lock()
	snap.Agents = s.registry.states()
	pins, copies := s.pins.state()
	s.cutMu.Unlock()
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
	p, v, err := s.trainer.policyState()
	snap.PolicyVersion = v
	if err != nil {
		return fmt.Errorf("marshal policy: %w", err)
	}
	snap.Policy = p
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := s.opts.Store.SaveCheckpoint(checkpointName, b); err != nil {
		s.metrics.persist.WithLabelValues("checkpoint", "failed").Inc()
		return err
	}
	s.metrics.persist.WithLabelValues("checkpoint", "ok").Inc()
	return nil
}

// restore loads the checkpoint and replays the experience log into the
// agents' demonstration buffers and, for Meta-PPO, their trajectories.
func (s *Server) restore() error {
	for _, st := range lifecycle.Stages {
		s.metrics.workloads.WithLabelValues(st.String()).Set(0)
	}
	if s.opts.Store == nil {
		s.trainer.publishLive()
		return nil
	}
	b, err := s.opts.Store.LoadCheckpoint(checkpointName)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// A fresh state directory.
		s.trainer.publishLive()
	case err != nil:
		return fmt.Errorf("load checkpoint: %w", err)
	default:
		var snap snapshot
		if err := json.Unmarshal(b, &snap); err != nil {
			return fmt.Errorf("decode checkpoint: %w", err)
		}
		if err := s.trainer.restorePolicy(snap.Policy, snap.PolicyVersion); err != nil {
			return fmt.Errorf("restore policy: %w", err)
		}
		if err := s.registry.restore(snap.Agents); err != nil {
			return err
		}
		s.trainer.publishLive()
		// An ensemble pins nothing (and wrote no pins).
		if s.ens == nil {
			if err := s.pins.restorePins(&snap, s.registry.serving()); err != nil {
				return fmt.Errorf("restore frozen policies: %w", err)
			}
		}
	}
	s.registry.restored()
	all := s.opts.Store.Experience()
	recs := make([]record, 0, len(all))
	orphans := 0
	for _, r := range all {
		e, err := learn.UnmarshalExperience(r)
		if err != nil {
			// One undecodable record (e.g. from an older state layout)
			// must not cost the rest.
			klog.ErrorS(err, "Skipping experience record")
			continue
		}
		a := s.registry.lookup(e.Workload)
		if a == nil {
			// A workload forgotten before the log was compacted.
			orphans++
			continue
		}
		a.Restore(e)
		recs = append(recs, record{key: e.Workload, b: r})
	}
	if orphans > 0 {
		// The next flush compacts them away.
		s.forgottenSinceCompaction.Add(1)
	}
	if over := len(recs) - s.opts.KeepRecords; over > 0 {
		recs = recs[over:]
	}
	s.recent = recs
	s.written = len(all)
	klog.InfoS("Restored agent state", "workloads", s.registry.len(), "policyVersion", versionString(s.trainer.version.Load()), "experience", len(all), "orphanedExperience", orphans, "frozenPolicies", s.pins.len())
	return nil
}
