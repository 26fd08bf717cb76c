package soak

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// hours turns (hours, value) pairs into points.
func hours(pairs ...float64) []Point {
	var out []Point
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Point{T: pairs[i] * 3600, V: pairs[i+1]})
	}
	return out
}

func TestSegments(t *testing.T) {
	pts := []Point{{0, 1}, {10, 2}, {20, 3}, {30, 4}, {40, 5}, {50, 6}, {60, 7}}
	for _, tc := range []struct {
		name   string
		cuts   []float64
		warmup float64
		want   [][]Point
	}{
		{"no restart", nil, 0, [][]Point{pts}},
		{"cut at a sample: it starts the new segment", []float64{30}, 0, [][]Point{pts[:3], pts[3:]}},
		{"cuts in any order", []float64{45, 15}, 0, [][]Point{pts[:2], pts[2:5], pts[5:]}},
		{"warm-up dropped after the start and after each cut", []float64{30}, 15, [][]Point{pts[2:3], pts[5:]}},
		{"a segment left empty by its warm-up is left out", []float64{30, 35}, 10, [][]Point{pts[1:3], pts[5:]}},
		{"a cut before the first sample", []float64{-5}, 0, [][]Point{pts}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Segments(pts, tc.cuts, tc.warmup); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Segments(cuts %v, warmup %v) = %v, want %v", tc.cuts, tc.warmup, got, tc.want)
			}
		})
	}
}

func TestRates(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Point
		want []Point
	}{
		{"steady counter", []Point{{0, 0}, {10, 50}, {20, 150}}, []Point{{10, 5}, {20, 10}}},
		{"a reset gives no rate", []Point{{0, 100}, {10, 200}, {20, 30}, {30, 130}}, []Point{{10, 10}, {30, 10}}},
		{"time that does not advance gives no rate", []Point{{0, 0}, {0, 5}, {10, 15}}, []Point{{10, 1}}},
		{"one sample, no rate", []Point{{0, 3}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rates(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Rates(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// noisy returns n points every step seconds from t0 of level + slope per
// hour, plus Gaussian noise of sd.
func noisy(r *rand.Rand, t0, step float64, n int, level, slope, sd float64) []Point {
	out := make([]Point, n)
	for i := range out {
		t := t0 + float64(i)*step
		out[i] = Point{T: t, V: level + slope*t/3600 + sd*r.NormFloat64()}
	}
	return out
}

func TestFitSlope(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const tol = 1e-4
	for _, tc := range []struct {
		name         string
		segs         [][]Point
		slope        float64 // the fitted slope per hour
		lo, hi       float64 // its interval; NaN: not checked
		n, segments  int
		includesZero bool
	}{
		{
			// y = 1,3,2,5,4 at 0..4 h: slope 0.8, SSE 3.6 on 3 degrees
			// of freedom, SE √0.12, t(0.975, 3) = 3.182446.
			name: "textbook line", segs: [][]Point{hours(0, 1, 1, 3, 2, 2, 3, 5, 4, 4)},
			slope: 0.8, lo: 0.8 - 3.182446*math.Sqrt(0.12), hi: 0.8 + 3.182446*math.Sqrt(0.12), n: 5, segments: 1, includesZero: true,
		},
		{
			name: "exact line: a zero-width interval", segs: [][]Point{hours(0, 10, 1, 12, 2, 14)},
			slope: 2, lo: 2, hi: 2, n: 3, segments: 1,
		},
		{
			// Each run starts lower (a restarted process) and grows 1 per
			// hour; pooled without intercepts the drops would hide the
			// growth.
			name:  "one slope across restarts, an intercept each",
			segs:  [][]Point{hours(0, 100, 1, 101, 2, 102), hours(3, 50, 4, 51, 5, 52), hours(6, 10, 7, 11, 8, 12)},
			slope: 1, lo: 1, hi: 1, n: 9, segments: 3,
		},
		{
			name: "segments of one point are left out", segs: [][]Point{hours(0, 5), hours(1, 0, 2, 2, 3, 4)},
			slope: 2, lo: 2, hi: 2, n: 3, segments: 1,
		},
		{
			name: "flat noise: the interval includes 0", segs: [][]Point{noisy(r, 0, 30, 240, 100, 0, 3)},
			slope: math.NaN(), lo: math.NaN(), hi: math.NaN(), n: 240, segments: 1, includesZero: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := FitSlope(tc.segs, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			if f.N != tc.n || f.Segments != tc.segments || f.DF != tc.n-tc.segments-1 {
				t.Errorf("N %d, segments %d, DF %d; want %d, %d, %d", f.N, f.Segments, f.DF, tc.n, tc.segments, tc.n-tc.segments-1)
			}
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"slope", f.Slope, tc.slope}, {"lo", f.Lo, tc.lo}, {"hi", f.Hi, tc.hi}} {
				if !math.IsNaN(c.want) && math.Abs(c.got-c.want) > tol {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
			if got := f.Lo <= 0 && f.Hi >= 0; got != tc.includesZero {
				t.Errorf("interval [%v, %v] includes 0: %v, want %v", f.Lo, f.Hi, got, tc.includesZero)
			}
		})
	}
}

func TestFitSlopeErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		segs  [][]Point
		level float64
		is    error
	}{
		{"no samples", nil, 0.95, ErrTooFew},
		{"two points leave no degree of freedom", [][]Point{hours(0, 1, 1, 2)}, 0.95, ErrTooFew},
		{"a one-point segment adds no degree of freedom", [][]Point{hours(0, 1), hours(2, 1, 3, 2)}, 0.95, ErrTooFew},
		{"all at one time", [][]Point{hours(1, 1, 1, 2, 1, 3)}, 0.95, ErrTooFew},
		{"level out of range", [][]Point{hours(0, 1, 1, 2, 2, 3)}, 1, nil},
		{"not finite", [][]Point{hours(0, 1, 1, math.NaN(), 2, 3)}, 0.95, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FitSlope(tc.segs, tc.level)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %v", err, tc.is)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	tol := Tolerance{Relative: 0.05, Absolute: 2}
	for _, tc := range []struct {
		name    string
		fit     Fit
		outcome Outcome
		pass    bool
	}{
		{"interval includes 0", Fit{Mean: 100, Slope: 1, Lo: -1, Hi: 3}, Flat, true},
		{"interval includes 0 and reaches past the tolerance: flat, wide", Fit{Mean: 100, Slope: 2, Lo: -3, Hi: 7}, Flat, true},
		{"falls", Fit{Mean: 100, Slope: -4, Lo: -6, Hi: -2}, Falls, true},
		// 5% of 100 is 5 per hour.
		{"grows, but within 5% of the level per hour", Fit{Mean: 100, Slope: 3, Lo: 2, Hi: 4.9}, Bounded, true},
		{"a small level is allowed the absolute floor", Fit{Mean: 10, Slope: 1.5, Lo: 1, Hi: 2}, Bounded, true},
		{"a leak: the interval above 0 and past the tolerance", Fit{Mean: 100, Slope: 8, Lo: 6, Hi: 10}, Grows, false},
		{"a leak whose interval only reaches past the tolerance still fails", Fit{Mean: 100, Slope: 3, Lo: 0.5, Hi: 6}, Grows, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.fit, tol)
			if v.Outcome != tc.outcome || v.Pass != tc.pass {
				t.Errorf("Judge(%+v) = %+v, want %s pass=%v", tc.fit, v, tc.outcome, tc.pass)
			}
			if wide := strings.HasSuffix(tc.name, "wide"); v.Wide != wide {
				t.Errorf("Judge(%+v).Wide = %v, want %v", tc.fit, v.Wide, wide)
			}
		})
	}
}

// TestReportJudge runs the whole judgement on sampled series: a steady
// process restarted twice passes; memory that grows across the runs
// fails, and so does an API rate that climbs; growth within every run
// that each restart resets passes (the case says why).
func TestReportJudge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	restarts := []Restart{{At: 2400, Component: "recommender"}, {At: 4800, Component: "rl-agent"}}
	// steady samples every 30s for 2 h around level, each run starting
	// after a warm-up bump that the warm-up window drops.
	series := func(level, slopePerHour, sd float64) []Point {
		var out []Point
		for ts := 0.0; ts < 7200; ts += 30 {
			start := 0.0
			for _, rs := range restarts {
				if ts >= rs.At {
					start = rs.At
				}
			}
			v := level + slopePerHour*(ts-start)/3600 + sd*r.NormFloat64()
			if ts-start < 300 {
				v += level // the warm-up: caches filling
			}
			out = append(out, Point{T: ts, V: v})
		}
		return out
	}
	// grown adds growth spread evenly over the 2 hours: a leak no
	// restart resets.
	grown := func(pts []Point, growth float64) []Point {
		for i := range pts {
			pts[i].V += growth * pts[i].T / 7200
		}
		return pts
	}
	counter := func(rate, growthPerHour float64) []Point {
		var out []Point
		total := 0.0
		for ts := 0.0; ts < 7200; ts += 30 {
			for _, rs := range restarts {
				if ts == rs.At {
					total = 0 // the API server's counters restart with it
				}
			}
			total += (rate + growthPerHour*ts/3600) * 30 * (1 + 0.05*r.NormFloat64())
			out = append(out, Point{T: ts, V: total})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		samples map[string]map[string][]Point
		checks  []Check
		pass    bool
		failed  []string // component/metric of the failed series
		// withinGrows: component/metric whose within-segment slope
		// lies above its tolerance.
		withinGrows []string
	}{
		{
			name: "steady, restarted twice",
			samples: map[string]map[string][]Point{
				"recommender": {MetricRSS: series(80<<20, 0, 1<<20), MetricGoroutines: series(150, 0, 3), MetricAPIRequests: counter(5, 0)},
				"rl-agent":    {MetricRSS: series(60<<20, 0, 1<<20), MetricFDs: series(20, 0, 0.5)},
			},
			pass: true,
		},
		{
			// This failed while the within-segment slope judged. A leak
			// that every restart resets in full leaves every segment's
			// settled level where the last one's was, so the settled
			// levels pass it; the within-segment slope, which the report
			// shows, still reads it. In the soak a restart resets one
			// component, so a real leak raises the levels of the segments
			// between its own restarts (TestJudgeSoaks).
			name: "memory that grows within every run, each restart resetting it, passes: the settled levels do not rise",
			samples: map[string]map[string][]Point{
				"recommender": {MetricRSS: series(80<<20, 20<<20, 1<<20), MetricGoroutines: series(150, 0, 3)},
			},
			pass:        true,
			withinGrows: []string{"recommender/" + MetricRSS},
		},
		{
			name: "memory that grows across the runs fails",
			samples: map[string]map[string][]Point{
				"recommender": {MetricRSS: grown(series(80<<20, 0, 1<<20), 20<<20), MetricGoroutines: series(150, 0, 3)},
			},
			failed:      []string{"recommender/" + MetricRSS},
			withinGrows: []string{"recommender/" + MetricRSS},
		},
		{
			name: "an API request rate that climbs fails",
			samples: map[string]map[string][]Point{
				"updater": {MetricAPIRequests: counter(5, 3)},
			},
			failed:      []string{"updater/" + MetricAPIRate},
			withinGrows: []string{"updater/" + MetricAPIRate},
		},
		{
			name: "a failed check fails a steady run",
			samples: map[string]map[string][]Point{
				"updater": {MetricGoroutines: series(100, 0, 2)},
			},
			checks: []Check{{Name: "no panics", Pass: false, Detail: "panic: boom"}},
		},
		{
			name: "a series too short for an interval fails",
			samples: map[string]map[string][]Point{
				"updater": {MetricGoroutines: {{T: 600, V: 1}, {T: 630, V: 2}}},
			},
			failed: []string{"updater/" + MetricGoroutines},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Report{Title: "test", Level: 0.95, Restarts: restarts, Checks: tc.checks}
			rep.Judge(tc.samples, DefaultJudgement(600))
			if rep.Pass != tc.pass {
				t.Errorf("Pass = %v, want %v; results %+v", rep.Pass, tc.pass, rep.Results)
			}
			var failed []string
			for _, res := range rep.Results {
				if !res.Pass() {
					failed = append(failed, res.Component+"/"+res.Metric)
				}
			}
			if !reflect.DeepEqual(failed, tc.failed) {
				t.Errorf("failed series %v, want %v; results %+v", failed, tc.failed, rep.Results)
			}
			var within []string
			for _, res := range rep.Results {
				if w := res.Within; w != nil && w.Lo > 0 && w.Hi > res.Verdict.Allowed {
					within = append(within, res.Component+"/"+res.Metric)
				}
			}
			if !reflect.DeepEqual(within, tc.withinGrows) {
				t.Errorf("within-segment slopes growing %v, want %v", within, tc.withinGrows)
			}
		})
	}
}

// TestReportLevels: the settled level of every segment, for the judged
// series and the shown ones (which a rise does not fail), in the report's
// table; a segment without enough settled samples has none, and a series
// neither judged nor shown is left out.
func TestReportLevels(t *testing.T) {
	restarts := []Restart{{At: 1200, Component: "recommender"}, {At: 2400, Component: "rl-agent"}}
	// step is a series sampled every 30 s, at levels[i] in segment i,
	// up to end.
	step := func(end float64, levels ...float64) []Point {
		var out []Point
		for ts := 0.0; ts < end; ts += 30 {
			out = append(out, Point{T: ts, V: levels[min(int(ts/1200), len(levels)-1)]})
		}
		return out
	}
	samples := map[string]map[string][]Point{
		"updater": {
			MetricRSS: step(3600, 90<<20, 100<<20, 100<<20),
			// The heap's last segment holds two samples: too few.
			MetricHeapInuse: step(2460, 20<<20, 30<<20, 40<<20),
			"not_listed":    step(3600, 1, 2, 3),
		},
	}
	rep := Report{Title: "levels", Level: 0.95, Restarts: restarts}
	rep.Judge(samples, DefaultJudgement(300))
	want := []Levels{
		{Component: "updater", Metric: MetricHeapInuse, Segments: []Point{{0, 20 << 20}, {1200, 30 << 20}}},
		{Component: "updater", Metric: MetricRSS, Judged: true, Segments: []Point{{0, 90 << 20}, {1200, 100 << 20}, {2400, 100 << 20}}},
	}
	if !reflect.DeepEqual(rep.Levels, want) {
		t.Errorf("Levels = %+v, want %+v", rep.Levels, want)
	}
	if len(rep.Results) != 1 || rep.Results[0].Metric != MetricRSS {
		t.Errorf("judged %+v, want the resident set alone", rep.Results)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"| Component | Series | 0 | 20 | 40 |",
		"| updater | heap_inuse_bytes (MiB), shown | 20.0 | 30.0 | — |",
		"| updater | rss_bytes (MiB) | 90.0 | 100 | 100 |",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, b.String())
		}
	}
	if strings.Contains(b.String(), "not_listed") {
		t.Errorf("a series neither judged nor shown is in the report:\n%s", b.String())
	}
}

func TestPanics(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      []string
	}{
		{"clean", "I1129 12:00:00.000 1 loop.go:10] \"Loop done\" autoscalers=100\nE1129 request failed: the panic button\n", nil},
		{"a crash", "I1129 loop\npanic: runtime error: index out of range [3] with length 3\n\ngoroutine 57 [running]:\nmain.f()\n",
			[]string{"panic: runtime error: index out of range [3] with length 3", "goroutine 57 [running]:"}},
		{"a fatal runtime error", "fatal error: concurrent map writes\n", []string{"fatal error: concurrent map writes"}},
		{"a recovered panic", "E1129 12:00:00 1 runtime.go:79] Observed a panic: boom\n", []string{"E1129 12:00:00 1 runtime.go:79] Observed a panic: boom"}},
		{"a blocked goroutine of a dump is not a header", "goroutine 9 [select]:\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Panics(tc.log); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Panics = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWriteMarkdown(t *testing.T) {
	rep := Report{
		Title: "Soak", Level: 0.95,
		Judgement: Judgement{Settle: DefaultSettle, Warmup: 300},
		Figures:   []Figure{{"set-up", "3m10s"}},
		Restarts:  []Restart{{At: 240, Component: "kube-apiserver", Took: 7}},
		Results: []Result{
			{Component: "recommender", Metric: MetricRSS, Method: MethodSettled, Fit: Fit{N: 6, Segments: 1, Mean: 100 << 20, Slope: 1 << 20, Lo: -(1 << 20), Hi: 3 << 20},
				Verdict: Verdict{Outcome: Flat, Pass: true, Allowed: 5 << 20},
				Within:  &Fit{N: 178, Segments: 6, Slope: 7 << 20, Lo: 2 << 20, Hi: 12 << 20}},
			{Component: "rl-agent", Metric: MetricRSS, Method: MethodSettled, Fit: Fit{N: 6, Segments: 1, Mean: 100 << 20, Slope: 1 << 20, Lo: -(2 << 20), Hi: 8 << 20},
				Verdict: Verdict{Outcome: Flat, Pass: true, Allowed: 5 << 20, Wide: true}},
			{Component: "rl-agent", Metric: MetricStateDir, Method: MethodTroughs, Compactions: 5, Fit: Fit{N: 5, Segments: 1, Mean: 10 << 20, Slope: 3 << 20, Lo: 2 << 20, Hi: 4 << 20},
				Verdict: Verdict{Outcome: Grows, Allowed: 1 << 20}},
			{Component: "updater", Metric: MetricFDs, Method: MethodSettled, Fit: Fit{N: 2, Segments: 1}, Err: "too few samples"},
		},
		Checks: []Check{{Name: "no panics", Pass: true, Detail: "4 logs | none"}},
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"## Soak: FAIL", "| set-up | 3m10s |", "4.0 kube-apiserver 7s",
		"(the mean of each segment's last 33%)", "after a warm-up of 5 min each",
		"| recommender | rss_bytes (MiB) | 6 segments | 100 | +1.00 [-1.00, +3.00] | 5.00 | flat | +7.00 [+2.00, +12.0] |",
		"| rl-agent | rss_bytes (MiB) | 6 segments | 100 | +1.00 [-2.00, +8.00] | 5.00 | flat (wide) | — |",
		"| rl-agent | state_dir_bytes (MiB) | 5 troughs | 10.0 | +3.00 [+2.00, +4.00] | 1.00 | FAIL: grows | — |",
		"| updater | open_fds | 2 segments | 0 | — | — | FAIL: too few samples | — |",
		`| no panics | pass | 4 logs \| none |`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// A state directory judged on its settled levels says how many
	// compactions it had: too few for troughs.
	rep.Results = []Result{{Component: "rl-agent", Metric: MetricStateDir, Method: MethodSettled, Compactions: 2, Fit: Fit{N: 6, Mean: 1 << 20}, Verdict: Verdict{Outcome: Flat, Pass: true, Allowed: 1 << 20}}}
	b.Reset()
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	if want := "| rl-agent | state_dir_bytes (MiB) | 6 segments (2 compactions) |"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	if err := WriteMarkdown(io.Discard, Report{}); err == nil {
		t.Error("a report without a confidence level was written")
	}
}

func TestWriteSVG(t *testing.T) {
	restarts := []Restart{{At: 120, Component: "kube-apiserver"}, {At: 240, Component: "rl-agent"}}
	samples := map[string]map[string][]Point{
		"rl-agent":    {MetricRSS: {{0, 1 << 20}, {60, 2 << 20}, {180, 2 << 20}, {300, 3 << 20}}, MetricStateDir: {{0, 100}, {300, 200}}, MetricHeapInuse: {{0, 1 << 20}}},
		"recommender": {MetricAPIRequests: {{0, 0}, {60, 60}, {130, 10}, {190, 70}}},
	}
	panels := Plot(samples, restarts)
	var titles []string
	for _, p := range panels {
		titles = append(titles, p.Title)
	}
	if want := []string{"Resident memory (MiB)", "Heap in use (MiB)", "API requests per second", "Agent state directory (MiB)"}; !reflect.DeepEqual(titles, want) {
		t.Fatalf("panels %q, want %q", titles, want)
	}
	// The rate is taken within the segments only: 1/s twice, none across
	// the API server's restart at 120s.
	if got := panels[2].Lines[0].Points; !reflect.DeepEqual(got, []Point{{60, 1}, {190, 1}}) {
		t.Errorf("API rate %v", got)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, "Soak <smoke>", panels, restarts, 300); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	polylines, texts := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "polyline":
				polylines++
			case "text":
				texts++
			}
		}
	}
	// RSS broken at both restarts (3 runs), the heap's one sample one,
	// the rate in 2 pieces, the state directory in 2 (its samples
	// straddle both restarts, one each side of them: 0 and 300).
	if polylines != 3+1+2+2 {
		t.Errorf("%d polylines, want 8", polylines)
	}
	if texts == 0 {
		t.Error("no labels")
	}
	if err := WriteSVG(io.Discard, "x", nil, nil, 1); err == nil {
		t.Error("no panels: no error")
	}
	if err := WriteSVG(io.Discard, "x", panels, nil, 0); err == nil {
		t.Error("zero span: no error")
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0, 1}, {0.3, 0.5}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {130, 200}} {
		t.Run("", func(t *testing.T) {
			if got := niceCeil(tc.in); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
