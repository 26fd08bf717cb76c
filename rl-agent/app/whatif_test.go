package app

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/lab/train"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

// whatifResult writes the whatif.json `recommender whatif` would write for
// a day's history of one workload: 0.04 CPU seconds per request on two
// pods, under a diurnal rate with a gap.
func whatifResult(t *testing.T, dir string) string {
	t.Helper()
	const n = 240
	s := &whatif.Series{Name: "shop/web", Container: "app", Start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Step: time.Minute, SLO: 0.25}
	for i := range n {
		r := 20 + 10*math.Sin(2*math.Pi*float64(i)/n)
		s.Rate = append(s.Rate, r)
		s.CPU = append(s.CPU, 0.04*r/2+0.002*float64(i%5))
		s.Memory = append(s.Memory, float64(150<<20+(i%7)<<10))
		s.Replicas = append(s.Replicas, 2)
		s.RequestCPU = append(s.RequestCPU, 0.5)
		s.RequestMemory = append(s.RequestMemory, 512<<20)
	}
	s.Rate[30] = math.NaN()
	fo := whatif.DefaultFitOptions()
	f, err := whatif.FitApp(s, fo)
	if err != nil {
		t.Fatal(err)
	}
	res, err := whatif.Replay(context.Background(), []whatif.Workload{{Series: s, Fit: f}}, whatif.ReplayOptions{
		Seeds: 2, Policies: []string{whatif.PolicyHPA, whatif.PolicyFused},
		Config:       sim.Config{Resize: sim.ResizeInPlace, RateWindow: 3 * time.Minute, SampledLatency: true},
		InstallAfter: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	res.FitOptions = fo
	if _, err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, whatif.JSONFile)
}

// untrainedCheckpoint writes a freshly initialised agent: the replay only
// needs a policy that decides, not a good one.
func untrainedCheckpoint(t *testing.T, path string, seed uint64) string {
	t.Helper()
	o := train.DefaultOptions()
	o.Hidden, o.Seed = []int{8}, seed
	l, err := train.NewLearner(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := train.WriteCheckpoint(path, l); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWhatifReplay: the agents of --checkpoint and their ensemble are
// replayed beside the recorded policies, on the recorded history, and the
// outputs (whatif.json, a plot) go to --out.
func TestWhatifReplay(t *testing.T) {
	dir := t.TempDir()
	from := whatifResult(t, filepath.Join(dir, "recommender"))
	a := untrainedCheckpoint(t, filepath.Join(dir, "a.ckpt"), 1)
	b := untrainedCheckpoint(t, filepath.Join(dir, "b.ckpt"), 2)
	out := filepath.Join(dir, "agent")
	stdout, stderr, err := execute(t, newWhatifReplayCommand(), "--from="+from, "--checkpoint="+a+","+b, "--out="+out, "--no-progress")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Log("\n" + stdout)
	if stderr != "" {
		t.Errorf("stderr with --no-progress: %q", stderr)
	}
	for _, want := range []string{"shop/web: fit 0.04", "error bar", "aware-1", "aware-2", "aware (2 of 2 agree)", "Paired against actual", "plot-shop-web.svg"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	f, err := os.Open(filepath.Join(out, whatif.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := whatif.ReadResult(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Report.Summaries {
		names = append(names, s.Policy)
	}
	if got, want := strings.Join(names, ","), "actual,hpa,fused,aware-1,aware-2,aware (2 of 2 agree)"; got != want {
		t.Errorf("policies %s, want %s", got, want)
	}
	if res.Seeds != 2 || len(res.History) != 1 || !math.IsNaN(res.History[0].Rate[30]) {
		t.Errorf("replayed with %d seeds, history %d", res.Seeds, len(res.History))
	}
	if res.Resize != sim.ResizeInPlace || res.RateWindow != 3*time.Minute || !res.SampledLatency || res.InstallAfter != 10*time.Minute {
		t.Errorf("replayed on a cluster resizing %q with a %s rate window, sampled latency %v, installed after %s; the recommender's was InPlace, 3m, sampled, 10m", res.Resize, res.RateWindow, res.SampledLatency, res.InstallAfter)
	}
	svg, err := os.ReadFile(filepath.Join(out, whatif.PlotFile("shop/web")))
	if err != nil || !strings.Contains(string(svg), ">aware (2 of 2 agree)<") {
		t.Errorf("plot lacks the ensemble (%v)", err)
	}
}

func TestWhatifReplayFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing", nil, "--from is required"},
		{"no checkpoint", []string{"--from=x.json"}, "--checkpoint is required"},
		{"ensemble of one", []string{"--from=x.json", "--checkpoint=a", "--ensemble-quorum=1"}, "at least 2 agents"},
		{"quorum too large", []string{"--from=x.json", "--checkpoint=a,b", "--ensemble-quorum=3"}, "in [0, 2]"},
		{"missing from", []string{"--from=" + filepath.Join(dir, "nope.json"), "--checkpoint=a", "--no-progress"}, "nope.json"},
		{"missing checkpoint", []string{"--from=" + whatifResult(t, dir), "--checkpoint=" + filepath.Join(dir, "nope.ckpt"), "--no-progress", "--out=" + filepath.Join(dir, "o")}, "nope.ckpt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := execute(t, newWhatifReplayCommand(), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
