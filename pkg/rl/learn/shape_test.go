package learn

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

func TestShapeOf(t *testing.T) {
	paper := nn.DefaultConfig(StateDim, int(NumActions))
	residual := ResidualConfig(DefaultFollowBias)
	for _, tc := range []struct {
		name    string
		mutate  func() nn.Config
		want    string
		off     Features
		wantErr string
	}{
		{"paper", func() nn.Config { return paper }, "paper", 0, ""},
		{"residual", func() nn.Config { return residual }, "residual", 0, ""},
		{"residual without trend", func() nn.Config { c := residual; c.StateFeatures = "peak"; return c }, "residual", FeaturesTrend, ""},
		{"an older state", func() nn.Config { c := paper; c.StateDim = 16; return c }, "", 0, "reads 16 state features"},
		{"unknown features", func() nn.Config { c := paper; c.StateFeatures = "time"; return c }, "", 0, "unknown feature group"},
		{"other actions", func() nn.Config { c := paper; c.NumActions = 9; return c }, "", 0, "9 actions"},
		{"other heads", func() nn.Config { c := residual; c.Heads = []int{8, 6, 5, 1}; return c }, "", 0, "heads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh, err := ShapeOf(tc.mutate())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, nn.ErrIncompatibleCheckpoint) {
					t.Fatalf("error %v, want an incompatible checkpoint naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || sh.String() != tc.want || sh.FeaturesOff != tc.off {
				t.Fatalf("shape %v (off %v), %v; want %s (off %v)", sh, sh.FeaturesOff, err, tc.want, tc.off)
			}
		})
	}
}

func TestActionName(t *testing.T) {
	space := DefaultResidualSpace()
	res := PolicyShape{Residual: &space}
	for _, tc := range []struct {
		name string
		sh   PolicyShape
		a    int
		want string
	}{
		{"paper", PolicyShape{}, int(AddReplica), "AddReplica"},
		{"paper out of range", PolicyShape{}, int(NumActions), ""},
		{"follow", res, FollowAction, "replicas=follow/cpu=follow/memory=follow"},
		{"mixed", res, nn.JoinAction([]int{4, 0, 3}, space.Sizes()), "replicas=+1/cpu=follow/memory=x0.85"},
		{"residual out of range", res, space.NumActions(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sh.ActionName(tc.a); got != tc.want {
				t.Fatalf("ActionName(%d) = %q, want %q", tc.a, got, tc.want)
			}
			if tc.sh.Residual != nil && tc.want != "" {
				ch, err := ParseResidual(tc.want)
				if err != nil || FormatResidual(ch) != tc.want {
					t.Fatalf("%q does not round-trip: %v, %v", tc.want, ch, err)
				}
			}
		})
	}
}

// TestResidualAgent drives a serving agent in the residual action space
// through bootstrapping and acting: the defaults' decisions are "follow"
// and never demonstrations, their episodes train nothing, the agent's own
// do, the policy's choice is applied relative to the default, and an
// illegal choice is refused.
func TestResidualAgent(t *testing.T) {
	space := DefaultResidualSpace()
	cfg := DefaultConfig()
	cfg.Gates.Window, cfg.Gates.EpisodeSteps = 3, 4
	now := time.Unix(0, 0)
	a, err := NewAgent("ns/app", cfg.Gates, DefaultSteps(), now)
	if err != nil {
		t.Fatal(err)
	}
	a.SetShape(PolicyShape{Residual: &space})
	o, c := obs(), cons()
	o.Containers[0].Usage = workload.Resources{CPU: 0.9, Memory: 460 * mi}
	def := workload.Recommendation{Replicas: 3, Containers: []workload.ContainerRecommendation{{
		Name: "app", Target: workload.Resources{CPU: 1, Memory: 512 * mi},
		LowerBound: workload.Resources{CPU: 0.8, Memory: 400 * mi}, UpperBound: workload.Resources{CPU: 1.2, Memory: 600 * mi},
	}}}
	plusOne := nn.JoinAction([]int{4, 0, 0}, space.Sizes())
	var acted, jobs int
	for step := range 24 {
		o.Time = now
		p, err := a.Prepare(o, c, def, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Mask) != 8+6+6 {
			t.Fatalf("mask of %d entries, want one per choice of each dimension (20)", len(p.Mask))
		}
		var d *nn.Decision
		if p.NeedsPolicy {
			if _, err := a.Decide(p, &nn.Decision{Action: space.NumActions()}); err == nil {
				t.Fatal("an action out of range was accepted")
			}
			d = &nn.Decision{Action: plusOne}
		}
		res, err := a.Decide(p, d)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !p.NeedsPolicy && (res.Recommendation.Replicas != 3 || res.Action != FollowAction):
			t.Fatalf("step %d: the default's decision %+v, action %d; want the default, following", step, res.Recommendation, res.Action)
		case p.NeedsPolicy:
			acted++
			if res.Recommendation.Replicas != 4 || res.Recommendation.Source != workload.SourceAgent || res.Recommendation.Containers[0].Target != def.Containers[0].Target {
				t.Fatalf("step %d: +1 replica over the default gave %+v", step, res.Recommendation)
			}
		}
		now = now.Add(time.Minute)
		next := o
		next.Time = now
		out, err := a.Outcome(Outcome{Observation: o, Applied: res.Recommendation, AppliedSource: res.Recommendation.Source, Next: next, Config: cfg}, now)
		if err != nil {
			t.Fatal(err)
		}
		if out.Experience.Teacher != -1 {
			t.Fatalf("step %d: teacher %d recorded: the residual space has no demonstrations", step, out.Experience.Teacher)
		}
		if out.Train != nil && len(out.Train.Demonstrations) > 0 {
			t.Fatalf("step %d: a training job with %d demonstrations", step, len(out.Train.Demonstrations))
		}
		if out.Train != nil {
			if !p.NeedsPolicy {
				t.Fatalf("step %d: the defaults' episode asked for training; in the residual space they train nothing", step)
			}
			jobs++
		}
		if want := res.Action; out.Experience.Transition.Action != int(want) {
			t.Fatalf("step %d: transition action %d, want %d", step, out.Experience.Transition.Action, want)
		}
	}
	if acted == 0 {
		t.Fatal("the agent never acted")
	}
	if jobs == 0 {
		t.Fatal("the agent's own episodes never asked for training")
	}

	// A default with no opinion leaves the allocation as it is.
	p, err := a.Prepare(o, c, workload.Recommendation{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.NeedsPolicy {
		res, err := a.Decide(p, &nn.Decision{Action: plusOne})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recommendation.Replicas != o.Replicas || res.Recommendation.Source != workload.SourceDefault {
			t.Fatalf("without a default: %+v", res.Recommendation)
		}
	}
}

// A residual agent charges its learner as the trainer does: per resize and
// per SLO-violating window, on top of the replica charge; the paper's
// agent only the replica charge.
func TestResidualCharges(t *testing.T) {
	space := DefaultResidualSpace()
	o := obs()
	keep := workload.Recommendation{Replicas: o.Replicas, Containers: []workload.ContainerRecommendation{{
		Name: "app", Target: o.Containers[0].Requests,
		LowerBound: o.Containers[0].Requests.Scale(0.9), UpperBound: o.Containers[0].Requests.Scale(1.1),
	}}}
	resize := keep
	resize.Containers = []workload.ContainerRecommendation{{Name: "app", Target: o.Containers[0].Requests.Scale(1.5)}}
	slow := o
	slow.Latency.P95 = 2 * slow.SLO
	for _, tc := range []struct {
		name     string
		shape    PolicyShape
		applied  workload.Recommendation
		next     workload.Observation
		wantDiff float64 // paper reward − learning reward
	}{
		{"residual, nothing", PolicyShape{Residual: &space}, keep, o, 0},
		{"residual, resize", PolicyShape{Residual: &space}, resize, o, DefaultVerticalCost},
		{"residual, SLO violated", PolicyShape{Residual: &space}, keep, slow, DefaultSLOCost},
		{"residual, both", PolicyShape{Residual: &space}, resize, slow, DefaultVerticalCost + DefaultSLOCost},
		{"paper, both", PolicyShape{}, resize, slow, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAgent("ns/app", DefaultConfig().Gates, DefaultSteps(), time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			a.SetShape(tc.shape)
			out, err := a.Outcome(Outcome{Observation: o, Applied: tc.applied, AppliedSource: workload.SourceDefault, Next: tc.next, Config: DefaultConfig()}, time.Unix(60, 0))
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Reward.Reward - out.Experience.Transition.Reward; math.Abs(got-tc.wantDiff) > 1e-12 {
				t.Fatalf("learning reward lower by %v, want %v", got, tc.wantDiff)
			}
		})
	}
}
