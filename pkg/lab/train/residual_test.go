package train

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

func residualOptions() Options {
	o := DefaultOptions()
	o.ActionSpace = ActionSpaceResidual
	o.Apps, o.Episodes, o.BootstrapEpisodes, o.EpisodeSteps, o.BatchEpisodes = 2, 6, 1, 24, 2
	o.Hidden, o.MinibatchSize = []int{16}, 32
	o.Traces = []string{"steady", "flash-crowd"}
	return o
}

// TestResidualUntrainedFollowsDefault: an untrained residual agent, greedy,
// is the fused default, run for run: "follow" starts as every head's most
// likely choice.
func TestResidualUntrainedFollowsDefault(t *testing.T) {
	apps, err := sim.GenerateApps(5, 4)
	if err != nil {
		t.Fatal(err)
	}
	var runs []eval.Run
	for i, app := range apps {
		tr, err := sim.GenerateTrace(sim.TraceKinds()[i], sim.TraceOptions{Mean: app.BaseRate, Steps: 300, Step: 15 * time.Second, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, eval.Run{App: app, Trace: &tr, Seed: uint64(i)})
	}
	// With an anchor the agent follows that variant of the default, which
	// the checkpoint records; the variant runs differently from the
	// default (checked below), so following the wrong one would show.
	//
	// Meta-PPO's embedding joins the state at the actor's input; the
	// follow bias must dominate whatever the untrained encoder makes of
	// the trajectory.
	for _, tc := range []struct{ policy, anchor string }{
		{PolicyPPO, ""}, {PolicyPPO, "limit-target=0.7/hold=24h"},
		// The agent's updater lets the count grow at the anchor's rate,
		// as the updater's --default-variant does in a cluster.
		{PolicyPPO, "limit-target=0.7/hold=24h/scale-up=400"},
		{PolicyMetaPPO, ""}, {PolicyMetaPPO, "limit-target=0.7/hold=24h"},
	} {
		anchor := tc.anchor
		t.Run(tc.policy+" anchor "+anchor, func(t *testing.T) {
			o := residualOptions()
			o.Anchor, o.Policy = anchor, tc.policy
			l, err := NewLearner(o)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.PolicyConfig().Anchor; got != anchor {
				t.Fatalf("the learner records the anchor %q, want %q", got, anchor)
			}
			if l.Kind() != tc.policy {
				t.Fatalf("a %s learner, want %s", l.Kind(), tc.policy)
			}
			def, err := fusion.ParseVariant(anchor)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := eval.Evaluate(context.Background(), runs, []eval.Contender{
				eval.FromFactory("fused", fusion.NewPolicyFactory(def)),
				Contender(l, AgentOptions{}),
				eval.FromFactory("plain", fusion.NewPolicyFactory(fusion.Options{})),
			}, eval.Options{Workers: 2, SeriesRun: -1})
			if err != nil {
				t.Fatal(err)
			}
			differs := false
			for i := 0; i < len(rep.Results); i += 3 {
				a, b, plain := rep.Results[i], rep.Results[i+1], rep.Results[i+2]
				a.Policy, b.Policy, plain.Policy = "", "", ""
				if !reflect.DeepEqual(a, b) {
					t.Errorf("run %d: untrained residual agent %+v, its anchor %+v", i/3, b, a)
				}
				differs = differs || !reflect.DeepEqual(a, plain)
			}
			if anchor != "" && !differs {
				t.Errorf("the anchor %q ran as the plain default in every run: the test cannot tell them apart", anchor)
			}
		})
	}
	o := residualOptions()
	o.Anchor = "limit-target=2"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "anchor") {
		t.Errorf("anchor limit-target=2: err = %v", err)
	}
}

// TestResidualTrains: training in the residual space runs, records the
// factored actions with their masks, and its checkpoint acts as a residual
// agent again.
func TestResidualTrains(t *testing.T) {
	for _, kind := range []string{PolicyPPO, PolicyMetaPPO} {
		t.Run(kind, func(t *testing.T) { testResidualTrains(t, kind) })
	}
}

func testResidualTrains(t *testing.T, kind string) {
	o := residualOptions()
	o.Policy = kind
	res, err := Train(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Episodes) != o.Episodes || len(res.Updates) == 0 {
		t.Fatalf("%d episodes, %d updates", len(res.Episodes), len(res.Updates))
	}
	if len(res.BC) != 0 {
		t.Errorf("%d behaviour-cloning rounds: the residual space starts on the default and clones nothing", len(res.BC))
	}
	b, err := res.Learner.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLearner(b)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAgent(l, sim.App{}.Constraints, AgentOptions{RNG: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	if a.residual == nil {
		t.Fatal("a residual checkpoint made a paper-space agent")
	}
	if l.Kind() != kind || len(l.PolicyConfig().Heads) != 3 {
		t.Fatalf("checkpoint of a %s with heads %v, want a %s with 3", l.Kind(), l.PolicyConfig().Heads, kind)
	}
	if kind == PolicyPPO {
		if p, err := nn.NewPPOFromCheckpoint(b); err != nil || len(p.Config().Heads) != 3 {
			t.Fatalf("checkpoint heads: %v", err)
		}
	}
	space := learn.DefaultResidualSpace()
	if !reflect.DeepEqual(space.Sizes(), learn.ResidualConfig(DefaultFollowBias).Heads) {
		t.Error("residual config and space disagree")
	}
}

// TestResidualBootstrapTrainsNothing: in the residual space the default's
// episodes (every head "follow") neither clone nor update the policy, which
// leaves bootstrapping exactly as it started: following the default.
func TestResidualBootstrapTrainsNothing(t *testing.T) {
	o := residualOptions()
	o.BootstrapEpisodes = 3
	o.Episodes = o.Apps * o.BootstrapEpisodes // every episode bootstraps
	o.Gates.PromoteMinMean = 1                // no mean reward reaches it: bootstrapping ends at its cap
	start, err := NewLearner(o)
	if err != nil {
		t.Fatal(err)
	}
	before := marshal(t, start)
	o.Init = start
	res := mustTrain(t, o)
	if n, _ := res.BootstrapCount(); n != o.Episodes {
		t.Fatalf("%d of %d episodes bootstrapped", n, o.Episodes)
	}
	if len(res.Updates) != 0 || len(res.BC) != 0 {
		t.Errorf("%d PPO updates and %d cloning rounds on the default's episodes, want none", len(res.Updates), len(res.BC))
	}
	if after := marshal(t, res.Learner); !reflect.DeepEqual(before, after) {
		t.Error("bootstrapping changed the residual policy")
	}
}

func TestResidualOptions(t *testing.T) {
	o := residualOptions()
	o.Policy = PolicyMetaPPO
	if err := o.Validate(); err != nil {
		t.Errorf("meta-ppo in the residual space: %v", err)
	}
	// An initial learner acts in its own space: another is refused, and
	// empty means the learner's.
	paper := residualOptions()
	paper.ActionSpace = ActionSpacePaper
	for _, tc := range []struct {
		name, space, want string
	}{{"paper learner, residual space", ActionSpaceResidual, "acts in the paper action space"}, {"paper learner, space unset", "", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			init, err := NewLearner(paper)
			if err != nil {
				t.Fatal(err)
			}
			o := residualOptions()
			o.Init, o.ActionSpace = init, tc.space
			err = o.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if tc.want == "" && o.Space() != ActionSpacePaper {
				t.Errorf("space %s, want the learner's %s", o.Space(), ActionSpacePaper)
			}
		})
	}
	o = residualOptions()
	o.VerticalCost = -1
	if err := o.Validate(); err == nil {
		t.Error("a negative vertical cost was accepted")
	}
	o = residualOptions()
	o.ActionSpace = "fancy"
	if err := o.Validate(); err == nil {
		t.Error("an unknown action space was accepted")
	}
}
