package learn

import (
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// TestSafeguardKeepsAllocation: when the safeguard refuses the agent's
// downward step it applies the allocation in force, not the default's
// recommendation, and the learner is told NoOp was applied. The default
// here shrinks memory to 250Mi and adds a replica, as the fused default
// does for a container whose memory histogram is still empty: applying
// it turned a refused 10% step into a 50% cut of a container peaking at
// its request.
func TestSafeguardKeepsAllocation(t *testing.T) {
	now := time.Unix(1000, 0)
	c := cons()
	cfg := DefaultConfig()
	hot := func(o *workload.Observation) { o.Containers[0].Peak.Memory = 0.95 * o.Containers[0].Requests.Memory }
	for _, tc := range []struct {
		name       string
		peak       func(*workload.Observation)
		action     Action
		wantSource workload.Source
		wantAction Action
		// wantReplicas and wantMemory are the app container's applied
		// allocation.
		wantReplicas int32
		wantMemory   float64
	}{
		{"memory peaking at 95% refuses LowerMemory", hot, LowerMemory, workload.SourceSafeguard, NoOp, 3, 512 * mi},
		{"cool memory lets LowerMemory through", func(*workload.Observation) {}, LowerMemory, workload.SourceAgent, LowerMemory, 3, 0.9 * 512 * mi},
		{"memory peaking at 95% lets AddReplica through", hot, AddReplica, workload.SourceAgent, AddReplica, 4, 512 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := RestoreAgent(AgentState{
				Workload: "ns/app", Gates: cfg.Gates, LastUpdate: now,
				Lifecycle: lifecycle.State{Stage: lifecycle.OnlineTraining, Since: now},
			}, DefaultSteps())
			if err != nil {
				t.Fatal(err)
			}
			o := obs()
			o.Time = now
			tc.peak(&o)
			def := Apply(&o, &c, NoOp, DefaultSteps())
			def.Replicas = o.Replicas + 1
			def.Containers[0].Target.Memory = 250 * mi
			def.Containers[0].LowerBound, def.Containers[0].UpperBound = def.Containers[0].Target, def.Containers[0].Target
			p, err := a.Prepare(o, c, def, cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Decide(p, &nn.Decision{Action: int(tc.action)})
			if err != nil {
				t.Fatal(err)
			}
			rec := res.Recommendation
			if rec.Source != tc.wantSource || res.Action != tc.wantAction {
				t.Fatalf("source %s action %v, want %s %v", rec.Source, res.Action, tc.wantSource, tc.wantAction)
			}
			got, ok := rec.Container("app")
			if !ok || rec.Replicas != tc.wantReplicas || !near(got.Target.Memory, tc.wantMemory) {
				t.Fatalf("applied %d replicas, memory %g; want %d, %g", rec.Replicas, got.Target.Memory, tc.wantReplicas, tc.wantMemory)
			}
			next := o
			next.Time = now.Add(time.Minute)
			out, err := a.Outcome(Outcome{Observation: o, Applied: rec, AppliedSource: rec.Source, Next: next, Config: cfg}, next.Time)
			if err != nil {
				t.Fatal(err)
			}
			if got := Action(out.Experience.Transition.Action); got != tc.wantAction {
				t.Errorf("transition records %v, want %v (what was applied)", got, tc.wantAction)
			}
		})
	}
}

func TestSafeguardRecommendation(t *testing.T) {
	o, c := obs(), cons()
	// The app's request lies below a minAllowed set since: the allocation
	// in force moves into the bounds, as every answer must (Apply).
	c.Containers[0].MinAllowed.Memory = 600 * mi
	rec := SafeguardRecommendation(&o, &c, DefaultSteps())
	if rec.Source != workload.SourceSafeguard || rec.Replicas != o.Replicas {
		t.Fatalf("got %+v, want the current %d replicas from the safeguard", rec, o.Replicas)
	}
	for _, want := range []struct {
		name   string
		target workload.Resources
	}{
		{"app", workload.Resources{CPU: 1, Memory: 600 * mi}},
		{"sidecar", o.Containers[1].Requests},
	} {
		got, ok := rec.Container(want.name)
		if !ok || got.Target != want.target || got.LowerBound != want.target || got.UpperBound != want.target {
			t.Errorf("container %s: %+v, want target and bounds %+v", want.name, got, want.target)
		}
	}
}
