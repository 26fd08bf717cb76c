package train

import (
	"bytes"
	"context"
	"encoding/xml"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// tiny is a training run small enough for -race: a few short episodes.
// tiny is a small training in the paper's setting, which most tests here
// are about (behaviour cloning, the gates, frozen Serving apps).
func tiny() Options {
	o := PaperOptions()
	o.Apps, o.Episodes, o.BootstrapEpisodes, o.EpisodeSteps, o.BatchEpisodes = 3, 9, 1, 24, 3
	o.Traces = []string{"steady", "flash-crowd"}
	o.MinibatchSize = 32
	o.Hidden = []int{16}
	o.Workers = 2
	return o
}

func mustTrain(t *testing.T, o Options) *Result {
	t.Helper()
	res, err := Train(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func marshal(t *testing.T, l Learner) []byte {
	t.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTrainImproves trains from scratch (no bootstrapping: the initial
// policy is random) on a fixed set of apps under steady load, every batch
// being the same apps with fresh arrivals, and asks the last two batches'
// mean episode reward to beat the first batch's by at least 0.05 (on a
// scale where the fused default scores about 0.65), for each of three
// seeds. A random policy scales in and shrinks requests at random and pays
// for it in OOM kills and lost requests; PPO quickly learns not to. (The
// updater's stabilisation window, which holds an agent's counts as in a
// cluster, spares the random policy most of its scale-ins: its first batch
// scores 0.31–0.49, against −0.21–0.24 before the simulator held them, and
// training ends at 0.55–0.58 either way.)
func TestTrainImproves(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		o := PaperOptions()
		o.Apps, o.BatchEpisodes, o.EpisodeSteps = 4, 4, 60
		o.Episodes, o.BootstrapEpisodes = 4*12, 0
		o.Traces = []string{"steady"}
		o.Hidden = []int{32}
		o.MinibatchSize, o.LearningRate = 60, 3e-3
		o.Seed = seed
		res := mustTrain(t, o)
		first := res.MeanReward(0, 4)
		last := res.MeanReward(len(res.Episodes)-8, len(res.Episodes))
		t.Logf("seed %d: mean episode reward %.3f in the first batch, %.3f in the last two", seed, first, last)
		if last < first+0.05 {
			t.Errorf("seed %d: training did not improve the reward enough: first batch %.3f, last two batches %.3f (want +0.05)", seed, first, last)
		}
		for _, e := range res.Episodes {
			if e.Phase != PhaseOnline || e.Steps != 60 || e.AgentDecisions == 0 {
				t.Fatalf("episode %+v: want an online episode of 60 steps in which the agent acted", e)
			}
		}
	}
}

func TestBootstrapClonesTheDefault(t *testing.T) {
	o := tiny()
	o.BootstrapEpisodes = 2 // the gate needs 10 episodes: the cap decides
	res := mustTrain(t, o)
	if len(res.Episodes) != o.Episodes {
		t.Fatalf("%d episodes, want %d", len(res.Episodes), o.Episodes)
	}
	boots := 2 * o.Apps // two per app, the apps taking turns
	for i, e := range res.Episodes {
		boot := i < boots
		if (e.Phase == PhaseBootstrap) != boot || e.Index != i {
			t.Errorf("episode %d: %+v", i, e)
		}
		if wantStage := map[bool]string{true: "Bootstrapping", false: "OnlineTraining"}[boot]; e.Stage != wantStage {
			t.Errorf("episode %d ran in %s, want %s", i, e.Stage, wantStage)
		}
		if boot && e.AgentDecisions != 0 {
			t.Errorf("bootstrap episode %d: the agent acted %d times", i, e.AgentDecisions)
		}
	}
	if n, end := res.BootstrapCount(); n != boots || end != boots {
		t.Errorf("BootstrapCount() = %d, %d; want %d, %d", n, end, boots, boots)
	}
	if len(res.Changes) != o.Apps {
		t.Fatalf("stage changes %+v: want one per app", res.Changes)
	}
	for _, c := range res.Changes {
		if c.From != "Bootstrapping" || c.To != "OnlineTraining" || c.Reason != "BootstrapCapReached" || c.Episode < o.Apps || c.Episode >= boots {
			t.Errorf("stage change %+v: want the cap to end the second bootstrapping episode", c)
		}
	}
	// Two batches bootstrap (each: BCRounds cloning calls and an offline
	// update), one learns online.
	if len(res.BC) != 2*o.BCRounds || res.BC[len(res.BC)-1].Accuracy < 0.6 {
		t.Errorf("behaviour cloning %+v: want %d rounds ending above 60%% accuracy", res.BC, 2*o.BCRounds)
	}
	if want := 2*o.OfflineUpdates + 1; len(res.Updates) != want {
		t.Errorf("%d PPO updates, want %d", len(res.Updates), want)
	}
}

// TestGateEndsBootstrapping: with gates every default passes, each app
// leaves Bootstrapping as soon as its window of Window episodes is full,
// before the cap; from scratch nothing bootstraps.
func TestGateEndsBootstrapping(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cap       int
		wantBoots int
		reason    string
	}{
		{"gate before cap", 100, 2 * 3, "RewardGatePassed"},
		{"from scratch", 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tiny()
			o.BootstrapEpisodes, o.Episodes = tc.cap, 15
			o.Gates.Window, o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 2, -1, 2
			o.Gates.RetrainBelowMean, o.Gates.RetrainAboveStdDev = -1, 2
			res := mustTrain(t, o)
			if n, _ := res.BootstrapCount(); n != tc.wantBoots {
				t.Errorf("%d bootstrapping episodes, want %d", n, tc.wantBoots)
			}
			for _, c := range res.Changes {
				if c.From == "Bootstrapping" && c.Reason != tc.reason {
					t.Errorf("change %+v, want reason %s", c, tc.reason)
				}
			}
			// The gates pass anything, so each app moves on every Window
			// episodes: OnlineTraining → Serving, then stays (the detector
			// cannot fire below -1).
			var serving int
			for _, e := range res.Episodes {
				if e.Stage == "Serving" {
					serving++
				}
			}
			if serving == 0 {
				t.Errorf("no episode served: %+v", res.Changes)
			}
		})
	}
}

func TestTrainingAppsAreNeverHeldOut(t *testing.T) {
	apps, err := TrainingApps(1, 12)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := sim.GenerateApps(1, 20)
	held := map[string]bool{}
	for i, a := range all {
		if sim.HeldOut(i) {
			held[a.Name] = true
		}
	}
	if len(apps) != 12 {
		t.Fatalf("%d apps, want 12", len(apps))
	}
	for _, a := range apps {
		if held[a.Name] {
			t.Errorf("training app %s is held out", a.Name)
		}
	}
}

func TestDeterministic(t *testing.T) {
	a := mustTrain(t, tiny())
	o := tiny()
	o.Workers = 1 // parallelism must not matter
	b := mustTrain(t, o)
	if !bytes.Equal(marshal(t, a.Learner), marshal(t, b.Learner)) {
		t.Error("same seed, different checkpoints")
	}
	for i := range a.Episodes {
		if a.Episodes[i] != b.Episodes[i] {
			t.Errorf("episode %d: %+v vs %+v", i, a.Episodes[i], b.Episodes[i])
		}
	}
	o = tiny()
	o.Seed = 2
	if c := mustTrain(t, o); bytes.Equal(marshal(t, a.Learner), marshal(t, c.Learner)) {
		t.Error("different seeds, same checkpoint")
	}
}

// TestLearningRateSchedule: a decaying rate is deterministic, changes the
// weights against the constant rate, and keeps the configured rate in the
// checkpoint; a schedule that ends at the start rate is the constant one.
func TestLearningRateSchedule(t *testing.T) {
	constant := mustTrain(t, tiny())
	o := tiny()
	o.LearningRateEnd = 1e-5
	a, b := mustTrain(t, o), mustTrain(t, o)
	if !bytes.Equal(marshal(t, a.Learner), marshal(t, b.Learner)) {
		t.Error("same seed and schedule, different checkpoints")
	}
	if bytes.Equal(marshal(t, a.Learner), marshal(t, constant.Learner)) {
		t.Error("a decaying learning rate gave the constant rate's checkpoint")
	}
	if got, want := a.Learner.PolicyConfig().LearningRate, constant.Learner.PolicyConfig().LearningRate; got != want {
		t.Errorf("checkpointed learning rate %v, want the configured %v", got, want)
	}
	o = tiny()
	o.LearningRateEnd = constant.Learner.PolicyConfig().LearningRate
	if flat := mustTrain(t, o); !bytes.Equal(marshal(t, flat.Learner), marshal(t, constant.Learner)) {
		t.Error("a schedule from the rate to itself is not the constant rate")
	}
}

func TestCheckpointWrittenAndReloadable(t *testing.T) {
	dir := t.TempDir()
	o := tiny()
	o.Checkpoint = filepath.Join(dir, "sub", "agent.ckpt")
	o.CheckpointEvery = 1
	res := mustTrain(t, o)
	l, err := LoadCheckpoint(o.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(t, l), marshal(t, res.Learner)) {
		t.Error("the checkpoint on disk is not the final learner")
	}
	entries, _ := os.ReadDir(filepath.Dir(o.Checkpoint))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	// The reloaded learner decides like the trained one.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		s := make([]float64, learn.StateDim)
		for i := range s {
			s[i] = rng.Float64()
		}
		d1, err1 := res.Learner.Act(s, nil, nil, true, nil)
		d2, err2 := l.Act(s, nil, nil, true, nil)
		if err1 != nil || err2 != nil || d1.Action != d2.Action || d1.Value != d2.Value {
			t.Fatalf("decisions differ: %+v %v vs %+v %v", d1, err1, d2, err2)
		}
	}
	// A torn file is refused, not loaded.
	b, _ := os.ReadFile(o.Checkpoint)
	torn := filepath.Join(dir, "torn.ckpt")
	if err := os.WriteFile(torn, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(torn); err == nil {
		t.Error("a torn checkpoint loaded")
	}
}

// TestAgentInEvaluator runs the greedy agent as an evaluation contender:
// it must never produce an invalid or failing decision.
func TestAgentInEvaluator(t *testing.T) {
	o := tiny()
	o.Episodes, o.BootstrapEpisodes = 3, 3
	res := mustTrain(t, o)
	apps, _ := sim.GenerateApps(1, 10)
	var runs []eval.Run
	for i, a := range apps {
		if !sim.HeldOut(i) {
			continue
		}
		tr, err := sim.GenerateTrace(sim.FlashCrowd, sim.TraceOptions{Mean: a.BaseRate, Steps: 80, Step: sim.DefaultConfig().Step, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, eval.Run{App: a, Trace: &tr, Seed: uint64(i)})
	}
	rep, err := eval.Evaluate(context.Background(), runs, []eval.Contender{Contender(res.Learner, AgentOptions{})}, eval.Options{SeriesRun: -1})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summaries[0]; s.Policy != PolicyName || s.PolicyErrors != 0 || s.Runs != 2 {
		t.Errorf("summary %+v", s)
	}
}

// alwaysLearner always picks one action; it stands in for a policy that
// wants to shrink memory.
type alwaysLearner struct {
	Learner
	action learn.Action
}

func (a alwaysLearner) WindowLen() int    { return 0 }
func (a alwaysLearner) SignatureLen() int { return 0 }

func (a alwaysLearner) PolicyConfig() nn.Config {
	return nn.DefaultConfig(learn.StateDim, int(learn.NumActions))
}

func (a alwaysLearner) Act(state []float64, _ []nn.Step, mask []bool, greedy bool, rng *rand.Rand) (nn.Decision, error) {
	if mask != nil && !mask[a.action] {
		return nn.Decision{Action: int(learn.NoOp)}, nil
	}
	return nn.Decision{Action: int(a.action)}, nil
}

func TestAgentSafeguard(t *testing.T) {
	apps, _ := sim.GenerateApps(1, 1)
	app := apps[0]
	obs := workload.Observation{
		Replicas: 2, ReadyReplicas: 2, RequestRate: 10, SLO: app.SLO, Samples: 2,
		Containers: []workload.ContainerObservation{{
			Name: app.Container, Requests: app.Requests, Limits: app.Limits,
			Usage: app.Requests.Scale(0.5), Peak: app.Requests.Scale(0.95),
		}},
	}
	ag, err := NewAgent(alwaysLearner{action: learn.LowerMemory}, app.Constraints, AgentOptions{Greedy: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ag.Recommend(context.Background(), obs)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Source != workload.SourceSafeguard {
		t.Errorf("memory peaking at 95%% of its request was shrunk: %+v", rec)
	}
	obs.Containers[0].Peak = app.Requests.Scale(0.5)
	if rec, err = ag.Recommend(context.Background(), obs); err != nil || rec.Source != workload.SourceAgent {
		t.Fatalf("recommendation %+v, %v: want the agent's", rec, err)
	}
	c, _ := rec.Container(app.Container)
	if want := app.Requests.Memory * (1 - learn.DefaultSteps().Memory); c.Target.Memory != want {
		t.Errorf("memory target %g, want one step down to %g", c.Target.Memory, want)
	}
	if _, err := NewAgent(alwaysLearner{}, app.Constraints, AgentOptions{}); err == nil {
		t.Error("a sampling agent without a random source was accepted")
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"defaults", func(*Options) {}, ""},
		{"no apps", func(o *Options) { o.Apps = 0 }, "apps must be > 0"},
		{"negative tenants", func(o *Options) { o.Tenants = -0.1 }, "tenants must be in [0, 1]"},
		{"negative bootstrap cap", func(o *Options) { o.BootstrapEpisodes = -1 }, "bootstrap episodes"},
		{"bad gates", func(o *Options) { o.Gates.Window = 1 }, "gates: window"},
		{"unknown policy", func(o *Options) { o.Policy = "a3c" }, `unknown policy "a3c"`},
		{"bad meta window", func(o *Options) { o.Policy, o.Window = PolicyMetaPPO, 0 }, "window must be in"},
		{"unknown trace", func(o *Options) { o.Traces = []string{"sawtooth"} }, `unknown trace kind "sawtooth"`},
		{"bad alpha", func(o *Options) { o.Alpha = 2 }, "alpha"},
		{"bad hidden", func(o *Options) { o.Hidden = []int{0} }, "hidden[0]"},
		{"bad batch", func(o *Options) { o.BatchEpisodes = 0 }, "batch episodes"},
		{"negative scaling cost", func(o *Options) { o.ScalingCost = -0.1 }, "scaling cost"},
		{"NaN vertical cost", func(o *Options) { o.VerticalCost = math.NaN() }, "vertical cost"},
		{"infinite slo cost", func(o *Options) { o.SLOCost = math.Inf(1) }, "slo cost"},
		{"negative trace steps", func(o *Options) { o.TraceSteps = -1 }, "trace steps"},
		{"decaying learning rate", func(o *Options) { o.LearningRateEnd = 1e-5 }, ""},
		{"negative final learning rate", func(o *Options) { o.LearningRateEnd = -1e-5 }, "final learning rate must be finite"},
		{"NaN final learning rate", func(o *Options) { o.LearningRateEnd = math.NaN() }, "final learning rate must be finite"},
		{"final learning rate above the start", func(o *Options) { o.LearningRateEnd = 1 }, "must not exceed the learning rate"},
		{"unknown features", func(o *Options) { o.FeaturesOff = 0x80 }, "unknown state features"},
		{"retraining min above max", func(o *Options) { o.Retraining.Min, o.Retraining.Max = 5, 4 }, "retraining min 5 must not exceed max 4"},
		{"negative retraining cap", func(o *Options) { o.Retraining.Max = -1 }, "retraining bounds must be >= 0"},
		{"negative auxiliary weight", func(o *Options) { o.Policy, o.AuxWeight = PolicyMetaPPO, -1 }, "auxiliary weight must be finite and >= 0"},
		{"infinite auxiliary weight", func(o *Options) { o.Policy, o.AuxWeight = PolicyMetaPPO, math.Inf(1) }, "auxiliary weight must be finite and >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			err := o.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestWriteCurveSVG(t *testing.T) {
	eps := []Episode{{Index: 0, Phase: PhaseBootstrap, MeanReward: 0.6}, {Index: 1, Phase: PhaseOnline, MeanReward: -0.2}, {Index: 2, Phase: PhaseOnline, MeanReward: 0.7}}
	var a, b bytes.Buffer
	if err := WriteCurveSVG(&a, eps, 2); err != nil {
		t.Fatal(err)
	}
	if err := WriteCurveSVG(&b, eps, 2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("equal curves, different plots")
	}
	var doc struct {
		XMLName xml.Name
		Circles []struct{} `xml:"circle"`
	}
	if err := xml.Unmarshal(a.Bytes(), &doc); err != nil || doc.XMLName.Local != "svg" || len(doc.Circles) != 3 {
		t.Errorf("not an SVG with one dot per episode (%v): %s", err, a.String())
	}
	if err := WriteCurveSVG(&a, nil, 2); err == nil {
		t.Error("an empty curve was plotted")
	}
}

// TestMetaPPOTraining trains Meta-PPO through bootstrapping (cloning with
// windows) and online updates, and checks that the run is reproducible,
// that the checkpoint reloads as Meta-PPO, and that the reloaded agent
// evaluates exactly like the trained one.
func TestMetaPPOTraining(t *testing.T) {
	dir := t.TempDir()
	o := tiny()
	o.Policy, o.Window, o.EmbedDim = PolicyMetaPPO, 4, 3
	o.Checkpoint = filepath.Join(dir, "meta.ckpt")
	res := mustTrain(t, o)
	if res.Learner.Kind() != PolicyMetaPPO || res.Learner.WindowLen() != 4 {
		t.Fatalf("learner %s with window %d", res.Learner.Kind(), res.Learner.WindowLen())
	}
	if n, _ := res.BootstrapCount(); n != o.Apps || len(res.BC) != o.BCRounds {
		t.Errorf("%d bootstrapping episodes and %d cloning calls, want %d and %d", n, len(res.BC), o.Apps, o.BCRounds)
	}
	o2 := o
	o2.Workers, o2.Checkpoint = 1, ""
	if again := mustTrain(t, o2); !bytes.Equal(marshal(t, res.Learner), marshal(t, again.Learner)) {
		t.Error("same seed, different Meta-PPO checkpoints")
	}
	l, err := LoadCheckpoint(o.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if l.Kind() != PolicyMetaPPO || !bytes.Equal(marshal(t, l), marshal(t, res.Learner)) {
		t.Fatalf("reloaded a %s learner that differs from the trained one", l.Kind())
	}
	apps, _ := sim.GenerateApps(3, 5)
	tr, err := sim.GenerateTrace(sim.Bursty, sim.TraceOptions{Mean: apps[4].BaseRate, Steps: 60, Step: sim.DefaultConfig().Step, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	runs := []eval.Run{{App: apps[4], Trace: &tr, Seed: 3}}
	reports := make([]*eval.Report, 2)
	for i, ln := range []Learner{res.Learner, l} {
		if reports[i], err = eval.Evaluate(context.Background(), runs, []eval.Contender{Contender(ln, AgentOptions{})}, eval.Options{SeriesRun: -1, Workers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if s := reports[0].Summaries[0]; s.PolicyErrors != 0 || s.Steps != 60 {
		t.Errorf("summary %+v", s)
	}
	if reports[0].Summaries[0] != reports[1].Summaries[0] {
		t.Errorf("the reloaded agent evaluates differently: %+v vs %+v", reports[0].Summaries[0], reports[1].Summaries[0])
	}
}

// TestAgentKeepsTheTrajectory: a Meta-PPO agent hands the learner the
// steps so far, at most WindowLen of them, each with the reward of the
// window that followed it; earlier windows are never overwritten. A blind
// agent (Options.MetaBlind) hands it none.
func TestAgentKeepsTheTrajectory(t *testing.T) {
	for _, tc := range []struct {
		name      string
		blind     bool
		signature bool
		// want is the window length of decision i.
		want func(i int) int
	}{
		{"window of 2", false, false, func(i int) int { return min(i, 2) }},
		{"blind", true, false, func(int) int { return 0 }},
		{"signature", false, true, func(i int) int { return min(i, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apps, _ := sim.GenerateApps(1, 1)
			app := apps[0]
			rec := &recordingLearner{window: 2}
			if tc.signature {
				rec.signature = learn.SignatureDim
			}
			ag, err := NewAgent(rec, app.Constraints, AgentOptions{Greedy: true, Blind: tc.blind})
			if err != nil {
				t.Fatal(err)
			}
			tr, _ := sim.GenerateTrace(sim.Steady, sim.TraceOptions{Mean: app.BaseRate, Steps: 6, Step: sim.DefaultConfig().Step, Seed: 1})
			s, err := sim.New(sim.DefaultConfig(), app, &tr, 1)
			if err != nil {
				t.Fatal(err)
			}
			// The simulator reuses an observation's slices, so keep each
			// window's reward, not the observation.
			var rewards []float64
			var sigs [][]float64
			for range 4 {
				s.Step()
				o := s.Observation()
				sigs = append(sigs, learn.Signature(&o))
				terms, err := learn.Reward(&o, 0.5)
				if err != nil {
					t.Fatal(err)
				}
				rewards = append(rewards, terms.Reward)
				r, err := ag.Recommend(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Apply(r); err != nil {
					t.Fatal(err)
				}
			}
			if len(rec.windows) != 4 {
				t.Fatalf("%d decisions recorded, want 4", len(rec.windows))
			}
			for i, w := range rec.windows {
				if want := tc.want(i); len(w) != want {
					t.Fatalf("decision %d saw %d steps, want %d", i, len(w), want)
				}
				for j, st := range w {
					k := i - len(w) + j // the decision this step records
					if st.Reward != rewards[k+1] || st.Action != int(learn.NoOp) || !slices.Equal(st.State, rec.states[k]) {
						t.Errorf("decision %d, step %d: %+v, want decision %d's state, NoOp and reward %v", i, j, st, k, rewards[k+1])
					}
					// The signature of the decision's own observation, only
					// for a learner that reads one.
					if want := sigs[k]; !tc.signature {
						want = nil
					} else if !slices.Equal(st.Signature, want) || want[learn.SigStartupSeen] != 1 {
						t.Errorf("decision %d, step %d: signature %v, want %v with the start-up delay seen", i, j, st.Signature, want)
					}
					if !tc.signature && st.Signature != nil {
						t.Errorf("decision %d, step %d: signature %v for a learner that reads none", i, j, st.Signature)
					}
				}
			}
		})
	}
}

// recordingLearner always chooses NoOp and records what it was shown.
type recordingLearner struct {
	Learner
	window    int
	signature int
	states    [][]float64
	windows   [][]nn.Step
}

func (r *recordingLearner) WindowLen() int    { return r.window }
func (r *recordingLearner) SignatureLen() int { return r.signature }

func (r *recordingLearner) PolicyConfig() nn.Config {
	if r.Learner != nil {
		return r.Learner.PolicyConfig()
	}
	return nn.DefaultConfig(learn.StateDim, int(learn.NumActions))
}

func (r *recordingLearner) Act(state []float64, window []nn.Step, _ []bool, _ bool, _ *rand.Rand) (nn.Decision, error) {
	r.states = append(r.states, state)
	r.windows = append(r.windows, window)
	return nn.Decision{Action: int(learn.NoOp)}, nil
}
