package eval

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func result(policy, app string, slo, reward, cost float64, oom, h, v int) RunResult {
	return RunResult{Policy: policy, App: app, Trace: "steady", Seed: 7, SLOViolationRate: slo,
		MeanReward: reward, Cost: cost, OOMKills: oom, HorizontalScales: h, VerticalScales: v}
}

func TestCompare(t *testing.T) {
	rep := &Report{
		Summaries: []Summary{{Policy: "fused"}, {Policy: "agent"}},
		Results: []RunResult{
			result("fused", "a", 0.010, 0.66, 10, 2, 10, 2),
			result("agent", "a", 0.005, 0.70, 8, 1, 12, 2),
			result("fused", "b", 0.020, 0.60, 20, 0, 10, 0),
			result("agent", "b", 0.040, 0.61, 18, 3, 8, 4),
			result("fused", "c", 0.000, 0.70, 5, 1, 0, 2),
			result("agent", "c", 0.001, 0.72, 5, 1, 0, 2),
		},
	}
	cs, err := rep.Compare("fused")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Policy != "agent" || cs[0].Pairs != 3 {
		t.Fatalf("comparisons %+v", cs)
	}
	c := cs[0]
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %g, want %g", what, got, want)
		}
	}
	near("SLO difference", c.SLOViolationRate.Mean, (-0.005+0.020+0.001)/3)
	near("reward difference", c.Reward.Mean, (0.04+0.01+0.02)/3)
	near("cost ratio", c.CostRatio.Mean, (-0.2-0.1+0)/3)
	near("OOM difference", c.OOMKills.Mean, (-1+3+0)/3.0)
	near("worse", c.Worse, 1.0/3) // only b is worse by more than a point
	near("horizontal churn", c.HorizontalRatio, 20.0/20)
	near("vertical churn", c.VerticalRatio, 8.0/4)
	if !(c.Reward.Lo < c.Reward.Mean && c.Reward.Mean < c.Reward.Hi) {
		t.Errorf("reward interval %+v does not bracket its mean", c.Reward)
	}
	var out bytes.Buffer
	if err := WriteComparisons(&out, cs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Paired against fused", "agent", "+0.53 [", "33.3%", "1.00x/2.00x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}

	t.Run("unpaired run", func(t *testing.T) {
		bad := &Report{Summaries: rep.Summaries, Results: append(rep.Results[:2:2], result("agent", "z", 0, 0, 1, 0, 0, 0))}
		if _, err := bad.Compare("fused"); err == nil || !strings.Contains(err.Error(), "agent ran z/steady seed 7, which baseline fused did not") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("no baseline", func(t *testing.T) {
		if _, err := rep.Compare("vpa"); err == nil || !strings.Contains(err.Error(), `baseline "vpa" has no runs`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("baseline twice", func(t *testing.T) {
		dup := &Report{Summaries: rep.Summaries, Results: append(rep.Results[:1:1], rep.Results[0])}
		if _, err := dup.Compare("fused"); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("NaN reward", func(t *testing.T) {
		nan := &Report{Summaries: rep.Summaries, Results: []RunResult{rep.Results[0], result("agent", "a", 0, math.NaN(), 1, 0, 0, 0)}}
		if _, err := nan.Compare("fused"); err == nil || !strings.Contains(err.Error(), "NaN") {
			t.Errorf("error %v", err)
		}
	})
}

func TestPool(t *testing.T) {
	rep := &Report{
		Summaries: []Summary{{Policy: "fused"}, {Policy: "hpa"}, {Policy: "aware-1"}, {Policy: "aware-2"}},
		Results: []RunResult{
			result("fused", "a", 0.010, 0.66, 10, 2, 10, 2),
			result("hpa", "a", 0.5, 0.5, 10, 0, 10, 0),
			result("aware-1", "a", 0.005, 0.70, 8, 1, 12, 2),
			result("aware-2", "a", 0.030, 0.62, 12, 3, 6, 6),
			result("fused", "b", 0.020, 0.60, 20, 0, 10, 0),
			result("hpa", "b", 0.5, 0.5, 10, 0, 10, 0),
			result("aware-1", "b", 0.040, 0.61, 18, 3, 8, 4),
			result("aware-2", "b", 0.020, 0.64, 16, 0, 10, 0),
		},
	}
	c, err := rep.Pool("fused", "aware (2 seeds)", []string{"aware-1", "aware-2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy != "aware (2 seeds)" || c.Pairs != 4 {
		t.Fatalf("pooled %+v", c)
	}
	if got, want := c.Reward.Mean, (0.04+0.01-0.04+0.04)/4; math.Abs(got-want) > 1e-12 {
		t.Errorf("pooled reward difference %g, want %g", got, want)
	}
	if got, want := c.Worse, 2.0/4; got != want { // aware-1 on b, aware-2 on a
		t.Errorf("pooled worse %g, want %g", got, want)
	}
	if got, want := c.VerticalRatio, 12.0/4; got != want {
		t.Errorf("pooled vertical churn %g, want %g", got, want)
	}
	each, err := rep.Compare("fused")
	if err != nil {
		t.Fatal(err)
	}
	if len(each) != 3 || each[0].Policy != "hpa" || each[1].Policy != "aware-1" || each[2].Policy != "aware-2" {
		t.Fatalf("per-policy comparisons out of summary order: %+v", each)
	}
	if _, err := rep.Pool("fused", "x", []string{"nobody"}); err == nil {
		t.Error("pooling policies that never ran gave no error")
	}
}
