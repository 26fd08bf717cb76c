package server

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
)

// Persistence, as the Server wires it: the journal (journal.go) keeps the
// experience log, the checkpointer (checkpoint.go) the checkpoint, and the
// health part (health.go) whether writing either works.

// persister flushes experience when enough is pending and checkpoints every
// FlushInterval, until Close. (Stage transitions checkpoint at once.)
func (s *Server) persister() {
	tick := time.NewTicker(s.opts.FlushInterval)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-s.stop:
			return
		case <-s.journal.flushC:
			// Only a failure counts here: a checkpoint may still be
			// failing, which the next persist reports either way.
			if err = s.journal.flush(); err != nil {
				s.health.persisted(err)
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
	err := s.journal.flush()
	if force || s.ckpt.dirty.Swap(false) {
		if cerr := s.ckpt.save(); cerr != nil {
			s.ckpt.markDirty()
			err = errors.Join(err, cerr)
		}
	}
	s.health.persisted(err)
	return err
}

// restore loads the checkpoint into the trainer, the registry and the
// pins, and replays the experience log into the agents' demonstration
// buffers and, for Meta-PPO, their trajectories; before anything runs.
func (s *Server) restore() error {
	for _, st := range lifecycle.Stages {
		s.metrics.workloads.WithLabelValues(st.String()).Set(0)
	}
	if s.opts.Store == nil {
		s.trainer.publishLive()
		return nil
	}
	snap, err := s.ckpt.load()
	if err != nil {
		return err
	}
	if snap == nil {
		// A fresh state directory.
		s.trainer.publishLive()
	} else {
		if err := s.trainer.restorePolicy(snap.Policy, snap.PolicyVersion); err != nil {
			return fmt.Errorf("restore policy: %w", err)
		}
		if err := s.registry.restore(snap.Agents); err != nil {
			return err
		}
		s.trainer.publishLive()
		// An ensemble pins nothing (and wrote no pins).
		if s.ens == nil {
			if err := s.pins.restorePins(snap, s.registry.serving()); err != nil {
				return fmt.Errorf("restore frozen policies: %w", err)
			}
		}
	}
	// A workload's TTL counts from its last outcome before the restart.
	s.registry.restored()
	all, orphans := s.journal.replay()
	klog.InfoS("Restored agent state", "workloads", s.registry.len(), "policyVersion", versionString(s.trainer.version.Load()), "experience", all, "orphanedExperience", orphans, "frozenPolicies", s.pins.len())
	return nil
}
