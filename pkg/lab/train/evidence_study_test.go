package train

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// bootstrapResult builds a bootstrap result whose arms violate viol[arm][app]
// windows, spread over two episodes per app.
func bootstrapResult(apps []string, viol [2][]int) *BootstrapResult {
	r := &BootstrapResult{Apps: apps}
	for k, name := range []string{"bootstrapped", "scratch"} {
		arm := BootstrapArm{Name: name}
		for half := range 2 {
			for i, app := range apps {
				v := viol[k][i] / 2
				if half == 1 {
					v = viol[k][i] - v
				}
				arm.Curve = append(arm.Curve, Episode{App: app, Steps: 10, SLOViolations: v})
			}
		}
		r.Arms = append(r.Arms, arm)
	}
	return r
}

func TestStudyBootstrap(t *testing.T) {
	rs := []*BootstrapResult{
		bootstrapResult([]string{"a", "b"}, [2][]int{{2, 4}, {10, 20}}),
		bootstrapResult([]string{"a", "b"}, [2][]int{{0, 6}, {5, 25}}),
	}
	st, err := StudyBootstrap(rs, []uint64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pairs) != 4 || st.Pairs[2].Seed != 2 || st.Pairs[2].App != "a" || st.Pairs[3].Scratch != 25 || st.Pairs[0].Windows != 20 {
		t.Fatalf("pairs %+v", st.Pairs)
	}
	// Bootstrapped 2, 4, 0, 6 (mean 3); scratch 10, 20, 5, 25 (mean 15).
	if !near(st.Bootstrapped.Mean, 3) || !near(st.Scratch.Mean, 15) || !near(st.Difference.Mean, 12) || st.Difference.N != 4 {
		t.Errorf("means %+v %+v %+v", st.Bootstrapped, st.Scratch, st.Difference)
	}
	// With the seed as the unit: 15 − 3 in both seeds.
	if iv := st.SeedDifference; iv.N != 2 || !near(iv.Mean, 12) || !near(iv.Lo, 12) {
		t.Errorf("seed-level difference %+v, want 12 over 2 seeds", iv)
	}
	if st.Ratio == nil || !near(st.Ratio.Mean, 5) || st.Ratio.Lo > 5 || st.Ratio.Hi < 5 || st.ScratchWorse != 4 {
		t.Errorf("ratio %+v, scratch worse in %d", st.Ratio, st.ScratchWorse)
	}
	var out bytes.Buffer
	if err := st.WriteTable(&out); err != nil || !strings.Contains(out.String(), "Scratch has 5.00x [") {
		t.Errorf("table %q, %v", out.String(), err)
	}

	t.Run("no bootstrapped violation has no ratio", func(t *testing.T) {
		st, err := StudyBootstrap([]*BootstrapResult{bootstrapResult([]string{"a"}, [2][]int{{0}, {4}})}, []uint64{1})
		if err != nil || st.Ratio != nil {
			t.Fatalf("ratio %v, %v", st.Ratio, err)
		}
	})
	t.Run("seeds and results must match", func(t *testing.T) {
		if _, err := StudyBootstrap(rs, []uint64{1}); err == nil {
			t.Error("no error")
		}
	})
}

// adaptResult builds an adapt result of one seed: runs[app][arm] gives
// episodes to 90% and the zero-shot reward.
func adaptResult(runs map[string]map[string][2]float64, apps []string) *AdaptResult {
	r := &AdaptResult{Converged: map[string]float64{}, CPUFactor: 1, MemoryFactor: 1, StartupFactor: 1, Thresholds: []float64{0.95}}
	for _, app := range apps {
		for _, arm := range AdaptArms {
			x := runs[app][arm]
			r.Runs = append(r.Runs, AdaptRun{Arm: arm, App: app, EpisodesTo90: int(x[0]), Reached: true, ZeroShot: x[1], Final: 0.7,
				To: []Reach{{Fraction: 0.95, Episodes: int(x[0]) + 1, Reached: x[0] < 10}}})
		}
	}
	return r
}

func TestStudyAdapt(t *testing.T) {
	run := func(meta, transfer float64) map[string][2]float64 {
		return map[string][2]float64{ArmMeta: {meta, 0.6}, ArmTransfer: {transfer, 0.5}, ArmScratch: {50, 0.1}, ArmFused: {1, 0.65}}
	}
	rs := []*AdaptResult{
		adaptResult(map[string]map[string][2]float64{"a": run(2, 8), "b": run(4, 12)}, []string{"a", "b"}),
		adaptResult(map[string]map[string][2]float64{"a": run(2, 4)}, []string{"a"}),
	}
	st, err := StudyAdapt(rs, []uint64{3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if st.Pairs != 3 || len(st.Thresholds) != 2 || st.Thresholds[0] != 0.9 || len(st.Arms) != len(AdaptArms) {
		t.Fatalf("study %+v", st)
	}
	meta := st.Arms[0]
	// Meta 2, 4, 2 episodes to 90%; 3, 5, 3 to 95%, of which those below
	// 10 episodes reached it.
	if meta.Name != ArmMeta || !near(meta.EpisodesTo[0].Mean, 8.0/3) || !near(meta.EpisodesTo[1].Mean, 11.0/3) || meta.ReachedTo[1] != 3 || !near(meta.ZeroShot.Mean, 0.6) {
		t.Errorf("meta %+v", meta)
	}
	if st.Arms[1].ReachedTo[1] != 2 {
		t.Errorf("transfer reached 95%% in %d runs, want 2 (12 episodes is past 10)", st.Arms[1].ReachedTo[1])
	}
	c := st.Comparisons[0]
	if c.Arm != ArmMeta || c.Base != ArmTransfer {
		t.Fatalf("first comparison %s - %s", c.Arm, c.Base)
	}
	// Transfer 8, 12, 4: meta − transfer = −6, −8, −2; speed-up 24/8 = 3.
	if !near(c.EpisodesTo[0].Mean, -16.0/3) || c.EpisodesTo[0].N != 3 || !near(c.Speedup[0].Mean, 3) || !near(c.ZeroShot.Mean, 0.1) {
		t.Errorf("meta - transfer %+v", c)
	}
	// With the seed as the unit: seed 3 (2+4)/2 − (8+12)/2 = −7, seed 4
	// 2 − 4 = −2.
	if iv := c.SeedEpisodesTo90; iv.N != 2 || !near(iv.Mean, -4.5) || !near(c.SeedZeroShot.Mean, 0.1) {
		t.Errorf("seed-level %+v, zero-shot %+v", iv, c.SeedZeroShot)
	}
	if c.Speedup[0].Lo > 3 || c.Speedup[0].Hi < 3 || c.Speedup[0].Lo < 2 {
		t.Errorf("speed-up interval %+v should hold 3 and stay within the pairs' ratios 2..4", c.Speedup[0])
	}
	var out bytes.Buffer
	if err := st.WriteTable(&out); err != nil || !strings.Contains(out.String(), "meta-ppo - transfer") || !strings.Contains(out.String(), "3 (app, seed) pairs") {
		t.Errorf("table %q, %v", out.String(), err)
	}

	t.Run("an arm missing is an error", func(t *testing.T) {
		bad := adaptResult(map[string]map[string][2]float64{"a": run(2, 8)}, []string{"a"})
		bad.Runs = bad.Runs[:2]
		if _, err := StudyAdapt([]*AdaptResult{bad}, []uint64{1}); err == nil || !strings.Contains(err.Error(), "has no scratch run") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("seeds of another setting are refused", func(t *testing.T) {
		other := adaptResult(map[string]map[string][2]float64{"a": run(2, 8)}, []string{"a"})
		other.CPUFactor = 4
		if _, err := StudyAdapt([]*AdaptResult{rs[0], other}, []uint64{1, 2}); err == nil || !strings.Contains(err.Error(), "another setting") {
			t.Errorf("error %v", err)
		}
	})
}

func TestStudyRetrain(t *testing.T) {
	run := func(before, during, defBefore, defDuring float64, detected int) *RetrainResult {
		return &RetrainResult{ChangeEpisode: 10, Detected: detected, Recovered: -1, Before: before, During: during,
			Degradation: (before - during) / before, DefaultBefore: defBefore, DefaultDuring: defDuring, Oracle: 0.9, DegradationVsOracle: (0.9 - during) / 0.9}
	}
	rs := []*RetrainSet{{Seed: 1, Runs: []*RetrainResult{run(0.8, 0.72, 0.7, 0.7, 12), run(0.8, 0.76, 0.7, 0.63, -1)}}, {Seed: 2, Runs: []*RetrainResult{run(0.5, 0.5, 0.5, 0.45, 10)}}}
	st, err := StudyRetrain(rs, []uint64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 3 || st.Detected != 2 || st.DetectionDelay == nil || !near(st.DetectionDelay.Mean, 2) || st.VsReference != nil {
		t.Errorf("study %+v", st)
	}
	if iv := st.SeedDegradation; iv.N != 2 || !near(iv.Mean, (0.075+0)/2) {
		t.Errorf("seed-level degradation %+v", iv)
	}
	if !near(st.Degradation.Mean, (0.1+0.05+0)/3) || !near(st.DefaultDegradation.Mean, (0+0.1+0.1)/3) || !near(st.AgentMinusDefault.Mean, (0.02+0.13+0.05)/3) {
		t.Errorf("degradation %+v, default %+v, agent - default %+v", st.Degradation, st.DefaultDegradation, st.AgentMinusDefault)
	}
	var out bytes.Buffer
	if err := st.WriteTable(&out); err != nil || !strings.Contains(out.String(), "5.0 [") {
		t.Errorf("table %q, %v", out.String(), err)
	}
}

// TestAdaptFusedArmIsTheDefault: the adapt experiment's floor is the fused
// default acting in every episode, scored as policyEpisode scores it on
// the same app, trace and seed; it does not define the converged reward.
func TestAdaptFusedArmIsTheDefault(t *testing.T) {
	e := tinyEvidence()
	e.AdaptStartupFactor = 4
	pre := mustPretrain(t, e)
	res, err := RunAdapt(context.Background(), e, pre)
	if err != nil {
		t.Fatal(err)
	}
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		t.Fatal(err)
	}
	app := apps[0]
	app.StartupDelay *= 4
	cfg := e.Base.SimConfig()
	var fused *AdaptRun
	best := math.Inf(-1)
	for i, r := range res.Runs {
		if r.Arm == ArmFused {
			fused = &res.Runs[i]
		} else {
			best = math.Max(best, r.Final)
		}
	}
	if fused == nil || len(fused.Rewards) != e.AdaptEpisodes || fused.ZeroShot != fused.Rewards[0] {
		t.Fatalf("fused run %+v", fused)
	}
	if res.Converged[app.Name] != best {
		t.Errorf("converged %v, want the best learning arm's %v", res.Converged[app.Name], best)
	}
	for i, got := range fused.Rewards {
		kind := sim.TraceKind(e.AdaptTraces[i%len(e.AdaptTraces)])
		want, err := policyEpisode(context.Background(), app, kind, mix(e.Seed, uint64(i)), cfg, &e.Base, e.Base.Alpha,
			func(*sim.Trace) (workload.Policy, error) {
				return fusion.NewPolicyFactory(fusion.Options{})(app.Constraints)
			})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("episode %d: fused arm %v, the default on the shifted app %v", i, got, want)
		}
	}
	var out bytes.Buffer
	if err := res.WriteTable(&out); err != nil || !strings.Contains(out.String(), "pod start-up delay x4.00") {
		t.Errorf("table %q, %v", out.String(), err)
	}
}

// TestEvidenceResidualSpace: in the residual space the pre-trained PPO
// and Meta-PPO both act in it; adapt, bootstrap and retrain run, and adapt
// refuses pre-trained learners of another space.
func TestEvidenceResidualSpace(t *testing.T) {
	e := tinyEvidence()
	e.Base.ActionSpace = ActionSpaceResidual
	pre := mustPretrain(t, e)
	ppo, err := learn.ShapeOf(pre.PPO.PolicyConfig())
	if err != nil {
		t.Fatal(err)
	}
	meta, err := learn.ShapeOf(pre.Meta.PolicyConfig())
	if err != nil {
		t.Fatal(err)
	}
	if ppo.Residual == nil || meta.Residual == nil {
		t.Errorf("residual heads: PPO %v, Meta-PPO %v", ppo.Residual, meta.Residual)
	}
	res, err := RunAdapt(context.Background(), e, pre)
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	if len(res.Runs) != len(AdaptArms)*e.AdaptApps {
		t.Errorf("adapt: %d runs, want %d", len(res.Runs), len(AdaptArms)*e.AdaptApps)
	}
	paper := e
	paper.Base.ActionSpace = ActionSpacePaper
	if _, err := RunAdapt(context.Background(), paper, pre); err == nil || !strings.Contains(err.Error(), "acts in the residual action space, the experiment in the paper one") {
		t.Errorf("adapt with residual learners in the paper space: error %v", err)
	}
	if _, err := RunBootstrap(context.Background(), e); err != nil {
		t.Errorf("bootstrap: %v", err)
	}
	if _, err := RunRetrain(context.Background(), e, pre); err != nil {
		t.Errorf("retrain: %v", err)
	}
}
