package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func keyOf(name string) string { return "shop/" + name + "/uid-" + name }

// countingLearner counts the greedy forward passes of the shared policy.
type countingLearner struct {
	Learner
	greedy atomic.Int64
}

func (c *countingLearner) ActBatch(states [][]float64, masks [][]bool, greedy bool, rng *rand.Rand) ([]nn.Decision, error) {
	if greedy {
		c.greedy.Add(1)
	}
	return c.Learner.ActBatch(states, masks, greedy, rng)
}

// outcome reports one outcome (one episode with the test gates) of name at
// tick, with an OOM kill if oom (reward -1: the detector fires).
func outcome(t *testing.T, h *harness, name string, tick int, oom bool) *pb.ReportOutcomeResponse {
	t.Helper()
	req := outcomeReq(name, tick)
	if oom {
		req.NextObservation.Containers[0].OomKills = 1
	}
	r, err := h.client.ReportOutcome(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// nearlyServing takes name to OnlineTraining with one good online episode:
// the next good outcome promotes it to Serving.
func nearlyServing(t *testing.T, h *harness, name string) {
	t.Helper()
	promote(t, h.client, name)
	if r := outcome(t, h, name, 2, false); r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("%s after one online episode: %v", name, r.Stage)
	}
}

// toServing promotes name, which nearlyServing prepared, to Serving.
func toServing(t *testing.T, h *harness, name string) {
	t.Helper()
	if r := outcome(t, h, name, 3, false); r.Stage != pb.Stage_STAGE_SERVING {
		t.Fatalf("%s after two online episodes: %v", name, r.Stage)
	}
}

// toRetraining fires name's detector with two OOM episodes.
func toRetraining(t *testing.T, h *harness, name string) {
	t.Helper()
	outcome(t, h, name, 4, true)
	if r := outcome(t, h, name, 5, true); r.Stage != pb.Stage_STAGE_RETRAINING {
		t.Fatalf("%s after two OOM episodes: %v", name, r.Stage)
	}
}

// trainOthers runs training jobs from the episodes of a bootstrapping
// workload until the shared policy is past version v.
func trainOthers(t *testing.T, h *harness, name string, v int64) {
	t.Helper()
	for tick := 0; h.srv.trainer.version.Load() <= v; tick++ {
		req := outcomeReq(name, tick)
		req.Config.Gates.Window = 10 // stays Bootstrapping: every episode trains
		if _, err := h.client.ReportOutcome(ctx(t), req); err != nil {
			t.Fatal(err)
		}
		waitTrainerIdle(h.srv)
	}
}

// probeStates are fixed states to compare policies on.
func probeStates() [][]float64 {
	rng := rand.New(rand.NewPCG(5, 6))
	out := make([][]float64, 8)
	for i := range out {
		out[i] = make([]float64, learn.StateDim)
		for k := range out[i] {
			out[i][k] = rng.Float64()*2 - 1
		}
	}
	return out
}

func greedyOn(t *testing.T, act func(states [][]float64, windows [][]nn.Step, masks [][]bool, greedy bool, rng *rand.Rand) ([]nn.Decision, error)) []nn.Decision {
	t.Helper()
	states := probeStates()
	ds, err := act(states, make([][]nn.Step, len(states)), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func liveAct(l Learner) func([][]float64, [][]nn.Step, [][]bool, bool, *rand.Rand) ([]nn.Decision, error) {
	return func(states [][]float64, _ [][]nn.Step, masks [][]bool, greedy bool, rng *rand.Rand) ([]nn.Decision, error) {
		return l.ActBatch(states, masks, greedy, rng)
	}
}

// serverDecision is the server's own decision for name's next Recommend:
// the policy recommend routes it to, through the batcher.
func serverDecision(t *testing.T, s *Server, name string) nn.Decision {
	t.Helper()
	p, in := prepare(t, s, recommendReq(name, 10))
	d, err := s.batcher.decide(ctx(t), p, s.frozenFor(in.key, p))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestServingIgnoresLaterTraining: a Serving workload keeps deciding with
// the weights of its promotion while another workload's episodes train the
// shared policy; its greedy decisions never reach the shared policy.
func TestServingIgnoresLaterTraining(t *testing.T) {
	cl := &countingLearner{Learner: newPPO(t, 1)}
	h := start(t, func(o *Options) { o.Learner = cl })
	nearlyServing(t, h, "web")
	toServing(t, h, "web")
	waitTrainerIdle(h.srv)
	pinned := h.srv.pins.lookup(keyOf("web"))
	if pinned == nil {
		t.Fatal("the Serving workload is not pinned")
	}
	before := serverDecision(t, h.srv, "web")
	liveBefore := greedyOn(t, liveAct(cl.Learner))

	trainOthers(t, h, "other", h.srv.trainer.version.Load())
	if reflect.DeepEqual(greedyOn(t, liveAct(cl.Learner)), liveBefore) {
		t.Fatal("training did not change the shared policy: the test has no teeth")
	}
	if after := serverDecision(t, h.srv, "web"); !reflect.DeepEqual(after, before) {
		t.Errorf("the Serving decision moved with the shared policy: %+v, was %+v", after, before)
	}

	cl.greedy.Store(0)
	r, err := h.client.Recommend(ctx(t), recommendReq("web", 11))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stage != pb.Stage_STAGE_SERVING || r.PolicyVersion != pinned.name || r.PolicyVersion == h.srv.PolicyVersion() {
		t.Errorf("Serving answer %v, want version %s (the shared policy is at %s)", r, pinned.name, h.srv.PolicyVersion())
	}
	if n := cl.greedy.Load(); n != 0 {
		t.Errorf("%d greedy forward passes of the shared policy for a Serving workload", n)
	}
	st, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
	if err != nil || st.Status.PolicyVersion != pinned.name {
		t.Errorf("status %v, %v: want version %s", st, err, pinned.name)
	}
	if err := serve.LintMetrics(h.reg, "rl-agent"); err != nil {
		t.Error(err)
	}
}

// TestFrozenPoliciesShareAndDrop: workloads promoted at one version share
// one copy, which goes when the last of them leaves Serving.
func TestFrozenPoliciesShareAndDrop(t *testing.T) {
	h := start(t, nil)
	for _, name := range []string{"a", "b", "c"} {
		nearlyServing(t, h, name)
	}
	waitTrainerIdle(h.srv)
	// Hold the trainer: a and b are promoted at the same version (each
	// promotion also queues its episode's training).
	h.srv.trainer.mu.Lock()
	toServing(t, h, "a")
	toServing(t, h, "b")
	v := h.srv.trainer.version.Load()
	h.srv.trainer.mu.Unlock()
	pa, pb_ := h.srv.pins.lookup(keyOf("a")), h.srv.pins.lookup(keyOf("b"))
	if pa == nil || pa != pb_ || pa.version != v || pa.refs != 2 {
		t.Fatalf("a pinned to %+v, b to %+v; want one copy of v%d with 2 references", pa, pb_, v)
	}
	gauge := func() float64 { return testutil.ToFloat64(h.srv.metrics.frozenPolicies) }
	if gauge() != 1 {
		t.Errorf("frozen policies gauge %v, want 1", gauge())
	}
	waitVersion(t, h.srv, v+1)
	toServing(t, h, "c")
	if pc := h.srv.pins.lookup(keyOf("c")); pc == nil || pc.version <= v || pc.refs != 1 || gauge() != 2 {
		t.Fatalf("c promoted after training pinned to %+v (gauge %v), want a copy newer than v%d", pc, gauge(), v)
	}

	toRetraining(t, h, "a")
	if h.srv.pins.lookup(keyOf("a")) != nil || pa.refs != 1 || gauge() != 2 {
		t.Errorf("after a left Serving: pin %v, refs %d, gauge %v; want none, 1, 2", h.srv.pins.lookup(keyOf("a")), pa.refs, gauge())
	}
	toRetraining(t, h, "b")
	if _, ok := h.srv.pins.copies[v]; ok || gauge() != 1 {
		t.Errorf("v%d kept after its last workload left Serving (gauge %v)", v, gauge())
	}
	toRetraining(t, h, "c")
	if n := h.srv.pins.len(); n != 0 || gauge() != 0 || len(h.srv.pins.pins) != 0 {
		t.Errorf("%d copies and %d pins left with no Serving workload (gauge %v)", n, len(h.srv.pins.pins), gauge())
	}
}

// TestFrozenPolicyCap: at the cap a promotion shares the newest copy; the
// copies already pinned, and the decisions of their workloads, stay.
func TestFrozenPolicyCap(t *testing.T) {
	h := start(t, func(o *Options) { o.MaxFrozenPolicies = 2 })
	for _, name := range []string{"a", "b", "c"} {
		nearlyServing(t, h, name)
	}
	var pins []*frozenPolicy
	var decisions []nn.Decision
	for _, name := range []string{"a", "b", "c"} {
		waitTrainerIdle(h.srv)
		v := h.srv.trainer.version.Load()
		toServing(t, h, name)
		pins = append(pins, h.srv.pins.lookup(keyOf(name)))
		decisions = append(decisions, serverDecision(t, h.srv, name))
		waitVersion(t, h.srv, v+1) // the promoted episode's training: a new version
	}
	a, b, c := pins[0], pins[1], pins[2]
	if a == b || a.version >= b.version {
		t.Fatalf("a pinned to %s, b to %s: want two copies", a.name, b.name)
	}
	if c != b {
		t.Errorf("c promoted at the cap pinned to %s, want the newest copy %s", c.name, b.name)
	}
	if got := testutil.ToFloat64(h.srv.metrics.frozenCapShares); got != 1 {
		t.Errorf("cap shares counted %v, want 1", got)
	}
	if n := h.srv.pins.len(); n != 2 {
		t.Errorf("%d copies, want the cap of 2", n)
	}
	for i, name := range []string{"a", "b", "c"} {
		if got := serverDecision(t, h.srv, name); !reflect.DeepEqual(got, decisions[i]) {
			t.Errorf("%s: decision moved from %+v to %+v", name, decisions[i], got)
		}
	}
	// b leaves; c still holds the copy, so there is no room yet.
	toRetraining(t, h, "b")
	if h.srv.pins.lookup(keyOf("c")) != b || h.srv.pins.len() != 2 {
		t.Errorf("c lost its copy when b left Serving")
	}
}

func TestPinSet(t *testing.T) {
	cp := func(v int64) *frozenPolicy { return newFrozenPolicy(v, nil) }
	type step struct {
		op      string // pin, unpin, restore
		key     string
		v       int64
		want    int64 // version pinned (pin, restore)
		capped  bool
		dropped int64 // version dropped (unpin), 0 for none
		copies  int
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"share by version", 4, []step{
			{op: "pin", key: "a", v: 1, want: 1, copies: 1},
			{op: "pin", key: "b", v: 1, want: 1, copies: 1},
			{op: "unpin", key: "a", copies: 1},
			{op: "unpin", key: "b", dropped: 1, copies: 0},
			{op: "unpin", key: "b", copies: 0},
		}},
		{"newest at the cap", 2, []step{
			{op: "pin", key: "a", v: 3, want: 3, copies: 1},
			{op: "pin", key: "b", v: 5, want: 5, copies: 2},
			{op: "pin", key: "c", v: 6, want: 5, capped: true, copies: 2},
			{op: "pin", key: "d", v: 3, want: 3, copies: 2},
			{op: "unpin", key: "a", copies: 2},
			{op: "unpin", key: "d", dropped: 3, copies: 1},
			{op: "pin", key: "e", v: 7, want: 7, copies: 2},
		}},
		{"restore beyond the cap", 1, []step{
			{op: "restore", key: "a", v: 1, want: 1, copies: 1},
			{op: "restore", key: "b", v: 2, want: 2, copies: 2},
			{op: "pin", key: "c", v: 3, want: 2, capped: true, copies: 2},
		}},
		{"repin releases the old copy", 4, []step{
			{op: "pin", key: "a", v: 1, want: 1, copies: 1},
			{op: "pin", key: "a", v: 2, want: 2, copies: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := newPinSet(tc.max, policySpec{}, nil)
			for i, s := range tc.steps {
				switch s.op {
				case "pin":
					fp, capped := ps.pin(s.key, cp(s.v))
					if fp.version != s.want || capped != s.capped {
						t.Fatalf("step %d: pinned %s (capped %v), want v%d (capped %v)", i, fp.name, capped, s.want, s.capped)
					}
				case "restore":
					ps.restore(s.key, cp(s.v))
					if fp := ps.lookup(s.key); fp.version != s.want {
						t.Fatalf("step %d: restored %s, want v%d", i, fp.name, s.want)
					}
				case "unpin":
					got := int64(0)
					if fp := ps.unpin(s.key); fp != nil {
						got = fp.version
					}
					if got != s.dropped {
						t.Fatalf("step %d: dropped v%d, want v%d", i, got, s.dropped)
					}
				}
				if n := ps.len(); n != s.copies {
					t.Fatalf("step %d: %d copies, want %d", i, n, s.copies)
				}
				refs := 0
				for _, fp := range ps.copies {
					refs += fp.refs
				}
				if refs != len(ps.pins) {
					t.Fatalf("step %d: %d references for %d pins", i, refs, len(ps.pins))
				}
			}
		})
	}
}

// TestServingRestart: a restarted agent serves a Serving workload with the
// weights it served before, although the shared policy trained on in
// between and is restored at its newer version.
func TestServingRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(o *Options, seed uint64)
	}{
		{"PPO", func(o *Options, seed uint64) { o.Learner = newPPO(t, seed) }},
		{"MetaPPO", func(o *Options, seed uint64) { o.Learner, o.MetaLearner = nil, newMeta(t, seed, 4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, _, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			h := start(t, func(o *Options) { tc.set(o, 1); o.Store = st })
			nearlyServing(t, h, "web")
			toServing(t, h, "web")
			waitTrainerIdle(h.srv)
			pinned := h.srv.pins.lookup(keyOf("web"))
			frozenBefore := greedyOn(t, pinned.policy.ActBatch)
			decisionBefore := serverDecision(t, h.srv, "web")
			trainOthers(t, h, "other", h.srv.trainer.version.Load())
			version := h.srv.PolicyVersion()
			st2, _ := restartStore(t, h, st, dir)
			h2 := start(t, func(o *Options) { tc.set(o, 99); o.Store = st2 })
			if got := h2.srv.PolicyVersion(); got != version {
				t.Fatalf("policy version %s after restart, want %s", got, version)
			}
			after := h2.srv.pins.lookup(keyOf("web"))
			if after == nil || after.name != pinned.name {
				t.Fatalf("pin after restart %+v, want %s", after, pinned.name)
			}
			if got := greedyOn(t, after.policy.ActBatch); !reflect.DeepEqual(got, frozenBefore) {
				t.Errorf("frozen decisions after restart differ:\n%+v\nwant\n%+v", got, frozenBefore)
			}
			live := greedyOn(t, func(s [][]float64, w [][]nn.Step, m [][]bool, g bool, r *rand.Rand) ([]nn.Decision, error) {
				return h2.srv.trainer.freezeLive().ActBatch(s, w, m, g, r)
			})
			if reflect.DeepEqual(live, frozenBefore) {
				t.Error("the restored shared policy decides as the pinned copy: the test has no teeth")
			}
			if got := serverDecision(t, h2.srv, "web"); !reflect.DeepEqual(got, decisionBefore) {
				t.Errorf("Serving decision after restart %+v, want %+v", got, decisionBefore)
			}
			if g := testutil.ToFloat64(h2.srv.metrics.frozenPolicies); g != 1 {
				t.Errorf("frozen policies gauge after restart %v, want 1", g)
			}
		})
	}
}

// TestOldCheckpointPinsRestoredPolicy: a checkpoint written before frozen
// weights (policy, version and agents only) loads; its Serving workload
// serves with the restored policy, and the next checkpoint pins it.
func TestOldCheckpointPinsRestoredPolicy(t *testing.T) {
	trained := newPPO(t, 7)
	rng := rand.New(rand.NewPCG(1, 1))
	demos := make([]nn.Demonstration, 16)
	for i := range demos {
		demos[i] = nn.Demonstration{State: probeStates()[i%8], Action: rng.IntN(int(learn.NumActions))}
	}
	if _, err := trained.BehaviourClone(demos); err != nil {
		t.Fatal(err)
	}
	weights, err := trained.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	gates := lifecycle.Gates{Window: 2, EpisodeSteps: 1}.WithDefaults()
	// The layout of a checkpoint before frozen weights, spelled out.
	old := struct {
		PolicyVersion int64              `json:"policyVersion"`
		Policy        []byte             `json:"policy"`
		Agents        []learn.AgentState `json:"agents"`
	}{
		PolicyVersion: 5, Policy: weights,
		Agents: []learn.AgentState{
			{Workload: keyOf("web"), Lifecycle: lifecycle.State{Stage: lifecycle.Serving, Episodes: 4, Since: t0}, Gates: gates, Transitions: 4, LastUpdate: t0},
			{Workload: keyOf("new"), Lifecycle: lifecycle.State{Stage: lifecycle.OnlineTraining, Episodes: 2, Since: t0}, Gates: gates, Transitions: 2, LastUpdate: t0},
		},
	}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeStore{ckpts: map[string][]byte{checkpointName: b}}
	h := start(t, func(o *Options) { o.Store = fs })
	pinned := h.srv.pins.lookup(keyOf("web"))
	if pinned == nil || pinned.name != "v5" || h.srv.pins.lookup(keyOf("new")) != nil {
		t.Fatalf("web pinned to %+v, want v5; new pinned to %+v, want none", pinned, h.srv.pins.lookup(keyOf("new")))
	}
	if got, want := greedyOn(t, pinned.policy.ActBatch), greedyOn(t, liveAct(trained)); !reflect.DeepEqual(got, want) {
		t.Errorf("the pin does not hold the checkpointed policy:\n%+v\nwant\n%+v", got, want)
	}
	r, err := h.client.Recommend(ctx(t), recommendReq("web", 10))
	if err != nil || r.Stage != pb.Stage_STAGE_SERVING || r.PolicyVersion != "v5" {
		t.Fatalf("Serving answer %v, %v", r, err)
	}
	if err := h.srv.persist(true); err != nil {
		t.Fatal(err)
	}
	var snap snapshot
	if err := json.Unmarshal(fs.ckpts[checkpointName], &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Frozen) != 1 || snap.Frozen[0].Version != 5 || !reflect.DeepEqual(snap.Pins, map[string]int64{keyOf("web"): 5}) {
		t.Errorf("next checkpoint holds frozen %d copies and pins %v, want v5 for web", len(snap.Frozen), snap.Pins)
	}
}

// TestCorruptFrozenCheckpoint: a checkpoint whose frozen copy does not
// decode, or does not fit the served policy, stops the start.
func TestCorruptFrozenCheckpoint(t *testing.T) {
	p := newPPO(t, 1)
	weights, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	good, err := p.Freeze().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	meta, err := newMeta(t, 1, 4).Freeze().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		name   string
		frozen []byte
		want   error
	}{
		{"flipped byte", flipped, nn.ErrCorruptCheckpoint},
		{"other kind", meta, nn.ErrIncompatibleCheckpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(snapshot{PolicyVersion: 1, Policy: weights, Frozen: []frozenState{{Version: 1, Policy: tc.frozen}}})
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			o.Learner, o.Registerer = newPPO(t, 2), prometheus.NewRegistry()
			o.Store = &fakeStore{ckpts: map[string][]byte{checkpointName: b}}
			srv, err := New(o)
			if err == nil {
				srv.Close()
				t.Fatal("started on a bad frozen policy")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestShadowServing: a Serving workload in mode Shadow is pinned like any
// other, but its default is applied and no forward pass runs.
func TestShadowServing(t *testing.T) {
	h := start(t, nil)
	nearlyServing(t, h, "web")
	toServing(t, h, "web")
	pinned := h.srv.pins.lookup(keyOf("web"))
	_, passes := histogramSum(h.srv)
	req := recommendReq("web", 10)
	req.Config.Mode = pb.RLMode_RL_MODE_SHADOW
	r, err := h.client.Recommend(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != pb.Source_SOURCE_DEFAULT || r.Reason != "Shadow" || r.Stage != pb.Stage_STAGE_SERVING || r.PolicyVersion != pinned.name || !sameAllocation(r.Recommendation, defaultRec()) {
		t.Errorf("shadow response %v", r)
	}
	if _, n := histogramSum(h.srv); n != passes {
		t.Errorf("%d forward passes for a decision that is never applied", n-passes)
	}
}

// TestForwardGroupsByPolicy: one batch of decisions for the shared policy
// and two frozen copies takes one forward pass per policy and mode, and
// each answer is its own policy's.
func TestForwardGroupsByPolicy(t *testing.T) {
	l := newPPO(t, 3)
	h := start(t, func(o *Options) { o.Learner = l })
	f1 := newPPO(t, 4).Freeze()
	f2 := newPPO(t, 5).Freeze()
	states := probeStates()
	var jobs []*decisionJob
	for i, s := range states {
		j := &decisionJob{ctx: context.Background(), state: s, greedy: true, reply: make(chan decisionResult, 1)}
		switch i % 4 {
		case 0:
			j.frozen = f1
		case 1:
			j.frozen = f2
		case 2:
			j.greedy = false
		}
		jobs = append(jobs, j)
	}
	_, n0 := histogramSum(h.srv)
	h.srv.batcher.forward(jobs, rand.New(rand.NewPCG(7, 8)))
	if _, n := histogramSum(h.srv); n-n0 != 4 {
		t.Errorf("%d forward passes, want 4 (shared greedy and sampled, two frozen copies)", n-n0)
	}
	sample := rand.New(rand.NewPCG(7, 8))
	for i, j := range jobs {
		r := <-j.reply
		if r.err != nil {
			t.Fatal(r.err)
		}
		var want nn.Decision
		var err error
		switch {
		case j.frozen != nil:
			ds, err := j.frozen.ActBatch([][]float64{j.state}, nil, nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			want = ds[0]
		case j.greedy:
			want, err = l.Act(j.state, nil, true, nil)
		default: // the only sampled group draws from the generator alone
			want, err = l.Act(j.state, nil, false, sample)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.d, want) {
			t.Errorf("job %d: %+v, want %+v", i, r.d, want)
		}
		if j.frozen == f1 && math.Float64bits(r.d.Value) == math.Float64bits(mustAct(t, l, j.state).Value) {
			t.Errorf("job %d: frozen answer equals the shared policy's: the test has no teeth", i)
		}
	}
}

func mustAct(t *testing.T, l Learner, s []float64) nn.Decision {
	t.Helper()
	d, err := l.Act(s, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
