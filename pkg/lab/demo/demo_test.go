package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/lab/train"
)

func tinyOptions() Options {
	o := DefaultOptions()
	o.Apps, o.Steps = 2, 120
	o.Traces = []string{"steady", "flash-crowd"}
	o.Agent = nil // TestRunWithAgent covers the agent
	return o
}

// tinyAgent trains a few short episodes.
func tinyAgent() *AgentOptions {
	a := &AgentOptions{Train: train.DefaultOptions()}
	t := &a.Train
	t.Apps, t.Episodes, t.BootstrapEpisodes, t.EpisodeSteps, t.BatchEpisodes = 2, 6, 2, 20, 2
	t.Hidden, t.MinibatchSize = []int{16}, 20
	return a
}

// TestRunWithAgent trains the agent, evaluates it beside the defaults,
// writes its checkpoint and reward curve, and then evaluates the same
// agent loaded from that checkpoint to the same report.
func TestRunWithAgent(t *testing.T) {
	t.Chdir(t.TempDir())
	o := tinyOptions()
	o.Policies = []string{PolicyFused, PolicyOracle}
	o.Agent = tinyAgent()
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), o, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v\nstderr: %s", err, stderr.String())
	}
	out := stdout.String()
	for _, p := range []string{PolicyFused, PolicyOracle, train.PolicyName} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == p && f[1] == "4" {
				found = true
			}
		}
		if !found {
			t.Errorf("table has no row for %s over 4 runs:\n%s", p, out)
		}
	}
	if !strings.Contains(out, "trained on 2 training apps") || !strings.Contains(stderr.String(), "6/6") {
		t.Errorf("no training summary or training progress:\n%s\n%s", out, stderr.String())
	}
	dir := "aware-demo-1"
	for _, f := range []string{eval.JSONFile, AgentCheckpointFile, RewardCurveFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}

	o.Agent = &AgentOptions{Checkpoints: []string{filepath.Join(dir, AgentCheckpointFile)}}
	o.OutDir, o.Progress = "loaded", false
	stdout.Reset()
	if err := Run(context.Background(), o, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "loaded from") {
		t.Errorf("the agent was not loaded:\n%s", stdout.String())
	}
	a, errA := os.ReadFile(filepath.Join(dir, eval.JSONFile))
	b, errB := os.ReadFile(filepath.Join("loaded", eval.JSONFile))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("the reloaded agent's report differs from the trained agent's (%v, %v)", errA, errB)
	}
}

// TestRunWithSeveralAgents trains two agents with consecutive seeds: each
// has its row, checkpoint and curve, and the comparison pools them; loaded
// from their checkpoints they give the same report.
func TestRunWithSeveralAgents(t *testing.T) {
	t.Chdir(t.TempDir())
	o := tinyOptions()
	o.Policies = []string{PolicyFused}
	o.Agent = tinyAgent()
	o.Agent.Seeds = 2
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), o, &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v\nstderr: %s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"training seed 1", "training seed 2", "aware-1 ", "aware-2 ", PooledName + "      8"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var ckpts []string
	for _, k := range []string{"1", "2"} {
		ckpts = append(ckpts, filepath.Join("aware-demo-1", "agent-"+k+".ckpt"))
		for _, f := range []string{"agent-" + k + ".ckpt", "reward-curve-" + k + ".svg"} {
			if _, err := os.Stat(filepath.Join("aware-demo-1", f)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
	var rep eval.Report
	b, err := os.ReadFile(filepath.Join("aware-demo-1", eval.JSONFile))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Comparisons); n != 3 || rep.Comparisons[2].Policy != PooledName || rep.Comparisons[2].Pairs != 8 {
		t.Fatalf("comparisons %+v, want aware-1, aware-2 and the pool of their 8 pairs", rep.Comparisons)
	}

	o.Agent = &AgentOptions{Checkpoints: ckpts}
	o.OutDir, o.Progress = "loaded", false
	stdout.Reset()
	if err := Run(context.Background(), o, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(filepath.Join("loaded", eval.JSONFile))
	if err != nil || !bytes.Equal(b, b2) {
		t.Errorf("the reloaded agents' report differs from the trained agents' (%v)", err)
	}

	// As ensembles: a row each, not in the pool.
	o.Agent = &AgentOptions{Checkpoints: ckpts, Quorums: []int{2, 1}}
	o.OutDir = "ensembles"
	stdout.Reset()
	if err := Run(context.Background(), o, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	b3, err := os.ReadFile(filepath.Join("ensembles", eval.JSONFile))
	if err == nil {
		err = json.Unmarshal(b3, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rep.Comparisons {
		got = append(got, fmt.Sprintf("%s/%d", c.Policy, c.Pairs))
	}
	want := []string{"aware-1/4", "aware-2/4", EnsembleName(2, 2) + "/4", EnsembleName(1, 2) + "/4", PooledName + "/8"}
	if !slices.Equal(got, want) {
		t.Errorf("comparisons %v, want %v", got, want)
	}
	if !strings.Contains(stdout.String(), "as far as at least 2 of them deviate the same way") {
		t.Errorf("output does not say what the ensemble row is:\n%s", stdout.String())
	}
}

func TestRunSmoke(t *testing.T) {
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), tinyOptions(), &stdout, &stderr); err != nil {
		t.Fatalf("Run: %v\nstderr: %s", err, stderr.String())
	}
	out := stdout.String()
	for _, p := range DefaultPolicies() {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == p && f[1] == "4" { // 2 apps × 2 traces
				found = true
			}
		}
		if !found {
			t.Errorf("table has no row for %s over 4 runs:\n%s", p, out)
		}
	}
	dir := "aware-demo-1"
	if !strings.Contains(out, dir) {
		t.Errorf("output does not name the folder %s:\n%s", dir, out)
	}
	for _, f := range []string{eval.JSONFile, eval.ScatterFile, eval.TimeSeriesFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(stderr.String(), "20/20") {
		t.Errorf("progress bar did not reach 20/20 jobs: %q", stderr.String())
	}

	// A second run picks a fresh folder and writes the same report.
	stdout.Reset()
	if err := Run(context.Background(), tinyOptions(), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "aware-demo-1-2") {
		t.Errorf("second run did not use a fresh folder:\n%s", stdout.String())
	}
	a, errA := os.ReadFile(filepath.Join(dir, eval.JSONFile))
	b, errB := os.ReadFile(filepath.Join("aware-demo-1-2", eval.JSONFile))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("same seed, different reports (%v, %v)", errA, errB)
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
		{"unknown policy", func(o *Options) { o.Policies = []string{"hpa", "magic"} }, `unknown policy "magic"`},
		{"unknown trace", func(o *Options) { o.Traces = []string{"sawtooth"} }, `unknown trace kind "sawtooth"`},
		{"series trace not run", func(o *Options) { o.Traces, o.SeriesTrace = []string{"steady"}, "bursty" }, `series trace "bursty" is not among`},
		{"default series trace follows the traces", func(o *Options) { o.Traces = []string{"steady"} }, ""},
		{"bad resize", func(o *Options) { o.Resize = "Sometimes" }, "resize must be"},
		{"tenants above 1", func(o *Options) { o.Tenants = 1.5 }, "tenants must be in [0, 1]"},
		{"packed nodes", func(o *Options) { o.Tenants = 1 }, ""},
		{"series app out of range", func(o *Options) { o.SeriesApp = o.Apps }, "series app"},
		{"bad agent training", func(o *Options) { o.Agent.Train.Episodes = 0 }, "agent training: episodes must be > 0"},
		{"agent checkpoint skips training options", func(o *Options) { o.Agent = &AgentOptions{Checkpoints: []string{"x.ckpt"}} }, ""},
		{"ensemble of one", func(o *Options) { o.Agent = &AgentOptions{Checkpoints: []string{"x.ckpt"}, Quorums: []int{1}} }, "at least 2 agents"},
		{"ensemble quorum above size", func(o *Options) { o.Agent = &AgentOptions{Checkpoints: []string{"x", "y"}, Quorums: []int{3}} }, "quorum must be in [0, 2]"},
		{"too many agent seeds", func(o *Options) { o.Agent = tinyAgent(); o.Agent.Seeds = 17 }, "agent seeds"},
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

func TestSeriesTraceFollowsTraces(t *testing.T) {
	for _, tc := range []struct {
		traces []string
		series string
		want   string
	}{
		{[]string{"steady", "flash-crowd"}, "", "flash-crowd"},
		{[]string{"steady", "ramp"}, "", "steady"},
		{[]string{"steady", "ramp"}, "ramp", "ramp"},
	} {
		o := Options{Traces: tc.traces, SeriesTrace: tc.series}
		if got := o.seriesTrace(); got != tc.want {
			t.Errorf("traces %v, series %q: plotted %q, want %q", tc.traces, tc.series, got, tc.want)
		}
	}
}

func TestRunsHeldOut(t *testing.T) {
	o := tinyOptions()
	o.Apps = 3
	runs, err := Runs(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 6 {
		t.Fatalf("%d runs, want 3 apps × 2 traces", len(runs))
	}
	want := []string{"app-0004", "app-0004", "app-0009", "app-0009", "app-0014", "app-0014"}
	for i, r := range runs {
		if r.App.Name != want[i] || r.Trace.Name != o.Traces[i%2] || len(r.Trace.Rates) != o.Steps {
			t.Errorf("run %d: %s/%s with %d windows, want %s/%s with %d", i, r.App.Name, r.Trace.Name, len(r.Trace.Rates), want[i], o.Traces[i%2], o.Steps)
		}
	}
}

func azureCSV(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("HashOwner,HashApp,HashFunction,Trigger")
	for m := 1; m <= 1440; m++ {
		fmt.Fprintf(&b, ",%d", m)
	}
	b.WriteString("\n")
	for _, fn := range []struct {
		name  string
		count func(m int) int
	}{
		{"idle", func(int) int { return 0 }},
		{"busy", func(m int) int { return 30 + 60*(m/60%2) }}, // 30/min, 90/min every other hour
	} {
		b.WriteString("o,a," + fn.name + ",http")
		for m := range 1440 {
			fmt.Fprintf(&b, ",%d", fn.count(m))
		}
		b.WriteString("\n")
	}
	p := filepath.Join(t.TempDir(), "invocations.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunsAzure(t *testing.T) {
	o := tinyOptions()
	o.Steps = 960 // four hours: two calm hours, two busy ones
	o.Azure.Invocations = azureCSV(t)
	runs, err := Runs(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 6 {
		t.Fatalf("%d runs, want 2 apps × (2 kinds + azure)", len(runs))
	}
	for _, r := range []eval.Run{runs[2], runs[5]} {
		if r.Trace.Name != "azure:busy" || len(r.Trace.Rates) != o.Steps {
			t.Fatalf("azure run %s/%s with %d windows", r.App.Name, r.Trace.Name, len(r.Trace.Rates))
		}
		// The function's day-long mean maps to the app's base rate: 60/min.
		if got, want := r.Trace.Rates[0], r.App.BaseRate/2; math.Abs(got-want) > 1e-9*want {
			t.Errorf("calm rate %g, want %g", got, want)
		}
		if got, want := r.Trace.Rates[300], 1.5*r.App.BaseRate; math.Abs(got-want) > 1e-9*want {
			t.Errorf("busy rate %g, want %g", got, want)
		}
	}
	// Past the file's day the run ends with its data, never padded.
	o.Steps = 5761
	if runs, err := Runs(o); err != nil || len(runs[2].Trace.Rates) != 5760 || len(runs[0].Trace.Rates) != 5761 {
		t.Errorf("runs past the day: %v", err)
	}
	o.Azure.Invocations = filepath.Join(t.TempDir(), "missing.csv")
	if _, err := Runs(o); err == nil {
		t.Error("a missing file was accepted")
	}
}

// TestRunsFilesOnly: with no trace kind, the runs are the files' alone: a
// sample of part of a day (as long as its minutes) and a rate series.
func TestRunsFilesOnly(t *testing.T) {
	o := tinyOptions()
	o.Traces, o.Steps = nil, 5760
	dir := t.TempDir()
	files, err := sim.WriteAzureSample(dir, sim.AzureSampleOptions{Functions: 30, FirstMinute: 480, Minutes: 60, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	o.Azure, o.AzureRate = files, sim.AzureRateRecorded
	o.Series.Path = filepath.Join(dir, "rates.csv")
	if err := os.WriteFile(o.Series.Path, []byte("time,count\n2024-05-01 10:00:00,600\n2024-05-01 10:10:00,1200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	runs, err := Runs(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2*o.Apps {
		t.Fatalf("%d runs, want %d apps × (azure, csv)", len(runs), o.Apps)
	}
	for i, r := range runs {
		want, n := "azure:", 240 // an hour of 15-second windows
		if i%2 == 1 {
			want, n = "csv:rates.csv", 80 // twenty minutes
		}
		if !strings.HasPrefix(r.Trace.Name, want) || len(r.Trace.Rates) != n {
			t.Errorf("run %d: %s with %d windows, want %s… with %d", i, r.Trace.Name, len(r.Trace.Rates), want, n)
		}
	}
	if got := runs[1].Trace.Rates; got[0] != 1 || got[79] != 2 {
		t.Errorf("series rates %g..%g, want 1..2 requests/s", got[0], got[79])
	}
	o.Azure, o.Series = sim.AzureFiles{}, sim.SeriesFile{}
	if err := o.Validate(); err == nil {
		t.Error("no trace kind and no file was accepted")
	}
}

// TestRunsAzureMeasured: with the durations and memory files, each app's
// Azure run has its function's measured execution time and memory.
func TestRunsAzureMeasured(t *testing.T) {
	o := tinyOptions()
	o.Steps = 100
	files, err := sim.WriteAzureFixture(t.TempDir(), 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	o.Azure = files
	ws, err := sim.LoadAzure(files)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Runs(o)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range []eval.Run{runs[2], runs[5]} {
		w := ws[k]
		if r.Trace.Name != "azure:"+w.Function {
			t.Fatalf("run %d: trace %s, want azure:%s", k, r.Trace.Name, w.Function)
		}
		if d := r.App.CPUSeconds + r.App.IOWait; math.Abs(d-w.Measured.Duration) > 1e-12 {
			t.Errorf("%s: execution time %g, want the measured %g", r.App.Name, d, w.Measured.Duration)
		}
		if r.App.BaseMemory != w.Measured.IdleMemory {
			t.Errorf("%s: base memory %g, want the measured %g", r.App.Name, r.App.BaseMemory, w.Measured.IdleMemory)
		}
		if runs[3*k].App.BaseMemory == r.App.BaseMemory {
			t.Errorf("%s: the generated runs share the measured app", r.App.Name)
		}
	}
}

// TestDerivedPolicies: the residual that follows the default in every
// dimension is the fused default, run for run; a constant residual and the
// paper-restricted default run and differ from it.
func TestDerivedPolicies(t *testing.T) {
	ownTarget := PolicyTargetPrefix + strconv.FormatFloat(hpa.DefaultTargetCPUUtilization, 'g', -1, 64)
	o := tinyOptions()
	o.Apps, o.Steps = 3, 240
	runs, err := Runs(o)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{PolicyFused, PolicyResidualPrefix, ownTarget, PolicyResidualPrefix + "memory=x0.85/replicas=+1", PolicyFusedPaper, PolicyOracleResidual, PolicyTargetPrefix + "0.9", PolicyLimitTargetPrefix + "0.7", PolicyLimitTargetPrefix + "0.7/hold=24h", PolicyLimitTargetPrefix + "0.7/hold=24h/burst=3.5", PolicyOracleRequests}
	var cs []eval.Contender
	for _, n := range names {
		if err := validPolicy(n); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, contender(n))
	}
	rep, err := eval.Evaluate(context.Background(), runs, cs, eval.Options{Workers: 2, SeriesRun: -1})
	if err != nil {
		t.Fatal(err)
	}
	byPolicy := map[string][]eval.RunResult{}
	for _, r := range rep.Results {
		p := r.Policy
		r.Policy = ""
		byPolicy[p] = append(byPolicy[p], r)
	}
	if !reflect.DeepEqual(byPolicy[PolicyFused], byPolicy[PolicyResidualPrefix]) {
		t.Error("following the default in every dimension is not the fused default")
	}
	if !reflect.DeepEqual(byPolicy[PolicyFused], byPolicy[ownTarget]) {
		t.Error("the fused default with its own target utilisation is not the fused default")
	}
	for _, n := range names[3:] {
		if reflect.DeepEqual(byPolicy[PolicyFused], byPolicy[n]) {
			t.Errorf("%s ran exactly as the fused default", n)
		}
	}
	for _, bad := range []string{PolicyResidualPrefix + "cpu=x0", PolicyTargetPrefix + "0", PolicyTargetPrefix + "1.5", PolicyTargetPrefix + "NaN", PolicyTargetPrefix + "high", PolicyLimitTargetPrefix + "0", PolicyLimitTargetPrefix + "1.5", PolicyLimitTargetPrefix + "0.7/hold=0s", PolicyLimitTargetPrefix + "0.7/hold=soon", PolicyLimitTargetPrefix + "0.7/wait=1h", "oracle-limits"} {
		if err := validPolicy(bad); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

func TestSingleAgentQuorums(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent AgentOptions
		q     []int
		want  []int
	}{
		{"default with several agents", AgentOptions{Seeds: 3}, DefaultQuorums(), DefaultQuorums()},
		{"default with one agent: none", AgentOptions{Seeds: 1}, DefaultQuorums(), nil},
		{"default with one checkpoint: none", AgentOptions{Checkpoints: []string{"a"}}, DefaultQuorums(), nil},
		{"asked for with one agent: kept, for Validate to refuse", AgentOptions{Seeds: 1}, []int{1}, []int{1}},
		{"none asked", AgentOptions{Seeds: 3}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.agent.SingleAgentQuorums(tc.q); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
