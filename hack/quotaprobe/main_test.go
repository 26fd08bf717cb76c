package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseCPUStat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     throttling
		err      string
	}{
		{name: "v1", in: "nr_periods 120\nnr_throttled 30\nthrottled_time 1500000000\n", want: throttling{120, 30, 1.5}},
		{name: "v2", in: "usage_usec 9\nuser_usec 5\nsystem_usec 4\nnr_periods 10\nnr_throttled 2\nthrottled_usec 250000\nnr_bursts 0\n", want: throttling{10, 2, 0.25}},
		{name: "a counter missing", in: "nr_periods 10\nnr_throttled 2\n", err: "want nr_periods"},
		{name: "not a number", in: "nr_periods x\n", err: "nr_periods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUStat(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestProcessCPU(t *testing.T) {
	if _, err := processCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := processCPU(-1); err == nil {
		t.Error("no such process: no error")
	}
}

func TestCgroupFiles(t *testing.T) {
	root := t.TempDir()
	if _, _, err := cpuRoot(root); err == nil {
		t.Fatal("an empty root: no error")
	}
	v1 := filepath.Join(root, "cpu,cpuacct")
	if err := os.MkdirAll(v1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v1, "cpu.cfs_quota_us"), []byte("-1"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, v2, err := cpuRoot(root)
	if err != nil || v2 || dir != v1 {
		t.Fatalf("got %s v2=%v %v, want %s v1", dir, v2, err, v1)
	}
	c, err := newCgroup(dir, false, "cell", 0.7)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"cpu.cfs_quota_us": "70000", "cpu.cfs_period_us": "100000"} {
		if b, err := os.ReadFile(filepath.Join(c.dir, file)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", file, b, err, want)
		}
	}
	if _, err := newCgroup(dir, false, "zero", 0); err == nil {
		t.Error("a zero limit: no error")
	}

	uni := t.TempDir()
	if err := os.WriteFile(filepath.Join(uni, "cgroup.controllers"), []byte("memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cpuRoot(uni); err == nil || !strings.Contains(err.Error(), "no cpu controller") {
		t.Fatalf("v2 without cpu: %v", err)
	}
	if err := os.WriteFile(filepath.Join(uni, "cgroup.controllers"), []byte("cpuset cpu memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, v2, err := cpuRoot(uni); err != nil || !v2 {
		t.Fatalf("v2: %v %v", v2, err)
	}
	c2, err := newCgroup(uni, true, "cell", 0.25)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(c2.dir, "cpu.max")); err != nil || string(b) != "25000 100000" {
		t.Errorf("cpu.max %q %v", b, err)
	}
}

func TestCellsAndHogs(t *testing.T) {
	o := options{limits: []float64{0.2, 0.7}, utilisation: []float64{0.1, 0.5}, background: []float64{0, 0.4}, reps: 2}
	cs := cells(o)
	if len(cs) != 16 {
		t.Fatalf("%d cells, want 16", len(cs))
	}
	// The second repetition is the first reversed.
	for i := range 8 {
		a, b := cs[i], cs[15-i]
		if a.Limit != b.Limit || a.Utilisation != b.Utilisation || a.Background != b.Background || a.Rep != 0 || b.Rep != 1 {
			t.Fatalf("cell %d %+v and %d %+v", i, a, 15-i, b)
		}
	}
	for _, tc := range []struct {
		cores float64
		n     int
		duty  float64
	}{{0, 0, 0}, {0.4, 1, 0.4}, {1, 1, 1}, {1.5, 2, 0.75}} {
		if n, d := hogs(tc.cores); n != tc.n || math.Abs(d-tc.duty) > 1e-12 {
			t.Errorf("hogs(%g) = %d, %g; want %d, %g", tc.cores, n, d, tc.n, tc.duty)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	hog(ctx, 0.5, 1) // returns once ctx ends
}

func TestParseOptions(t *testing.T) {
	if _, err := parseOptions([]string{"-testapp", "/x"}); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"no app", nil, "-testapp is required"},
		{"a utilisation past the grid", []string{"-testapp", "/x", "-utilisations", "0.5,1.2"}, "-utilisations"},
		{"a limit that is not a number", []string{"-testapp", "/x", "-limits", "a"}, "-limits"},
		{"a run shorter than two windows", []string{"-testapp", "/x", "-duration", "20s"}, "-duration"},
		{"a bad duty", []string{"-hog-duty", "2"}, "-hog-duty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseOptions(tc.args); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want one with %q", err, tc.err)
			}
		})
	}
}

func TestMeasuredWindows(t *testing.T) {
	in := `{"window":0,"ok":10,"p50":0.5,"p95":0.9}
{"window":1,"ok":20,"lost":1,"p50":0.010,"p95":0.020}
{"window":2,"ok":0,"lost":3}
{"window":3,"ok":30,"p50":0.012,"p95":0.080}
`
	ws, err := measuredWindows(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].OK != 20 || ws[1].P95 != 0.080 {
		t.Fatalf("got %+v: want windows 1 and 3", ws)
	}
	geo, sd := logStats(ws, func(w window) float64 { return w.P95 })
	if math.Abs(geo-0.04) > 1e-12 || math.Abs(sd-math.Log(4)/math.Sqrt2) > 1e-12 {
		t.Fatalf("geo %g sd %g", geo, sd)
	}
	if _, err := measuredWindows(strings.NewReader(`{"window":0,"ok":1,"p50":1,"p95":1}`)); err == nil {
		t.Error("only the warm-up: no error")
	}
	if _, err := measuredWindows(strings.NewReader(`{"window":`)); err == nil {
		t.Error("a torn record: no error")
	}
}

func TestSummaryPairsTheBackground(t *testing.T) {
	mk := func(limit, util, bg float64, rep int, p95, model float64) result {
		return result{cell: cell{Limit: limit, Utilisation: util, Background: bg, Rep: rep}, P95: p95, ModelP95: model, ModelBackgroundP95: model * (1 + bg), Rate: 10, CPU: cpuUse{PerRequest: 0.01}}
	}
	rs := []result{
		mk(0.7, 0.1, 0, 0, 0.02, 0.01), mk(0.7, 0.5, 0, 0, 0.04, 0.02),
		mk(0.7, 0.1, 0.4, 0, 0.04, 0.01), mk(0.7, 0.5, 0.4, 0, 0.08, 0.02),
	}
	var b bytes.Buffer
	if err := writeSummary(&b, rs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Without the background the real p95 is twice the model's in both
	// cells; the background doubles it again in both pairs.
	for _, want := range []string{
		"limit 0.70, background 0.00 cores: +0.693 [+0.693, +0.693] (2.00x) over 2 cells\n",
		// With the background the real p95 is 4x the model's, 4/1.4 the
		// model's with it.
		"limit 0.70, background 0.40 cores: +1.386 [+1.386, +1.386] (4.00x) over 2 cells; with the background in the model +1.050 [+1.050, +1.050] (2.86x)",
		"limit 0.70, background 0.40 cores: +0.693 [+0.693, +0.693] (2.00x) over 2 pairs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	writeRow(&b, rs[0], true)
}

// TestReport: a cells.json is printed again with this build's models:
// the models written in it are replaced, and a missing file or one
// without cells is refused.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	cells := []result{
		{cell: cell{Limit: 0.7, Utilisation: 0.2}, Rate: 9, P95: 0.02, CPU: cpuUse{PerRequest: 0.0155}, ModelP95: 1, Cores: 2},
		{cell: cell{Limit: 0.7, Utilisation: 0.2, Background: 0.4}, Rate: 9, P95: 0.024, CPU: cpuUse{PerRequest: 0.0155}, ModelP95: 1, Cores: 2},
	}
	b, err := json.Marshal(cells)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cells.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := report(path, 0, &out); err != nil {
		t.Fatal(err)
	}
	// The model's p95 of a lone 15.5-ms request at 9/s on 0.7 core is
	// about its CPU time, not the 1 s written in the file.
	if !strings.Contains(out.String(), "limit 0.70, background 0.00 cores: +0.2") {
		t.Errorf("the models were not recomputed:\n%s", out.String())
	}
	cells[1].Cores = 0
	if b, err = json.Marshal(cells); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := report(path, 0, &out); err == nil || !strings.Contains(err.Error(), "cell 1 records no node cores") {
		t.Errorf("a cell without cores: %v", err)
	}
	if err := report(filepath.Join(dir, "none.json"), 0, &out); err == nil {
		t.Error("a missing file: no error")
	}
	if err := os.WriteFile(path, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := report(path, 0, &out); err == nil || !strings.Contains(err.Error(), "no cells") {
		t.Errorf("no cells: %v", err)
	}
}
