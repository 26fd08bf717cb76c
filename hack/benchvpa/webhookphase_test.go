//go:build benchvpa

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

// aggOf is one side's sums: n requests of latency ms each, cpu seconds of
// server CPU over elapsed, measured at load.
func aggOf(n int, ms, cpu float64, elapsed time.Duration, load float64, errs int) *webhookAgg {
	a := &webhookAgg{cpu: cpu, n: n, errs: errs, elapsed: elapsed, loadSum: load, loadN: 1}
	for range n {
		a.lat = append(a.lat, ms)
	}
	return a
}

func TestWebhookRows(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nTargets   int
		fixed      map[string]*webhookAgg
		closed     map[string]*webhookAgg
		wantP99    string // measure of the fixed-rate p99 row
		wantRatio  float64
		wantVerd   string
		wantThru   [2]float64 // closed-loop req/s, ours and VPA's
		wantCPU    [2]float64 // fixed-rate µs per request
		wantLoad   float64
		wantNotes  []string
		wantSuffix string // every row's measure ends so
		wantRows   int
		wantFloor  float64    // the floor's fixed-rate p99 over VPA's; 0: no floor rows
		wantNet    [2]float64 // fixed-rate µs per request net of idle, ours and VPA's; zero: no such row
		wantWakes  [2]float64 // fixed-rate wake-ups per request, ours and VPA's
	}{
		{
			name:    "before the scale steps: rows keep their names",
			fixed:   map[string]*webhookAgg{"AWARE": aggOf(100, 1, 0.01, time.Second, 2, 0), "VPA": aggOf(100, 2, 0.02, time.Second, 4, 0)},
			closed:  map[string]*webhookAgg{"AWARE": aggOf(200, 1, 0.01, time.Second, 2, 0), "VPA": aggOf(100, 2, 0.01, time.Second, 2, 0)},
			wantP99: "webhook p99, 300 req/s", wantRatio: 0.5, wantVerd: "met",
			wantThru: [2]float64{200, 100}, wantCPU: [2]float64{100, 200}, wantLoad: 3,
			wantSuffix: "", wantRows: 11,
		},
		{
			name:     "at a scale step every row names the targets, and failures become notes",
			nTargets: 1000,
			fixed:    map[string]*webhookAgg{"AWARE": aggOf(10, 3, 0.001, time.Second, 1, 2), "VPA": aggOf(10, 4, 0.001, time.Second, 1, 0)},
			closed:   map[string]*webhookAgg{"AWARE": aggOf(10, 1, 0.001, 2*time.Second, 1, 0), "VPA": aggOf(10, 1, 0.001, 0, 1, 1)},
			wantP99:  "webhook p99, 300 req/s, 1000 targets", wantRatio: 0.75, wantVerd: "NOT met",
			wantThru: [2]float64{5, 0}, wantCPU: [2]float64{100, 100}, wantLoad: 1,
			wantNotes:  []string{"AWARE webhook, 1000 targets: 2 failed requests (not in the latencies)", "VPA webhook, 1000 targets: 1 failed requests (not in the latencies)"},
			wantSuffix: ", 1000 targets", wantRows: 11,
		},
		{
			name: "the floor gets rows against VPA, idle CPU is netted out, and handshakes inside the runs become notes",
			fixed: map[string]*webhookAgg{"AWARE": aggOf(100, 1, 0.01, time.Second, 2, 0), "VPA": aggOf(100, 2, 0.02, time.Second, 2, 0),
				floorSide: aggOf(100, 0.5, 0.005, time.Second, 2, 0)},
			closed: map[string]*webhookAgg{"AWARE": aggOf(200, 1, 0.01, time.Second, 2, 0), "VPA": aggOf(100, 2, 0.01, time.Second, 2, 0),
				floorSide: {lat: []float64{1}, n: 1, elapsed: time.Second, dials: 3}},
			wantP99: "webhook p99, 300 req/s", wantRatio: 0.5, wantVerd: "met",
			wantThru: [2]float64{200, 100}, wantCPU: [2]float64{100, 200}, wantLoad: 2,
			wantNotes: []string{"floor webhook: 3 connections opened inside the measured runs (TLS handshakes included in its numbers)"},
			wantRows:  21, wantFloor: 0.25, wantNet: [2]float64{50, 180}, wantWakes: [2]float64{7, 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 700 and 300 wake-ups over 100 requests each.
			tc.fixed["AWARE"].wakeups, tc.fixed["VPA"].wakeups = 700, 300
			if tc.wantNet != [2]float64{} {
				// 5 and 2 ms of CPU per second at idle; the floor 1.
				for side, idle := range map[string]float64{"AWARE": 0.005, "VPA": 0.002, floorSide: 0.001} {
					tc.fixed[side].idle, tc.fixed[side].idleSet = idle, true
				}
			}
			rows, notes := webhookRows(tc.fixed, tc.closed, 300, 8, tc.nTargets)
			if len(rows) != tc.wantRows {
				t.Fatalf("%d rows, want %d", len(rows), tc.wantRows)
			}
			byName := map[string]bench.Row{}
			for _, r := range rows {
				byName[r.Measure] = r
				if tc.wantSuffix != "" && !strings.HasSuffix(r.Measure, tc.wantSuffix) {
					t.Errorf("row %q does not name the targets", r.Measure)
				}
				if tc.wantSuffix == "" && strings.Contains(r.Measure, "targets") {
					t.Errorf("row %q names targets before the scale steps", r.Measure)
				}
			}
			p99, ok := byName[tc.wantP99]
			if !ok {
				t.Fatalf("no row %q in %v", tc.wantP99, rows)
			}
			if p99.Ratio() != tc.wantRatio || p99.Verdict() != tc.wantVerd || p99.Goal != 0.6 {
				t.Errorf("p99 row: ratio %v verdict %q goal %v, want %v %q 0.6", p99.Ratio(), p99.Verdict(), p99.Goal, tc.wantRatio, tc.wantVerd)
			}
			for _, r := range rows {
				if r.Goal != 0 && r.Measure != tc.wantP99 {
					t.Errorf("row %q has a goal; only the fixed-rate p99 has", r.Measure)
				}
			}
			thru := rows[4]
			if !strings.HasPrefix(thru.Measure, "webhook throughput, closed loop, 8 clients") || thru.Ours != tc.wantThru[0] || thru.VPA != tc.wantThru[1] {
				t.Errorf("throughput row %+v, want %v", thru, tc.wantThru)
			}
			cpu := rows[3]
			if !approx(cpu.Ours, tc.wantCPU[0]) || !approx(cpu.VPA, tc.wantCPU[1]) {
				t.Errorf("CPU per request row %+v, want %v µs", cpu, tc.wantCPU)
			}
			if rows[0].Load != tc.wantLoad {
				t.Errorf("load %v, want %v", rows[0].Load, tc.wantLoad)
			}
			if w := byName["webhook server thread wake-ups per request, 300 req/s"+tc.wantSuffix]; tc.wantWakes != [2]float64{} && (w.Ours != tc.wantWakes[0] || w.VPA != tc.wantWakes[1]) {
				t.Errorf("wake-ups row %+v, want %v", w, tc.wantWakes)
			}
			netRow, ok := byName["webhook server CPU per request net of idle, 300 req/s"]
			if ok != (tc.wantNet != [2]float64{}) || (ok && (!approx(netRow.Ours, tc.wantNet[0]) || !approx(netRow.VPA, tc.wantNet[1]))) {
				t.Errorf("net-of-idle row %+v (present %v), want %v µs", netRow, ok, tc.wantNet)
			}
			floor, ok := byName["floor (a minimal Go webhook, AWARE column) p99, 300 req/s"]
			if ok != (tc.wantFloor > 0) || (ok && floor.Ratio() != tc.wantFloor) {
				t.Errorf("floor p99 row %+v (present %v), want ratio %v", floor, ok, tc.wantFloor)
			}
			if strings.Join(notes, "\n") != strings.Join(tc.wantNotes, "\n") {
				t.Errorf("notes %q, want %q", notes, tc.wantNotes)
			}
		})
	}
}

func approx(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestWebhookAtScaleReport(t *testing.T) {
	row := func(targets int, ours, vpa float64) webhookPoint {
		rows, _ := webhookRows(
			map[string]*webhookAgg{"AWARE": aggOf(10, ours, 0, time.Second, 1, 0), "VPA": aggOf(10, vpa, 0, time.Second, 1, 0)},
			map[string]*webhookAgg{"AWARE": aggOf(10, 1, 0, time.Second, 1, 0), "VPA": aggOf(10, 1, 0, time.Second, 1, 0)},
			300, 8, targets)
		return webhookPoint{Targets: targets, Rows: rows}
	}
	before := row(0, 3, 3)
	for _, tc := range []struct {
		name    string
		r       results
		want    []string
		notWant []string
	}{
		{
			name: "before and two scales",
			r:    results{Webhook: before.Rows, WebhookAtScale: []webhookPoint{row(100, 3, 4), row(1000, 3, 6)}},
			want: []string{
				"### Admission webhook at each scale",
				"Fixed-rate p99, AWARE against VPA: before the scale steps (1 target): 3.00 against 3.00 ms, 1.00× (NOT met); 100 targets: 3.00 against 4.00 ms, 0.75× (NOT met); 1000 targets: 3.00 against 6.00 ms, 0.50× (met).",
				"| webhook p99, 300 req/s, 100 targets | 3.00 ms | 4.00 ms | 0.75× | ≤ 0.6× | NOT met |",
				"| webhook p99, 300 req/s, 1000 targets | 3.00 ms | 6.00 ms | 0.50× | ≤ 0.6× | met |",
			},
		},
		{
			name:    "no measure at the scales: no section",
			r:       results{Webhook: before.Rows},
			notWant: []string{"at each scale"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var md bytes.Buffer
			if err := writeMarkdown(&md, tc.r); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(md.String(), w) {
					t.Errorf("markdown lacks %q:\n%s", w, md.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(md.String(), w) {
					t.Errorf("markdown has %q:\n%s", w, md.String())
				}
			}
		})
	}
}

func TestMergeReportsKeepsWebhookAtScale(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r results) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := write("big.json", results{Machine: "m", WebhookAtScale: []webhookPoint{{Targets: 1000, Rows: []bench.Row{{Measure: "a"}}}}})
	small := write("small.json", results{Machine: "m", WebhookAtScale: []webhookPoint{{Targets: 100, Rows: []bench.Row{{Measure: "b"}}}}})
	out := filepath.Join(dir, "out")
	stdout := os.Stdout
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	os.Stdout = devnull // mergeReports prints the tables
	err = mergeReports(out, []string{big, small})
	os.Stdout = stdout
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got results
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var targets []int
	for _, p := range got.WebhookAtScale {
		targets = append(targets, p.Targets)
	}
	if len(targets) != 2 || targets[0] != 100 || targets[1] != 1000 {
		t.Errorf("merged webhook points at %v targets, want [100 1000]", targets)
	}
}
