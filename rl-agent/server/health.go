package server

import (
	"context"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/klog/v2"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// healthState is the health part of the server: whether it admits calls
// (not draining) and whether it can persist what it learns, as answered by
// Ready, the gRPC health service and the admission of every call.
//
// Invariants: once draining, always draining, and the health service
// reports NOT_SERVING for good; persistErr is the last failure to write
// the state directory, nil once a write succeeded, and the health service
// reports NOT_SERVING exactly while it is set (and not draining). It has no
// mutex (atomics only) and calls no other part.
type healthState struct {
	grpc       *health.Server
	draining   atomic.Bool
	persistErr atomic.Pointer[error]
}

func newHealthState() *healthState { return &healthState{grpc: health.NewServer()} }

// drain makes the server refuse new calls and report NOT_SERVING.
func (h *healthState) drain() {
	if h.draining.CompareAndSwap(false, true) {
		h.grpc.Shutdown()
	}
}

// ready reports nil while the server accepts calls and can persist its
// state.
func (h *healthState) ready() error {
	if h.draining.Load() {
		return ErrShuttingDown
	}
	if err := h.persistErr.Load(); err != nil {
		return fmt.Errorf("%w: %w", ErrCannotPersist, *err)
	}
	return nil
}

// setServing sets the gRPC health status of the server and the service
// (after drain the health server ignores it: it stays NOT_SERVING).
func (h *healthState) setServing(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.grpc.SetServingStatus("", st)
	h.grpc.SetServingStatus(pb.AgentService_ServiceDesc.ServiceName, st)
}

func (h *healthState) admit(ctx context.Context) error {
	if h.draining.Load() {
		return ErrShuttingDown
	}
	return ctx.Err()
}

// admitLearning admits a call that acts or learns (Recommend,
// ReportOutcome). While the state directory cannot be written it refuses
// them with UNAVAILABLE naming the cause: what the agent would learn could
// not be kept, so the caller applies its defaults (and says why) until a
// write succeeds, even when it reaches the agent directly rather than
// through a Service that drops the unready endpoint. Status queries and
// ForgetWorkload are still answered.
func (h *healthState) admitLearning(ctx context.Context) error {
	if err := h.admit(ctx); err != nil {
		return err
	}
	if err := h.persistErr.Load(); err != nil {
		return fmt.Errorf("%w: %w", ErrCannotPersist, *err)
	}
	return nil
}

// persisted records the outcome of a write to the state directory: after
// a failure the server is not ready (Ready, and the gRPC health service
// reports NOT_SERVING), so that the recommender moves to its defaults
// rather than feed an agent that would lose what it learns; the next
// successful write makes it ready again. Failed writes are retried by the
// persister (pending experience and the dirty checkpoint are kept).
func (h *healthState) persisted(err error) {
	if err == nil {
		if h.persistErr.Swap(nil) != nil {
			klog.InfoS("Persisting agent state works again; ready")
			h.setServing(true)
		}
		return
	}
	if h.persistErr.Swap(&err) == nil {
		klog.ErrorS(err, "Cannot persist agent state; not ready until a write succeeds")
		h.setServing(false)
	}
}
