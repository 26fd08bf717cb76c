package train

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// tinyEvidence runs every experiment in about a second: the machinery,
// not the paper's numbers.
func tinyEvidence() EvidenceOptions {
	e := DefaultEvidenceOptions()
	e.Apps = 2
	e.Base.EpisodeSteps, e.Base.Hidden, e.Base.MinibatchSize, e.Base.Workers = 12, []int{8}, 32, 2
	e.Base.Window, e.Base.EmbedDim, e.Base.BatchEpisodes = 2, 2, 4
	e.Base.Gates.Window = 2
	e.PretrainApps, e.PretrainEpisodes = 2, 8
	e.BootstrapEpisodes, e.BootstrapCap, e.BootstrapBatch = 8, 2, 4
	e.AdaptApps, e.AdaptEpisodes, e.AdaptBatch, e.ConvergedWindow, e.SmoothEpisodes = 1, 6, 2, 2, 2
	e.EvalSteps, e.EvalTraces = 30, []string{"steady"}
	e.RetrainBefore, e.RetrainAfter, e.RetrainBatch = 4, 6, 2
	return e
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPretrain(t *testing.T, e EvidenceOptions) *Pretrained {
	t.Helper()
	pre, err := Pretrain(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	if pre.PPO.Kind() != PolicyPPO || pre.Meta.Kind() != PolicyMetaPPO {
		t.Fatalf("pre-trained %s and %s", pre.PPO.Kind(), pre.Meta.Kind())
	}
	return pre
}

// TestEvidenceAppsAreNew: the evidence apps are neither training apps nor
// the demo's held-out apps of the same seed.
func TestEvidenceAppsAreNew(t *testing.T) {
	apps, err := EvidenceApps(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(apps) != 4 {
		t.Fatalf("%d apps, want 4", len(apps))
	}
	type key struct{ cpu, rate float64 }
	seen := map[key]bool{}
	known, _ := sim.GenerateApps(1, 200) // training and demo apps alike
	for _, a := range known {
		seen[key{a.CPUSeconds, a.BaseRate}] = true
	}
	for _, a := range apps {
		if seen[key{a.CPUSeconds, a.BaseRate}] || !strings.HasPrefix(a.Name, "new-") {
			t.Errorf("evidence app %s (cpu %g, rate %g) is not new", a.Name, a.CPUSeconds, a.BaseRate)
		}
	}
}

func TestRunBootstrap(t *testing.T) {
	e := tinyEvidence()
	res, err := RunBootstrap(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Arms) != 2 || res.Arms[0].Name != "bootstrapped" || res.Arms[1].Name != "scratch" {
		t.Fatalf("arms %+v", res.Arms)
	}
	for _, a := range res.Arms {
		var viol int
		for _, ep := range a.Curve {
			viol += ep.SLOViolations
		}
		if a.Episodes != e.BootstrapEpisodes || len(a.Curve) != a.Episodes || a.Windows != a.Episodes*e.Base.EpisodeSteps || viol != a.SLOViolations {
			t.Errorf("arm %s: %d episodes, %d windows, %d violations (curve %d): inconsistent", a.Name, a.Episodes, a.Windows, a.SLOViolations, viol)
		}
	}
	if b := res.Arms[0].BootstrapEpisodes; b == 0 || b > e.BootstrapCap*e.Apps {
		t.Errorf("bootstrapped arm: the default acted in %d episodes, want 1..%d", b, e.BootstrapCap*e.Apps)
	}
	if res.Arms[1].BootstrapEpisodes != 0 {
		t.Errorf("scratch arm bootstrapped %d episodes", res.Arms[1].BootstrapEpisodes)
	}
	if (res.Ratio == nil) != (res.Arms[0].SLOViolations == 0) {
		t.Errorf("ratio %v with %d bootstrapped violations", res.Ratio, res.Arms[0].SLOViolations)
	}
	var out bytes.Buffer
	if err := res.WriteTable(&out); err != nil || !strings.Contains(out.String(), "scratch") {
		t.Errorf("table %q, %v", out.String(), err)
	}
	again, err := RunBootstrap(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustJSON(t, res), mustJSON(t, again)) {
		t.Error("same seed, different results")
	}
}

func TestEpisodesTo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rs      []float64
		target  float64
		k       int
		want    int
		reached bool
	}{
		{"first episode", []float64{0.9, 0.1}, 0.5, 1, 1, true},
		{"smoothed", []float64{0.2, 0.9, 0.6, 0.8}, 0.7, 2, 3, true},
		{"warm-up averages what there is", []float64{0.8, 0.2}, 0.7, 3, 1, true},
		{"never", []float64{0.1, 0.2, 0.3}, 0.5, 2, 3, false},
		{"negative rewards", []float64{-0.5, -0.3, -0.2}, -0.25, 1, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reached := EpisodesTo(tc.rs, tc.target, tc.k)
			if got != tc.want || reached != tc.reached {
				t.Errorf("episodesTo = %d, %v; want %d, %v", got, reached, tc.want, tc.reached)
			}
		})
	}
}

// TestPolicyEpisodeScoresAsTheTrainer: the oracle's reference reward is
// computed by policyEpisode, which must run and score an episode exactly
// as the trainer does. Checked with the fused default, which both can
// run: the trainer's episodes in which the default acts and policyEpisode
// on the same apps, traces and seeds give identical rewards.
func TestPolicyEpisodeScoresAsTheTrainer(t *testing.T) {
	o := tiny()
	o.Apps, o.Episodes, o.BatchEpisodes = 2, 4, 2
	o.BootstrapEpisodes, o.BCRounds, o.OfflineUpdates = o.Episodes, 0, 0
	o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 1, 0
	res := mustTrain(t, o)
	apps, err := TrainingApps(o.Seed, o.Apps)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.SimConfig()
	for i, ep := range res.Episodes {
		if ep.Phase != PhaseBootstrap {
			t.Fatalf("episode %+v: the default should act", ep)
		}
		a := i % len(apps)
		kind := sim.TraceKind(o.Traces[(a+i/len(apps))%len(o.Traces)])
		got, err := policyEpisode(context.Background(), apps[a], kind, mix(o.Seed, uint64(i)), cfg, &o, o.Alpha,
			func(*sim.Trace) (workload.Policy, error) {
				return fusion.NewPolicyFactory(fusion.Options{})(apps[a].Constraints)
			})
		if err != nil {
			t.Fatal(err)
		}
		if got != ep.MeanReward || ep.Trace != string(kind) {
			t.Errorf("episode %d (%s, %s): policyEpisode %v, trainer %v", i, ep.App, ep.Trace, got, ep.MeanReward)
		}
	}
}

func TestShortfall(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   []float64
		conv float64
		want float64
	}{
		{"at the converged reward", []float64{0.5, 0.5}, 0.5, 0},
		{"above it counts nothing", []float64{0.6, 0.4}, 0.5, 0.1},
		{"relative to the converged reward", []float64{0.2, 0.4, 0.6}, 0.8, (0.6 + 0.4 + 0.2) / 3 / 0.8},
		{"negative converged reward", []float64{-0.6, -0.4}, -0.4, 0.2 / 2 / 0.4},
		{"zero converged reward", []float64{-0.5}, 0, 0},
		{"no episodes", nil, 0.5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shortfall(tc.rs, tc.conv); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("shortfall = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAdaptShiftsTheNewApps: the adapt experiment's factors reach the apps
// the arms learn (a heavier app scores differently) and the result says
// which were applied.
func TestAdaptShiftsTheNewApps(t *testing.T) {
	e := tinyEvidence()
	e.Base.Gates.Window = 2
	pre := mustPretrain(t, e)
	plain, err := RunAdapt(context.Background(), e, pre)
	if err != nil {
		t.Fatal(err)
	}
	e.AdaptCPUFactor, e.AdaptMemoryFactor = 8, 2
	shifted, err := RunAdapt(context.Background(), e, pre)
	if err != nil {
		t.Fatal(err)
	}
	if shifted.CPUFactor != 8 || shifted.MemoryFactor != 2 || plain.CPUFactor != 1 {
		t.Errorf("factors %v/%v, plain %v", shifted.CPUFactor, shifted.MemoryFactor, plain.CPUFactor)
	}
	if slices.Equal(plain.Runs[0].Rewards, shifted.Runs[0].Rewards) {
		t.Error("the factors did not change the apps")
	}
	var out bytes.Buffer
	if err := shifted.WriteTable(&out); err != nil || !strings.Contains(out.String(), "x8.00") {
		t.Errorf("table %q, %v", out.String(), err)
	}
}

func TestRunAdaptAfterRetrain(t *testing.T) {
	e := tinyEvidence()
	pre := mustPretrain(t, e)
	before := mustJSON(t, [][]byte{marshal(t, pre.PPO), marshal(t, pre.Meta)})

	t.Run("adapt", func(t *testing.T) {
		res, err := RunAdapt(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Runs) != len(AdaptArms)*e.AdaptApps || len(res.Arms) != len(AdaptArms) {
			t.Fatalf("%d runs, %d arms", len(res.Runs), len(res.Arms))
		}
		for _, r := range res.Runs {
			if len(r.Rewards) != e.AdaptEpisodes || r.EpisodesTo90 < 1 || r.EpisodesTo90 > e.AdaptEpisodes {
				t.Errorf("run %+v", r)
			}
			// The best arm defines the converged reward, so it reaches
			// 90% of it, and every other threshold (smoothing = converged
			// window here).
			if r.Final == res.Converged[r.App] && !r.Reached {
				t.Errorf("the best arm %s did not reach its own converged reward", r.Arm)
			}
			if len(r.To) != len(e.AdaptThresholds) || r.Shortfall < 0 || r.Shortfall != shortfall(r.Rewards, res.Converged[r.App]) {
				t.Errorf("run %s: thresholds %+v, shortfall %v", r.Arm, r.To, r.Shortfall)
			}
			for k, to := range r.To {
				if to.Fraction != e.AdaptThresholds[k] || (r.Final == res.Converged[r.App] && !to.Reached) {
					t.Errorf("run %s: %+v", r.Arm, to)
				}
				// A higher bar is never reached sooner.
				if to.Episodes < r.EpisodesTo90 && to.Fraction >= 0.9 {
					t.Errorf("run %s: %d episodes to %v but %d to 90%%", r.Arm, to.Episodes, to.Fraction, r.EpisodesTo90)
				}
			}
		}
		if res.SpeedupVsTransfer <= 0 || res.SpeedupVsScratch <= 0 || len(res.SpeedupsVsTransfer) != len(e.AdaptThresholds) {
			t.Errorf("speed-ups %v, %v, %v", res.SpeedupVsTransfer, res.SpeedupVsScratch, res.SpeedupsVsTransfer)
		}
		for _, a := range res.Arms {
			if len(a.MeanEpisodesTo) != len(e.AdaptThresholds) || len(a.ReachedTo) != len(e.AdaptThresholds) || a.MeanShortfall < 0 {
				t.Errorf("arm %+v", a)
			}
		}
		again, err := RunAdapt(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mustJSON(t, res), mustJSON(t, again)) {
			t.Error("same seed, different results")
		}
	})
	t.Run("after", func(t *testing.T) {
		res, err := RunAfter(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range res.Report.Summaries {
			names = append(names, s.Policy)
			if s.PolicyErrors != 0 || s.Runs != e.Apps*len(e.EvalTraces) {
				t.Errorf("summary %+v", s)
			}
		}
		if !slices.Equal(names, []string{"fused", "oracle", AfterPPO, AfterMeta}) {
			t.Errorf("policies %v", names)
		}
	})
	t.Run("retrain detects a synthetic change", func(t *testing.T) {
		e := e
		e.CPUFactor = 30 // the app can no longer meet its SLO as deployed
		set, err := RunRetrain(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
		if len(set.Runs) != e.RetrainApps {
			t.Fatalf("%d runs, want %d", len(set.Runs), e.RetrainApps)
		}
		res := set.Runs[0]
		if len(res.Curve) != e.RetrainBefore+e.RetrainAfter || res.Curve[0].Stage != lifecycle.Serving.String() {
			t.Fatalf("curve %+v", res.Curve)
		}
		if res.FalseAlarms != 0 || res.Detected < e.RetrainBefore {
			t.Fatalf("detected at %d with %d false alarms; changes %+v", res.Detected, res.FalseAlarms, res.Changes)
		}
		if res.Gates.RetrainBelowMean != res.Baseline-e.RetrainMargin || !(res.During < res.Before) || res.Degradation <= 0 {
			t.Errorf("result %+v", res)
		}
		// After the detection the agent learns again.
		if s := res.Curve[min(res.Detected+e.RetrainBatch+1, len(res.Curve)-1)].Stage; s == lifecycle.Serving.String() && res.Recovered < 0 {
			t.Errorf("still serving after the detection: %s", s)
		}
		var staged int
		for _, n := range res.StageEpisodes {
			staged += n
		}
		if staged != e.RetrainAfter {
			t.Errorf("stage episodes %v, want %d in all", res.StageEpisodes, e.RetrainAfter)
		}
		for name, v := range map[string]float64{"reference": res.Reference, "oracle": res.Oracle, "default": res.DefaultDuring} {
			if math.IsNaN(v) || v < -1 || v > 1 {
				t.Errorf("%s reward %v", name, v)
			}
		}
		if want := (res.Reference - res.During) / math.Abs(res.Reference); res.DegradationVsReference != want {
			t.Errorf("degradation vs reference %v, want %v", res.DegradationVsReference, want)
		}
		var out bytes.Buffer
		if err := res.WriteTable(&out); err != nil || !strings.Contains(out.String(), "oracle on the changed app") {
			t.Errorf("table %q, %v", out.String(), err)
		}
		again, err := RunRetrain(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := mustJSON(t, set), mustJSON(t, again); !bytes.Equal(a, b) {
			t.Errorf("same seed, different results:\n%s\n%s", a, b)
		}
	})
	t.Run("retrain cap returns the app to the agent", func(t *testing.T) {
		e := e
		e.CPUFactor, e.RetrainMin, e.RetrainCap = 30, 0, 2
		set, err := RunRetrain(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
		res := set.Runs[0]
		if res.Detected < 0 {
			t.Fatalf("the detector did not fire; changes %+v", res.Changes)
		}
		capped := false
		for _, c := range res.Changes {
			capped = capped || (c.From == lifecycle.Retraining.String() && c.Reason == "RetrainingCapReached")
		}
		if !capped || res.Returned <= res.Detected || res.AgentActed == nil || res.Retraining.Max != 2 {
			t.Errorf("the cap did not return the app to the agent: returned %d, changes %+v", res.Returned, res.Changes)
		}
		if n := res.StageEpisodes[lifecycle.Retraining.String()]; n < 1 || n > 2*len(res.Changes) {
			t.Errorf("%d Retraining episodes with a cap of 2 and changes %+v", n, res.Changes)
		}
	})
	if !bytes.Equal(before, mustJSON(t, [][]byte{marshal(t, pre.PPO), marshal(t, pre.Meta)})) {
		t.Error("an experiment trained the shared pre-trained policies in place")
	}
}
