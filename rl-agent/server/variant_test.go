package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/agentclient"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

const anchor = "limit-target=0.7/hold=24h"

// anchoredPPO is a residual policy trained beside the variant v of the
// fused default.
func anchoredPPO(t testing.TB, seed uint64, v string) *nn.PPO {
	t.Helper()
	cfg := learn.ResidualConfig(learn.DefaultFollowBias)
	cfg.MinibatchSize, cfg.Seed, cfg.Anchor = 16, seed, v
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func withVariant[R interface{ GetConfig() *pb.Config }](r R, v string) R {
	r.GetConfig().DefaultVariant = v
	return r
}

// TestDefaultVariant serves policies trained beside a variant of the fused
// default: a request whose default came from the same variant, however
// spelt, is answered; one from another variant is refused on Recommend and
// ReportOutcome with FAILED_PRECONDITION naming both, counted, and without
// touching the agent's state.
func TestDefaultVariant(t *testing.T) {
	servers := []struct {
		name   string
		anchor string
		opts   func(*Options)
	}{
		{"fused default", "", func(o *Options) { o.Learner = newResidualPPO(t, 1) }},
		{"paper action space", "", nil},
		{"anchored learner", anchor, func(o *Options) { o.Learner = anchoredPPO(t, 1, anchor) }},
		{"anchored ensemble", anchor, func(o *Options) {
			o.Learner = nil
			o.Ensemble = &Ensemble{Members: []*nn.Frozen{anchoredPPO(t, 1, anchor).Freeze(), anchoredPPO(t, 2, anchor).Freeze()}}
		}},
	}
	requests := []struct {
		name    string
		variant string
		// served lists the anchors of the servers that answer it.
		served []string
	}{
		{"the fused default", "", []string{""}},
		{"the fused default's target spelt out", "target=0.7", []string{""}},
		{"the anchor", anchor, []string{anchor}},
		{"the anchor spelt otherwise", "limit-target=0.70/hold=1440m", []string{anchor}},
		{"the anchor without its hold", "limit-target=0.7", nil},
		{"another target", "target=0.8", nil},
	}
	for _, sv := range servers {
		for _, rq := range requests {
			t.Run(sv.name+"/"+rq.name, func(t *testing.T) {
				h := start(t, sv.opts)
				if h.srv.spec.shape.Anchor != sv.anchor {
					t.Fatalf("served anchor %q, want %q", h.srv.spec.shape.Anchor, sv.anchor)
				}
				// "web" has state from requests of the served variant.
				for i := range 2 {
					if _, err := h.client.ReportOutcome(ctx(t), withVariant(outcomeReq("web", i), sv.anchor)); err != nil {
						t.Fatal(err)
					}
				}
				if r, err := h.client.Recommend(ctx(t), withVariant(recommendReq("web", 2), sv.anchor)); err != nil || r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
					t.Fatalf("after two good outcomes: %v, %v; want OnlineTraining", r, err)
				}
				// The outcomes above may have queued training, whose end
				// moves the policy version: let it finish first.
				waitTrainerIdle(h.srv)
				before, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
				if err != nil {
					t.Fatal(err)
				}
				h.srv.journal.expMu.Lock()
				pending := len(h.srv.journal.pending)
				h.srv.journal.expMu.Unlock()

				served := false
				for _, a := range rq.served {
					served = served || a == sv.anchor
				}
				for _, name := range []string{"web", "new"} {
					_, errRec := h.client.Recommend(ctx(t), withVariant(recommendReq(name, 3), rq.variant))
					_, errOut := h.client.ReportOutcome(ctx(t), withVariant(outcomeReq(name, 3), rq.variant))
					for method, err := range map[string]error{"Recommend": errRec, "ReportOutcome": errOut} {
						switch st := status.Convert(err); {
						case served && err != nil:
							t.Fatalf("%s %s: %v, want it served", method, name, err)
						case !served && st.Code() != codes.FailedPrecondition:
							t.Fatalf("%s %s: %v, want FailedPrecondition", method, name, err)
						case !served && (!strings.Contains(st.Message(), variantName(rq.variant)) || !strings.Contains(st.Message(), variantName(sv.anchor))):
							t.Fatalf("%s %s: %q does not name both %s and %s", method, name, st.Message(), variantName(rq.variant), variantName(sv.anchor))
						}
					}
				}
				for _, method := range []string{"Recommend", "ReportOutcome"} {
					want := 2.0
					if served {
						want = 0
					}
					if n := testutil.ToFloat64(h.srv.metrics.variantMismatches.WithLabelValues(method)); n != want {
						t.Errorf("%s mismatches counted %v, want %v", method, n, want)
					}
				}
				if served {
					return
				}
				// Nothing changed: no agent for "new", "web" as it was, no
				// experience recorded.
				if _, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("new")}); status.Code(err) != codes.NotFound {
					t.Errorf("a workload only refused has an agent: %v", err)
				}
				after, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(before, after) {
					t.Errorf("status changed by refused requests:\nbefore %v\nafter  %v", before, after)
				}
				h.srv.journal.expMu.Lock()
				defer h.srv.journal.expMu.Unlock()
				if len(h.srv.journal.pending) != pending {
					t.Errorf("refused outcomes recorded experience: %d records pending, %d before", len(h.srv.journal.pending), pending)
				}
			})
		}
	}
}

// TestDefaultVariantInvalid refuses a variant that names no default with
// INVALID_ARGUMENT on config.default_variant, before the variant check.
func TestDefaultVariantInvalid(t *testing.T) {
	h := start(t, func(o *Options) { o.Learner = anchoredPPO(t, 1, anchor) })
	for _, tc := range []struct{ name, variant string }{
		{"unknown setting", "burst=2"},
		{"target out of range", "limit-target=1.5"},
		{"hold on the request's target", "target=0.7/hold=1h"},
		{"too long", "limit-target=0.7/hold=" + strings.Repeat("1", 200) + "h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.Recommend(ctx(t), withVariant(recommendReq("web", 0), tc.variant))
			wantField(t, err, "config.default_variant")
			_, err = h.client.ReportOutcome(ctx(t), withVariant(outcomeReq("web", 0), tc.variant))
			wantField(t, err, "config.default_variant")
		})
	}
	for _, method := range []string{"Recommend", "ReportOutcome"} {
		if n := testutil.ToFloat64(h.srv.metrics.variantMismatches.WithLabelValues(method)); n != 0 {
			t.Errorf("invalid variants counted as %v %s mismatches", n, method)
		}
	}
	h.srv.metrics.variantMismatches.WithLabelValues("Recommend")
	if problems, err := testutil.GatherAndLint(h.reg, "aware_rlagent_default_variant_mismatches_total"); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestServerRefusesUnknownAnchor: a policy whose anchor names no variant
// (a checkpoint from a later version, or edited) could answer no request,
// so the server does not start with it, for a learner or an ensemble.
func TestServerRefusesUnknownAnchor(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*Options)
	}{
		{"learner", func(o *Options) { o.Learner = anchoredPPO(t, 1, "burst=2") }},
		{"ensemble", func(o *Options) {
			o.Ensemble = &Ensemble{Members: []*nn.Frozen{anchoredPPO(t, 1, "burst=2").Freeze(), anchoredPPO(t, 2, "burst=2").Freeze()}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Registerer = prometheus.NewRegistry()
			tc.opts(&o)
			if _, err := New(o); !errors.Is(err, nn.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `unknown setting "burst"`) {
				t.Fatalf("New: %v, want ErrIncompatibleCheckpoint naming the anchor's fault", err)
			}
		})
	}
}

// TestAdvisorAgainstAnchoredServer runs the recommender's side
// (agentclient.Advisor) against a server whose policy was trained beside a
// variant: told the same variant it gets the agent's answers and reports
// outcomes that the agent learns from; told another, it applies its
// default with reason AgentRefusedDefault and the agent's words, its
// breaker stays closed, and the agent keeps nothing of it.
func TestAdvisorAgainstAnchoredServer(t *testing.T) {
	in, err := fromRecommendRequest(recommendReq("web", 0))
	if err != nil {
		t.Fatal(err)
	}
	obs, cons, def := in.obs, in.constraints, in.def
	for _, tc := range []struct {
		name, variant string
		wantReason    string
	}{
		{"same variant", anchor, "AgentBootstrapping"},
		{"the fused default", "", "AgentRefusedDefault"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, func(o *Options) { o.Learner = anchoredPPO(t, 1, anchor) })
			a := agentclient.NewAdvisor(h.client, agentclient.Options{Timeout: 5 * time.Second, Breaker: agentclient.NewBreaker(1, time.Hour), DefaultVariant: tc.variant})
			m := &v1alpha1.MultidimPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"},
				Spec:       v1alpha1.MultidimPodAutoscalerSpec{RL: &v1alpha1.RLSpec{Mode: v1alpha1.RLModeOn}},
			}
			for i := range 3 {
				o := obs
				o.Time = obs.Time.Add(time.Duration(i) * time.Minute)
				rec, rl := a.Advise(ctx(t), m, &o, &cons, def)
				if rl.Reason != tc.wantReason || rl.Source != v1alpha1.SourceDefault || rec.Replicas != def.Replicas {
					t.Fatalf("advice %d: %s/%s (%s), %d replicas; want Default/%s and the default's %d", i, rl.Source, rl.Reason, rl.Message, rec.Replicas, tc.wantReason, def.Replicas)
				}
				if tc.wantReason == "AgentRefusedDefault" && !strings.Contains(rl.Message, variantName(anchor)) {
					t.Fatalf("message %q does not name the policy's anchor", rl.Message)
				}
			}
			st, err := h.client.GetPolicyStatus(ctx(t), &pb.GetPolicyStatusRequest{Workload: ref("web")})
			switch {
			case tc.wantReason == "AgentRefusedDefault" && status.Code(err) != codes.NotFound:
				t.Errorf("a refused recommender left state: %v, %v", st, err)
			case tc.wantReason != "AgentRefusedDefault" && (err != nil || st.GetStatus().GetTransitions() != 2):
				t.Errorf("status %v, %v; want the 2 outcomes reported", st, err)
			}
			if got := testutil.ToFloat64(h.srv.metrics.variantMismatches.WithLabelValues("Recommend")); (got > 0) != (tc.wantReason == "AgentRefusedDefault") {
				t.Errorf("%v mismatches counted", got)
			}
		})
	}
}
