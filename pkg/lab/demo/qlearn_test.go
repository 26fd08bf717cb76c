package demo

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/eval"
)

// TestServerlessPolicies: qlearn changes its target and the replicas (it is
// not the HPA at Knative's default target it starts from), the HPA at the
// hindsight-best target has the best reward of the fixed targets on every
// run, the HPA at 0.7 is the HPA, and bad names are refused.
func TestServerlessPolicies(t *testing.T) {
	o := tinyOptions()
	o.Apps, o.Steps = 2, 480
	runs, err := Runs(o)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{PolicyHPA, PolicyQLearn, PolicyQLearnRule, PolicyHPABestTarget}
	for _, x := range HindsightTargets() {
		names = append(names, fmt.Sprintf("%s%g", PolicyHPATargetPrefix, x))
	}
	var cs []eval.Contender
	var settle *SettleLog
	for _, n := range names {
		if err := validPolicy(n); err != nil {
			t.Fatal(err)
		}
		c := contender(n)
		if n == PolicyQLearn {
			c, settle = recordSettle(c)
		}
		cs = append(cs, c)
	}
	rep, err := eval.Evaluate(context.Background(), runs, cs, eval.Options{Workers: 2, SeriesRun: -1})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ app, trace string }
	by := map[string]map[key]eval.RunResult{}
	for _, r := range rep.Results {
		p := r.Policy
		if by[p] == nil {
			by[p] = map[key]eval.RunResult{}
		}
		r.Policy = ""
		by[p][key{r.App, r.Trace}] = r
	}
	for k, best := range by[PolicyHPABestTarget] {
		top := math.Inf(-1)
		for _, x := range HindsightTargets() {
			top = math.Max(top, by[fmt.Sprintf("%s%g", PolicyHPATargetPrefix, x)][k].MeanReward)
		}
		if best.MeanReward != top {
			t.Errorf("%v: best target's reward %g, the best fixed target's %g", k, best.MeanReward, top)
		}
	}
	if !reflect.DeepEqual(by[PolicyHPA], by[PolicyHPATargetPrefix+"0.7"]) {
		t.Error("the HPA at 0.7 is not the HPA")
	}
	if reflect.DeepEqual(by[PolicyHPA], by[PolicyQLearn]) || reflect.DeepEqual(by[PolicyQLearnRule], by[PolicyQLearn]) {
		t.Error("qlearn ran exactly as the HPA at its initial target, or as its rule without learning")
	}
	moved := false
	for _, ts := range settle.runs {
		if len(ts) != o.Steps {
			t.Errorf("settle log holds %d windows, want %d", len(ts), o.Steps)
		}
		for _, x := range ts {
			moved = moved || x != 0.7
		}
	}
	if len(settle.runs) != len(runs) || !moved {
		t.Errorf("settle log: %d runs (want %d), target moved %v", len(settle.runs), len(runs), moved)
	}
	var out bytes.Buffer
	settle.Write(&out, 15)
	if !strings.Contains(out.String(), "qlearn settles") {
		t.Errorf("settle summary: %q", out.String())
	}
	for _, bad := range []string{PolicyHPATargetPrefix + "0", PolicyHPATargetPrefix + "1.5", PolicyHPATargetPrefix + "x", "qlearn:fast"} {
		if err := validPolicy(bad); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

func TestSettleWindow(t *testing.T) {
	flat := func(v float64, n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = v
		}
		return xs
	}
	cat := func(xs ...[]float64) []float64 {
		var out []float64
		for _, x := range xs {
			out = append(out, x...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		targets []float64
		want    int
	}{
		{"settled from the start", flat(0.7, 40), 0},
		{"moves once, then holds", cat(flat(0.7, 20), flat(0.4, 20)), 20},
		{"within one level is settled", cat(flat(0.8, 10), flat(0.5, 10), flat(0.6, 20)), 10},
		{"exploring windows do not unsettle a block", cat(flat(0.5, 10), []float64{0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, flat(0.5, 20)), 0},
		{"never settles", cat(flat(0.3, 10), flat(0.9, 10), flat(0.3, 10), flat(0.9, 10)), 30},
		{"shorter than two blocks", flat(0.7, 15), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SettleWindow(tc.targets, 10); got != tc.want {
				t.Errorf("SettleWindow = %d, want %d", got, tc.want)
			}
		})
	}
}
