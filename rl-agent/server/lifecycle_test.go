package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// TestGateHoldsBackBadDefaults feeds transitions whose reward fails the
// gate (an OOM kill each window): the workload stays in Bootstrapping, the
// defaults keep acting, and the reward is the negative penalty.
func TestGateHoldsBackBadDefaults(t *testing.T) {
	h := start(t, nil)
	for i := range 6 {
		req := outcomeReq("oomy", i)
		req.NextObservation.Containers[0].OomKills = 1
		r, err := h.client.ReportOutcome(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stage != pb.Stage_STAGE_BOOTSTRAPPING || r.Reward >= 0 || !r.EpisodeComplete {
			t.Fatalf("outcome %d: %v", i, r)
		}
	}
	r, err := h.client.Recommend(ctx(t), recommendReq("oomy", 10))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != pb.Source_SOURCE_DEFAULT || r.Stage != pb.Stage_STAGE_BOOTSTRAPPING {
		t.Errorf("after failing the gate: %v", r)
	}
	st, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("oomy")})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Episodes != 6 || st.Status.RewardMean != -1 || st.Status.RewardStdDev != 0 {
		t.Errorf("status %v", st.Status)
	}
}

// TestLifecycleOverGRPC walks one workload through every stage with
// synthetic outcomes: good rewards promote it twice (Bootstrapping →
// OnlineTraining → Serving), OOM kills fire the detector (→ Retraining),
// and good rewards bring it back (→ OnlineTraining). Serving decisions are
// greedy and Serving episodes queue no training.
func TestLifecycleOverGRPC(t *testing.T) {
	// The defaults act for at least 3 episodes of Retraining.
	h := start(t, func(o *Options) { o.Retraining = lifecycle.RetrainingBounds{Min: 3} })
	tick := 0
	feed := func(n int, oom bool) *pb.ReportOutcomeResponse { return feedOutcomes(t, h, &tick, n, oom) }
	if r := feed(2, false); r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("after 2 good episodes: %v", r.Stage)
	}
	if r := feed(2, false); r.Stage != pb.Stage_STAGE_SERVING {
		t.Fatalf("after 2 stable online episodes: %v", r.Stage)
	}
	// Let the training queued so far finish, then check Serving adds none.
	waitTrainerIdle(h.srv)
	before := testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("ok")) + testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("dropped"))
	rec, err := h.client.Recommend(ctx(t), recommendReq("web", tick))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Stage != pb.Stage_STAGE_SERVING || rec.Source == pb.Source_SOURCE_DEFAULT {
		t.Fatalf("serving decision: %v", rec)
	}
	if r := feed(2, true); r.Stage != pb.Stage_STAGE_RETRAINING || r.Reward != -1 {
		t.Fatalf("after 2 OOM episodes: %v", r)
	}
	waitTrainerIdle(h.srv)
	after := testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("ok")) + testutil.ToFloat64(h.srv.metrics.training.WithLabelValues("dropped"))
	if after != before {
		t.Errorf("Serving episodes queued %v training jobs, want 0", after-before)
	}
	// The gate passes after 2 good episodes, but the minimum holds it.
	if r := feed(2, false); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 2 good Retraining episodes of at least 3: %v", r.Stage)
	}
	if r := feed(1, false); r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("after recovery: %v", r.Stage)
	}
	for _, tr := range [][2]string{{"Bootstrapping", "OnlineTraining"}, {"OnlineTraining", "Serving"}, {"Serving", "Retraining"}, {"Retraining", "OnlineTraining"}} {
		if got := testutil.ToFloat64(h.srv.metrics.transitions.WithLabelValues(tr[0], tr[1])); got != 1 {
			t.Errorf("transitions %s→%s = %v, want 1", tr[0], tr[1], got)
		}
	}
}

// TestRetrainingCap: a workload whose defaults never pass the promotion
// gate after the detector fired returns to the agent after the cap, and a
// restart keeps counting the episodes of the stay.
func TestRetrainingCap(t *testing.T) {
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	bounds := func(o *Options) { o.Store, o.Retraining = st, lifecycle.RetrainingBounds{Max: 3} }
	h := start(t, bounds)
	tick := 0
	feed := func(h *harness, n int, oom bool) *pb.ReportOutcomeResponse { return feedOutcomes(t, h, &tick, n, oom) }
	feed(h, 4, false) // Bootstrapping → OnlineTraining → Serving
	if r := feed(h, 2, true); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 2 OOM episodes: %v", r.Stage)
	}
	// One bad episode in Retraining; the gate fails (reward -1).
	if r := feed(h, 1, true); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 1 bad Retraining episode: %v", r.Stage)
	}
	if err := h.srv.persist(true); err != nil {
		t.Fatal(err)
	}
	st, _ = restartStore(t, h, st, dir)
	h2 := start(t, bounds)
	if r := feed(h2, 1, true); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("after 2 bad Retraining episodes across a restart: %v", r.Stage)
	}
	if r := feed(h2, 1, true); r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("after the cap of 3: %v", r.Stage)
	}
	if got := testutil.ToFloat64(h2.srv.metrics.transitions.WithLabelValues("Retraining", "OnlineTraining")); got != 1 {
		t.Errorf("transitions Retraining→OnlineTraining = %v, want 1", got)
	}
}

// feedOutcomes reports n outcomes of workload "web" from tick *tick on,
// each an episode at the test gates; oom makes each window OOM-kill (reward
// -1). It returns the last answer.
func feedOutcomes(t *testing.T, h *harness, tick *int, n int, oom bool) *pb.ReportOutcomeResponse {
	t.Helper()
	var r *pb.ReportOutcomeResponse
	for range n {
		req := outcomeReq("web", *tick)
		if oom {
			req.NextObservation.Containers[0].OomKills = 1
		}
		*tick++
		var err error
		if r, err = h.client.ReportOutcome(ctx(t), req); err != nil {
			t.Fatal(err)
		}
	}
	return r
}
