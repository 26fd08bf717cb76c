//go:build benchvpa

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestScaleRows(t *testing.T) {
	full := scalePoint{Targets: 100, Load: 3, Cost: map[string]loopCost{
		"aware-recommender": {Loops: 3, CPUPerLoop: 0.02, RequestsPerLp: 5, RSSBytes: 60 * mib},
		"vpa-recommender":   {Loops: 3, CPUPerLoop: 0.1, RequestsPerLp: 110, RSSBytes: 50 * mib},
		"aware-updater":     {Loops: 3, CPUPerLoop: 0.01, RequestsPerLp: 1, RSSBytes: 40 * mib},
		"vpa-updater":       {Loops: 3, CPUPerLoop: 0.15, RequestsPerLp: 200, RSSBytes: 45 * mib},
	}}
	for _, tc := range []struct {
		name      string
		sp        scalePoint
		wantRows  []string // measure: verdict
		wantNotes int
	}{
		{name: "both sides measured", sp: full, wantRows: []string{
			"recommender CPU per loop, 100 targets: met", "recommender API requests per loop, 100 targets: ",
			"recommender RSS, 100 targets: NOT met", "updater CPU per loop, 100 targets: ",
			"updater API requests per loop, 100 targets: ", "updater RSS, 100 targets: ",
		}},
		{name: "a side without loops has no per-loop rows", sp: scalePoint{Targets: 5000, Cost: map[string]loopCost{
			"aware-recommender": {Loops: 3, CPUPerLoop: 1, RSSBytes: mib}, "vpa-recommender": {Loops: 0, RSSBytes: 2 * mib},
		}}, wantRows: []string{"recommender RSS, 5000 targets: met"}, wantNotes: 1},
		{name: "a side missing gives no rows and a note", sp: scalePoint{Targets: 10, Cost: map[string]loopCost{"aware-recommender": {Loops: 1}}}, wantNotes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, notes := scaleRows(tc.sp)
			var got []string
			for _, r := range rows {
				got = append(got, r.Measure+": "+r.Verdict())
			}
			if strings.Join(got, "\n") != strings.Join(tc.wantRows, "\n") {
				t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantRows, "\n"))
			}
			if len(notes) != tc.wantNotes {
				t.Errorf("notes %q, want %d", notes, tc.wantNotes)
			}
		})
	}
}

func TestCostPlotAndMarkdown(t *testing.T) {
	r := results{Machine: "m", Scale: []scalePoint{
		{Targets: 100, Cost: map[string]loopCost{"aware-recommender": {Loops: 3, CPUPerLoop: 0.02}, "vpa-recommender": {Loops: 3, CPUPerLoop: 0.1}}},
		{Targets: 1000, Cost: map[string]loopCost{"aware-recommender": {Loops: 3, CPUPerLoop: 0.2}, "vpa-recommender": {Loops: 0}}},
	}, AwareOnly: []scalePoint{{Targets: 10000, Pods: 20000, Cost: map[string]loopCost{"aware-recommender": {Loops: 3, CPUPerLoop: 1.5, RSSBytes: 300 * mib}}}}}
	p := costPlot(r)
	if len(p.Series) != 2 {
		t.Fatalf("%d series, want the two recommenders", len(p.Series))
	}
	if n := len(p.Series[0].Points); n != 3 {
		t.Errorf("AWARE recommender: %d points, want 3 (100, 1000, 10000)", n)
	}
	if n := len(p.Series[1].Points); n != 1 {
		t.Errorf("VPA recommender: %d points, want 1 (no loop at 1000)", n)
	}
	var svg bytes.Buffer
	if err := p.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| recommender CPU per loop, 100 targets | 20.0 ms | 100 ms | 0.20× | ≤ 0.2× | met |", "| 10000 | 20000 | 1500 ms |", "- 1000 targets: aware-recommender finished 3 loops"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
