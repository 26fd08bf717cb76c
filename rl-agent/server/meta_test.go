package server

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

func newMeta(t testing.TB, seed uint64, window int) *nn.MetaPPO {
	t.Helper()
	return newMetaSignature(t, seed, window, 0)
}

// newMetaSignature is newMeta whose encoder reads signature values per
// step.
func newMetaSignature(t testing.TB, seed uint64, window, signature int) *nn.MetaPPO {
	t.Helper()
	cfg := nn.DefaultMetaConfig(learn.StateDim, int(learn.NumActions))
	cfg.Hidden, cfg.MinibatchSize, cfg.Seed, cfg.Window, cfg.EmbedDim = []int{16}, 8, seed, window, 3
	cfg.SignatureDim = signature
	m, err := nn.NewMetaPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitVersion waits until the policy reached version v and the copy that
// promotions pin is of it: the trainer raises the version a moment before
// it stores that copy.
func waitVersion(t *testing.T, s *Server, v int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.trainer.version.Load() < v || s.pins.live.Load() == nil || s.pins.live.Load().version < v {
		if time.Now().After(deadline) {
			t.Fatalf("training did not run: version %s, want v%d", s.PolicyVersion(), v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// windowOf is the trajectory the server's agent for name would hand to the
// policy now.
func windowOf(t *testing.T, s *Server, name string) []nn.Step {
	t.Helper()
	p, _ := prepare(t, s, recommendReq(name, 0))
	return p.Window
}

// prepare is the first half of the server's decision on req, without
// acting (Prepare changes nothing but the gates, which req does not).
func prepare(t *testing.T, s *Server, req *pb.RecommendRequest) (learn.Prepared, recommendInput) {
	t.Helper()
	in, err := fromRecommendRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	s.registry.mu.RLock()
	a := s.registry.agents[in.key]
	s.registry.mu.RUnlock()
	if a == nil {
		t.Fatalf("no agent for %s", in.key)
	}
	p, err := a.Prepare(in.obs, in.constraints, in.def, in.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, in
}

// TestMetaPPOServer serves a Meta-PPO policy: the agents keep their
// trajectories, bootstrapping and online training run the Meta-PPO updates
// (the version moves), Recommend acts through the batched Meta-PPO forward
// pass once the workload is promoted (sampled in OnlineTraining, greedy in
// Serving, by the frozen copy it was pinned to), GetPolicyStatus answers
// with the pinned version, and a restart on the same state restores the
// weights, stages, version, pin and each workload's window (rebuilt from
// the experience log). With a learner that reads signatures, each step of
// the windows carries one, and the log rebuilds them too.
func TestMetaPPOServer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		signature int
	}{{"state, action and reward", 0}, {"with signatures", learn.SignatureDim}} {
		t.Run(tc.name, func(t *testing.T) { testMetaPPOServer(t, tc.signature) })
	}
}

func testMetaPPOServer(t *testing.T, signature int) {
	const window = 4
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	learner := newMetaSignature(t, 1, window, signature)
	h := start(t, func(o *Options) { o.Store, o.Learner, o.MetaLearner = st, nil, learner })
	promote(t, h.client, "web")
	waitVersion(t, h.srv, 2) // two bootstrapping jobs: behaviour cloning and update, with windows
	for tick := 2; tick < 8; tick++ {
		r, err := h.client.Recommend(ctx(t), recommendReq("web", tick))
		if err != nil {
			t.Fatal(err)
		}
		if r.Stage == pb.Stage_STAGE_BOOTSTRAPPING || r.Source == pb.Source_SOURCE_DEFAULT {
			t.Fatalf("tick %d: the promoted workload did not get the policy's answer: %v", tick, r)
		}
		if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", tick)); err != nil {
			t.Fatal(err)
		}
	}
	// Two online episodes of one step each (two Meta-PPO updates) fill the
	// gate's window of 2 and promote the workload to Serving, which
	// exploits (greedy forward passes) and does not train.
	waitVersion(t, h.srv, 4)
	w := windowOf(t, h.srv, "web")
	if len(w) != window {
		t.Fatalf("window of %d steps after 8 outcomes, want %d", len(w), window)
	}
	for i, s := range w {
		if len(s.Signature) != signature {
			t.Fatalf("step %d of the window carries %d signature values, want %d", i, len(s.Signature), signature)
		}
	}
	s, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
	if err != nil {
		t.Fatal(err)
	}
	// The promotion pinned the version current then: the last online
	// episode's training, queued by the same outcome, may not have landed.
	pinned := h.srv.pins.lookup("shop/web/uid-web")
	if pinned == nil || pinned.version < 2 || pinned.version > 4 {
		t.Fatalf("pin %+v, want one of v2..v4", pinned)
	}
	if s.Status.Stage != pb.Stage_STAGE_SERVING || s.Status.Transitions != 8 || s.Status.PolicyVersion != pinned.name {
		t.Fatalf("status %v, want version %s", s.Status, pinned.name)
	}
	st2, _ := restartStore(t, h, st, dir)
	fresh := newMetaSignature(t, 99, window, signature)
	h2 := start(t, func(o *Options) { o.Store, o.Learner, o.MetaLearner = st2, nil, fresh })
	if got := h2.srv.PolicyVersion(); got != "v4" {
		t.Errorf("policy version %s after restart, want v4", got)
	}
	if got := windowOf(t, h2.srv, "web"); !reflect.DeepEqual(got, w) {
		t.Errorf("window after restart %v, want %v", got, w)
	}
	state := make([]float64, learn.StateDim)
	for i := range state {
		state[i] = float64(i) / learn.StateDim
	}
	a, err := learner.ActWindow(state, w, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fresh.ActWindow(state, w, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("restored policy %+v differs from the checkpointed one %+v", b, a)
	}
	// Serving is greedy, so the answer is the decision of the frozen copy
	// pinned before the restart on the state and the rebuilt window.
	req := recommendReq("web", 8)
	p, in := prepare(t, h2.srv, req)
	ds, err := pinned.policy.ActBatch([][]float64{p.State}, [][]nn.Step{p.Window}, [][]bool{p.Mask}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := ds[0]
	if plain, err := pinned.policy.ActBatch([][]float64{p.State}, [][]nn.Step{nil}, [][]bool{p.Mask}, true, nil); err != nil || plain[0].Value == d.Value {
		t.Fatalf("the window does not change the critic's value (%v, %v): the check below would not show it was used", plain, err)
	}
	want := learn.Apply(&in.obs, &in.constraints, learn.Action(d.Action), learn.DefaultSteps())
	wantSource := pb.Source_SOURCE_AGENT
	if learn.SafeguardRefuses(&in.obs, &in.constraints, learn.Action(d.Action)) {
		want, wantSource = learn.SafeguardRecommendation(&in.obs, &in.constraints, learn.DefaultSteps()), pb.Source_SOURCE_SAFEGUARD
	}
	r, err := h2.client.Recommend(ctx(t), req)
	if err != nil || r.Stage != pb.Stage_STAGE_SERVING || r.PolicyVersion != pinned.name {
		t.Fatalf("after restart: %v, %v", r, err)
	}
	if r.Source != wantSource || !sameAllocation(r.Recommendation, wire.ToRecommendation(&want)) {
		t.Fatalf("after restart: answer %v from %v, want %v from %v (action %v)", r.Recommendation, r.Source, wire.ToRecommendation(&want), wantSource, learn.Action(d.Action))
	}
}

// TestPolicyKindMismatch: a state directory holding one kind (or window)
// of policy refuses to start with another, without touching the state.
func TestPolicyKindMismatch(t *testing.T) {
	for _, tc := range []struct {
		name        string
		saved, next func(*Options)
	}{
		{"PPO state, Meta-PPO learner", func(o *Options) { o.Learner = newPPO(t, 1) }, func(o *Options) { o.MetaLearner = newMeta(t, 1, 4) }},
		{"Meta-PPO state, PPO learner", func(o *Options) { o.MetaLearner = newMeta(t, 1, 4) }, func(o *Options) { o.Learner = newPPO(t, 1) }},
		{"Meta-PPO state, other window", func(o *Options) { o.MetaLearner = newMeta(t, 1, 4) }, func(o *Options) { o.MetaLearner = newMeta(t, 1, 8) }},
		{"Meta-PPO state, signature learner", func(o *Options) { o.MetaLearner = newMeta(t, 1, 4) }, func(o *Options) { o.MetaLearner = newMetaSignature(t, 1, 4, learn.SignatureDim) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, _, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			h := start(t, func(o *Options) { o.Learner = nil; tc.saved(o); o.Store = st })
			if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", 0)); err != nil {
				t.Fatal(err)
			}
			h.stop()
			before, err := st.LoadCheckpoint(checkpointName)
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			o.Registerer, o.Store = prometheus.NewRegistry(), st
			tc.next(&o)
			srv, err := New(o)
			if err == nil {
				srv.Close()
				t.Fatal("a server started on a state of another policy")
			}
			if !errors.Is(err, nn.ErrIncompatibleCheckpoint) {
				t.Fatalf("got %v, want ErrIncompatibleCheckpoint", err)
			}
			after, err := st.LoadCheckpoint(checkpointName)
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("the refused start changed the state (err %v)", err)
			}
		})
	}
}

// TestMetaSignatureOfAnotherLength: a meta-learner whose steps carry a
// signature of another length than the agents compute is refused.
func TestMetaSignatureOfAnotherLength(t *testing.T) {
	o := DefaultOptions()
	o.Registerer, o.Learner, o.MetaLearner = prometheus.NewRegistry(), nil, newMetaSignature(t, 1, 4, learn.SignatureDim+1)
	srv, err := New(o)
	if err == nil {
		srv.Close()
		t.Fatal("accepted")
	}
	if !errors.Is(err, nn.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("got %v", err)
	}
}

func TestOptionsNeedOneLearner(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
	}{
		{"none", func(*Options) {}},
		{"both", func(o *Options) { o.Learner, o.MetaLearner = newPPO(t, 1), newMeta(t, 1, 4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Registerer = prometheus.NewRegistry()
			tc.set(&o)
			srv, err := New(o)
			if err == nil {
				srv.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "exactly one of a learner, a meta-learner and an ensemble") {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// TestMetaForwardPassesWindows: the batcher's forward pass hands each
// decision's window to the Meta-PPO policy. Its answers, greedy and sampled
// groups alike, equal ActWindow on each job's own state and window (the
// sampled group drawing from the generator in order), and differ from what
// the same states give without windows.
func TestMetaForwardPassesWindows(t *testing.T) {
	m := newMeta(t, 3, 4)
	h := start(t, func(o *Options) { o.Learner, o.MetaLearner = nil, m })
	rng := rand.New(rand.NewPCG(1, 2))
	var jobs []*decisionJob
	for i := range 6 {
		state := make([]float64, learn.StateDim)
		for k := range state {
			state[k] = rng.Float64()
		}
		var window []nn.Step
		for range i % 5 {
			s := make([]float64, learn.StateDim)
			for k := range s {
				s[k] = rng.Float64()
			}
			window = append(window, nn.Step{State: s, Action: rng.IntN(int(learn.NumActions)), Reward: rng.Float64()})
		}
		jobs = append(jobs, &decisionJob{ctx: context.Background(), state: state, window: window, greedy: i%2 == 0, reply: make(chan decisionResult, 1)})
	}
	h.srv.batcher.forward(jobs, rand.New(rand.NewPCG(7, 8)))
	sample := rand.New(rand.NewPCG(7, 8))
	for _, greedy := range []bool{true, false} { // forward's order: greedy group first
		for i, j := range jobs {
			if j.greedy != greedy {
				continue
			}
			r := <-j.reply
			if r.err != nil {
				t.Fatal(r.err)
			}
			want, err := m.ActWindow(j.state, j.window, nil, greedy, sample)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.d, want) {
				t.Fatalf("job %d: forward pass %+v, ActWindow %+v", i, r.d, want)
			}
			if len(j.window) > 0 {
				plain, err := m.ActWindow(j.state, nil, nil, true, nil)
				if err != nil {
					t.Fatal(err)
				}
				if plain.Value == r.d.Value {
					t.Fatalf("job %d: the window did not change the value", i)
				}
			}
		}
	}
}
