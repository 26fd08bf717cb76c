package soak

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// legacyRecord is report.json as the harness wrote it before the settled
// levels judged: the within-segment fit as the result's fit, no method,
// no judgement, no span. Rejudge must read it.
type legacyRecord struct {
	Report struct {
		Title    string    `json:"title"`
		Figures  []Figure  `json:"figures"`
		Restarts []Restart `json:"restarts"`
		Results  []struct {
			Component string  `json:"component"`
			Metric    string  `json:"metric"`
			Fit       Fit     `json:"fit"`
			Verdict   Verdict `json:"verdict"`
		} `json:"results"`
		Checks []Check `json:"checks"`
		Level  float64 `json:"level"`
		Pass   bool    `json:"pass"`
	} `json:"report"`
	Warmup   float64                       `json:"warmupSeconds"`
	Samples  map[string]map[string][]Point `json:"samples"`
	Finished time.Time                     `json:"finished"`
}

// TestRejudge writes a recorded soak's report.json from synthetic
// samples, judges it again as cmd/soakjudge does, and checks the new
// verdicts, that the files it writes read back to the same judgement,
// and that judging those again changes nothing.
func TestRejudge(t *testing.T) {
	all := func(Restart) bool { return true }
	plateau := func(r *rand.Rand) []Point {
		return soakSeries(r, 0.5*mib, func(t float64) float64 { return ramp(sinceRestart(t, 0, all), 108*mib, 122*mib, 1500) })
	}
	leak := func(r *rand.Rand) []Point {
		return soakSeries(r, 0.5*mib, func(t float64) float64 { return 60*mib + 5*mib*t/3600 })
	}
	for _, tc := range []struct {
		name    string
		samples func(r *rand.Rand) map[string]map[string][]Point
		legacy  bool
		pass    bool
		failed  []string
	}{
		{
			name: "a recorded soak the within-segment slope failed, its memory climbing to a plateau after each restart, passes",
			samples: func(r *rand.Rand) map[string]map[string][]Point {
				return map[string]map[string][]Point{"recommender": {MetricRSS: plateau(r)}, "updater": {MetricRSS: plateau(r)}}
			},
			legacy: true, pass: true,
		},
		{
			name: "a recorded soak with a leak fails",
			samples: func(r *rand.Rand) map[string]map[string][]Point {
				return map[string]map[string][]Point{"recommender": {MetricRSS: plateau(r)}, "updater": {MetricRSS: leak(r)}}
			},
			legacy: true, failed: []string{"updater/" + MetricRSS},
		},
		{
			name: "a record in today's format",
			samples: func(r *rand.Rand) map[string]map[string][]Point {
				return map[string]map[string][]Point{"recommender": {MetricRSS: plateau(r)}}
			},
			pass: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			samples := tc.samples(rand.New(rand.NewPCG(36, 2)))
			var in bytes.Buffer
			if tc.legacy {
				var old legacyRecord
				old.Report.Title, old.Report.Level, old.Report.Restarts = "Soak of record", 0.95, recordRestarts
				old.Report.Checks = []Check{{Name: "no panics", Pass: true, Detail: "none"}}
				old.Report.Results = append(old.Report.Results, struct {
					Component string  `json:"component"`
					Metric    string  `json:"metric"`
					Fit       Fit     `json:"fit"`
					Verdict   Verdict `json:"verdict"`
				}{"recommender", MetricRSS, Fit{N: 178, Segments: 6, DF: 171, Slope: 7 * mib, Lo: 2 * mib, Hi: 12 * mib}, Verdict{Outcome: Grows, Allowed: 6 * mib}})
				old.Warmup, old.Samples = 300, samples
				if err := json.NewEncoder(&in).Encode(old); err != nil {
					t.Fatal(err)
				}
			} else {
				rec := Record{Report: Report{Title: "Soak of record", Level: 0.95, Restarts: recordRestarts,
					Checks: []Check{{Name: "no panics", Pass: true, Detail: "none"}}}, Warmup: 300, SpanSeconds: 7200, Samples: samples}
				rec.Report.Judge(samples, DefaultJudgement(300))
				if err := rec.Write(Outputs{Markdown: new(bytes.Buffer), JSON: &in, SVG: new(bytes.Buffer)}); err != nil {
					t.Fatal(err)
				}
			}

			var md, js, svg bytes.Buffer
			rep, err := Rejudge(bytes.NewReader(in.Bytes()), Outputs{Markdown: &md, JSON: &js, SVG: &svg}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Pass != tc.pass {
				t.Errorf("Pass = %v, want %v; results %+v", rep.Pass, tc.pass, rep.Results)
			}
			var failed []string
			for _, res := range rep.Results {
				if res.Method != MethodSettled {
					t.Errorf("%s/%s judged on %q, want %q", res.Component, res.Metric, res.Method, MethodSettled)
				}
				if !res.Pass() {
					failed = append(failed, res.Component+"/"+res.Metric)
				}
			}
			if !reflect.DeepEqual(failed, tc.failed) {
				t.Errorf("failed %v, want %v", failed, tc.failed)
			}
			if want := (Judgement{Settle: DefaultSettle, Warmup: 300, Tolerances: DefaultTolerances}); !reflect.DeepEqual(rep.Judgement, want) {
				t.Errorf("judgement %+v, want %+v", rep.Judgement, want)
			}
			if len(rep.Checks) != 1 || rep.Title != "Soak of record" || len(rep.Restarts) != len(recordRestarts) {
				t.Errorf("title, restarts or checks not kept: %+v", rep)
			}
			if !strings.Contains(md.String(), "## Soak of record: ") || !strings.HasPrefix(svg.String(), "<svg") {
				t.Errorf("report.md or soak.svg not written:\n%s\n%.200s", md.String(), svg.String())
			}

			back, err := ReadRecord(bytes.NewReader(js.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Report, rep) {
				t.Errorf("report.json reads back as %+v, want %+v", back.Report, rep)
			}
			if wantSpan := map[bool]float64{true: 7170, false: 7200}[tc.legacy]; back.Span() != wantSpan {
				t.Errorf("span %g, want %g (the last sample's time in a legacy record)", back.Span(), wantSpan)
			}
			var md2, js2, svg2 bytes.Buffer
			if _, err := Rejudge(bytes.NewReader(js.Bytes()), Outputs{Markdown: &md2, JSON: &js2, SVG: &svg2}, 0, 0); err != nil {
				t.Fatal(err)
			}
			if md2.String() != md.String() || js2.String() != js.String() || svg2.String() != svg.String() {
				t.Error("judging the re-judged record again changed its files")
			}
		})
	}
}

func TestRejudgeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		settle   float64
	}{
		{"not JSON", "soak", 0},
		{"no samples", `{"report": {"level": 0.95}}`, 0},
		{"no confidence level", `{"report": {}, "samples": {"updater": {"rss_bytes": [{"t": 0, "v": 1}]}}}`, 0},
		{"a settled share past 1", `{"report": {"level": 0.95}, "samples": {"updater": {"rss_bytes": [{"t": 0, "v": 1}]}}}`, 1.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if _, err := Rejudge(strings.NewReader(tc.in), Outputs{Markdown: &b, JSON: &b, SVG: &b}, tc.settle, 0); err == nil {
				t.Error("no error")
			}
			if b.Len() != 0 {
				t.Errorf("wrote %q", b.String())
			}
		})
	}
}
