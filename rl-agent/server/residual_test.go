package server

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func newResidualPPO(t testing.TB, seed uint64) *nn.PPO {
	t.Helper()
	cfg := learn.ResidualConfig(learn.DefaultFollowBias)
	cfg.MinibatchSize = 16
	cfg.Seed = seed
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResidualServing serves a residual policy: the defaults decide while
// bootstrapping, then every answer is the request's default with the
// policy's choice per dimension, named in the response.
func TestResidualServing(t *testing.T) {
	h := start(t, func(o *Options) { o.Learner = newResidualPPO(t, 1) })
	r, err := h.client.Recommend(ctx(t), recommendReq("web", 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != pb.Source_SOURCE_DEFAULT || r.Action != "" || !sameAllocation(r.Recommendation, defaultRec()) {
		t.Fatalf("bootstrapping response %v", r)
	}
	promote(t, h.client, "web")
	def := defaultRec()
	sources := map[pb.Source]int{}
	for i := range 60 {
		r, err := h.client.Recommend(ctx(t), recommendReq("web", 10+i))
		if err != nil {
			t.Fatal(err)
		}
		sources[r.Source]++
		ch, err := learn.ParseResidual(r.Action)
		if err != nil {
			t.Fatalf("action %q: %v", r.Action, err)
		}
		follow := ch == [learn.NumDimensions]learn.Choice{learn.Follow, learn.Follow, learn.Follow}
		switch {
		case follow && (r.Source != pb.Source_SOURCE_DEFAULT || r.Reason != "FollowDefault" || !sameAllocation(r.Recommendation, def)):
			t.Fatalf("following the default: %v", r)
		case !follow && r.Source != pb.Source_SOURCE_AGENT:
			t.Fatalf("a deviation %q with source %v", r.Action, r.Source)
		}
		if c := ch[learn.DimReplicas]; !c.Hold && c != learn.Follow {
			want := int32(math.Round(float64(def.Replicas+c.Offset) * c.Factor))
			if r.Recommendation.Replicas != max(min(want, 10), 1) {
				t.Fatalf("%q over the default's %d replicas gave %d", r.Action, def.Replicas, r.Recommendation.Replicas)
			}
		}
	}
	if sources[pb.Source_SOURCE_AGENT] == 0 || sources[pb.Source_SOURCE_DEFAULT] == 0 {
		t.Errorf("a sampling residual policy should both follow and deviate: %v", sources)
	}
}

// The server refuses a policy that reads another state than its agents
// compute. A policy trained beside another default than the fused one is
// served, and requests from another default are refused one by one
// (TestDefaultVariant).
func TestServerRefusesOtherShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  nn.Config
		want string
	}{
		{"an older state", nn.DefaultConfig(learn.StateDim-3, int(learn.NumActions)), "state features"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := nn.NewPPO(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			o.Learner, o.Registerer = p, prometheus.NewRegistry()
			if _, err := New(o); !errors.Is(err, nn.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrIncompatibleCheckpoint naming %q", err, tc.want)
			}
		})
	}
}

func newResidualMeta(t testing.TB, seed uint64, window int) *nn.MetaPPO {
	t.Helper()
	cfg := nn.MetaConfig{Config: learn.ResidualConfig(learn.DefaultFollowBias), Window: window, EmbedDim: 3}
	cfg.Hidden, cfg.MinibatchSize, cfg.Seed = []int{16}, 8, seed
	m, err := nn.NewMetaPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestResidualMetaServing serves a residual Meta-PPO policy: its answers
// are the default with the policy's choice per dimension, its agents keep
// the trajectory of factored actions, and a restart on the same state
// rebuilds each workload's window from the experience log and acts as the
// checkpointed policy did.
func TestResidualMetaServing(t *testing.T) {
	const window = 4
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	learner := newResidualMeta(t, 1, window)
	h := start(t, func(o *Options) { o.Store, o.Learner, o.MetaLearner = st, nil, learner })
	promote(t, h.client, "web")
	sources := map[pb.Source]int{}
	for tick := 2; tick < 40; tick++ {
		r, err := h.client.Recommend(ctx(t), recommendReq("web", tick))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := learn.ParseResidual(r.Action); err != nil {
			t.Fatalf("tick %d: action %q: %v", tick, r.Action, err)
		}
		sources[r.Source]++
		if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", tick)); err != nil {
			t.Fatal(err)
		}
	}
	if sources[pb.Source_SOURCE_DEFAULT] == 0 {
		t.Errorf("a residual Meta-PPO that starts on the default never followed it: %v", sources)
	}
	w := windowOf(t, h.srv, "web")
	if len(w) != window {
		t.Fatalf("window of %d steps, want %d", len(w), window)
	}
	deviated := false
	for _, s := range w {
		deviated = deviated || s.Action != learn.FollowAction
	}
	st2, _ := restartStore(t, h, st, dir)
	fresh := newResidualMeta(t, 99, window)
	h2 := start(t, func(o *Options) { o.Store, o.Learner, o.MetaLearner = st2, nil, fresh })
	if got := windowOf(t, h2.srv, "web"); !reflect.DeepEqual(got, w) {
		t.Errorf("window after restart %v, want %v (deviations in it: %v)", got, w, deviated)
	}
	state := make([]float64, learn.StateDim)
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
	if len(fresh.Config().Heads) != int(learn.NumDimensions) {
		t.Errorf("restored heads %v", fresh.Config().Heads)
	}
}
