package train

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lifecycle"
	"github.com/aware-k8s/aware/pkg/sim"
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
			got, reached := episodesTo(tc.rs, tc.target, tc.k)
			if got != tc.want || reached != tc.reached {
				t.Errorf("episodesTo = %d, %v; want %d, %v", got, reached, tc.want, tc.reached)
			}
		})
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
		if len(res.Runs) != 3*e.AdaptApps || len(res.Arms) != 3 {
			t.Fatalf("%d runs, %d arms", len(res.Runs), len(res.Arms))
		}
		for _, r := range res.Runs {
			if len(r.Rewards) != e.AdaptEpisodes || r.EpisodesTo90 < 1 || r.EpisodesTo90 > e.AdaptEpisodes {
				t.Errorf("run %+v", r)
			}
			// The best arm defines the converged reward, so it reaches
			// 90% of it (smoothing = converged window here).
			if r.Final == res.Converged[r.App] && !r.Reached {
				t.Errorf("the best arm %s did not reach its own converged reward", r.Arm)
			}
		}
		if res.SpeedupVsTransfer <= 0 || res.SpeedupVsScratch <= 0 {
			t.Errorf("speed-ups %v, %v", res.SpeedupVsTransfer, res.SpeedupVsScratch)
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
		res, err := RunRetrain(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
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
		again, err := RunRetrain(context.Background(), e, pre)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mustJSON(t, res), mustJSON(t, again)) {
			t.Error("same seed, different results")
		}
	})
	if !bytes.Equal(before, mustJSON(t, [][]byte{marshal(t, pre.PPO), marshal(t, pre.Meta)})) {
		t.Error("an experiment trained the shared pre-trained policies in place")
	}
}
