package whatif

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
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
		back := readBack(t, files[0])
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

// TestResultCluster: a result keeps the cluster its replay ran on, client
// timeout, readiness within the step and node tick included, so that a
// command replaying its file (rl-agent whatif-replay) replays alike.
func TestResultCluster(t *testing.T) {
	s := record(t, truthApp("ns/a"), 240, 3)
	fo := DefaultFitOptions()
	fo.MinPoints, fo.NodeCPU, fo.NodeTick, fo.ServesTimedOut = 20, 2, 4*time.Millisecond, true
	f, err := FitApp(s, fo)
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Config{Resize: sim.ResizeInPlace, RateWindow: 2 * time.Minute, SampledLatency: true,
		Timeout: 10 * time.Second, ReadyWithinWindow: true, NodeCores: 2, NodeTick: 4 * time.Millisecond}
	res, err := Replay(context.Background(), []Workload{{Series: s, Fit: f}}, ReplayOptions{Seeds: 2, Policies: []string{PolicyHPA}, Config: want})
	if err != nil {
		t.Fatal(err)
	}
	res.FitOptions = fo // as the commands do
	files, err := res.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	back := readBack(t, files[0])
	if got := back.Cluster(); got != want {
		t.Fatalf("cluster read back %+v, want %+v", got, want)
	}
	ws, err := back.Refit()
	if err != nil {
		t.Fatal(err)
	}
	if !ws[0].Fit.App.ServesTimedOut {
		t.Error("the refit app does not serve past its clients' timeout")
	}
	again, err := Replay(context.Background(), ws, ReplayOptions{Seeds: back.Seeds, Seed: back.Seed, Policies: back.Policies, Config: back.Cluster()})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range again.Report.Summaries {
		if s.Cost != res.Report.Summaries[i].Cost || s.SLOViolations != res.Report.Summaries[i].SLOViolations {
			t.Errorf("%s: cost %g, %d violations; first replay %g, %d", s.Policy, s.Cost, s.SLOViolations,
				res.Report.Summaries[i].Cost, res.Report.Summaries[i].SLOViolations)
		}
	}
	// And a cluster of defaults is not that one: the settings reach the
	// simulator (the client timeout and the tick move the p95's verdicts
	// or the lost requests of some run).
	plain, err := Replay(context.Background(), ws, ReplayOptions{Seeds: back.Seeds, Seed: back.Seed, Policies: back.Policies,
		Config: sim.Config{Resize: sim.ResizeInPlace, RateWindow: 2 * time.Minute, SampledLatency: true, NodeCores: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(plain.Report.Summaries, res.Report.Summaries) {
		t.Error("the replay on the default cluster is the same as on the one asked for")
	}
}

// readBack reads the whatif.json at path.
func readBack(t *testing.T, path string) *Result {
	t.Helper()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	back, err := ReadResult(r)
	if err != nil {
		t.Fatal(err)
	}
	return back
}
