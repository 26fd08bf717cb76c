package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// promServer speaks the Prometheus HTTP API on 127.0.0.1. Instant queries
// are answered by substring match on the query (first match wins), range
// queries with rangeData; gate, if set, holds range queries until closed.
type promServer struct {
	*httptest.Server
	mu        sync.Mutex
	instant   [][2]string // substring, data
	rangeData string
	gate      chan struct{}
	ranges    int
	fail      bool
}

func newPromServer(t *testing.T) *promServer {
	t.Helper()
	p := &promServer{rangeData: `{"resultType":"matrix","result":[]}`}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		q := r.Form.Get("query")
		p.mu.Lock()
		fail, gate := p.fail, p.gate
		data := `{"resultType":"vector","result":[]}`
		if r.URL.Path == "/api/v1/query_range" {
			p.ranges++
			data = p.rangeData
		} else {
			for _, a := range p.instant {
				if strings.Contains(q, a[0]) {
					data = a[1]
					break
				}
			}
		}
		p.mu.Unlock()
		if r.URL.Path == "/api/v1/query_range" && gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"error","errorType":"unavailable","error":"storage is starting"}`)
			return
		}
		fmt.Fprintf(w, `{"status":"success","data":%s}`, data)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *promServer) rangeQueries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ranges
}

func (p *promServer) answer(substr, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instant = append(p.instant, [2]string{substr, fmt.Sprintf(`{"resultType":"vector","result":[{"metric":{},"value":[%d,%q]}]}`, t0.Unix(), value)})
}

// source is a Prometheus source on p; m, if not nil, counts its queries.
func (p *promServer) source(t *testing.T, m *Metrics) *usage.Prometheus {
	t.Helper()
	o := usage.PrometheusOptions{Address: p.URL, Timeout: 5 * time.Second, Window: 2 * time.Minute}
	if m != nil {
		o.Observer = m
	}
	src, err := usage.NewPrometheus(o)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// obsAdvisor records the observation the agent would see and keeps the
// default.
type obsAdvisor struct {
	mu  sync.Mutex
	obs []workload.Observation
}

var _ Advisor = (*obsAdvisor)(nil)

func (a *obsAdvisor) Advise(_ context.Context, _ *v1alpha1.MultidimPodAutoscaler, obs *workload.Observation, _ *workload.Constraints, def workload.Recommendation) (workload.Recommendation, *v1alpha1.RLStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.obs = append(a.obs, *obs)
	return def, &v1alpha1.RLStatus{Source: v1alpha1.SourceDefault, Reason: "Shadow"}
}

func (a *obsAdvisor) last(t *testing.T) workload.Observation {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.obs) == 0 {
		t.Fatal("no observation reached the advisor")
	}
	return a.obs[len(a.obs)-1]
}

func sloWorkload(percentile int32) []runtime.Object {
	objs := twoPodWorkload()
	objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.RL = &v1alpha1.RLSpec{Mode: v1alpha1.RLModeShadow, SLO: &v1alpha1.SLOSpec{
		Metric:     autoscalingv2.MetricIdentifier{Name: "http_request_duration_seconds", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"route": "/api"}}},
		Percentile: percentile,
		Target:     metav1.Duration{Duration: 250 * time.Millisecond},
	}}
	return objs
}

func sloFixture(t *testing.T, prom *promServer, percentile int32) (*fixture, *obsAdvisor) {
	t.Helper()
	f := newFixture(t, sloWorkload(percentile)...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
	adv := &obsAdvisor{}
	f.deps = wrapDepsWithMetrics(t, f, func(d *Deps) {
		d.SLO, d.Advisor = prom.source(t, d.Metrics), adv
	})
	f.start()
	return f, adv
}

func TestSLOFillsObservation(t *testing.T) {
	prom := newPromServer(t)
	prom.answer(`_count{namespace="ns", route="/api"}`, "40")
	prom.answer(`histogram_quantile(0.5,`, "0.05")
	prom.answer(`histogram_quantile(0.9,`, "0.2")
	prom.answer(`histogram_quantile(0.99,`, "0.6")
	prom.answer(`sum(rate(http_failed_requests_total{namespace="ns", route="/api"}[2m]))`, "1.5")
	f, adv := sloFixture(t, prom, 90)
	f.tick()
	obs := adv.last(t)
	if obs.RequestRate != 40 || obs.SLO != 0.25 || obs.Latency != (workload.Latency{P50: 0.05, P95: 0.2, P99: 0.6}) {
		t.Errorf("observation rate %g slo %g latency %+v; want 40, 0.25, p50 0.05 / P95 = the SLO's p90 0.2 / p99 0.6", obs.RequestRate, obs.SLO, obs.Latency)
	}
	if obs.ErrorRate != 1.5 {
		t.Errorf("error rate %g, want 1.5", obs.ErrorRate)
	}
	if obs.RateWindow != 2*time.Minute {
		t.Errorf("rate window %s, want the source's 2m: the policy matches the usage to it", obs.RateWindow)
	}
	if n := testutil.ToFloat64(f.c.metrics.promQueries.WithLabelValues("errorRate", "success")); n != 1 {
		t.Errorf("errorRate queries %g, want 1", n)
	}
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
}

func TestSLOPrometheusDownKeepsDefault(t *testing.T) {
	prom := newPromServer(t)
	prom.Close() // connection refused
	f, adv := sloFixture(t, prom, 95)
	f.tick()
	obs := adv.last(t)
	if obs.Latency != (workload.Latency{}) || obs.RequestRate != 0 || obs.ErrorRate != 0 || obs.SLO != 0.25 || obs.RateWindow != 0 {
		t.Errorf("observation latency %+v rate %g (window %s) error rate %g slo %g; want no latency, no rates, the SLO", obs.Latency, obs.RequestRate, obs.RateWindow, obs.ErrorRate, obs.SLO)
	}
	if n := testutil.ToFloat64(f.c.metrics.promQueries.WithLabelValues("requestRate", "error")); n != 1 {
		t.Errorf("failed requestRate queries %g, want 1 (Prometheus unreachable)", n)
	}
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionTrue, "SLOMetricsUnavailable")
	if m.Status.RecommendationTime == nil || m.Status.DesiredReplicas < 1 {
		t.Errorf("the default must go on: %+v", m.Status)
	}
}

func TestSLONaNAndEmptyAreDroppedAndCounted(t *testing.T) {
	prom := newPromServer(t)
	prom.answer(`_count{`, "12")
	prom.answer(`histogram_quantile(0.95,`, "NaN")
	prom.answer(`histogram_quantile(0.99,`, "+Inf")
	prom.answer(`http_failed_requests_total{`, "NaN")
	f, adv := sloFixture(t, prom, 95) // p50: empty vector
	f.tick()
	obs := adv.last(t)
	if obs.Latency != (workload.Latency{}) || obs.RequestRate != 12 || obs.ErrorRate != 0 {
		t.Errorf("latency %+v rate %g error rate %g; want no latency, the rate, no error rate", obs.Latency, obs.RequestRate, obs.ErrorRate)
	}
	if err := obs.Validate(); err != nil {
		t.Errorf("observation must be valid: %v", err)
	}
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionTrue, "SLOMetricInvalid")
	if n := testutil.ToFloat64(f.c.metrics.invalidSamples.WithLabelValues(dropNaN)); n != 2 {
		t.Errorf("nan drops %g, want 2 (p95 and the error rate)", n)
	}
	if n := testutil.ToFloat64(f.c.metrics.invalidSamples.WithLabelValues(dropInfinite)); n != 1 {
		t.Errorf("infinite drops %g", n)
	}

	// The histogram disappears: no data at all.
	prom.mu.Lock()
	prom.instant = nil
	prom.mu.Unlock()
	f.clock.Step(time.Minute)
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.ScalingActive, corev1.ConditionTrue, "SLOMetricMissing")
	if obs := adv.last(t); obs.ErrorRate != 0 || obs.RequestRate != 0 {
		t.Errorf("without data: rate %g error rate %g, want 0 and 0", obs.RequestRate, obs.ErrorRate)
	}
}

// TestPrometheusQueryErrorsCounted: an error status and an answer that is
// not the Prometheus API's both count as failed queries, by template.
func TestPrometheusQueryErrorsCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(w http.ResponseWriter)
	}{
		{"error status", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"error","errorType":"unavailable","error":"storage is starting"}`)
		}},
		{"malformed answer", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html>proxy login</html>`)
		}},
		{"wrong result type", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tc.body(w) }))
			t.Cleanup(srv.Close)
			objs := sloWorkload(95)
			objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.Goals = goalSpec(externalGoal("queue_messages", 30))
			f := newFixture(t, objs...)
			f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
			f.deps = wrapDepsWithMetrics(t, f, func(d *Deps) {
				src := (&promServer{Server: srv}).source(t, d.Metrics)
				d.SLO, d.Goals = src, src
			})
			f.start()
			f.tick()
			for _, q := range []string{"requestRate", "external"} {
				if n := testutil.ToFloat64(f.c.metrics.promQueries.WithLabelValues(q, "error")); n != 1 {
					t.Errorf("failed %s queries %g, want 1", q, n)
				}
				if n := testutil.ToFloat64(f.c.metrics.promQueries.WithLabelValues(q, "success")); n != 0 {
					t.Errorf("successful %s queries %g, want 0", q, n)
				}
			}
			m := f.mpa("ns", "web")
			wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionTrue, "SLOMetricsUnavailable")
			if c := cond(t, m, v1alpha1.ScalingActive); !strings.Contains(c.Message, "the Prometheus query failed") {
				t.Errorf("ScalingActive %+v: the goal's failure must be named", c)
			}
		})
	}
}

// wrapDepsWithMetrics creates the controller's metrics before next runs,
// so that a Prometheus source built in next can report to them.
func wrapDepsWithMetrics(t *testing.T, f *fixture, next func(*Deps)) func(*Deps) {
	t.Helper()
	return func(d *Deps) {
		m, err := NewMetrics(f.reg)
		if err != nil {
			t.Fatal(err)
		}
		d.Metrics = m
		next(d)
	}
}

func TestSLOWithoutPrometheus(t *testing.T) {
	f := newFixture(t, sloWorkload(95)...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
	f.start()
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionTrue, "NoSLOSource")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
}

func TestGoalMetricsReported(t *testing.T) {
	prom := newPromServer(t)
	prom.answer(`sum(queue_messages{namespace="ns", queue="orders"})`, "90")
	objs := twoPodWorkload()
	objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.Goals = &v1alpha1.Goals{Metrics: []autoscalingv2.MetricSpec{
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType}}},
		{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "orders"}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(30, resource.DecimalSI)}}},
		{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{ // no data: not reported
			Metric: autoscalingv2.MetricIdentifier{Name: "inflight"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(5, resource.DecimalSI)}}},
	}}
	f := newFixture(t, objs...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
	f.deps = func(d *Deps) { d.Goals = prom.source(t, nil) }
	f.start()
	f.tick()
	cm := f.mpa("ns", "web").Status.CurrentMetrics
	if len(cm) != 3 || cm[2].Type != autoscalingv2.ExternalMetricSourceType || cm[2].External.Current.AverageValue.AsApproximateFloat64() != 45 {
		t.Fatalf("currentMetrics %+v; want cpu, memory and the external metric at 90/2 pods", cm)
	}
}

func historyFixture(t *testing.T, prom *promServer, objs ...runtime.Object) *fixture {
	t.Helper()
	f := newFixture(t, objs...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
	f.cfg.History = HistoryConfig{Length: 2 * time.Hour, Step: time.Hour, Concurrency: 1, Timeout: 10 * time.Second}
	f.deps = func(d *Deps) { d.History = prom.source(t, nil) }
	f.start()
	return f
}

// waitHistory waits until the background load of key is over.
func waitHistory(t *testing.T, f *fixture, key string) {
	t.Helper()
	st := f.c.loop.states[key]
	if st == nil || st.history.load == nil {
		t.Fatalf("no history load for %s", key)
	}
	select {
	case <-st.history.load.done:
	case <-time.After(10 * time.Second):
		t.Fatal("history load did not finish")
	}
}

func TestHistoryLoadedAtStartUp(t *testing.T) {
	prom := newPromServer(t)
	start := t0.Add(-2 * time.Hour)
	pt := func(i int, v string) string {
		return fmt.Sprintf(`[%d,%q]`, start.Add(time.Duration(i)*time.Hour).Unix(), v)
	}
	prom.rangeData = `{"resultType":"matrix","result":[` +
		`{"metric":{"pod":"web-1","container":"app"},"values":[` + pt(0, "0.2") + "," + pt(1, "NaN") + "," + pt(2, "0.4") + `]}]}`
	prom.gate = make(chan struct{})
	f := historyFixture(t, prom, twoPodWorkload()...)

	ups := statusUpdates(t, f.tick())
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.FetchingHistory, corev1.ConditionTrue, "FetchingHistory")
	if len(ups) != 1 || m.Status.RecommendationTime != nil || condition(&m.Status, v1alpha1.RecommendationProvided) != nil {
		t.Fatalf("while loading, FetchingHistory is written and no recommendation is made: %+v", m.Status)
	}
	close(prom.gate)
	waitHistory(t, f, "ns/web")
	f.clock.Step(time.Minute)
	f.tick()
	m = f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.FetchingHistory, corev1.ConditionFalse, "HistoryLoaded")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
	s := f.c.loop.states["ns/web"].policy.(histograms).Recommender().State("app")
	// 2 valid hourly points, each standing for 60 one-minute samples, then
	// one live sample.
	if got := s.Samples(); got != 2*60+1 {
		t.Errorf("cpu samples %d, want %d", got, 2*60+1)
	}
	if s.Memory().IsEmpty() {
		t.Error("memory histogram is empty")
	}
	if n := testutil.ToFloat64(f.c.metrics.invalidSamples.WithLabelValues(dropNaN)); n != 2 {
		t.Errorf("nan drops %g, want 2 (cpu and memory queries share the answer)", n)
	}
	if n := prom.rangeQueries(); n != 2 {
		t.Errorf("%d range queries, want 2 (cpu, memory)", n)
	}
}

func TestHistoryFailureStartsEmpty(t *testing.T) {
	prom := newPromServer(t)
	prom.fail = true
	f := historyFixture(t, prom, twoPodWorkload()...)
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.FetchingHistory, corev1.ConditionTrue, "FetchingHistory")
	waitHistory(t, f, "ns/web")
	f.clock.Step(time.Minute)
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.FetchingHistory, corev1.ConditionFalse, "HistoryUnavailable")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
}

func TestHistoryTimeoutStartsEmpty(t *testing.T) {
	prom := newPromServer(t)
	prom.gate = make(chan struct{}) // never answers
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
	f.cfg.History = HistoryConfig{Length: 2 * time.Hour, Step: time.Hour, Concurrency: 1, Timeout: 50 * time.Millisecond}
	f.deps = func(d *Deps) { d.History = prom.source(t, nil) }
	f.start()
	f.tick()
	waitHistory(t, f, "ns/web")
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.FetchingHistory, corev1.ConditionFalse, "HistoryUnavailable")
}

func TestHistoryNotLoadedWithCheckpoint(t *testing.T) {
	prom := newPromServer(t)
	objs := twoPodWorkload()
	objs = append(objs, &v1alpha1.MultidimPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-app"},
		Spec:       v1alpha1.MultidimPodAutoscalerCheckpointSpec{MPAObjectName: "web", ContainerName: "app"},
		Status:     v1alpha1.MultidimPodAutoscalerCheckpointStatus{Version: CheckpointVersion},
	})
	f := historyFixture(t, prom, objs...)
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.FetchingHistory, corev1.ConditionFalse, "CheckpointRestored")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
	if n := prom.rangeQueries(); n != 0 {
		t.Errorf("%d range queries for an autoscaler with a checkpoint", n)
	}
}

func TestPodRegex(t *testing.T) {
	mk := func(name, hash string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if hash != "" {
			p.Labels = map[string]string{"pod-template-hash": hash}
		}
		return p
	}
	got := podRegex([]*corev1.Pod{mk("web-7d4b9c-x2x4z", "7d4b9c"), mk("web-7d4b9c-abcde", "7d4b9c"), mk("db-0", ""), mk("odd.name", "zz")})
	if want := `db-0|odd\.name|web-[a-z0-9]+-[a-z0-9]+`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
