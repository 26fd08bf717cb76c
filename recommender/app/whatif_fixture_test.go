package app

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

// update rewrites the recorded fixtures and golden files of the what-if's
// tests: go test ./recommender/app -run Whatif -update
var update = flag.Bool("update", false, "rewrite testdata/whatif from the generated history")

const fixtureDir = "testdata/whatif"

// rangeAnswer is one recorded range query and Prometheus' answer to it.
type rangeAnswer struct {
	Query  string          `json:"query"`
	Start  string          `json:"start"`
	End    string          `json:"end"`
	Step   string          `json:"step"`
	Answer json.RawMessage `json:"answer"`
}

// fixtureOpts reads six hours at two minutes: enough steps for the fit
// (90 of the 60 it needs) and a fixture small enough to keep in git.
func fixtureOpts(t *testing.T, addr string) *WhatifOptions {
	o := whatifOpts(t, addr)
	o.Period, o.Step = 6*time.Hour, 2*time.Minute
	o.Fit.MinPoints = 60
	return o
}

var fixtureTargets = fixedWorkloads{
	{Namespace: "shop", Deployment: "web", Container: "app", SLOMetric: "web_request_duration_seconds", SLO: 0.25, RequestCPU: 9, RequestMemory: 9},
	{Namespace: "shop", Deployment: "idle", Container: "app", SLOMetric: "idle_request_duration_seconds", RequestCPU: 0.25, RequestMemory: 128 << 20},
}

// spoil damages a recorded answer as real histories are damaged: the web
// workload's request rate gets a NaN sample and a gap of five steps (a
// Prometheus restart), its CPU a negative sample (a broken recording rule
// across a counter reset).
func spoil(t *testing.T, query string, raw []byte) []byte {
	t.Helper()
	var ans struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		t.Fatal(err)
	}
	for k := range ans.Data.Result {
		v := ans.Data.Result[k].Values
		switch {
		case strings.Contains(query, "web_request_duration_seconds_count"):
			v[40][1] = "NaN"
			v = append(v[:100:100], v[105:]...)
		case strings.Contains(query, "container_cpu_usage_seconds_total") && strings.Contains(query, "web-") && k == 0:
			v[60][1] = "-0.3"
		}
		ans.Data.Result[k].Values = v
	}
	out, err := json.Marshal(ans)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// recordFixture asks the generating server every query of the fixture's
// run and writes the spoiled answers to testdata.
func recordFixture(t *testing.T) {
	t.Helper()
	gen := historyProm(t)
	var answers []rangeAnswer
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := http.PostForm(gen.URL+r.URL.Path, r.Form)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		body = spoil(t, r.Form.Get("query"), body)
		answers = append(answers, rangeAnswer{Query: r.Form.Get("query"), Start: r.Form.Get("start"), End: r.Form.Get("end"), Step: r.Form.Get("step"), Answer: body})
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer rec.Close()
	if err := runWhatif(context.Background(), fixtureOpts(t, rec.URL), fixtureTargets, whatifNow, io0{}, io0{}); err != nil {
		t.Fatal(err)
	}
	// One answer a line: a diff of the fixture shows which queries moved.
	var b []byte
	for i, a := range answers {
		line, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		sep := ",\n"
		if i == 0 {
			sep = "[\n"
		}
		b = append(append(b, sep...), line...)
	}
	b = append(b, "\n]"...)
	if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixtureDir, "range-queries.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixtureProm serves the recorded answers; a query it has no answer for is
// a 400, so a change in the queries fails the test rather than reading
// nothing.
func fixtureProm(t *testing.T) *httptest.Server {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "range-queries.json"))
	if err != nil {
		t.Fatal(err)
	}
	var answers []rangeAnswer
	if err := json.Unmarshal(b, &answers); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]json.RawMessage{}
	for _, a := range answers {
		byKey[a.Query+"|"+a.Start+"|"+a.End+"|"+a.Step] = a.Answer
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/api/v1/query_range" {
			http.Error(w, "range queries only", http.StatusBadRequest)
			return
		}
		a, ok := byKey[r.Form.Get("query")+"|"+r.Form.Get("start")+"|"+r.Form.Get("end")+"|"+r.Form.Get("step")]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":"no recorded answer for %q"}`, r.Form.Get("query"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(a)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWhatifOutputsFromRecordedQueries runs the what-if on recorded
// range-query answers (testdata/whatif/range-queries.json, with a NaN, a
// gap and a negative sample) and checks each output: whatif.json carries
// the history with its gaps, the plot has a line per policy and the
// history, and the manifest is the golden one and decodes strictly into
// the API types.
func TestWhatifOutputsFromRecordedQueries(t *testing.T) {
	if *update {
		recordFixture(t)
	}
	srv := fixtureProm(t)
	o := fixtureOpts(t, srv.URL)
	if dir := os.Getenv("WHATIF_KEEP"); dir != "" {
		o.Output = dir // to look at the outputs
	}
	var out bytes.Buffer
	if err := runWhatif(context.Background(), o, fixtureTargets, whatifNow, &out, io0{}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())

	t.Run("whatif.json", func(t *testing.T) {
		f, err := os.Open(filepath.Join(o.Output, whatif.JSONFile))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		res, err := whatif.ReadResult(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.History) != 2 || res.History[0].Name != "shop/web" || len(res.History[0].Rate) != 180 {
			t.Fatalf("history %d workloads", len(res.History))
		}
		var gaps int
		for _, x := range res.History[0].Rate {
			if math.IsNaN(x) {
				gaps++
			}
		}
		// The NaN sample is dropped and the five missing steps are gaps.
		if gaps != 6 {
			t.Errorf("the rate read back has %d gaps, the fixture 6", gaps)
		}
		if res.Seeds != o.Replay.Seeds || res.FitOptions != o.Fit || len(res.Policies) != len(whatif.Policies()) {
			t.Errorf("replay settings %d seeds, %+v, %v", res.Seeds, res.FitOptions, res.Policies)
		}
		// Kept for rl-agent whatif-replay: the recommender's default
		// window, and in-place resizes (--mpa-update-mode Off).
		if res.Resize != sim.ResizeInPlace || res.RateWindow != 2*time.Minute || res.SampledLatency {
			t.Errorf("replay's cluster: resize %q, rate window %s, sampled latency %v; want InPlace, 2m, off", res.Resize, res.RateWindow, res.SampledLatency)
		}
		ws, err := res.Refit()
		if err != nil {
			t.Fatal(err)
		}
		if ws[0].Fit.Refused != "" || ws[1].Fit.Refused == "" {
			t.Errorf("refits %q, %q", ws[0].Fit.Refused, ws[1].Fit.Refused)
		}
	})

	t.Run("plot", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(o.Output, whatif.PlotFile("shop/idle"))); !os.IsNotExist(err) {
			t.Errorf("a refused workload has a plot (%v)", err)
		}
		b, err := os.ReadFile(filepath.Join(o.Output, whatif.PlotFile("shop/web")))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Polylines []struct {
				Stroke string `xml:"stroke,attr"`
			} `xml:"polyline"`
			Texts []string `xml:"text"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("the plot is not XML: %v", err)
		}
		for _, want := range []string{"recorded", "actual (replayed)", "hpa", "vpa", "hpa+vpa", "fused", "Replicas (recorded; replayed: desired)", "CPU requested by all pods"} {
			found := false
			for _, s := range doc.Texts {
				found = found || s == want
			}
			if !found {
				t.Errorf("the plot lacks %q", want)
			}
		}
		// Rate: the history, broken by its NaN and its gap into three
		// lines; replicas, total and per-pod CPU: the history and five
		// policies each.
		if want := 3 + 3*(1+len(whatif.Policies())); len(doc.Polylines) != want {
			t.Errorf("%d lines, want %d", len(doc.Polylines), want)
		}
	})

	t.Run("manifest", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(o.Output, MPAFile("shop/idle"))); !os.IsNotExist(err) {
			t.Errorf("a refused workload has a manifest (%v)", err)
		}
		name := MPAFile("shop/web")
		got, err := os.ReadFile(filepath.Join(o.Output, name))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join(fixtureDir, name)
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("manifest differs from %s (rerun with -update if intended):\n%s", golden, got)
		}
		var m v1alpha1.MultidimPodAutoscaler
		if err := yaml.UnmarshalStrict(got, &m); err != nil {
			t.Fatalf("the manifest does not decode into the API types: %v", err)
		}
		spec := m.Spec
		if m.APIVersion != "autoscaling.aware.dev/v1alpha1" || m.Kind != "MultidimPodAutoscaler" || m.Name != "web" || m.Namespace != "shop" {
			t.Errorf("object %s %s %s/%s", m.APIVersion, m.Kind, m.Namespace, m.Name)
		}
		if r := spec.ScaleTargetRef; r == nil || r.Kind != "Deployment" || r.Name != "web" || r.APIVersion != "apps/v1" {
			t.Errorf("target %+v", r)
		}
		if spec.Policy == nil || spec.Policy.UpdateMode == nil || *spec.Policy.UpdateMode != v1alpha1.UpdateModeOff {
			t.Errorf("updateMode %+v, want Off by default", spec.Policy)
		}
		g := spec.Constraints.Global
		// Two replicas throughout; the fused default's replay never went
		// below one nor above the maximum checked here.
		if *g.MinReplicas < 1 || *g.MinReplicas > 2 || *g.MaxReplicas < 4 {
			t.Errorf("replicas %d..%d, want min in [1, 2] and max at least twice the recorded 2", *g.MinReplicas, *g.MaxReplicas)
		}
		c := spec.ResourcePolicy.ContainerPolicies[0]
		minCPU, maxCPU := c.MinAllowed.Cpu().AsApproximateFloat64(), c.MaxAllowed.Cpu().AsApproximateFloat64()
		minMem, maxMem := c.MinAllowed.Memory().AsApproximateFloat64(), c.MaxAllowed.Memory().AsApproximateFloat64()
		// Per-pod CPU is 0.02 × rate (10 to 20 requests/s), plus noise.
		if c.ContainerName != "app" || minCPU < 0.09 || minCPU > 0.11 || maxCPU < 0.8 || maxCPU > 0.85 {
			t.Errorf("container %q CPU %g..%g, want about 0.5×0.2 .. 2×0.41", c.ContainerName, minCPU, maxCPU)
		}
		if minMem != 150<<20 || maxMem != 302<<20 {
			t.Errorf("memory %g..%g MiB, want 150 (the least working set) .. 302 (twice the most, rounded up)", minMem/(1<<20), maxMem/(1<<20))
		}
	})
}

// TestWhatifManifestUpdateMode: --mpa-update-mode reaches the manifest,
// and an unknown mode is refused before anything is read.
func TestWhatifManifestUpdateMode(t *testing.T) {
	srv := fixtureProm(t)
	o := fixtureOpts(t, srv.URL)
	o.MPAUpdateMode = "InPlace"
	if err := runWhatif(context.Background(), o, fixtureTargets, whatifNow, io0{}, io0{}); err != nil {
		t.Fatal(err)
	}
	var m v1alpha1.MultidimPodAutoscaler
	b, err := os.ReadFile(filepath.Join(o.Output, MPAFile("shop/web")))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatal(err)
	}
	if *m.Spec.Policy.UpdateMode != v1alpha1.UpdateModeInPlace || !bytes.Contains(b, []byte("AWARE resizes the workload")) {
		t.Errorf("updateMode %s", *m.Spec.Policy.UpdateMode)
	}
	o.MPAUpdateMode = "Sometimes"
	o.PrometheusAddress = "http://127.0.0.1:9090"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--mpa-update-mode") {
		t.Errorf("err %v", err)
	}
}

// TestWhatifProgress: the bar is drawn on stderr when asked, over every
// workload's range queries and replayed runs, and not at all otherwise;
// with workloads read and replayed concurrently it still counts every
// query and run once.
func TestWhatifProgress(t *testing.T) {
	srv := fixtureProm(t)
	counts := regexp.MustCompile(`\] (\d+)/(\d+) `)
	for _, tc := range []struct {
		show        bool
		concurrency int
		want        []string
	}{
		{false, 1, nil},
		// Each workload runs ten range queries (one chunk each), and the
		// web workload's replay 5 policies × 2 seeds (idle's fit refuses):
		// 30 in all. A buffer is not a terminal, so the bar writes a line
		// per tenth of the work. One workload at a time, web's queries
		// come first.
		{true, 1, []string{"] 30/30 ", "shop/web query 4/10", "shop/idle query"}},
		// Two at a time, a line names whichever workload's query ended
		// last: either may take every line (1 run in 7 named no idle query).
		{true, 2, []string{"] 30/30 ", "/10\n"}},
	} {
		t.Run(fmt.Sprintf("show=%v,concurrency=%d", tc.show, tc.concurrency), func(t *testing.T) {
			o := fixtureOpts(t, srv.URL)
			o.showProgress = tc.show
			o.PrometheusConcurrency = tc.concurrency
			var stderr bytes.Buffer
			if err := runWhatif(context.Background(), o, fixtureTargets, whatifNow, io0{}, &stderr); err != nil {
				t.Fatal(err)
			}
			s := stderr.String()
			if !tc.show {
				if s != "" {
					t.Fatalf("stderr %q without --progress", s)
				}
				return
			}
			for _, want := range tc.want {
				if !strings.Contains(s, want) {
					t.Errorf("progress lacks %q:\n%q", want, s)
				}
			}
			// The total is learnt as workloads begin and are fitted: at
			// most both workloads' queries and runs (40), never a count
			// above its total, and 30 at the end.
			lines := counts.FindAllStringSubmatch(s, -1)
			for _, m := range lines {
				done, _ := strconv.Atoi(m[1])
				total, _ := strconv.Atoi(m[2])
				if total > 40 || done > total {
					t.Errorf("drew %s/%s:\n%q", m[1], m[2], s)
				}
			}
			if n := len(lines); n == 0 || lines[n-1][1] != "30" || lines[n-1][2] != "30" {
				t.Errorf("the bar did not end at 30/30:\n%q", s)
			}
		})
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
}
