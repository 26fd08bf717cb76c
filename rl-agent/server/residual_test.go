package server

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aware-k8s/aware/pkg/learn"
	"github.com/aware-k8s/aware/pkg/policy"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func newResidualPPO(t testing.TB, seed uint64) *policy.PPO {
	t.Helper()
	cfg := learn.ResidualConfig(learn.DefaultFollowBias)
	cfg.MinibatchSize = 16
	cfg.Seed = seed
	p, err := policy.NewPPO(cfg)
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
		cfg  policy.Config
		want string
	}{
		{"an older state", policy.DefaultConfig(learn.StateDim-3, int(learn.NumActions)), "state features"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.NewPPO(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			o.Learner, o.Registerer = p, prometheus.NewRegistry()
			if _, err := New(o); !errors.Is(err, policy.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrIncompatibleCheckpoint naming %q", err, tc.want)
			}
		})
	}
}
