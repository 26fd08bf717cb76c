package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	whatifCPU  = `sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{pod=~"web-.+", namespace="shop", container!="", container!="POD"}[2m]))`
	whatifMem  = `max by (namespace, pod, container) (max_over_time(container_memory_working_set_bytes{pod=~"web-.+", namespace="shop", container!="", container!="POD"}[2m]))`
	whatifRate = `sum(rate(http_request_duration_seconds_count{namespace="shop"}[2m]))`
	whatifP95  = `histogram_quantile(0.95, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="shop"}[2m])))`
	whatifReq  = `sum by (pod) (kube_pod_container_resource_requests{namespace="shop", pod=~"web-.+", resource="cpu"})`
	whatifReqM = `sum by (pod) (kube_pod_container_resource_requests{namespace="shop", pod=~"web-.+", resource="memory"})`
	whatifLim  = `sum by (pod) (kube_pod_container_resource_limits{namespace="shop", pod=~"web-.+", resource="cpu"})`
	whatifReps = `sum(kube_deployment_status_replicas{namespace="shop", deployment="web"})`
	whatifUp   = `max by (pod) (kube_pod_status_ready_time{namespace="shop", pod=~"web-.+"}) - on (pod) max by (pod) (kube_pod_start_time{namespace="shop", pod=~"web-.+"})`
)

func whatifQuery(start time.Time, steps int) WorkloadQuery {
	return WorkloadQuery{Namespace: "shop", PodRegex: "web-.+", Deployment: "web", SLOMetric: "http_request_duration_seconds",
		Start: start, Steps: steps, Step: time.Minute}
}

func nanAt(t *testing.T, name string, v []float64, i int) {
	t.Helper()
	if !math.IsNaN(v[i]) {
		t.Errorf("%s[%d] = %g, want a gap (NaN)", name, i, v[i])
	}
}

func TestWorkloadHistory(t *testing.T) {
	start := now.Add(-4 * time.Minute)
	m := time.Minute
	full := func(f *fakeProm) {
		// Step 2 of the rate is a gap; step 3 went negative through a
		// broken recording rule over a counter reset: dropped.
		f.set(whatifRate, matrix(series(``, start, m, "10", "20")+`,`+series(``, start.Add(3*m), m, "-5", "40")))
		f.set(whatifP95, matrix(series(``, start, m, "0.1", "0.2", "NaN", "0.2", "0.3")))
		// Two pods, two containers each: CPU per pod sums the containers.
		f.set(whatifCPU, matrix(
			series(`"namespace":"shop","pod":"web-1","container":"app"`, start, m, "0.2", "0.4", "0.4", "0.4", "0.4"),
			series(`"namespace":"shop","pod":"web-1","container":"proxy"`, start, m, "0.1", "0.1", "0.1", "0.1", "0.1"),
			series(`"namespace":"shop","pod":"web-2","container":"app"`, start.Add(2*m), m, "0.6", "NaN", "+Inf"),
		))
		f.set(whatifMem, matrix(
			series(`"namespace":"shop","pod":"web-1","container":"app"`, start, m, "100", "100", "100", "100", "100"),
			series(`"namespace":"shop","pod":"web-2","container":"app"`, start, m, "300", "300", "300", "300", "300"),
		))
		f.set(whatifReq, matrix(series(`"pod":"web-1"`, start, m, "0.5", "0.5", "0.5", "0.5", "0.5"), series(`"pod":"web-2"`, start, m, "0.5", "0.5", "1.5", "1.5", "1.5")))
		f.set(whatifReqM, matrix(series(`"pod":"web-1"`, start, m, "256", "256", "256", "256", "256")))
		f.set(whatifLim, matrix(series(`"pod":"web-1"`, start, m, "1", "1", "1", "1", "1")))
		f.set(whatifReps, matrix(series(``, start, m, "1", "1", "2", "2", "2")))
		// web-2 became Ready 12 s after it started; web-1 flapped, and
		// its last value counts.
		f.set(whatifUp, matrix(series(`"pod":"web-1"`, start, m, "20", "20", "45"), series(`"pod":"web-2"`, start.Add(2*m), m, "12", "12", "12")))
	}
	t.Run("every series", func(t *testing.T) {
		f := newFakeProm(t)
		full(f)
		var progress []string
		q := whatifQuery(start, 5)
		q.Progress = func(done, total int) { progress = append(progress, fmt.Sprintf("%d/%d", done, total)) }
		h, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if h.Rate[0] != 10 || h.Rate[1] != 20 || h.Rate[4] != 40 {
			t.Errorf("rate %v", h.Rate)
		}
		nanAt(t, "rate", h.Rate, 2)
		nanAt(t, "rate", h.Rate, 3)
		nanAt(t, "latency", h.Latency, 2)
		if h.Latency[4] != 0.3 {
			t.Errorf("latency %v", h.Latency)
		}
		if math.Abs(h.CPU[0]-0.3) > 1e-9 || math.Abs(h.CPU[2]-(0.5+0.6)/2) > 1e-9 || math.Abs(h.CPU[3]-0.5) > 1e-9 {
			t.Errorf("cpu per pod %v", h.CPU)
		}
		if h.Memory[0] != 200 || h.RequestCPU[2] != 1 || h.RequestMemory[0] != 256 || h.LimitCPU[0] != 1 {
			t.Errorf("memory %v requests %v %v limits %v", h.Memory, h.RequestCPU, h.RequestMemory, h.LimitCPU)
		}
		nanAt(t, "limitMemory", h.LimitMemory, 0)
		if h.Replicas[0] != 1 || h.Replicas[4] != 2 || h.Sources["replicas"] != "kube-state-metrics" || h.Sources["limitMemory"] != "none" {
			t.Errorf("replicas %v sources %v", h.Replicas, h.Sources)
		}
		if want := (Drops{DropNaN: 2, DropNegative: 1, DropInfinite: 1}); !mapsEqual(h.Dropped, want) {
			t.Errorf("dropped %v, want %v", h.Dropped, want)
		}
		if len(h.StartupDelays) != 2 || h.StartupDelays[0] != 12 || h.StartupDelays[1] != 45 || h.Sources["startup"] != "kube-state-metrics" {
			t.Errorf("start-up delays %v", h.StartupDelays)
		}
		if len(progress) != 10 || progress[9] != "10/10" {
			t.Errorf("progress %v", progress)
		}
	})
	t.Run("requests in flight", func(t *testing.T) {
		f := newFakeProm(t)
		full(f)
		// The template as the what-if's --in-flight-query takes it,
		// rendered with the workload's namespace and pods.
		want := `sum by (pod) (app_requests_in_flight{namespace="shop", pod=~"web-.+"})`
		f.set(want, matrix(series(`"pod":"web-1"`, start, m, "2", "4", "NaN", "4", "6"), series(`"pod":"web-2"`, start.Add(2*m), m, "8", "10", "12")))
		q := whatifQuery(start, 5)
		q.InFlightQuery = `sum by (pod) (app_requests_in_flight{namespace="{{.Namespace}}", pod=~"{{.PodRegex}}"})`
		h, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if h.Sources["inFlight"] != want {
			t.Errorf("in-flight source %q, want %q", h.Sources["inFlight"], want)
		}
		// Per pod: the mean over the pods with a sample at the step.
		for i, w := range []float64{2, 4, 8, 7, 9} {
			if h.InFlight[i] != w {
				t.Errorf("in flight per pod %v, want %g at step %d", h.InFlight, w, i)
			}
		}
		q.InFlightQuery = `sum({{.Nope}})`
		if _, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), q); err == nil || !strings.Contains(err.Error(), "in-flight query template") {
			t.Errorf("a template with an unknown field: %v, want an in-flight query template error", err)
		}
	})
	t.Run("no in-flight query", func(t *testing.T) {
		f := newFakeProm(t)
		full(f)
		h, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), whatifQuery(start, 5))
		if err != nil {
			t.Fatal(err)
		}
		if h.InFlight != nil || h.Sources["inFlight"] != "" {
			t.Errorf("in flight %v from %q without the query", h.InFlight, h.Sources["inFlight"])
		}
	})
	t.Run("no kube-state-metrics", func(t *testing.T) {
		f := newFakeProm(t)
		full(f)
		for _, q := range []string{whatifReq, whatifReqM, whatifLim, whatifReps, whatifUp} {
			f.set(q, matrix())
		}
		h, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), whatifQuery(start, 5))
		if err != nil {
			t.Fatal(err)
		}
		if h.Sources["replicas"] != "pod count" || h.Sources["requestCPU"] != "none" || h.Sources["startup"] != "none" || h.StartupDelays != nil {
			t.Errorf("sources %v", h.Sources)
		}
		// web-2's working set is there from step 0, its CPU rate from
		// step 2 and dropped at steps 3 and 4: it lived at every step.
		for i, r := range h.Replicas {
			if r != 2 {
				t.Errorf("replicas[%d] = %g from the pods cAdvisor saw, want 2 (%v)", i, r, h.Replicas)
			}
		}
		nanAt(t, "requestCPU", h.RequestCPU, 0)
	})
	t.Run("the same to the bit however often read", func(t *testing.T) {
		// Eight pods whose CPU sums differ in the last bit with the order
		// of the terms (0.1 + 0.2 + 0.3 is not 0.3 + 0.2 + 0.1): a mean
		// summed in a map's order differs between reads.
		f := newFakeProm(t)
		full(f)
		var pods []string
		for k, v := range []string{"0.1", "0.2", "0.3", "0.7", "1e-17", "0.15", "3.3", "0.01"} {
			pods = append(pods, series(fmt.Sprintf(`"namespace":"shop","pod":"web-%d","container":"app"`, k), start, m, v, v, v, v, v))
		}
		f.set(whatifCPU, matrix(pods...))
		var first []float64
		for read := range 30 {
			h, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), whatifQuery(start, 5))
			if err != nil {
				t.Fatal(err)
			}
			if read == 0 {
				first = h.CPU
				continue
			}
			for i := range first {
				if math.Float64bits(h.CPU[i]) != math.Float64bits(first[i]) {
					t.Fatalf("read %d: cpu[%d] = %v, first read %v", read, i, h.CPU[i], first[i])
				}
			}
		}
	})
	t.Run("rate query", func(t *testing.T) {
		f := newFakeProm(t)
		f.set(`sum(rate(nginx_requests_total{ns="shop"}[5m]))`, matrix(series(``, start, m, "7")))
		q := whatifQuery(start, 5)
		q.SLOMetric, q.RateQuery = "", `sum(rate(nginx_requests_total{ns="shop"}[5m]))`
		h, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if h.Rate[0] != 7 || h.Latency != nil || h.Sources["latency"] != "none" {
			t.Errorf("rate %v latency %v", h.Rate, h.Latency)
		}
	})
}

// TestWorkloadHistoryChunks: a period longer than Prometheus' 11,000
// points per series is read in chunks that tile the grid without overlap.
func TestWorkloadHistoryChunks(t *testing.T) {
	f := newFakeProm(t)
	start := now.Add(-30 * 24 * time.Hour).Truncate(time.Minute)
	steps := 25000
	_, err := newProm(t, f.URL, Queries{}).WorkloadHistory(context.Background(), whatifQuery(start, steps))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	type span struct{ from, to int64 }
	byQuery := map[string][]span{}
	for _, r := range f.ranges {
		from, _ := strconv.ParseFloat(r.Get("start"), 64)
		to, _ := strconv.ParseFloat(r.Get("end"), 64)
		if n := int((to-from)/60) + 1; n > MaxHistoryPoints {
			t.Errorf("%s asks %d points", r.Get("query"), n)
		}
		byQuery[r.Get("query")] = append(byQuery[r.Get("query")], span{int64(from), int64(to)})
	}
	if len(byQuery) != 10 {
		t.Errorf("%d queries, want 10", len(byQuery))
	}
	for q, spans := range byQuery {
		if len(spans) != 3 {
			t.Fatalf("%s in %d chunks, want 3", q, len(spans))
		}
		if spans[0].from != start.Unix() || spans[2].to != start.Add(time.Duration(steps-1)*time.Minute).Unix() {
			t.Errorf("%s spans %v", q, spans)
		}
		for i := 1; i < 3; i++ {
			if spans[i].from != spans[i-1].to+60 {
				t.Errorf("%s: chunk %d starts at %d, previous ends at %d", q, i, spans[i].from, spans[i-1].to)
			}
		}
	}
}

func TestWorkloadHistoryFailures(t *testing.T) {
	start := now.Add(-time.Hour)
	status := func(code int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprint(w, body)
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		says    string
	}{
		{"times out", func(w http.ResponseWriter, r *http.Request) {
			// Longer than the client's timeout; bounded so Close returns.
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
			}
		}, ErrPrometheusTimeout, "deadline"},
		{"its own timeout", status(http.StatusServiceUnavailable, `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`), ErrPrometheusTimeout, "timed out"},
		{"bad query", status(http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries"}`), ErrPrometheusRefused, "11,000 points"},
		{"execution", status(http.StatusUnprocessableEntity, `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`), ErrPrometheusRefused, "many-to-many"},
		{"server error", status(http.StatusInternalServerError, `oops`), ErrPrometheusRefused, "server error: 500"},
		{"forbidden", status(http.StatusForbidden, `no`), ErrPrometheusRefused, "client error: 403"},
		{"not prometheus", status(http.StatusOK, `<html>login</html>`), ErrPrometheusUnavailable, "prometheus rate range query"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			p, err := NewPrometheus(PrometheusOptions{Address: srv.URL, Timeout: 200 * time.Millisecond, Window: 2 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.WorkloadHistory(context.Background(), whatifQuery(start, 60))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err %v, want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := srv.URL
		srv.Close()
		_, err := newProm(t, addr, Queries{}).WorkloadHistory(context.Background(), whatifQuery(start, 60))
		if !errors.Is(err, ErrPrometheusUnavailable) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestWorkloadHistoryRejects(t *testing.T) {
	p := newProm(t, "http://127.0.0.1:1", Queries{})
	tests := []struct {
		name string
		edit func(q *WorkloadQuery)
		says string
	}{
		{"no rate", func(q *WorkloadQuery) { q.SLOMetric = "" }, ErrNoRequestRate.Error()},
		{"bad namespace", func(q *WorkloadQuery) { q.Namespace = `a"b` }, "namespace"},
		{"bad deployment", func(q *WorkloadQuery) { q.Deployment = `web"}` }, "deployment"},
		{"bad metric", func(q *WorkloadQuery) { q.SLOMetric = "a b" }, "not a Prometheus metric name"},
		{"no steps", func(q *WorkloadQuery) { q.Steps = 0 }, "steps > 0"},
		{"no pods", func(q *WorkloadQuery) { q.PodRegex = "" }, "empty pod regex"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := whatifQuery(now, 10)
			tc.edit(&q)
			if _, err := p.WorkloadHistory(context.Background(), q); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err %v, want one saying %q", err, tc.says)
			}
		})
	}
}

func TestPodCount(t *testing.T) {
	at := func(names ...string) map[string]float64 {
		m := map[string]float64{}
		for _, n := range names {
			m[n] = 1
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		cpu, memory []map[string]float64
		want        []int
	}{
		{"none", make([]map[string]float64, 3), make([]map[string]float64, 3), []int{0, 0, 0}},
		{"a gap inside a pod's life counts", []map[string]float64{at("a"), nil, at("a")}, make([]map[string]float64, 3), []int{1, 1, 1}},
		{"the working set before the first rate", []map[string]float64{at("a"), at("a", "b"), at("a", "b")}, []map[string]float64{at("a", "b"), at("a", "b"), at("a", "b")}, []int{2, 2, 2}},
		{"a pod gone stops counting", []map[string]float64{at("a", "b"), at("a"), at("a")}, []map[string]float64{at("a", "b"), at("a"), nil}, []int{2, 1, 1}},
		{"a new pod from its first sample", []map[string]float64{at("a"), at("a"), at("b")}, make([]map[string]float64, 3), []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podCount(tc.cpu, tc.memory); !slices.Equal(got, tc.want) {
				t.Errorf("podCount = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPeakInFlightQuery: the template checks as an --in-flight-query, and
// reads each pod's peak of the metric over the window, per pod.
func TestPeakInFlightQuery(t *testing.T) {
	text := PeakInFlightQuery("app_requests_in_flight")
	if err := CheckTemplate(qInFlight, text); err != nil {
		t.Fatal(err)
	}
	tmpl, err := parseQuery(qInFlight, text)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.execute(QueryData{Namespace: "shop", PodRegex: "web-.*", Window: "1m"})
	if err != nil {
		t.Fatal(err)
	}
	want := `sum by (pod) (max_over_time(app_requests_in_flight{namespace="shop", pod=~"web-.*"}[1m]))`
	if got != want {
		t.Errorf("query\n%s\nwant\n%s", got, want)
	}
}
