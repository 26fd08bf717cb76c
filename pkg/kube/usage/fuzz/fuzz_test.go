package fuzz

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/kube/usage"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func sloQuery(pc int32) usage.SLOQuery {
	return usage.SLOQuery{Namespace: "shop", Metric: "http_request_duration_seconds", Percentile: pc,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"route": "/api"}}}
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// bodyTransport answers every request with one response: status and body
// from the fuzzer, without a network. The fuzz function sets them before
// each input; inputs run one at a time in a worker.
type bodyTransport struct {
	status int
	body   []byte
}

func (b *bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: b.status, Status: http.StatusText(b.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(bytes.NewReader(b.body)),
		Request: r,
	}, nil
}

func validReading(t *testing.T, what string, r usage.Reading) {
	t.Helper()
	if r.OK && (math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Value < 0) {
		t.Fatalf("%s: an invalid value %v is marked OK", what, r.Value)
	}
}

// readers is how many readers FuzzPrometheusResponse chooses from.
const readers = 6

// FuzzPrometheusResponse feeds arbitrary Prometheus HTTP API answers to
// the readers of the Prometheus source (SLO, pod usage, history, goals, CPU
// pressure, a workload's what-if history; one per input): none may panic, and a value they mark valid
// (SLO and goal readings, history points, pressures) is finite and
// non-negative, as the recommender relies on; a pressure is also at most 1.
func FuzzPrometheusResponse(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a","container":"app","namespace":"shop"},"value":[1772366400,"0.5"]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1772366400,"NaN"]},{"metric":{"pod":"b"},"value":[1772366400,"-Inf"]}]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1772366400,"3"]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"pod":"web-a","container":"app"},"values":[[1772359200,"0.2"],[1772362800,"1e308"],[1772366400,"-1"]]}]}}`,
		`{"status":"success","data":{"resultType":"string","result":[1772366400,"x"]}}`,
		`{"status":"success","data":null}`,
		`{"status":"success"}`,
		`{"status":"error","errorType":"bad_data","error":"parse error"}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1e400,"1"]}]}}`,
		`not json`,
		``,
	} {
		for reader := range uint8(readers) {
			f.Add(reader, 200, []byte(seed))
		}
	}
	f.Add(uint8(0), 503, []byte(`{"status":"error","errorType":"unavailable","error":"down"}`))
	f.Add(uint8(2), 422, []byte(`{"status":"error","errorType":"execution","error":"too many samples"}`))
	// One source for every input: building it parses the query templates,
	// which would cost more than the input.
	answer := &bodyTransport{}
	p, err := usage.NewPrometheus(usage.PrometheusOptions{
		Address: "http://prometheus.test", Timeout: time.Second, Window: 2 * time.Minute,
		Now: func() time.Time { return now }, RoundTripper: answer,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, reader uint8, status int, body []byte) {
		if status < 100 || status > 599 {
			status = 200
		}
		answer.status, answer.body = status, body
		ctx := context.Background()

		// One reader per input: each asks several queries, all answered
		// with the same body.
		switch reader % readers {
		case 0:
			r, err := p.SLO(ctx, sloQuery(95))
			if err != nil {
				return
			}
			validReading(t, "request rate", r.RequestRate)
			validReading(t, "error rate", r.ErrorRate)
			for pc, l := range r.Latency {
				validReading(t, fmt.Sprintf("latency p%d", pc), l)
			}
		case 1:
			_, _ = p.PodUsage(ctx, "shop") // values pass through unvalidated; it must not panic
		case 2:
			h, err := p.History(ctx, usage.HistoryQuery{Namespace: "shop", PodRegex: "web-.+", Start: now.Add(-2 * time.Hour), End: now, Step: time.Hour})
			if err != nil {
				return
			}
			for _, c := range h.Containers {
				for _, pts := range [][]usage.Point{c.CPU, c.Memory} {
					for _, pt := range pts {
						validReading(t, "history point", usage.Reading{Value: pt.Value, OK: true})
					}
				}
			}
		case 5:
			const steps = 3
			h, err := p.WorkloadHistory(ctx, usage.WorkloadQuery{Namespace: "shop", PodRegex: "web-.+", Deployment: "web",
				SLOMetric: "http_request_duration_seconds", Start: now.Add(-2 * time.Hour), Steps: steps, Step: time.Hour})
			if err != nil {
				return
			}
			// Every series is on the grid; a value is a gap (NaN) or
			// finite and non-negative.
			for _, v := range [][]float64{h.Rate, h.Latency, h.CPU, h.Memory, h.Replicas, h.RequestCPU, h.RequestMemory, h.LimitCPU, h.LimitMemory} {
				if len(v) != steps {
					t.Fatalf("a series has %d values, want %d", len(v), steps)
				}
				for _, x := range v {
					if !math.IsNaN(x) {
						validReading(t, "workload history", usage.Reading{Value: x, OK: true})
					}
				}
			}
			for _, x := range h.StartupDelays {
				validReading(t, "start-up delay", usage.Reading{Value: x, OK: true})
			}
		case 4:
			r, err := p.CPUPressure(ctx, "shop")
			if err != nil {
				return
			}
			for k, v := range r.Containers {
				validReading(t, fmt.Sprintf("pressure of %+v", k), usage.Reading{Value: v, OK: true})
				if v > 1 {
					t.Fatalf("pressure of %+v is %v, above 1", k, v)
				}
			}
		default:
			for _, spec := range []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "inflight"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("10")}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qty("30")}}},
			} {
				if r, err := p.Goal(ctx, usage.GoalQuery{Namespace: "shop", Spec: spec}); err == nil {
					validReading(t, "goal value", r.Value)
					for pod, v := range r.PerPod {
						validReading(t, "goal of pod "+pod, usage.Reading{Value: v, OK: true})
					}
				}
			}
		}
	})
}
