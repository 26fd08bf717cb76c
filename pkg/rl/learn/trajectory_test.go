package learn

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

func step(i int) nn.Step {
	return nn.Step{State: []float64{float64(i)}, Action: i % int(NumActions), Reward: float64(i) / 10}
}

// TestTrajectory: a window is the last n steps, oldest first, and every
// window handed out keeps its contents while the trajectory moves on
// (across several refills of the backing array).
func TestTrajectory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		steps int
	}{
		{"keeps none", 0, 5},
		{"one step", 1, 9},
		{"shorter than the window", 4, 3},
		{"many refills", 4, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTrajectory(tc.n)
			if tr.Len() != tc.n {
				t.Fatalf("Len %d, want %d", tr.Len(), tc.n)
			}
			var handed [][]nn.Step
			var want [][]nn.Step
			for i := range tc.steps {
				tr.Push(step(i))
				w := tr.Window()
				var exp []nn.Step
				for j := max(i+1-tc.n, 0); j <= i && tc.n > 0; j++ {
					exp = append(exp, step(j))
				}
				if !reflect.DeepEqual(w, exp) {
					t.Fatalf("after %d pushes: window %v, want %v", i+1, w, exp)
				}
				handed, want = append(handed, w), append(want, exp)
			}
			for i := range handed {
				if !reflect.DeepEqual(handed[i], want[i]) {
					t.Fatalf("window %d changed to %v, want %v", i, handed[i], want[i])
				}
			}
		})
	}
}

// TestAgentKeepsWindows drives a workload with a window-keeping agent: each
// Prepare carries the steps reported so far (state, recorded action and
// the paper's reward, which some transitions reduce by a scaling cost), the
// training job's windows line up with its transitions and
// demonstrations and train a Meta-PPO learner, and an agent restored from
// its state and the experience log has the same window. With signatures
// every step also carries its observation's Signature, through the log too.
func TestAgentKeepsWindows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		signature bool
	}{{"state, action and reward", false}, {"with signatures", true}} {
		t.Run(tc.name, func(t *testing.T) { testAgentKeepsWindows(t, tc.signature) })
	}
}

func testAgentKeepsWindows(t *testing.T, signature bool) {
	const n = 16 // the whole run, bootstrapping steps with a scaling cost included
	cfg := DefaultConfig()
	cfg.Gates.Window, cfg.Gates.EpisodeSteps = 3, 4
	now := time.Unix(0, 0)
	a, err := NewAgent("ns/app", cfg.Gates, DefaultSteps(), now)
	if err != nil {
		t.Fatal(err)
	}
	a.SetWindowLen(n)
	a.SetSignature(signature)
	mcfg := nn.DefaultMetaConfig(StateDim, int(NumActions))
	mcfg.Hidden, mcfg.MinibatchSize, mcfg.Window, mcfg.EmbedDim = []int{16}, 8, n, 4
	if signature {
		mcfg.SignatureDim = SignatureDim
	}
	m, err := nn.NewMetaPPO(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	o, c := obs(), cons()
	def := Apply(&o, &c, NoOp, DefaultSteps())
	var steps []nn.Step
	var log []Experience
	var trained, charged int
	for i := range 16 {
		o.Time = now
		o.RequestRate = float64(50 + 10*i) // a changing state
		// Replicas other than the default's 3 are charged a scaling cost
		// in the transition's reward, not in the trajectory's.
		o.Replicas = int32(2 + i%3)
		o.ReadyReplicas = o.Replicas
		p, err := a.Prepare(o, c, def, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if want := steps[max(len(steps)-n, 0):]; !reflect.DeepEqual(p.Window, want) {
			t.Fatalf("step %d: window %v, want %v", i, p.Window, want)
		}
		var d *nn.Decision
		if p.NeedsPolicy {
			dd, err := m.ActWindow(p.State, p.Window, p.Mask, p.Greedy, rng)
			if err != nil {
				t.Fatal(err)
			}
			d = &dd
		}
		res, err := a.Decide(p, d)
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
		next := o
		next.Time = now
		out, err := a.Outcome(Outcome{Observation: o, Applied: res.Recommendation, AppliedSource: res.Recommendation.Source, Next: next, Config: cfg}, now)
		if err != nil {
			t.Fatal(err)
		}
		tr, sr := out.Experience.Transition, out.Experience.StepReward
		if sr == nil || *sr != out.Reward.Reward {
			t.Fatalf("step %d: experience step reward %v, want the paper's reward %v", i, sr, out.Reward.Reward)
		}
		if tr.Reward != *sr {
			charged++
		}
		var sig []float64
		if signature {
			sig = Signature(&o)
		}
		if !reflect.DeepEqual(out.Experience.Signature, sig) {
			t.Fatalf("step %d: experience signature %v, want %v", i, out.Experience.Signature, sig)
		}
		steps = append(steps, nn.Step{State: tr.State, Signature: sig, Action: tr.Action, Reward: *sr})
		log = append(log, out.Experience)
		if j := out.Train; j != nil {
			if len(j.Windows) != len(j.Batch) || len(j.DemoWindows) != len(j.Demonstrations) {
				t.Fatalf("job with %d/%d windows for %d/%d transitions/demonstrations", len(j.Windows), len(j.DemoWindows), len(j.Batch), len(j.Demonstrations))
			}
			if signature != (len(j.Signatures) == len(j.Batch)) || (!signature && j.Signatures != nil) {
				t.Fatalf("job with %d signatures for %d transitions, signatures %t", len(j.Signatures), len(j.Batch), signature)
			}
			// The last transition of the episode is this step; its window
			// is the steps before it.
			if w, want := j.Windows[len(j.Windows)-1], steps[max(len(steps)-1-n, 0):len(steps)-1]; !reflect.DeepEqual(w, want) {
				t.Fatalf("step %d: job window %v, want %v", i, w, want)
			}
			if err := j.RunMeta(m); err != nil {
				t.Fatal(err)
			}
			trained++
		}
	}
	if trained == 0 || a.Stage() == lifecycle.Bootstrapping || charged == 0 {
		t.Fatalf("trained %d times, stage %v, %d steps charged a scaling cost", trained, a.Stage(), charged)
	}

	b, err := RestoreAgent(a.State(), DefaultSteps())
	if err != nil {
		t.Fatal(err)
	}
	b.SetWindowLen(n)
	b.SetSignature(signature)
	for _, e := range log {
		// Through the log's encoding, as a restarted server reads it.
		rec, err := MarshalExperience(e)
		if err != nil {
			t.Fatal(err)
		}
		e, err := UnmarshalExperience(rec)
		if err != nil {
			t.Fatal(err)
		}
		b.Restore(e)
	}
	o.Time = now
	pa, err := a.Prepare(o, c, def, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.Prepare(o, c, def, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(pa.Window) != n || !reflect.DeepEqual(pa.Window, pb.Window) {
		t.Fatalf("restored window %v, want %v", pb.Window, pa.Window)
	}
}

// TestAgentWithoutWindowKeepsNone: the default agent (PPO) hands out no
// windows and its jobs carry none, which RunMeta refuses.
func TestAgentWithoutWindowKeepsNone(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Gates.Window, cfg.Gates.EpisodeSteps = 2, 1
	now := time.Unix(0, 0)
	a, err := NewAgent("ns/app", cfg.Gates, DefaultSteps(), now)
	if err != nil {
		t.Fatal(err)
	}
	o, c := obs(), cons()
	def := Apply(&o, &c, NoOp, DefaultSteps())
	// Two bootstrapping episodes of one step; then the policy would act.
	for range 2 {
		o.Time = now
		p, err := a.Prepare(o, c, def, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if p.Window != nil {
			t.Fatalf("window %v", p.Window)
		}
		res, err := a.Decide(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
		next := o
		next.Time = now
		out, err := a.Outcome(Outcome{Observation: o, Applied: res.Recommendation, AppliedSource: workload.SourceDefault, Next: next, Config: cfg}, now)
		if err != nil {
			t.Fatal(err)
		}
		j := out.Train
		if j == nil || j.Windows != nil || j.DemoWindows != nil {
			t.Fatalf("job %+v", j)
		}
		if err := j.RunMeta(nil); err == nil {
			t.Fatal("RunMeta accepted a job without windows")
		}
	}
}

// TestUnmarshalExperience: a record of the experience log is refused when
// its state or its signature has the wrong length.
func TestUnmarshalExperience(t *testing.T) {
	state := make([]float64, StateDim)
	good := Experience{Workload: "ns/app", Transition: nn.Transition{State: state, NextState: state}, Teacher: -1}
	for _, tc := range []struct {
		name    string
		mutate  func(e *Experience)
		wantErr string
	}{
		{"plain", func(*Experience) {}, ""},
		{"with a signature", func(e *Experience) { e.Signature = make([]float64, SignatureDim) }, ""},
		{"short state", func(e *Experience) { e.Transition.State = state[1:] }, "state of length"},
		{"short signature", func(e *Experience) { e.Signature = []float64{1} }, "signature of length 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := good
			tc.mutate(&e)
			rec, err := MarshalExperience(e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalExperience(rec)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			case err == nil && !reflect.DeepEqual(got.Signature, e.Signature):
				t.Fatalf("signature %v, want %v", got.Signature, e.Signature)
			}
		})
	}
	if _, err := UnmarshalExperience([]byte("{")); err == nil {
		t.Error("a truncated record was accepted")
	}
}
