package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func TestDeadlineExceeded(t *testing.T) {
	gl := &gatedLearner{Learner: newPPO(t, 1), entered: make(chan struct{}, 16), release: make(chan struct{})}
	h := start(t, func(o *Options) { o.Learner = gl })
	promote(t, h.client, "web")

	// The forward pass outlives the caller's deadline.
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := h.client.Recommend(c, recommendReq("web", 5))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("slow forward pass: %v, want DeadlineExceeded", err)
	}
	<-gl.entered
	close(gl.release)

	// A call whose deadline passed before it started does no work.
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := h.srv.Recommend(expired, recommendReq("other", 0)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("expired context: %v, want DeadlineExceeded", err)
	}
	if _, ok := h.srv.registry.agents["shop/other/uid-other"]; ok {
		t.Error("an expired call created a workload")
	}
}

func TestOverloadAndShutdown(t *testing.T) {
	gl := &gatedLearner{Learner: newPPO(t, 1), entered: make(chan struct{}, 16), release: make(chan struct{})}
	h := start(t, func(o *Options) {
		o.Learner = gl
		o.QueueSize, o.MaxBatch = 1, 1
	})
	promote(t, h.client, "web")

	errs := make(chan error, 2)
	go func() { _, err := h.client.Recommend(ctx(t), recommendReq("web", 10)); errs <- err }()
	<-gl.entered // the batcher holds the first call
	go func() { _, err := h.client.Recommend(ctx(t), recommendReq("web", 11)); errs <- err }()
	for len(h.srv.batcher.queue) < 1 { // the second fills the queue
		time.Sleep(time.Millisecond)
	}
	_, err := h.client.Recommend(ctx(t), recommendReq("web", 12))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("full queue: %v, want Unavailable", err)
	}
	close(gl.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("queued call: %v", err)
		}
	}
	if got := testutil.ToFloat64(h.srv.metrics.requests.WithLabelValues("Recommend", "Unavailable")); got != 1 {
		t.Errorf("Unavailable count %v, want 1", got)
	}

	// Health is SERVING until the server drains; then calls are refused.
	for _, svc := range []string{"", pb.AgentService_ServiceDesc.ServiceName} {
		r, err := h.health.Check(ctx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v, %v", svc, r, err)
		}
	}
	h.srv.Drain()
	if r, err := h.health.Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health while draining: %v, %v", r, err)
	}
	for name, call := range map[string]func() error{
		"Recommend":     func() error { _, err := h.client.Recommend(ctx(t), recommendReq("web", 20)); return err },
		"ReportOutcome": func() error { _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", 20)); return err },
		"GetPolicyStatus": func() error {
			_, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.Unavailable {
			t.Errorf("%s while draining: %v, want Unavailable", name, err)
		}
	}
}

// TestMicroBatching checks that decisions queued while a forward pass runs
// share the next one. The first pass is held at a gate until every other
// call is queued, so the outcome does not depend on goroutine scheduling.
func TestMicroBatching(t *testing.T) {
	gl := &gatedLearner{Learner: newPPO(t, 1), entered: make(chan struct{}, 4), release: make(chan struct{}), onDemand: true}
	h := start(t, func(o *Options) { o.Learner = gl })
	const n = 32
	for i := range n {
		promote(t, h.client, fmt.Sprintf("w%d", i))
	}
	gl.calls.Store(0)
	gl.maxSize.Store(0)
	gl.paused.Store(true)

	errs := make(chan error, n)
	call := func(i int) {
		_, err := h.client.Recommend(ctx(t), recommendReq(fmt.Sprintf("w%d", i), 10))
		errs <- err
	}
	go call(0)
	select {
	case <-gl.entered: // the batcher is now busy with w0's pass
	case <-time.After(30 * time.Second):
		t.Fatal("first forward pass never started")
	}
	for i := 1; i < n; i++ {
		go call(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(h.srv.batcher.queue) < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d decisions queued", len(h.srv.batcher.queue), n-1)
		}
		time.Sleep(time.Millisecond)
	}
	gl.paused.Store(false)
	close(gl.release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	calls, biggest := gl.calls.Load(), gl.maxSize.Load()
	if calls != 2 || biggest != n-1 {
		t.Errorf("%d decisions took %d forward passes (largest %d), want 2 passes, the second of %d", n, calls, biggest, n-1)
	}
}
