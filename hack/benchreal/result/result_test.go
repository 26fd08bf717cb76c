package result

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// run builds a run of n 15-s windows: expected counts from rates (per
// second), p95 from p95s, ready CPU requests from ready.
func run(policy string, rep int, rates, p95s, ready []float64) Run {
	r := Run{Policy: policy, Rep: rep, SLO: 0.25, Window: 15, CPUSecondsPerRequest: 0.02}
	for i := range rates {
		w := Window{Index: i, Start: float64(15 * i), End: float64(15 * (i + 1)), Expected: 15 * rates[i], Sent: int(15 * rates[i]),
			OK: int(15 * rates[i]), P95: p95s[i], Replicas: 1, Ready: 1,
			CPURequested: 0.5, MemoryRequested: 1 << 30, ReadyCPURequested: ready[i], CPUUsed: 0.25, MemoryUsed: 1 << 29}
		r.Windows = append(r.Windows, w)
	}
	return r
}

func TestSummarise(t *testing.T) {
	r := run("fused", 0, []float64{10, 10, 10, 30}, []float64{0.1, 0.3, 0.1, 0.1}, []float64{1, 1, 1, 1})
	r.Windows[2].Lost = 3
	r.Windows[3].OOMKills = 1
	r.Windows[1].ReplicaChanges, r.Windows[2].Resizes, r.Windows[3].Evictions = 2, 1, 1
	s, err := Summarise(r)
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 cores and 1 GiB for 60 s: (0.5 + 1/7.5)·60/3600.
	if want := (0.5 + 1/7.5) * 60 / 3600; math.Abs(s.Cost-want) > 1e-12 {
		t.Errorf("cost %g, want %g", s.Cost, want)
	}
	if s.Violations != 0.5 { // window 1 (p95) and window 2 (lost)
		t.Errorf("violations %g, want 0.5", s.Violations)
	}
	if want := 3.0 / (15 * 60); math.Abs(s.LostShare-want) > 1e-12 {
		t.Errorf("lost share %g, want %g", s.LostShare, want)
	}
	if s.OOMKills != 1 || s.ReplicaChanges != 2 || s.Resizes != 1 || s.Evictions != 1 {
		t.Errorf("events %+v", s)
	}
	// The OOM window's reward is −1; the others lie in [0, 1].
	if !(s.Reward < 0.75) || !(s.Reward > -1) {
		t.Errorf("reward %g", s.Reward)
	}
}

func TestSummariseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Run)
		want string
	}{
		{"no windows", func(r *Run) { r.Windows = nil }, "no windows"},
		{"no SLO", func(r *Run) { r.SLO = 0 }, "must be > 0"},
		{"NaN usage", func(r *Run) { r.Windows[1].CPUUsed = math.NaN() }, "window 1"},
		{"negative request", func(r *Run) { r.Windows[0].CPURequested = -1 }, "window 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run("hpa", 0, []float64{1, 1}, []float64{0.1, 0.1}, []float64{1, 1})
			tc.mod(&r)
			if _, err := Summarise(r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReaction(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name          string
		rates, p95s   []float64
		ready         []float64
		slo, capacity float64
	}{
		{
			name:  "violations after the step, capacity two windows later",
			rates: []float64{10, 10, 10, 30, 30, 30, 30},
			p95s:  []float64{0.1, 0.1, 0.1, 0.5, 0.9, 0.2, 0.1},
			// Demand 30/s × 0.02 s = 0.6 cores.
			ready: []float64{0.2, 0.2, 0.2, 0.2, 0.4, 0.6, 0.6},
			slo:   30, capacity: 45,
		},
		{
			name:  "no violation",
			rates: []float64{10, 10, 30, 30},
			p95s:  []float64{0.1, 0.1, 0.1, 0.1},
			ready: []float64{1, 1, 1, 1},
			slo:   0, capacity: 15,
		},
		{
			name:  "a late violation is not the step's",
			rates: []float64{10, 10, 30, 30, 30, 30, 30},
			p95s:  []float64{0.1, 0.1, 0.1, 0.1, 0.1, 0.9, 0.1},
			ready: []float64{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
			slo:   0, capacity: nan,
		},
		{
			name:  "no step",
			rates: []float64{10, 10, 10, 10},
			p95s:  []float64{0.1, 0.9, 0.1, 0.1},
			ready: []float64{1, 1, 1, 1},
			slo:   nan, capacity: nan,
		},
		{
			name:  "violating to the end",
			rates: []float64{10, 10, 40, 40},
			p95s:  []float64{0.1, 0.1, 0.3, 0.3},
			ready: []float64{0.1, 0.1, 0.1, 0.1},
			slo:   30, capacity: nan,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slo, capacity := Reaction(run("x", 0, tc.rates, tc.p95s, tc.ready))
			if !same(slo, tc.slo) || !same(capacity, tc.capacity) {
				t.Fatalf("reaction (%g, %g), want (%g, %g)", slo, capacity, tc.slo, tc.capacity)
			}
		})
	}
}

func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

func TestCompare(t *testing.T) {
	var runs []Run
	// fused costs 0.5 cores, hpa 0.6 in every pair; hpa violates one window
	// more in each of three repetitions.
	for rep := range 3 {
		f := run("fused", rep, []float64{10, 10, 10, 10}, []float64{0.1, 0.1, 0.1, 0.1}, []float64{1, 1, 1, 1})
		h := run("hpa", rep, []float64{10, 10, 10, 10}, []float64{0.1, 0.9, 0.1, 0.1}, []float64{1, 1, 1, 1})
		for i := range h.Windows {
			h.Windows[i].CPURequested = 0.6 + 0.01*float64(rep)
		}
		runs = append(runs, h, f)
	}
	var sums []Summary
	for _, r := range runs {
		s, err := Summarise(r)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, s)
	}
	cs, err := Compare(sums, "fused")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Policy != "hpa" || cs[0].Pairs != 3 {
		t.Fatalf("comparisons %+v", cs)
	}
	c := cs[0]
	if math.Abs(c.Violations.Mean-0.25) > 1e-12 || c.Violations.Lo != c.Violations.Mean {
		t.Errorf("violations %+v, want +0.25 with no spread", c.Violations)
	}
	if !(c.Cost.Lo > 0) || !(c.CostRatio > 1.1) {
		t.Errorf("cost %+v ratio %g, want hpa dearer with an interval above 0", c.Cost, c.CostRatio)
	}
	if _, err := Compare(sums, "vpa"); err == nil {
		t.Error("a reference without runs was accepted")
	}
	if _, err := Compare(append(sums, Summary{Policy: "vpa", Rep: 9}), "fused"); !errors.Is(err, ErrUnpaired) {
		t.Errorf("a policy without a shared repetition: %v, want ErrUnpaired", err)
	}
}

func TestWriteAndReadRuns(t *testing.T) {
	runs := []Run{
		run("hpa", 0, []float64{10, 10, 10, 30}, []float64{0.1, 0.1, 0.1, 0.4}, []float64{0.1, 0.1, 0.1, 0.1}),
		run("fused", 0, []float64{10, 10, 10, 30}, []float64{0.1, 0.1, 0.1, 0.1}, []float64{1, 1, 1, 1}),
	}
	var b bytes.Buffer
	if err := WriteRuns(&b, map[string]string{"trace": "step-change"}, runs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRuns(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Policy != "fused" || len(got[1].Windows) != 4 || got[0].Windows[3].P95 != 0.4 {
		t.Fatalf("read back %+v", got)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, got, "fused"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"policy", "hpa ", "fused ", "paired by repetition", "25.0%"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	for _, tc := range []struct{ name, in string }{
		{"other kind", `{"kind":"x","runs":[]}`},
		{"unknown field", `{"kind":"aware-bench-real/v1","runs":[],"extra":1}`},
		{"not JSON", `kind: x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadRuns(strings.NewReader(tc.in)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// A file written before the SLO inputs and the agent policies (the
// committed results of docs/results/real-node) still reads and merges with
// a new one, and the new sections show only for the runs that have them.
func TestOldAndNewFilesMerge(t *testing.T) {
	f, err := os.Open("../../../docs/results/real-node/results.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old, err := ReadRuns(f)
	if err != nil {
		t.Fatalf("the committed results no longer read: %v", err)
	}
	if len(old) == 0 {
		t.Fatal("no runs in the committed results")
	}
	agent := run("agent", 0, []float64{10, 10, 10, 30}, []float64{0.1, 0.1, 0.1, 0.1}, []float64{1, 1, 1, 1})
	agent.SLOMetrics = true
	for i, st := range []struct{ stage, source string }{{"Bootstrapping", "Default"}, {"OnlineTraining", "Agent"}, {"Serving", "Safeguard"}, {"Serving", "Default"}} {
		agent.Windows[i].Stage, agent.Windows[i].Source, agent.Windows[i].SLORate, agent.Windows[i].SLOP95 = st.stage, st.source, 10, 0.05
	}
	agent.SLOMissing = "a p95 in 0 of 2 windows"
	agent.RecommenderQueries = map[string]float64{"requestRate/success": 16, "latency/success": 48}
	var b bytes.Buffer
	if err := WriteRuns(&b, nil, append(old, agent)); err != nil {
		t.Fatal(err)
	}
	merged, err := ReadRuns(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(merged) != len(old)+1 || merged[len(old)].Windows[1].Stage != "OnlineTraining" {
		t.Fatalf("merged %d runs, the agent's windows %+v", len(merged), merged[len(merged)-1].Windows)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, merged, "fused"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"what acted", "Bootstrapping 1, OnlineTraining 1, Serving 2", "SLO inputs", "a p95 in 0 of 2 windows", "16/48"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	// The old runs have neither section's rows.
	for _, r := range old {
		if _, ok := ActedIn(r); ok || r.SLOMetrics {
			t.Errorf("old run %s %d reads as an agent or SLO run", r.Policy, r.Rep)
		}
	}
}

func TestActedIn(t *testing.T) {
	base := run("ensemble", 1, []float64{10, 10, 10, 10}, []float64{0.1, 0.1, 0.1, 0.1}, []float64{1, 1, 1, 1})
	for _, tc := range []struct {
		name       string
		stages     []string
		sources    []string
		wantOK     bool
		wantAgent  int
		wantFirst  float64
		wantLooked int
	}{
		{"not an agent run", []string{"", "", "", ""}, []string{"", "", "", ""}, false, 0, -1, 0},
		{"defaults only", []string{"Bootstrapping", "Bootstrapping", "Bootstrapping", "Bootstrapping"}, []string{"Default", "Default", "Default", "Default"}, true, 0, -1, 4},
		{"the agent from the third window", []string{"", "Bootstrapping", "OnlineTraining", "Serving"}, []string{"", "Default", "Agent", "Safeguard"}, true, 2, 30, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Windows = append([]Window(nil), base.Windows...)
			for i := range r.Windows {
				r.Windows[i].Stage, r.Windows[i].Source = tc.stages[i], tc.sources[i]
			}
			a, ok := ActedIn(r)
			if ok != tc.wantOK || a.Agent != tc.wantAgent || a.FirstAgent != tc.wantFirst || a.Looked != tc.wantLooked {
				t.Errorf("ActedIn = %+v, %v", a, ok)
			}
		})
	}
}

func TestOutside(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cpu       CPUShare
		want      float64
		disturbed bool
	}{
		{"quiet", CPUShare{Machine: 310, ControlPlane: 36.5, Node: 11.3, Components: 158.7, LoadGen: 9.5, Wall: 480}, 0.196, false},
		{"VPA's processes are a part", CPUShare{Machine: 310, ControlPlane: 36.5, Node: 11.3, Components: 158.7, LoadGen: 9.5, VPA: 24, Wall: 480}, 0.146, false},
		{"beside compiles", CPUShare{Machine: 958, ControlPlane: 38.8, Node: 11.8, Components: 181, LoadGen: 9.1, Wall: 480}, 1.494, true},
		{"parts above the machine (sampling skew)", CPUShare{Machine: 100, Components: 120, Wall: 480}, 0, false},
		// Round twenty-nine's last run's parts, had 0.2 of its 0.26 cores
		// outside been the hypervisor's: the parts lose steal alike.
		{"steal counts as a disturbance", CPUShare{Machine: 250.4, ControlPlane: 42.94, Node: 15.02, Components: 145.546, LoadGen: 16.49, Steal: 96, Wall: 480}, 0.063, true},
		{"a little steal", CPUShare{Machine: 250.4, ControlPlane: 42.94, Node: 15.02, Components: 145.546, LoadGen: 16.49, Steal: 24, Wall: 480}, 0.063, false},
		{"unmeasured (older file)", CPUShare{}, math.NaN(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cpu.OutsideCores()
			if !same(math.Round(got*1000)/1000, tc.want) {
				t.Errorf("OutsideCores = %.4f, want %.3f", got, tc.want)
			}
			r := Run{Policy: "fused", CPU: tc.cpu}
			if d := Disturbed(r, DefaultMaxOutsideCores); d != tc.disturbed {
				t.Errorf("Disturbed = %v, want %v", d, tc.disturbed)
			}
			quiet, bad := Quiet([]Run{r}, DefaultMaxOutsideCores)
			if len(bad) == 1 != tc.disturbed || len(quiet)+len(bad) != 1 {
				t.Errorf("Quiet split %d/%d", len(quiet), len(bad))
			}
			var b strings.Builder
			if err := WriteOutside(&b, []Run{r}, DefaultMaxOutsideCores); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(b.String(), "DISTURBED") != tc.disturbed {
				t.Errorf("WriteOutside wrote %q", b.String())
			}
		})
	}
}

func TestTimeline(t *testing.T) {
	r := Run{
		Decisions: []Decision{
			{At: 10, Count: 1, Message: "first recommendation: replicas 1"},
			{At: 130, Count: 3, Message: "replicas 1 → 3"},
		},
		Events: []Event{
			{At: 131.5, Type: "Warning", Reason: "FailedScheduling", Object: "Pod/testapp-x", Source: "default-scheduler", Message: "0/1 nodes are available: 1 Insufficient cpu."},
			{At: -2, Count: 1, Type: "Normal", Reason: "Scheduled", Object: "Pod/testapp-a", Source: "default-scheduler", Message: "assigned"},
		},
	}
	var b strings.Builder
	if err := Timeline(&b, r); err != nil {
		t.Fatal(err)
	}
	want := `   -2.0s Normal Scheduled Pod/testapp-a [default-scheduler] assigned (×1)
   10.0s decision first recommendation: replicas 1 (×1)
  130.0s decision replicas 1 → 3 (×3)
  131.5s Warning FailedScheduling Pod/testapp-x [default-scheduler] 0/1 nodes are available: 1 Insufficient cpu. (×1)
`
	if b.String() != want {
		t.Errorf("Timeline:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestSpeedMismatch: invocations whose app measured CPU per request more
// than the ratio apart are named; within it, or with one measuring
// nothing, none is.
func TestSpeedMismatch(t *testing.T) {
	runs := func(v ...float64) []Run {
		var rs []Run
		for _, x := range v {
			rs = append(rs, Run{CPUSecondsPerRequest: x})
		}
		return rs
	}
	for _, tc := range []struct {
		name   string
		groups []Group
		want   string
	}{
		{"one machine", []Group{{"a.json", runs(0.0113, 0.0115)}, {"b.json", runs(0.0112, 0.0120)}}, ""},
		{"a slower machine", []Group{{"fast.json", runs(0.0112, 0.0113, 0.0115)}, {"slow.json", runs(0.0167, 0.0167)}}, "the runs of slow.json measured 0.0167 CPU-seconds per request and those of fast.json 0.0113 (×1.48"},
		{"an outlier run within a file", []Group{{"a.json", runs(0.0113, 0.0114, 0.05)}, {"b.json", runs(0.0113)}}, ""},
		{"a file without the measure", []Group{{"old.json", runs(0, 0)}, {"b.json", runs(0.0167)}}, ""},
		{"one file", []Group{{"a.json", runs(0.01, 0.02)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SpeedMismatch(tc.groups, DefaultMaxSpeedRatio)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCPUUsedSeconds: each window's usage times its width, summed.
func TestCPUUsedSeconds(t *testing.T) {
	r := Run{Windows: []Window{{Start: 0, End: 15, CPUUsed: 0.2}, {Start: 15, End: 30, CPUUsed: 0.4}, {Start: 30, End: 40}}}
	if got := r.CPUUsedSeconds(); math.Abs(got-9) > 1e-12 {
		t.Errorf("CPUUsedSeconds = %g, want 15·0.2 + 15·0.4 = 9", got)
	}
}
