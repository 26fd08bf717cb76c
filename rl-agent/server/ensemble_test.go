package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// member is a frozen residual policy whose greedy choice in dimension d
// is prefer[d], whatever the state: a bias far above what random initial
// weights give any logit.
func member(t testing.TB, seed uint64, prefer [learn.NumDimensions]int) *nn.Frozen {
	t.Helper()
	cfg := learn.ResidualConfig(0)
	cfg.Seed = seed
	off := 0
	for d, n := range cfg.Heads {
		cfg.InitBias[off+prefer[d]] = 40
		off += n
	}
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.Freeze()
}

// The members of the ensemble tests. Over the default's 3 replicas, 1 CPU
// and 512Mi (defaultRec), and the test observation's peaks (which forbid
// cutting a request): replicas +1, +2, +2; CPU ×1.15, ×1.3, follow;
// memory follows.
func ensembleMembers(t testing.TB) []*nn.Frozen {
	return []*nn.Frozen{
		member(t, 1, [learn.NumDimensions]int{4, 4, 0}),
		member(t, 2, [learn.NumDimensions]int{5, 5, 0}),
		member(t, 3, [learn.NumDimensions]int{5, 0, 0}),
	}
}

func residual(t testing.TB, idx [learn.NumDimensions]int) string {
	t.Helper()
	space := learn.DefaultResidualSpace()
	ch, err := space.Choices(learn.Residual(idx[:]))
	if err != nil {
		t.Fatal(err)
	}
	return learn.FormatResidual(ch)
}

// TestEnsembleServing serves the ensemble: the defaults act while a
// workload bootstraps, then every decision, in OnlineTraining as in
// Serving, is the members' agreement for the quorum, the same every time,
// named by the ensemble's version; nothing trains.
func TestEnsembleServing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		quorum   int
		want     [learn.NumDimensions]int
		version  string
		replicas int32
		cpu      float64
	}{
		// All three raise replicas, by at least 1; CPU: one follows.
		{"all agree", 0, [learn.NumDimensions]int{4, 0, 0}, "ensemble-3of3-", 4, 1},
		// Two of three: the median of each dimension.
		{"majority", 2, [learn.NumDimensions]int{5, 4, 0}, "ensemble-2of3-", 5, 1.15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(o *Options) {
				o.Learner = nil
				o.Ensemble = &Ensemble{Members: ensembleMembers(t), Quorum: tc.quorum}
			})
			r, err := h.client.Recommend(ctx(t), recommendReq("web", 0))
			if err != nil {
				t.Fatal(err)
			}
			if r.Source != pb.Source_SOURCE_DEFAULT || !sameAllocation(r.Recommendation, defaultRec()) {
				t.Fatalf("bootstrapping: %v", r)
			}
			promote(t, h.client, "web") // OnlineTraining: the ensemble acts
			want := residual(t, tc.want)
			for tick := 10; tick < 16; tick++ {
				r, err := h.client.Recommend(ctx(t), recommendReq("web", tick))
				if err != nil {
					t.Fatal(err)
				}
				if r.Stage != pb.Stage_STAGE_ONLINE_TRAINING || r.Action != want || r.Source != pb.Source_SOURCE_AGENT {
					t.Fatalf("tick %d: stage %v action %q source %v, want OnlineTraining %q from the agent", tick, r.Stage, r.Action, r.Source, want)
				}
				if !strings.HasPrefix(r.PolicyVersion, tc.version) {
					t.Errorf("policy version %q, want %s…", r.PolicyVersion, tc.version)
				}
				rec := r.Recommendation
				if rec.Replicas != tc.replicas || len(rec.Containers) != 1 {
					t.Fatalf("recommendation %v, want %d replicas", rec, tc.replicas)
				}
				if got := rec.Containers[0].Target.CpuCores; got < tc.cpu-1e-6 || got > tc.cpu+1e-6 {
					t.Errorf("CPU target %v, want %v", got, tc.cpu)
				}
			}
			// Episodes keep completing; none trains.
			for i := 2; i < 6; i++ {
				if _, err := h.client.ReportOutcome(ctx(t), outcomeReq("web", i)); err != nil {
					t.Fatal(err)
				}
			}
			for _, res := range []string{"ok", "failed", "dropped"} {
				if n := testutil.ToFloat64(h.srv.metrics.training.WithLabelValues(res)); n != 0 {
					t.Errorf("training jobs %s: %v, want none", res, n)
				}
			}
			if v := h.srv.PolicyVersion(); !strings.HasPrefix(v, tc.version) {
				t.Errorf("PolicyVersion %q", v)
			}
		})
	}
}

// The ensemble's state survives a restart, and a state directory is never
// handed from an ensemble to a learner or back: the one would overwrite
// what the other wrote.
func TestEnsembleRestart(t *testing.T) {
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	withEnsemble := func(st *store.Store) func(*Options) {
		return func(o *Options) {
			o.Learner, o.Store = nil, st
			o.Ensemble = &Ensemble{Members: ensembleMembers(t)}
		}
	}
	h := start(t, withEnsemble(st))
	promote(t, h.client, "web")
	st, _ = restartStore(t, h, st, dir)
	h = start(t, withEnsemble(st))
	r, err := h.client.Recommend(ctx(t), recommendReq("web", 20))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stage != pb.Stage_STAGE_ONLINE_TRAINING || r.Action != residual(t, [learn.NumDimensions]int{4, 0, 0}) {
		t.Fatalf("after a restart: stage %v action %q", r.Stage, r.Action)
	}
	st, _ = restartStore(t, h, st, dir)

	o := DefaultOptions()
	o.Learner, o.Store, o.Registerer = newResidualPPO(t, 1), st, prometheus.NewRegistry()
	if _, err := New(o); !errors.Is(err, nn.ErrIncompatibleCheckpoint) {
		t.Fatalf("a learner on an ensemble's state: %v, want ErrIncompatibleCheckpoint", err)
	}

	learnerDir := t.TempDir()
	lst, _, err := store.Open(learnerDir)
	if err != nil {
		t.Fatal(err)
	}
	lh := start(t, func(o *Options) { o.Learner, o.Store = newResidualPPO(t, 1), lst })
	promote(t, lh.client, "web")
	lst, _ = restartStore(t, lh, lst, learnerDir)
	o = DefaultOptions()
	o.Ensemble, o.Store, o.Registerer = &Ensemble{Members: ensembleMembers(t)}, lst, prometheus.NewRegistry()
	if _, err := New(o); !errors.Is(err, nn.ErrIncompatibleCheckpoint) {
		t.Fatalf("an ensemble on a learner's state: %v, want ErrIncompatibleCheckpoint", err)
	}
}

func TestEnsembleRefused(t *testing.T) {
	paper, err := nn.NewPPO(nn.DefaultConfig(learn.StateDim, int(learn.NumActions)))
	if err != nil {
		t.Fatal(err)
	}
	noRates := learn.ResidualConfig(learn.DefaultFollowBias)
	noRates.StateFeatures = "none"
	other, err := nn.NewPPO(noRates)
	if err != nil {
		t.Fatal(err)
	}
	anchoredCfg := learn.ResidualConfig(learn.DefaultFollowBias)
	anchoredCfg.Anchor = "limit-target=0.7"
	anchored, err := nn.NewPPO(anchoredCfg)
	if err != nil {
		t.Fatal(err)
	}
	ms := ensembleMembers(t)
	for _, tc := range []struct {
		name string
		e    *Ensemble
		opts func(*Options)
		want string
	}{
		{"one member", &Ensemble{Members: ms[:1]}, nil, "at least 2 members"},
		{"quorum above members", &Ensemble{Members: ms, Quorum: 4}, nil, "quorum 4"},
		{"negative quorum", &Ensemble{Members: ms, Quorum: -1}, nil, "quorum -1"},
		{"nil member", &Ensemble{Members: []*nn.Frozen{ms[0], nil}}, nil, "member 2 is nil"},
		{"paper action space", &Ensemble{Members: []*nn.Frozen{ms[0], paper.Freeze()}}, nil, "paper's action space"},
		{"other features", &Ensemble{Members: []*nn.Frozen{ms[0], other.Freeze()}}, nil, "other state features"},
		{"other default", &Ensemble{Members: []*nn.Frozen{ms[0], anchored.Freeze()}}, nil, "another default"},
		{"and a learner", &Ensemble{Members: ms}, func(o *Options) { o.Learner = newResidualPPO(t, 1) }, "exactly one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Ensemble, o.Registerer = tc.e, prometheus.NewRegistry()
			if tc.opts != nil {
				tc.opts(&o)
			}
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
