package server

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// TestForgetWorkload: ForgetWorkload drops the workload from memory, the
// metrics and the next checkpoint; it is idempotent and validates its
// argument.
func TestForgetWorkload(t *testing.T) {
	fs := &fakeStore{ckpts: map[string][]byte{}}
	h := start(t, func(o *Options) { o.Store, o.MaxWorkloads = fs, 4 })
	for _, name := range []string{"a", "b"} {
		if _, err := h.client.Recommend(ctx(t), recommendReq(name, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(h.srv.metrics.capacity); got != 0.5 {
		t.Fatalf("capacity with 2 of 4 workloads = %v", got)
	}
	for i, want := range []bool{true, false} {
		r, err := h.client.ForgetWorkload(ctx(t), &pb.ForgetWorkloadRequest{Workload: ref("a")})
		if err != nil {
			t.Fatal(err)
		}
		if r.Found != want {
			t.Errorf("forget #%d: found = %v, want %v", i+1, r.Found, want)
		}
	}
	if _, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("a")}); status.Code(err) != codes.NotFound {
		t.Errorf("status of a forgotten workload: %v, want NotFound", err)
	}
	if _, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("b")}); err != nil {
		t.Errorf("the other workload: %v", err)
	}
	if _, err := h.client.ForgetWorkload(ctx(t), &pb.ForgetWorkloadRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("forget without a workload: %v, want InvalidArgument", err)
	}
	for name, want := range map[string]float64{
		"capacity":                    0.25,
		"workloads{Bootstrapping}":    1,
		"forgotten{removed}":          1,
		"forgotten{expired}":          0,
		"persisted agents (below, 1)": 1,
	} {
		var got float64
		switch name {
		case "capacity":
			got = testutil.ToFloat64(h.srv.metrics.capacity)
		case "workloads{Bootstrapping}":
			got = testutil.ToFloat64(h.srv.metrics.workloads.WithLabelValues("Bootstrapping"))
		case "forgotten{removed}":
			got = testutil.ToFloat64(h.srv.metrics.forgotten.WithLabelValues(forgetRemoved))
		case "forgotten{expired}":
			got = testutil.ToFloat64(h.srv.metrics.forgotten.WithLabelValues(forgetExpired))
		default:
			if err := h.srv.persist(false); err != nil {
				t.Fatal(err)
			}
			got = float64(len(checkpointedAgents(t, fs)))
		}
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

func checkpointedAgents(t *testing.T, fs *fakeStore) []string {
	t.Helper()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var snap snapshot
	if err := json.Unmarshal(fs.ckpts[checkpointName], &snap); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, a := range snap.Agents {
		keys = append(keys, a.Workload)
	}
	return keys
}

// TestCreateDeleteCyclesDoNotGrowState re-creates an autoscaler (a new UID
// each time) many more times than the workload limit, forgetting the old
// one each time, as the recommender does: no call is ever refused, and
// after a restart neither the checkpoint nor the experience log holds a
// forgotten workload.
func TestCreateDeleteCyclesDoNotGrowState(t *testing.T) {
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const limit, cycles = 3, 20
	h := start(t, func(o *Options) {
		o.Store, o.MaxWorkloads = st, limit
		o.FlushRecords, o.KeepRecords, o.FlushInterval = 1000, 1000, time.Hour
	})
	keep := &pb.WorkloadRef{Namespace: "shop", Name: "stays", Uid: "uid-stays"}
	req := outcomeReq("stays", 0)
	req.Workload = keep
	if _, err := h.client.ReportOutcome(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	for i := range cycles {
		w := &pb.WorkloadRef{Namespace: "shop", Name: "web", Uid: fmt.Sprintf("uid-%d", i)}
		rec := recommendReq("web", i)
		rec.Workload = w
		if _, err := h.client.Recommend(ctx(t), rec); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		out := outcomeReq("web", i)
		out.Workload = w
		out.Config.Gates.Window = 10 // no stage transitions
		if _, err := h.client.ReportOutcome(ctx(t), out); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i%5 == 4 {
			if err := h.srv.persist(true); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := h.client.ForgetWorkload(ctx(t), &pb.ForgetWorkloadRequest{Workload: w}); err != nil || !r.Found {
			t.Fatalf("cycle %d: forget: %v %v", i, r, err)
		}
	}
	if got := testutil.ToFloat64(h.srv.metrics.capacity); got != 1.0/limit {
		t.Errorf("capacity after the cycles = %v, want %v", got, 1.0/limit)
	}
	if err := h.srv.persist(true); err != nil {
		t.Fatal(err)
	}
	st2, rec := restartStore(t, h, st, dir)
	if rec.Records != 1 {
		t.Errorf("experience log holds %d records after the cycles, want 1 (the remaining workload's)", rec.Records)
	}
	h2 := start(t, func(o *Options) { o.Store, o.MaxWorkloads = st2, limit })
	h2.srv.registry.mu.RLock()
	n := len(h2.srv.registry.agents)
	h2.srv.registry.mu.RUnlock()
	if n != 1 {
		t.Errorf("%d workloads restored, want 1", n)
	}
	if _, err := h2.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: keep}); err != nil {
		t.Errorf("the remaining workload after restart: %v", err)
	}
}

// TestWorkloadTTL: a workload with no call for WorkloadTTL is forgotten, one
// that called within it is kept, and after a restart the TTL counts from
// the workload's last outcome, not from the restart.
func TestWorkloadTTL(t *testing.T) {
	var mu sync.Mutex
	now := t0
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Hour
	h := start(t, func(o *Options) { o.Store, o.Now, o.WorkloadTTL = st, clock, ttl })
	for _, name := range []string{"silent", "busy", "quiet"} {
		if _, err := h.client.ReportOutcome(ctx(t), outcomeReq(name, 0)); err != nil {
			t.Fatal(err)
		}
	}
	advance(40 * time.Minute)
	if _, err := h.client.Recommend(ctx(t), recommendReq("busy", 1)); err != nil {
		t.Fatal(err)
	}
	advance(30 * time.Minute) // silent: 70 min, busy: 30 min
	if n := h.srv.expireSilent(clock()); n != 2 {
		t.Errorf("expired %d workloads, want 2 (silent and quiet)", n)
	}
	for name, want := range map[string]codes.Code{"silent": codes.NotFound, "quiet": codes.NotFound, "busy": codes.OK} {
		if _, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref(name)}); status.Code(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if got := testutil.ToFloat64(h.srv.metrics.forgotten.WithLabelValues(forgetExpired)); got != 2 {
		t.Errorf("forgotten{expired} = %v, want 2", got)
	}

	// busy's last outcome was at t0 (its Recommend does not update it):
	// after a restart at t0+70m its TTL has run out.
	if err := h.srv.persist(true); err != nil {
		t.Fatal(err)
	}
	st2, _ := restartStore(t, h, st, dir)
	h2 := start(t, func(o *Options) { o.Store, o.Now, o.WorkloadTTL = st2, clock, ttl })
	if n := h2.srv.expireSilent(clock()); n != 1 {
		t.Errorf("after restart: expired %d, want 1 (busy's last outcome is 70 min old)", n)
	}
	// Disabled TTL forgets nothing.
	h3 := start(t, func(o *Options) { o.Now, o.WorkloadTTL = clock, 0 })
	if _, err := h3.client.Recommend(ctx(t), recommendReq("x", 0)); err != nil {
		t.Fatal(err)
	}
	advance(1000 * time.Hour)
	if n := h3.srv.expireSilent(clock()); n != 0 {
		t.Errorf("with the TTL disabled, expired %d", n)
	}
}

// TestForgetDropsConstraints: the constraints the bounds remember from a
// Recommend go with the workload, by either path, so a re-created
// autoscaler's outcomes are not checked against the deleted one's.
func TestForgetDropsConstraints(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(h *harness)
	}{
		{"ForgetWorkload", func(h *harness) {
			if _, err := h.client.ForgetWorkload(ctx(t), &pb.ForgetWorkloadRequest{Workload: ref("a")}); err != nil {
				t.Fatal(err)
			}
		}},
		{"TTL", func(h *harness) {
			if n := h.srv.expireSilent(t0.Add(10000 * time.Hour)); n != 2 {
				t.Fatalf("expired %d workloads, want 2", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(o *Options) { o.WorkloadTTL = time.Hour })
			for _, name := range []string{"a", "b"} {
				if _, err := h.client.Recommend(ctx(t), recommendReq(name, 0)); err != nil {
					t.Fatal(err)
				}
			}
			if n := h.srv.bounds.remembered(); n != 2 {
				t.Fatalf("constraints of %d workloads remembered, want 2", n)
			}
			if _, ok := h.srv.bounds.constraintsOf("shop/a/uid-a"); !ok {
				t.Fatal("no constraints remembered under the workload's key")
			}
			tc.forget(h)
			if _, ok := h.srv.bounds.constraintsOf("shop/a/uid-a"); ok {
				t.Error("the forgotten workload's constraints are still remembered")
			}
			// An outcome with replicas beyond the old constraints is no
			// longer refused for them.
			req := outcomeReq("a", 0)
			req.Applied.Replicas = 50
			if _, err := h.client.ReportOutcome(ctx(t), req); status.Code(err) == codes.InvalidArgument {
				t.Errorf("outcome after forgetting: %v; it was checked against the old constraints", err)
			}
		})
	}
}
