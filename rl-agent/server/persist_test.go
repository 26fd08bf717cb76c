package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/store"
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

// TestRestart checks that a server restarted on the same state directory
// resumes every workload's stage, the policy version and the weights.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	learner := newPPO(t, 1)
	h := start(t, func(o *Options) { o.Store, o.Learner = st, learner })
	promote(t, h.client, "web")
	// The transition was checkpointed before it was reported, not at the
	// next interval (30s by default): a kill -9 now would not undo it.
	if b, err := st.LoadCheckpoint(checkpointName); err != nil || !strings.Contains(string(b), `"workload":"shop/web/uid-web","lifecycle":{"stage":2`) {
		t.Fatalf("stage transition not checkpointed: %v %.300s", err, b)
	}
	if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("idle", 0)); err != nil {
		t.Fatal(err)
	}
	// Bootstrapping episodes queue training; wait for them.
	deadline := time.Now().Add(20 * time.Second)
	for h.srv.trainer.version.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("training did not run: version %s", h.srv.PolicyVersion())
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.stop() // a training job in flight ends before the version is read
	version := h.srv.PolicyVersion()
	st2, rec := restartStore(t, h, st, dir)
	if rec.Records != 3 {
		t.Errorf("experience log holds %d records, want 3", rec.Records)
	}
	fresh := newPPO(t, 99)
	h2 := start(t, func(o *Options) { o.Store, o.Learner = st2, fresh })
	if got := h2.srv.PolicyVersion(); got != version {
		t.Errorf("policy version %s after restart, want %s", got, version)
	}
	for name, want := range map[string]pb.Stage{"web": pb.Stage_STAGE_ONLINE_TRAINING, "idle": pb.Stage_STAGE_BOOTSTRAPPING} {
		r, err := h2.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref(name)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Stage != want || r.Status.PolicyVersion != version {
			t.Errorf("%s after restart: %v, want stage %v version %s", name, r.Status, want, version)
		}
	}
	// The weights are the trained ones, not the fresh learner's: both give
	// the same probabilities and value on a state. (The checkpoint bytes
	// differ: the config, seed included, stays the learner's own.)
	state := make([]float64, learn.StateDim)
	for i := range state {
		state[i] = float64(i) / learn.StateDim
	}
	a, err := learner.Act(state, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fresh.Act(state, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Value != b.Value || fmt.Sprint(a.Probs) != fmt.Sprint(b.Probs) {
		t.Errorf("restored policy %+v differs from the checkpointed one %+v", b, a)
	}
	if got := testutil.ToFloat64(h2.srv.metrics.workloads.WithLabelValues("OnlineTraining")); got != 1 {
		t.Errorf("workloads gauge after restart: %v", got)
	}
}

// TestExperiencePersistence checks that experience reaches the store in
// order, that a failed append is retried rather than lost, and that the log
// is compacted to the most recent records.
func TestExperiencePersistence(t *testing.T) {
	fs := &fakeStore{ckpts: map[string][]byte{}, failNext: true}
	h := start(t, func(o *Options) {
		o.Store = fs
		o.FlushRecords, o.KeepRecords, o.FlushInterval = 1000, 3, time.Hour
	})
	var want []string
	for i := range 14 {
		name := fmt.Sprintf("w%02d", i)
		req := outcomeReq(name, 0)
		req.Config.Gates.Window = 10 // no transitions: they would checkpoint
		if _, err := h.client.ReportOutcome(ctx(t), req); err != nil {
			t.Fatal(err)
		}
		want = append(want, "shop/"+name+"/uid-"+name)
		if i%2 == 1 {
			err := h.srv.journal.flush()
			if (err != nil) != (i == 1) {
				t.Fatalf("flush after %d: %v (only the first may fail)", i, err)
			}
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fmt.Sprint(fs.appended) != fmt.Sprint(want) {
		t.Errorf("appended %v, want %v", fs.appended, want)
	}
	// 14 records with KeepRecords 3: compaction once 12 were written, to
	// the 3 most recent at that point.
	if len(fs.compacted) != 1 || fmt.Sprint(fs.compacted[0]) != fmt.Sprint(want[9:12]) {
		t.Errorf("compactions %v, want one to %v", fs.compacted, want[9:12])
	}
	if got := testutil.ToFloat64(h.srv.metrics.persist.WithLabelValues("experience", "failed")); got != 1 {
		t.Errorf("failed appends counted %v, want 1", got)
	}
}
