package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// TestReadinessFollowsPersistence: while the agent cannot write its state
// directory (experience or checkpoint), it is not ready, on /readyz and on
// the gRPC health service; the next successful write makes it ready again.
func TestReadinessFollowsPersistence(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*fakeStore)
		mend func(*fakeStore)
	}{
		{"experience append fails", func(f *fakeStore) { f.failNext = true }, func(*fakeStore) {}},
		{"checkpoint fails", func(f *fakeStore) { f.failCheckpoints = true }, func(f *fakeStore) { f.failCheckpoints = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeStore{ckpts: map[string][]byte{}}
			h := start(t, func(o *Options) { o.Store, o.FlushInterval = fs, time.Hour })
			health := func() healthpb.HealthCheckResponse_ServingStatus {
				r, err := h.health.Check(ctx(t), &healthpb.HealthCheckRequest{Service: pb.AgentService_ServiceDesc.ServiceName})
				if err != nil {
					t.Fatal(err)
				}
				return r.Status
			}
			if err := h.srv.Ready(); err != nil || health() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("fresh server: ready %v, health %v", err, health())
			}
			fs.mu.Lock()
			tc.fail(fs)
			fs.mu.Unlock()
			req := outcomeReq("web", 0)
			req.Config.Gates.Window = 10
			if _, err := h.client.ReportOutcome(ctx(t), req); err != nil {
				t.Fatal(err)
			}
			if err := h.srv.persist(false); err == nil {
				t.Fatal("the write did not fail")
			}
			if err := h.srv.Ready(); !errors.Is(err, ErrCannotPersist) {
				t.Errorf("ready = %v, want ErrCannotPersist", err)
			}
			if got := health(); got != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Errorf("health %v while state cannot be written", got)
			}
			// The calls that act or learn are refused, naming the cause;
			// a status query is answered.
			if _, err := h.client.Recommend(ctx(t), recommendReq("web", 1)); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "cannot persist agent state") {
				t.Errorf("Recommend while state cannot be written: %v, want Unavailable: cannot persist agent state", err)
			}
			if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", 1)); status.Code(err) != codes.Unavailable {
				t.Errorf("ReportOutcome while state cannot be written: %v, want Unavailable", err)
			}
			if _, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")}); err != nil {
				t.Errorf("GetPolicyStatus while state cannot be written: %v", err)
			}
			fs.mu.Lock()
			tc.mend(fs)
			fs.mu.Unlock()
			if err := h.srv.persist(false); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if err := h.srv.Ready(); err != nil || health() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("after a successful write: ready %v, health %v", err, health())
			}
			if _, err := h.client.Recommend(ctx(t), recommendReq("web", 2)); err != nil {
				t.Errorf("Recommend after a successful write: %v", err)
			}
		})
	}
}
