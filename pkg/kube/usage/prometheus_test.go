package usage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeProm speaks the Prometheus HTTP API on 127.0.0.1. answer maps a
// PromQL query to the JSON "data" object; an unknown query gets an empty
// vector.
type fakeProm struct {
	*httptest.Server
	mu      sync.Mutex
	answer  map[string]string
	queries []string
	ranges  []url.Values
}

func newFakeProm(t *testing.T) *fakeProm {
	t.Helper()
	f := &fakeProm{answer: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q := r.Form.Get("query")
		f.mu.Lock()
		f.queries = append(f.queries, q)
		if r.URL.Path == "/api/v1/query_range" {
			f.ranges = append(f.ranges, r.Form)
		}
		data, ok := f.answer[q]
		f.mu.Unlock()
		if !ok {
			data = `{"resultType":"vector","result":[]}`
			if r.URL.Path == "/api/v1/query_range" {
				data = `{"resultType":"matrix","result":[]}`
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":%s}`, data)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeProm) set(query, data string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer[query] = data
}

func (f *fakeProm) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queries)
}

// vector renders an instant vector with one sample per (labels, value).
func vector(samples ...string) string {
	return `{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}`
}

func sample(labels, value string) string {
	return fmt.Sprintf(`{"metric":{%s},"value":[%d,%q]}`, labels, now.Unix(), value)
}

func newProm(t *testing.T, addr string, q Queries) *Prometheus {
	t.Helper()
	p, err := NewPrometheus(PrometheusOptions{Address: addr, Timeout: 2 * time.Second, Window: 2 * time.Minute, Queries: q, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultTemplatesRender(t *testing.T) {
	p := newProm(t, "http://127.0.0.1:1", Queries{})
	d := QueryData{Namespace: "shop", PodRegex: `web-.+`, Container: "app", Metric: "http_request_duration_seconds",
		Selector: `route="/api"`, Percentile: 95, Quantile: 0.95, Window: "2m", ObjectKind: "ingress", ObjectName: "main"}
	for _, tc := range []struct{ name, want string }{
		{qCPU, `sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{pod=~"web-.+", namespace="shop", container!="", container!="POD"}[2m]))`},
		{qMemory, `max by (namespace, pod, container) (max_over_time(container_memory_working_set_bytes{pod=~"web-.+", namespace="shop", container!="", container!="POD"}[2m]))`},
		{qCPUPressure, `sum by (namespace, pod, container) (rate(container_pressure_cpu_waiting_seconds_total{pod=~"web-.+", namespace="shop", container!="", container!="POD"}[2m]))`},
		{qLatency, `histogram_quantile(0.95, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="shop", route="/api"}[2m])))`},
		{qRequestRate, `sum(rate(http_request_duration_seconds_count{namespace="shop", route="/api"}[2m]))`},
		{qErrorRate, `sum(rate(http_failed_requests_total{namespace="shop", route="/api"}[2m]))`},
		{qPods, `sum by (pod) (http_request_duration_seconds{namespace="shop", pod=~"web-.+", route="/api"})`},
		{qObject, `sum(http_request_duration_seconds{namespace="shop", ingress="main", route="/api"})`},
		{qExternal, `sum(http_request_duration_seconds{route="/api"})`},
	} {
		got, err := p.Render(tc.name, d)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	// The e2e emulator's histogram and counter go together by name; a
	// histogram named otherwise gets <name>_failed_requests_total.
	for metric, want := range map[string]string{
		"aware_emulator_request_duration_seconds": `sum(rate(aware_emulator_failed_requests_total{namespace="shop"}[2m]))`,
		"rpc_latency_seconds":                     `sum(rate(rpc_latency_seconds_failed_requests_total{namespace="shop"}[2m]))`,
	} {
		if got, _ := p.Render(qErrorRate, QueryData{Namespace: "shop", Metric: metric, Window: "2m"}); got != want {
			t.Errorf("error rate of %s:\n got %s\nwant %s", metric, got, want)
		}
	}
	// Without a namespace or selector the optional matchers disappear.
	d = QueryData{PodRegex: ".+", Metric: "queue_depth", Window: "1m"}
	for name, want := range map[string]string{
		qCPU:         `sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{pod=~".+", container!="", container!="POD"}[1m]))`,
		qCPUPressure: `sum by (namespace, pod, container) (rate(container_pressure_cpu_waiting_seconds_total{pod=~".+", container!="", container!="POD"}[1m]))`,
		qExternal:    `sum(queue_depth{})`,
	} {
		if got, _ := p.Render(name, d); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func TestNewPrometheusValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    PrometheusOptions
		want string
	}{
		{"no address", PrometheusOptions{Timeout: time.Second, Window: time.Minute}, "address is empty"},
		{"no timeout", PrometheusOptions{Address: "http://127.0.0.1:1", Window: time.Minute}, "must be positive"},
		{"bad template", PrometheusOptions{Address: "http://127.0.0.1:1", Timeout: time.Second, Window: time.Minute, Queries: Queries{CPU: "{{.Nope"}}, "cpu query template"},
		{"unknown field", PrometheusOptions{Address: "http://127.0.0.1:1", Timeout: time.Second, Window: time.Minute, Queries: Queries{Latency: "{{.Nope}}"}}, "latency query template"},
	} {
		if _, err := NewPrometheus(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	p := newProm(t, "http://127.0.0.1:1", Queries{RequestRate: `sum(rate({{.Metric}}_count{job="x"}[{{.Window}}]))`})
	if got, _ := p.Render(qRequestRate, QueryData{Metric: "m", Window: "5m"}); got != `sum(rate(m_count{job="x"}[5m]))` {
		t.Errorf("custom template rendered %s", got)
	}
}

func TestMatchers(t *testing.T) {
	got, err := Matchers(&metav1.LabelSelector{
		MatchLabels: map[string]string{"route": `/a"b`, "code": "200"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "method", Operator: metav1.LabelSelectorOpIn, Values: []string{"POST", "GET"}},
			{Key: "host", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a.example"}},
			{Key: "tenant", Operator: metav1.LabelSelectorOpExists},
			{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `canary="", code="200", host!~"a\\.example", method=~"GET|POST", route="/a\"b", tenant!=""`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, err := Matchers(&metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "x"}}); err == nil {
		t.Error("a label name with dots and slashes must be refused")
	}
	if s, err := Matchers(nil); s != "" || err != nil {
		t.Errorf("nil selector: %q %v", s, err)
	}
}

const (
	rateQ = `sum(rate(http_request_duration_seconds_count{namespace="shop", route="/api"}[2m]))`
	p50Q  = `histogram_quantile(0.5, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="shop", route="/api"}[2m])))`
	p99Q  = `histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="shop", route="/api"}[2m])))`
	p90Q  = `histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket{namespace="shop", route="/api"}[2m])))`
	errQ  = `sum(rate(http_failed_requests_total{namespace="shop", route="/api"}[2m]))`
)

func sloQuery(pc int32) SLOQuery {
	return SLOQuery{Namespace: "shop", Metric: "http_request_duration_seconds", Percentile: pc,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"route": "/api"}}}
}

func TestSLO(t *testing.T) {
	f := newFakeProm(t)
	f.set(rateQ, vector(sample("", "12.5")))
	f.set(p50Q, vector(sample("", "0.1")))
	f.set(p99Q, vector(sample("", "0.9")))
	f.set(p90Q, vector(sample("", "0.4")))
	f.set(errQ, vector(sample(`"pod":"a"`, "0.25"), sample(`"pod":"b"`, "0.5")))
	r, err := newProm(t, f.URL, Queries{}).SLO(context.Background(), sloQuery(90))
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestRate != (Reading{Value: 12.5, OK: true}) || r.Window != 2*time.Minute {
		t.Errorf("rate %+v over %s, want 12.5 over the source's 2m", r.RequestRate, r.Window)
	}
	if r.ErrorRate != (Reading{Value: 0.75, OK: true}) {
		t.Errorf("error rate %+v, want the sum 0.75", r.ErrorRate)
	}
	for pc, want := range map[int32]float64{50: 0.1, 90: 0.4, 99: 0.9} {
		if got := r.Latency[pc]; !got.OK || got.Value != want {
			t.Errorf("p%d = %+v, want %g", pc, got, want)
		}
	}
	if want := []string{rateQ, errQ, p50Q, p99Q, p90Q}; !slices.Equal(f.seen(), want) {
		t.Errorf("queries\n got %q\nwant %q", f.seen(), want)
	}
	// Percentile 99 is not queried twice.
	f.mu.Lock()
	f.queries = nil
	f.mu.Unlock()
	if _, err := newProm(t, f.URL, Queries{}).SLO(context.Background(), sloQuery(99)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.seen()); n != 4 {
		t.Errorf("%d queries for an SLO at p99, want 4", n)
	}
}

func TestSLOInvalidValuesDroppedAndCounted(t *testing.T) {
	f := newFakeProm(t)
	f.set(rateQ, vector(sample("", "-3")))                                  // a counter reset gone wrong
	f.set(p50Q, vector(sample("", "NaN")))                                  // no requests in the window
	f.set(p99Q, vector(sample("", "+Inf")))                                 // all in the +Inf bucket
	f.set(p90Q, vector(sample(`"a":"1"`, "NaN"), sample(`"a":"2"`, "0.3"))) // one good series survives
	f.set(errQ, vector(sample("", "NaN")))
	r, err := newProm(t, f.URL, Queries{}).SLO(context.Background(), sloQuery(90))
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestRate.OK || r.RequestRate.Problem != DropNegative {
		t.Errorf("rate %+v", r.RequestRate)
	}
	if l := r.Latency[50]; l.OK || l.Problem != DropNaN {
		t.Errorf("p50 %+v", l)
	}
	if l := r.Latency[99]; l.OK || l.Problem != DropInfinite {
		t.Errorf("p99 %+v", l)
	}
	if l := r.Latency[90]; !l.OK || l.Value != 0.3 {
		t.Errorf("p90 %+v", l)
	}
	if r.ErrorRate.OK || r.ErrorRate.Problem != DropNaN {
		t.Errorf("error rate %+v", r.ErrorRate)
	}
	if want := (Drops{DropNaN: 3, DropInfinite: 1, DropNegative: 1}); !mapsEqual(r.Dropped, want) {
		t.Errorf("dropped %v, want %v", r.Dropped, want)
	}
}

func mapsEqual(a, b Drops) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestSLOEmptyResult(t *testing.T) {
	f := newFakeProm(t) // every query answers an empty vector
	r, err := newProm(t, f.URL, Queries{}).SLO(context.Background(), sloQuery(95))
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestRate.OK || r.RequestRate.Problem != NoData || r.ErrorRate.OK || r.ErrorRate.Problem != NoData ||
		r.Latency[95].OK || r.Latency[95].Problem != NoData || len(r.Dropped) != 0 {
		t.Errorf("reading %+v", r)
	}
}

func TestSLORejectsUnsafeInput(t *testing.T) {
	p := newProm(t, "http://127.0.0.1:1", Queries{})
	q := sloQuery(95)
	q.Metric = `x{a="b"} or vector(1)`
	if _, err := p.SLO(context.Background(), q); err == nil || !strings.Contains(err.Error(), "not a Prometheus metric name") {
		t.Errorf("error %v", err)
	}
	q = sloQuery(95)
	q.Namespace = `a"b`
	if _, err := p.SLO(context.Background(), q); err == nil {
		t.Error("an invalid namespace must be refused")
	}
}

func TestPrometheusDown(t *testing.T) {
	f := newFakeProm(t)
	addr := f.URL
	f.Close()
	p := newProm(t, addr, Queries{})
	ctx := context.Background()
	_, err := p.SLO(ctx, sloQuery(95))
	if err == nil || !strings.Contains(err.Error(), "prometheus requestRate query") {
		t.Errorf("SLO error %v must name the query", err)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("SLO error %v must wrap the transport error", err)
	}
	if _, err := p.PodUsage(ctx, "shop"); err == nil {
		t.Error("PodUsage must fail")
	}
	if _, err := p.History(ctx, HistoryQuery{Namespace: "shop", PodRegex: "web-.+", Start: now.Add(-time.Hour), End: now, Step: time.Minute}); err == nil {
		t.Error("History must fail")
	}
}

func TestPrometheusErrorStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"status":"error","errorType":"execution","error":"query timed out"}`)
	}))
	defer srv.Close()
	_, err := newProm(t, srv.URL, Queries{}).SLO(context.Background(), sloQuery(95))
	if err == nil || !strings.Contains(err.Error(), "query timed out") {
		t.Errorf("error %v", err)
	}
}

func TestPodUsage(t *testing.T) {
	f := newFakeProm(t)
	cpuQ := `sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{pod=~".+", namespace="shop", container!="", container!="POD"}[2m]))`
	memQ := `max by (namespace, pod, container) (max_over_time(container_memory_working_set_bytes{pod=~".+", namespace="shop", container!="", container!="POD"}[2m]))`
	f.set(cpuQ, vector(sample(`"namespace":"shop","pod":"web-1","container":"app"`, "0.25"),
		sample(`"namespace":"shop","pod":"web-1","container":"sidecar"`, "NaN")))
	f.set(memQ, vector(sample(`"namespace":"shop","pod":"web-1","container":"app"`, "1048576"),
		sample(`"namespace":"shop","pod":"web-2","container":"app"`, "2048")))
	got, err := newProm(t, f.URL, Queries{}).PodUsage(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "web-1" || got[1].Name != "web-2" || got[0].Window != 2*time.Minute || !got[0].Timestamp.Equal(now) {
		t.Fatalf("got %+v", got)
	}
	app := got[0].Containers[0]
	if app.Name != "app" || app.CPU != 0.25 || app.Memory != 1<<20 {
		t.Errorf("web-1/app %+v", app)
	}
	// Passed through unvalidated, as Source requires: the consumer drops.
	if sc := got[0].Containers[1]; sc.Name != "sidecar" || sc.CPU == sc.CPU {
		t.Errorf("web-1/sidecar %+v, want NaN CPU", sc)
	}
}

func matrix(series ...string) string {
	return `{"resultType":"matrix","result":[` + strings.Join(series, ",") + `]}`
}

func series(labels string, start time.Time, step time.Duration, values ...string) string {
	var vs []string
	for i, v := range values {
		vs = append(vs, fmt.Sprintf(`[%d,%q]`, start.Add(time.Duration(i)*step).Unix(), v))
	}
	return fmt.Sprintf(`{"metric":{%s},"values":[%s]}`, labels, strings.Join(vs, ","))
}

func TestHistory(t *testing.T) {
	f := newFakeProm(t)
	start := now.Add(-2 * time.Hour)
	cpuQ := `sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{pod=~"web-[a-z0-9]+-[a-z0-9]+|db-0", namespace="shop", container!="", container!="POD"}[1h]))`
	memQ := `max by (namespace, pod, container) (max_over_time(container_memory_working_set_bytes{pod=~"web-[a-z0-9]+-[a-z0-9]+|db-0", namespace="shop", container!="", container!="POD"}[1h]))`
	f.set(cpuQ, matrix(
		series(`"pod":"web-a-1","container":"app"`, start, time.Hour, "0.2", "0.4", "NaN"),
		series(`"pod":"web-b-2","container":"app"`, start, time.Hour, "0.4", "-1", "0.6"),
	))
	f.set(memQ, matrix(
		series(`"pod":"web-a-1","container":"app"`, start, time.Hour, "100", "300"),
		series(`"pod":"web-b-2","container":"app"`, start, time.Hour, "200", "+Inf"),
	))
	h, err := newProm(t, f.URL, Queries{}).History(context.Background(), HistoryQuery{
		Namespace: "shop", PodRegex: `web-[a-z0-9]+-[a-z0-9]+|db-0`, Start: start, End: now, Step: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Containers) != 1 || h.Containers[0].Name != "app" {
		t.Fatalf("containers %+v", h.Containers)
	}
	c := h.Containers[0]
	if len(c.CPU) != 3 || !c.CPU[0].Time.Equal(start) || c.CPU[0].Value < 0.29999 || c.CPU[0].Value > 0.30001 ||
		c.CPU[1].Value != 0.4 || c.CPU[2].Value != 0.6 || !c.CPU[2].Time.Equal(start.Add(2*time.Hour)) {
		t.Errorf("cpu %+v (mean over pods, invalid points dropped)", c.CPU)
	}
	if len(c.Memory) != 2 || c.Memory[0].Value != 200 || c.Memory[1].Value != 300 {
		t.Errorf("memory %+v (max over pods)", c.Memory)
	}
	if want := (Drops{DropNaN: 1, DropNegative: 1, DropInfinite: 1}); !mapsEqual(h.Dropped, want) {
		t.Errorf("dropped %v, want %v", h.Dropped, want)
	}
	f.mu.Lock()
	r := f.ranges[0]
	f.mu.Unlock()
	if r.Get("step") != "3600" || r.Get("start") == "" || r.Get("end") == "" {
		t.Errorf("range parameters %v", r)
	}
	if _, err := newProm(t, f.URL, Queries{}).History(context.Background(), HistoryQuery{Namespace: "shop", PodRegex: "x", Start: now.Add(-30 * 24 * time.Hour), End: now, Step: time.Minute}); err == nil || !strings.Contains(err.Error(), "raise the step") {
		t.Errorf("an unbounded range must be refused: %v", err)
	}
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// TestExternalGoalsAreScopedToTheNamespace: an External goal reads only its
// autoscaler's namespace, whatever its selector says, unless the namespace
// is allowed cluster-wide metrics; an invalid allowed namespace is refused.
func TestExternalGoalsAreScopedToTheNamespace(t *testing.T) {
	ext := func(sel *metav1.LabelSelector) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: sel},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("30")}}}
	}
	other := &metav1.LabelSelector{MatchLabels: map[string]string{"namespace": "payments"}}
	for _, tc := range []struct {
		name        string
		namespace   string
		clusterWide []string
		spec        autoscalingv2.MetricSpec
		wantQuery   string
	}{
		{"no selector", "shop", nil, ext(nil), `sum(queue_messages{namespace="shop"})`},
		{"another namespace asked for", "shop", nil, ext(other), `sum(queue_messages{namespace="shop", namespace="payments"})`},
		{"allowed cluster-wide", "ops", []string{"ops"}, ext(other), `sum(queue_messages{namespace="payments"})`},
		{"allowed elsewhere only", "shop", []string{"ops"}, ext(nil), `sum(queue_messages{namespace="shop"})`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t)
			f.set(tc.wantQuery, vector(sample("", "7")))
			p, err := NewPrometheus(PrometheusOptions{Address: f.URL, Timeout: 2 * time.Second, Window: 2 * time.Minute, Now: func() time.Time { return now },
				ClusterWideExternalNamespaces: tc.clusterWide})
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.Goal(context.Background(), GoalQuery{Namespace: tc.namespace, Spec: tc.spec})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Value.OK || r.Value.Value != 7 {
				t.Errorf("reading %+v: the query was not %s", r.Value, tc.wantQuery)
			}
		})
	}
	if _, err := NewPrometheus(PrometheusOptions{Address: "http://127.0.0.1:1", Timeout: time.Second, Window: time.Minute,
		ClusterWideExternalNamespaces: []string{`x"}`}}); err == nil {
		t.Error("an invalid cluster-wide namespace must be refused")
	}
}

func TestGoals(t *testing.T) {
	f := newFakeProm(t)
	f.set(`sum by (pod) (inflight{namespace="shop", pod=~".+"})`, vector(
		sample(`"pod":"web-1"`, "30"), sample(`"pod":"web-2"`, "NaN"), sample(`"pod":"other"`, "1000")))
	f.set(`sum(requests_per_second{namespace="shop", ingress="main"})`, vector(sample("", "250")))
	f.set(`sum(queue_messages{namespace="shop", queue="orders"})`, vector(sample("", "90")))
	p := newProm(t, f.URL, Queries{})
	obs := &workload.Observation{Window: time.Minute, Replicas: 2, ReadyReplicas: 2, Pods: []workload.PodSample{{Name: "web-1", Ready: true}, {Name: "web-2", Ready: true}}}
	pods := []string{"web-1", "web-2"}
	ctx := context.Background()

	podsSpec := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "inflight"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("10")}}}
	r, err := p.Goal(ctx, GoalQuery{Namespace: "shop", Spec: podsSpec})
	if err != nil {
		t.Fatal(err)
	}
	if r.Dropped[DropNaN] != 1 || r.PerPod["web-1"] != 30 {
		t.Errorf("pods reading %+v", r)
	}
	g := ToGoal(podsSpec, &r, nil)
	if g.Kind != workload.GoalAverageValue || g.Target != 10 || g.Problem != "" || g.PerPod["web-1"] != 30 {
		t.Errorf("pods goal %+v", g)
	}
	obs.Goals = []workload.Goal{g}
	if err := obs.Validate(); err != nil {
		t.Errorf("the goal must make a valid observation: %v", err)
	}
	// web-2 is missing; the calculator scales up on web-1 alone.
	d, err := hpa.NewDecider(workload.Constraints{MinReplicas: 1, MaxReplicas: 10}, hpa.DefaultCalculator())
	if err != nil {
		t.Fatal(err)
	}
	dec, err := d.Decide(now, 2, []hpa.Metric{hpa.GoalMetric(obs, &g, nil, nil)})
	if err != nil || dec.Proposed != 3 {
		t.Errorf("decision %+v %v, want 3 proposed (30/10 on the one pod with a value)", dec, err)
	}
	if st, ok := MetricStatus(podsSpec, r, pods); !ok || st.Pods.Current.AverageValue.AsApproximateFloat64() != 30 {
		t.Errorf("pods status %+v", st)
	}

	objSpec := autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: "Ingress", Name: "main", APIVersion: "networking.k8s.io/v1"},
		Metric:          autoscalingv2.MetricIdentifier{Name: "requests_per_second"},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("100")}}}
	r, err = p.Goal(ctx, GoalQuery{Namespace: "shop", Spec: objSpec})
	if err != nil {
		t.Fatal(err)
	}
	if g := ToGoal(objSpec, &r, nil); g.Kind != workload.GoalValue || g.Value != 250 || g.Target != 100 || g.Problem != "" {
		t.Errorf("object goal %+v", g)
	}
	if st, ok := MetricStatus(objSpec, r, pods); !ok || st.Object.Current.Value.AsApproximateFloat64() != 250 {
		t.Errorf("object status %+v", st)
	}

	extSpec := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "orders"}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("30")}}}
	r, err = p.Goal(ctx, GoalQuery{Namespace: "shop", Spec: extSpec})
	if err != nil {
		t.Fatal(err)
	}
	if g := ToGoal(extSpec, &r, nil); g.Kind != workload.GoalTotalAverageValue || g.Value != 90 || g.Target != 30 || g.Problem != "" {
		t.Errorf("external goal %+v", g)
	}
	if st, ok := MetricStatus(extSpec, r, pods); !ok || st.External.Current.AverageValue.AsApproximateFloat64() != 45 {
		t.Errorf("external status %+v", st)
	}

	// An empty answer is an error for the calculator, not a zero.
	extSpec.External.Metric.Selector = nil
	r, err = p.Goal(ctx, GoalQuery{Namespace: "shop", Spec: extSpec})
	if err != nil {
		t.Fatal(err)
	}
	if g := ToGoal(extSpec, &r, nil); g.Problem != NoData {
		t.Errorf("empty external metric: %+v", g)
	}
	if _, ok := MetricStatus(extSpec, r, pods); ok {
		t.Error("no status for a metric without a value")
	}
	_, err = p.Goal(ctx, GoalQuery{Namespace: "shop", Spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType}})
	if !errors.Is(err, ErrNotPrometheusMetric) {
		t.Errorf("resource goal: %v", err)
	}
}

// TestToGoal covers the spec forms and every way a goal has no reading.
func TestToGoal(t *testing.T) {
	pct := func(v int32) *int32 { return &v }
	res := func(name string, tgt autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceName(name), Target: tgt}}
	}
	obj := func(tgt autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{Kind: "Ingress", Name: "main"}, Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Target: tgt}}
	}
	ext := func(tgt autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "lag"}, Target: tgt}}
	}
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "inflight"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("5")}}}
	value := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("20")}
	average := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("20")}
	ok := &GoalReading{Value: Reading{Value: 40, OK: true}}
	for _, tc := range []struct {
		name string
		spec autoscalingv2.MetricSpec
		r    *GoalReading
		err  error
		want workload.Goal
	}{
		{"resource cpu utilization", res("cpu", autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: pct(60)}), nil, nil,
			workload.Goal{Name: "cpu", Kind: workload.GoalUtilization, Resource: workload.CPU, Target: 0.6}},
		{"resource memory average value", res("memory", autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("1Gi")}), nil, nil,
			workload.Goal{Name: "memory", Kind: workload.GoalAverageValue, Resource: workload.Memory, Target: 1 << 30}},
		{"resource without a utilization", res("cpu", autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}), nil, nil,
			workload.Goal{Name: "cpu", Kind: workload.GoalValue, Problem: GoalInvalidSpec}},
		{"other resources are unsupported", res("nvidia.com/gpu", average), nil, nil,
			workload.Goal{Name: "nvidia.com/gpu", Kind: workload.GoalValue, Problem: GoalUnsupported}},
		{"object value", obj(value), ok, nil, workload.Goal{Name: "rps", Kind: workload.GoalValue, Target: 20, Value: 40}},
		{"object average value", obj(average), ok, nil, workload.Goal{Name: "rps", Kind: workload.GoalTotalAverageValue, Target: 20, Value: 40}},
		{"external value", ext(value), ok, nil, workload.Goal{Name: "lag", Kind: workload.GoalValue, Target: 20, Value: 40}},
		{"external average value", ext(average), ok, nil, workload.Goal{Name: "lag", Kind: workload.GoalTotalAverageValue, Target: 20, Value: 40}},
		{"external utilization is invalid", ext(autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: pct(5)}), ok, nil,
			workload.Goal{Name: "lag", Kind: workload.GoalValue, Problem: GoalInvalidSpec}},
		{"zero target is invalid", ext(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("0")}), ok, nil,
			workload.Goal{Name: "lag", Kind: workload.GoalValue, Problem: GoalInvalidSpec}},
		{"not read", ext(value), nil, nil, workload.Goal{Name: "lag", Kind: workload.GoalValue, Target: 20, Problem: GoalNotRead}},
		{"query failed", ext(value), &GoalReading{}, errors.New("connection refused"), workload.Goal{Name: "lag", Kind: workload.GoalValue, Target: 20, Problem: GoalQueryFailed}},
		{"NaN value", ext(value), &GoalReading{Value: Reading{Problem: DropNaN}}, nil, workload.Goal{Name: "lag", Kind: workload.GoalValue, Target: 20, Problem: DropNaN}},
		{"pods without any value", pods, &GoalReading{PerPod: map[string]float64{}}, nil, workload.Goal{Name: "inflight", Kind: workload.GoalAverageValue, Target: 5, Problem: NoData}},
		{"pods whose every value was negative", pods, &GoalReading{PerPod: map[string]float64{}, Dropped: Drops{DropNegative: 2}}, nil,
			workload.Goal{Name: "inflight", Kind: workload.GoalAverageValue, Target: 5, Problem: DropNegative}},
		{"container resource is unsupported", autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType}, nil, nil,
			workload.Goal{Name: "containerresource", Kind: workload.GoalValue, Problem: GoalUnsupported}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ToGoal(tc.spec, tc.r, tc.err)
			if got.Name != tc.want.Name || got.Kind != tc.want.Kind || got.Resource != tc.want.Resource || got.Target != tc.want.Target ||
				got.Value != tc.want.Value || got.Problem != tc.want.Problem {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			o := workload.Observation{Goals: []workload.Goal{got}}
			if err := o.Validate(); err != nil {
				t.Errorf("goal makes an invalid observation: %v", err)
			}
		})
	}
}

// countingObserver records query outcomes.
type countingObserver struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *countingObserver) ObservePrometheusQuery(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := "success"
	if err != nil {
		r = "error"
	}
	c.got[name+"/"+r]++
}

func TestQueryObserver(t *testing.T) {
	f := newFakeProm(t)
	f.set(rateQ, `{"resultType":"matrix","result":[]}`) // a malformed answer: not a vector
	obs := &countingObserver{got: map[string]int{}}
	p, err := NewPrometheus(PrometheusOptions{Address: f.URL, Timeout: time.Second, Window: 2 * time.Minute, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SLO(context.Background(), sloQuery(95)); err == nil {
		t.Fatal("a matrix answer to an instant query must fail")
	}
	if _, err := p.PodUsage(context.Background(), "shop"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := p.History(context.Background(), HistoryQuery{Namespace: "shop", PodRegex: "web-.+", Start: now.Add(-time.Hour), End: now, Step: time.Minute}); err == nil {
		t.Fatal("History must fail when Prometheus is down")
	}
	want := map[string]int{"requestRate/error": 1, "cpu/success": 1, "memory/success": 1, "cpu/error": 1}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for k, v := range want {
		if obs.got[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, obs.got[k], v, obs.got)
		}
	}
}
