package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestPercentiles(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted
	}
	for _, tc := range []struct {
		name    string
		xs, ps  []float64
		want    []float64
		wantErr bool
	}{
		{name: "one sample is every percentile", xs: []float64{7}, ps: []float64{50, 99, 99.9}, want: []float64{7, 7, 7}},
		{name: "nearest rank of 1..100", xs: hundred, ps: []float64{1, 50, 99, 99.9, 100}, want: []float64{1, 50, 99, 100, 100}},
		{name: "even count median is the lower middle", xs: []float64{4, 1, 3, 2}, ps: []float64{50}, want: []float64{2}},
		{name: "p999 of 10 samples is the maximum", xs: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, ps: []float64{99.9}, want: []float64{10}},
		{name: "empty", xs: nil, ps: []float64{50}, wantErr: true},
		{name: "p0 rejected", xs: []float64{1}, ps: []float64{0}, wantErr: true},
		{name: "p above 100 rejected", xs: []float64{1}, ps: []float64{101}, wantErr: true},
		{name: "NaN p rejected", xs: []float64{1}, ps: []float64{math.NaN()}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.xs)
			got, err := Percentiles(tc.xs, tc.ps...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Percentiles = %v, want %v", got, tc.want)
			}
			if !slices.Equal(tc.xs, before) {
				t.Errorf("input reordered: %v", tc.xs)
			}
		})
	}
	if _, err := Percentiles(nil, 50); !errors.Is(err, ErrNoSamples) {
		t.Errorf("empty sample: err = %v, want ErrNoSamples", err)
	}
}

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       float64
		wantErr    bool
	}{
		{name: "plain", text: "1234 (recommender) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 0 0\n", want: 3.25},
		{name: "name with spaces and parens", text: "9 (a (b) c) R 1 9 9 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 0 0", want: 0.03},
		{name: "no name", text: "1234 S 1", wantErr: true},
		{name: "truncated", text: "1 (x) S 1 2 3", wantErr: true},
		{name: "not a number", text: "1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 2 0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProcStat(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("cpu = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseSchedstat(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       float64
		wantSlices uint64
		wantErr    bool
	}{
		{name: "plain", text: "1500000000 6768714 12\n", want: 1.5, wantSlices: 12},
		{name: "two fields", text: "1 2", wantErr: true},
		{name: "negative", text: "-1 2 3", wantErr: true},
		{name: "timeslices not a number", text: "1 2 x", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, slices, err := ParseSchedstat(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want || slices != tc.wantSlices {
				t.Errorf("cpu, timeslices = %v, %d, want %v, %d", got, slices, tc.want, tc.wantSlices)
			}
		})
	}
}

func TestParseProcStatus(t *testing.T) {
	for _, tc := range []struct {
		name, text      string
		wantRSS, wantHW float64
		wantErr         bool
	}{
		{name: "both", text: "Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t   1024 kB\nThreads: 9\n", wantRSS: 1 << 20, wantHW: 2 << 20},
		{name: "missing peak", text: "VmRSS:\t1 kB\n", wantErr: true},
		{name: "wrong unit", text: "VmRSS:\t1 MB\nVmHWM:\t1 kB\n", wantErr: true},
		{name: "not a number", text: "VmRSS:\tx kB\nVmHWM:\t1 kB\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rss, hwm, err := ParseProcStatus(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if rss != tc.wantRSS || hwm != tc.wantHW {
				t.Errorf("rss, peak = %v, %v; want %v, %v", rss, hwm, tc.wantRSS, tc.wantHW)
			}
		})
	}
}

func TestRowVerdict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		row       Row
		wantRatio float64
		want      string
	}{
		{name: "met", row: Row{Ours: 1, VPA: 10, Goal: 0.2}, wantRatio: 0.1, want: "met"},
		{name: "exactly at the goal is met", row: Row{Ours: 2, VPA: 10, Goal: 0.2}, wantRatio: 0.2, want: "met"},
		{name: "not met", row: Row{Ours: 3, VPA: 10, Goal: 0.2}, wantRatio: 0.3, want: "NOT met"},
		{name: "no goal", row: Row{Ours: 3, VPA: 10}, wantRatio: 0.3, want: ""},
		{name: "nothing to compare with", row: Row{Ours: 3, VPA: 0, Goal: 1}, wantRatio: math.NaN(), want: "n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.row.Ratio()
			if !(r == tc.wantRatio || math.IsNaN(r) && math.IsNaN(tc.wantRatio)) && math.Abs(r-tc.wantRatio) > 1e-12 {
				t.Errorf("Ratio = %v, want %v", r, tc.wantRatio)
			}
			if got := tc.row.Verdict(); got != tc.want {
				t.Errorf("Verdict = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNum(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.58123, "0.581"}, {12.345, "12.3"}, {1234.6, "1235"}, {0.0004567, "0.000457"}, {math.NaN(), "–"}, {-2.5, "-2.50"},
	} {
		if got := Num(tc.v); got != tc.want {
			t.Errorf("Num(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	rows := []Row{
		{Measure: "webhook p99 | 1000 req/s", Unit: "ms", Ours: 0.6, VPA: 1.2, Goal: 0.6, Load: 2.5},
		{Measure: "RSS", Unit: "MiB", Ours: 60, VPA: 56, Goal: 1, Load: 1},
		{Measure: "API requests per loop", Unit: "", Ours: 3, VPA: 0},
	}
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2+len(rows) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2+len(rows), b.String())
	}
	for i, want := range []string{
		`| webhook p99 \| 1000 req/s | 0.600 ms | 1.20 ms | 0.50× | ≤ 0.6× | met | 2.50 |`,
		`| RSS | 60.0 MiB | 56.0 MiB | 1.07× | ≤ 1× | NOT met | 1.00 |`,
		`| API requests per loop | 3.00  | 0  | – |  |  | 0.00 |`,
	} {
		if lines[2+i] != want {
			t.Errorf("row %d:\n got %s\nwant %s", i, lines[2+i], want)
		}
	}
	for _, l := range lines {
		if n := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|"); n != 8 {
			t.Errorf("%d cell separators in %q, want 8", n, l)
		}
	}
}

func TestPlotWriteSVG(t *testing.T) {
	good := Plot{Title: "CPU per loop <by> scale", XLabel: "targets", YLabel: "CPU s",
		Series: []Series{
			{Name: "AWARE", Points: []Point{{100, 0.015}, {1000, 0.12}, {5000, 0.6}}},
			{Name: "VPA", Color: "#d62728", Points: []Point{{100, 0.2}, {1000, 1.9}, {5000, 9}}},
		}}
	t.Run("valid XML with a line and markers per series", func(t *testing.T) {
		var b bytes.Buffer
		if err := good.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
		counts := map[string]int{}
		for {
			tok, err := dec.Token()
			if err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
			}
			if se, ok := tok.(xml.StartElement); ok {
				counts[se.Name.Local]++
			}
		}
		if counts["svg"] != 1 || counts["polyline"] != 2 || counts["circle"] != 6 {
			t.Errorf("elements %v, want 1 svg, 2 polylines, 6 circles", counts)
		}
		if !strings.Contains(b.String(), "CPU per loop &lt;by&gt; scale") {
			t.Error("title not escaped")
		}
		// x spans 100..10k on whole decades: ticks 100, 1000, 10k.
		for _, label := range []string{">100<", ">1000<", ">10k<", ">0.01<", ">10<"} {
			if !strings.Contains(b.String(), label) {
				t.Errorf("no tick label %s", label)
			}
		}
		var again bytes.Buffer
		_ = good.WriteSVG(&again)
		if !bytes.Equal(b.Bytes(), again.Bytes()) {
			t.Error("output differs between two writes of the same plot")
		}
	})
	t.Run("the larger cost is drawn higher", func(t *testing.T) {
		var b bytes.Buffer
		p := Plot{Series: []Series{{Name: "a", Points: []Point{{10, 1}, {100, 100}}}}}
		if err := p.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		// Points are 10,1 → left bottom, 100,100 → right top (smaller y).
		i := strings.Index(b.String(), `points="`)
		pts := strings.Fields(strings.SplitN(b.String()[i+8:], `"`, 2)[0])
		if len(pts) != 2 {
			t.Fatalf("points %v", pts)
		}
		if pts[0] != "70,350" || pts[1] != "620,40" {
			t.Errorf("points %v, want [70,350 620,40]", pts)
		}
	})
	for _, tc := range []struct {
		name string
		p    Plot
	}{
		{name: "no points", p: Plot{Series: []Series{{Name: "a"}}}},
		{name: "zero cost", p: Plot{Series: []Series{{Name: "a", Points: []Point{{10, 0}}}}}},
		{name: "negative scale", p: Plot{Series: []Series{{Name: "a", Points: []Point{{-1, 1}}}}}},
		{name: "NaN", p: Plot{Series: []Series{{Name: "a", Points: []Point{{1, math.NaN()}}}}}},
		{name: "Inf", p: Plot{Series: []Series{{Name: "a", Points: []Point{{1, math.Inf(1)}}}}}},
	} {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.p.WriteSVG(&b); err == nil {
				t.Errorf("no error; wrote %d bytes", b.Len())
			}
		})
	}
}
