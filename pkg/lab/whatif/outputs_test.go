package whatif

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/lab/eval"
)

func TestValuesJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Values
		want string
	}{
		{"gaps are null", Values{1.5, math.NaN(), math.Inf(1), 0, 2e-9}, `[1.5,null,null,0,2e-09]`},
		{"empty", Values{}, `[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("%s, want %s", b, tc.want)
			}
			var back Values
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if len(back) != len(tc.in) {
				t.Fatalf("read back %v", back)
			}
			for i, x := range tc.in {
				if ok(x) != ok(back[i]) || ok(x) && x != back[i] {
					t.Errorf("value %d: %g read back as %g", i, x, back[i])
				}
			}
		})
	}
	var v Values
	if err := json.Unmarshal([]byte(`null`), &v); err != nil || v != nil {
		t.Errorf("null: %v %v", v, err)
	}
	if err := json.Unmarshal([]byte(`["a"]`), &v); err == nil {
		t.Error("a string was read as a value")
	}
}

// TestReplayOutputs: the plots, the result's history and the extra
// contenders, and a result read back replays the same workloads again.
func TestReplayOutputs(t *testing.T) {
	s := record(t, truthApp("ns/a"), 240, 3)
	s.Rate[17] = math.NaN() // a gap survives the trip through JSON
	f, err := FitApp(s, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra := eval.FromFactory("extra-hpa", hpa.NewPolicyFactory(hpa.PolicyOptions{}))
	res, err := Replay(context.Background(), []Workload{{Series: s, Fit: f}}, ReplayOptions{Seeds: 2, Plot: true, Extra: []eval.Contender{extra}})
	if err != nil {
		t.Fatal(err)
	}
	names := append(Policies(), "extra-hpa")
	if n := len(res.Report.Summaries); n != len(names) || res.Report.Summaries[n-1].Policy != "extra-hpa" {
		t.Fatalf("summaries %+v", res.Report.Summaries)
	}
	if len(res.Policies) != len(Policies()) || res.Seeds != 2 || res.Seed != 1 || len(res.History) != 1 {
		t.Errorf("settings %v %d %d, history %d", res.Policies, res.Seeds, res.Seed, len(res.History))
	}
	if len(res.Plots) != 1 || len(res.Plots[0].Replayed.Series) != len(names) || len(res.Plots[0].Replayed.Series[0].Points) != 240 {
		t.Fatalf("plots %+v", res.Plots)
	}

	dir := t.TempDir()
	files, err := res.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || filepath.Base(files[1]) != "plot-ns-a.svg" {
		t.Fatalf("files %v", files)
	}
	svg, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Fatalf("plot is not XML: %v", err)
	}
	for _, want := range []string{">recorded<", ">actual (replayed)<", ">extra-hpa<", "Request rate (recorded) — ns/a"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
	var again bytes.Buffer
	if err := res.Plots[0].WriteSVG(&again); err != nil || !bytes.Equal(again.Bytes(), svg) {
		t.Errorf("the plot is not a pure function of the replay (%v)", err)
	}
	if err := (Plot{History: s}).WriteSVG(&again); err == nil {
		t.Error("a plot without a replay was drawn")
	}

	t.Run("read back", func(t *testing.T) {
		r, err := os.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		back, err := ReadResult(r)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := back.Refit()
		if err != nil {
			t.Fatal(err)
		}
		if !math.IsNaN(ws[0].Series.Rate[17]) || ws[0].Fit.CPU != f.CPU || ws[0].Fit.App.CPUSeconds != f.App.CPUSeconds {
			t.Errorf("refit %+v, want %+v", ws[0].Fit.CPU, f.CPU)
		}
		again, err := Replay(context.Background(), ws, ReplayOptions{Seeds: back.Seeds, Seed: back.Seed, Policies: back.Policies})
		if err != nil {
			t.Fatal(err)
		}
		// The simulator is deterministic: the same history, fit and seeds
		// give the same costs.
		for i, s := range again.Report.Summaries {
			if s.Cost != res.Report.Summaries[i].Cost {
				t.Errorf("%s: cost %g, first replay %g", s.Policy, s.Cost, res.Report.Summaries[i].Cost)
			}
		}
	})
	t.Run("refit refuses", func(t *testing.T) {
		if _, err := (&Result{}).Refit(); err == nil || !strings.Contains(err.Error(), "no history") {
			t.Errorf("err %v", err)
		}
		changed := *res
		changed.FitOptions.MinCPUR2 = 0.9999999
		if _, err := changed.Refit(); err == nil || !strings.Contains(err.Error(), "fits differently") {
			t.Errorf("err %v", err)
		}
	})
	if _, err := ReadResult(strings.NewReader("{")); err == nil {
		t.Error("a truncated result was read")
	}
}
