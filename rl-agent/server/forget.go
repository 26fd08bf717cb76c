package server

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

// Forgetting. The agent keys workloads by the autoscaler's UID, so a
// deleted autoscaler leaves state behind that no call will ever use again,
// and a re-created one takes a new slot. Two paths drop it: ForgetWorkload,
// which the recommender calls when an autoscaler disappears, and
// Options.WorkloadTTL, which drops a workload that made no call for that
// long (its autoscaler was deleted while no recommender could say so).
// Either way the workload leaves memory at once, the checkpoint at the next
// one, and the experience log at the next flush, which compacts it away.

// Reasons a workload is forgotten, as counted in
// aware_rlagent_workloads_forgotten_total.
const (
	forgetRemoved = "removed"
	forgetExpired = "expired"
)

// ForgetWorkload drops one workload's state; it is idempotent.
func (s *Server) ForgetWorkload(ctx context.Context, req *pb.ForgetWorkloadRequest) (*pb.ForgetWorkloadResponse, error) {
	resp, err := s.forgetWorkload(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) forgetWorkload(ctx context.Context, req *pb.ForgetWorkloadRequest) (*pb.ForgetWorkloadResponse, error) {
	if err := s.admit(ctx); err != nil {
		return nil, err
	}
	key, err := fromForgetWorkloadRequest(req)
	if err != nil {
		return nil, err
	}
	found := s.forget(key, forgetRemoved, time.Time{})
	if found {
		klog.FromContext(ctx).V(2).Info("Forgot workload", "workload", key, "reason", forgetRemoved)
	}
	return &pb.ForgetWorkloadResponse{Found: found}, nil
}

// forget drops key's agent, its pin and its TTL record, and reports
// whether there was one. With a non-zero silentSince, it forgets only if
// the workload made no call since then (a call racing the TTL wins).
func (s *Server) forget(key, reason string, silentSince time.Time) bool {
	// cutMu: the checkpoint sees the agent and its pin go together.
	s.cutMu.Lock()
	s.mu.Lock()
	a := s.agents[key]
	if a != nil && !silentSince.IsZero() {
		if last, ok := s.lastSeen(key); !ok || last.After(silentSince) {
			a = nil
		}
	}
	if a != nil {
		delete(s.agents, key)
		s.updateCapacity(len(s.agents))
	}
	s.mu.Unlock()
	// ForgetWorkload drops the constraints whether or not an agent was
	// made (a Recommend refused after the bounds check left them behind);
	// the TTL only with the agent it expires.
	if a != nil || silentSince.IsZero() {
		s.bounds.forget(key)
	}
	if a == nil {
		s.cutMu.Unlock()
		return false
	}
	s.pins.unpin(key)
	s.cutMu.Unlock()
	s.seen.Delete(key)
	s.metrics.workloads.WithLabelValues(a.Stage().String()).Dec()
	s.pins.updateGauge()
	s.metrics.forgotten.WithLabelValues(reason).Inc()
	s.forgottenSinceCompaction.Add(1)
	s.dirty.Store(true)
	return true
}

// expireSilent forgets every workload that made no call for WorkloadTTL
// before now.
func (s *Server) expireSilent(now time.Time) int {
	ttl := s.opts.WorkloadTTL
	if ttl <= 0 {
		return 0
	}
	cutoff := now.Add(-ttl)
	var stale []string
	s.mu.RLock()
	for key := range s.agents {
		if last, ok := s.lastSeen(key); !ok || !last.After(cutoff) {
			stale = append(stale, key)
		}
	}
	// A call that raced a forget may have left a record of its workload.
	s.seen.Range(func(key, _ any) bool {
		if _, ok := s.agents[key.(string)]; !ok {
			s.seen.Delete(key)
		}
		return true
	})
	s.mu.RUnlock()
	n := 0
	for _, key := range stale {
		if s.forget(key, forgetExpired, cutoff) {
			n++
			klog.InfoS("Forgot a silent workload", "workload", key, "silentFor", ttl)
		}
	}
	return n
}

// touch records a call of key at t (never moving it back).
func (s *Server) touch(key string, t time.Time) {
	v, ok := s.seen.Load(key)
	if !ok {
		v, _ = s.seen.LoadOrStore(key, new(atomic.Int64))
	}
	last := v.(*atomic.Int64)
	for {
		old := last.Load()
		if old >= t.UnixNano() || last.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

func (s *Server) lastSeen(key string) (time.Time, bool) {
	v, ok := s.seen.Load(key)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, v.(*atomic.Int64).Load()), true
}

// updateCapacity sets the capacity gauge from the number of workloads.
func (s *Server) updateCapacity(n int) {
	s.metrics.capacity.Set(float64(n) / float64(s.opts.MaxWorkloads))
}

func fromForgetWorkloadRequest(r *pb.ForgetWorkloadRequest) (string, error) {
	return wire.WorkloadKey(r.GetWorkload())
}
