package server

import (
	"context"
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
	if err := s.health.admit(ctx); err != nil {
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
	// The checkpoint's cut: it sees the agent and its pin go together.
	s.ckpt.cut.Lock()
	a := s.registry.remove(key, silentSince)
	// ForgetWorkload drops the constraints whether or not an agent was
	// made (a Recommend refused after the bounds check left them behind);
	// the TTL only with the agent it expires.
	if a != nil || silentSince.IsZero() {
		s.bounds.forget(key)
	}
	if a == nil {
		s.ckpt.cut.Unlock()
		return false
	}
	s.pins.unpin(key)
	s.ckpt.cut.Unlock()
	s.registry.forgetSeen(key)
	s.metrics.workloads.WithLabelValues(a.Stage().String()).Dec()
	s.pins.updateGauge()
	s.metrics.forgotten.WithLabelValues(reason).Inc()
	s.journal.forgot()
	s.ckpt.markDirty()
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
	stale := s.registry.stale(cutoff)
	n := 0
	for _, key := range stale {
		if s.forget(key, forgetExpired, cutoff) {
			n++
			klog.InfoS("Forgot a silent workload", "workload", key, "silentFor", ttl)
		}
	}
	return n
}

func fromForgetWorkloadRequest(r *pb.ForgetWorkloadRequest) (string, error) {
	return wire.WorkloadKey(r.GetWorkload())
}
