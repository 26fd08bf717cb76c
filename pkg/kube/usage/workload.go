package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Named failures of the workload-history reader, so a caller can tell a
// slow Prometheus from one that says no.
var (
	// ErrPrometheusTimeout: a query did not finish within its timeout
	// (ours, or Prometheus' own query timeout).
	ErrPrometheusTimeout = errors.New("prometheus timed out")
	// ErrPrometheusRefused: Prometheus answered with an error status
	// (4xx, 5xx): a bad query, too many points, an overloaded server.
	ErrPrometheusRefused = errors.New("prometheus refused the query")
	// ErrPrometheusUnavailable: Prometheus could not be reached, or its
	// answer was not the Prometheus API's.
	ErrPrometheusUnavailable = errors.New("prometheus unavailable")
	// ErrNoRequestRate: the workload has neither an SLO metric nor a rate
	// query, so its request rate cannot be read.
	ErrNoRequestRate = errors.New("no request rate: give the SLO histogram's metric or a rate query")
)

// classify wraps err with the named failure it is.
func classify(err error) error {
	var pe *promv1.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrPrometheusTimeout, err)
	case errors.As(err, &pe) && (pe.Type == promv1.ErrTimeout || pe.Type == promv1.ErrCanceled ||
		// Prometheus answers its own query timeout with 503, whose JSON
		// body the client keeps undecoded in Detail.
		strings.Contains(pe.Detail, `"errorType":"timeout"`)):
		return fmt.Errorf("%w: %w", ErrPrometheusTimeout, err)
	case errors.As(err, &pe) && pe.Type != promv1.ErrBadResponse:
		return fmt.Errorf("%w: %w", ErrPrometheusRefused, err)
	case errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("%w: %w", ErrPrometheusUnavailable, err)
}

// WorkloadQuery asks for one workload's history, as the what-if replay
// needs it.
type WorkloadQuery struct {
	Namespace string
	// PodRegex matches the workload's pod names (RE2, anchored).
	PodRegex string
	// Deployment names the Deployment for kube-state-metrics' replica
	// count; empty counts the pods with CPU samples instead.
	Deployment string
	// SLOMetric names the classic histogram of the workload's latency
	// (spec.rl.slo.metric.name): the request rate is read from its
	// _count, the Percentile latency from its buckets. Selector narrows it.
	SLOMetric  string
	Selector   *metav1.LabelSelector
	Percentile float64
	// RateQuery, when set, is the PromQL of the request rate (requests/s,
	// one series), instead of the SLO histogram's.
	RateQuery string
	// InFlightQuery, when set, is a query template (QueryData's
	// .Namespace, .PodRegex and .Window, as the built-in templates take
	// them) answering each pod's requests in flight, one series per pod
	// labelled pod: an app's in-flight gauge, which the memory fit reads
	// instead of Little's law. CheckTemplate checks it.
	InFlightQuery string
	// Start is the first step's time; Steps the number of steps.
	Start time.Time
	Steps int
	Step  time.Duration
	// Timeout bounds each range query; zero means the source's.
	Timeout time.Duration
	// Progress, if set, is told after each range query how many of the
	// total are done.
	Progress func(done, total int)
}

// WorkloadHistory is a workload's history on the grid Start + i·Step, one
// value per step; NaN marks a step without a sample (a gap, a dropped
// value, or a metric not served). CPU and memory are per pod, summed over
// the pod's containers and averaged over the pods; requests and limits
// likewise (per pod, summed over containers).
type WorkloadHistory struct {
	Start time.Time
	Step  time.Duration
	// Rate is the request rate (requests/s); Latency its Percentile (s).
	Rate, Latency []float64
	CPU, Memory   []float64
	// InFlight is the requests in flight per pod (InFlightQuery's series,
	// averaged over the pods); nil without the query.
	InFlight []float64
	// Replicas is kube-state-metrics' status.replicas, else the number of
	// pods cAdvisor saw (podCount).
	Replicas                                         []float64
	RequestCPU, RequestMemory, LimitCPU, LimitMemory []float64
	// StartupDelays are the seconds from start to Ready of the pods
	// kube-state-metrics reports (kube_pod_status_ready_time −
	// kube_pod_start_time, each pod's last value), sorted; empty without
	// kube-state-metrics.
	StartupDelays []float64
	// Sources says where each series came from, or that it was not served
	// ("none"), by series name.
	Sources map[string]string
	// Dropped counts NaN, infinite and negative samples discarded.
	Dropped Drops
}

// PeakInFlightQuery is a WorkloadQuery.InFlightQuery template for an app's
// in-flight gauge metric, labelled namespace and pod: each pod's peak over
// .Window, the range the working set's peak is read over (the built-in
// memory template's max_over_time), so that both sides of the memory fit
// are read alike.
func PeakInFlightQuery(metric string) string {
	return `sum by (pod) (max_over_time(` + metric + `{namespace="{{.Namespace}}", pod=~"{{.PodRegex}}"}[{{.Window}}]))`
}

// qInFlight names WorkloadQuery.InFlightQuery's template in errors.
const qInFlight = "inFlight"

// CheckTemplate checks text as a query template named name: it parses, and
// executes with empty query data, as NewPrometheus checks its own.
func CheckTemplate(name, text string) error {
	t, err := parseQuery(name, text)
	if err != nil {
		return err
	}
	_, err = t.execute(QueryData{})
	return err
}

// WorkloadHistory reads one workload's request rate, latency, per-pod CPU
// and memory, replicas and per-pod requests and limits with range queries,
// each split into chunks of at most MaxHistoryPoints steps. Counters are
// read through rate(), which Prometheus corrects for counter resets; a
// negative value, which a reset can only give through a broken recording
// rule, is dropped and counted like NaN. A failed query fails the whole
// read, wrapped in ErrPrometheusTimeout, ErrPrometheusRefused or
// ErrPrometheusUnavailable.
func (p *Prometheus) WorkloadHistory(ctx context.Context, q WorkloadQuery) (WorkloadHistory, error) {
	h := WorkloadHistory{Start: q.Start, Step: q.Step, Sources: map[string]string{}, Dropped: Drops{}}
	if err := validNamespace(q.Namespace); err != nil {
		return h, err
	}
	switch {
	case q.PodRegex == "":
		return h, errors.New("workload history: empty pod regex")
	case q.Step <= 0 || q.Steps <= 0:
		return h, fmt.Errorf("workload history: need step > 0 and steps > 0, got %s and %d", q.Step, q.Steps)
	case q.SLOMetric == "" && q.RateQuery == "":
		return h, ErrNoRequestRate
	}
	if q.SLOMetric != "" {
		if err := ValidMetricName(q.SLOMetric); err != nil {
			return h, err
		}
	}
	if q.Deployment != "" {
		if err := validNamespace(q.Deployment); err != nil {
			return h, fmt.Errorf("deployment: %w", err)
		}
	}
	sel, err := Matchers(q.Selector)
	if err != nil {
		return h, err
	}
	pc := q.Percentile
	if pc == 0 {
		pc = 95
	}
	timeout := q.Timeout
	if timeout <= 0 {
		timeout = p.timeout
	}
	window := Window(max(q.Step, p.window)) // rate() needs two scrapes
	d := QueryData{Namespace: q.Namespace, PodRegex: quote(q.PodRegex), Metric: q.SLOMetric, Selector: sel,
		Percentile: pc, Quantile: pc / 100, Window: window}
	type job struct {
		name, query string
		into        func(m model.Metric, i int, v float64)
	}
	n := q.Steps
	nan := func() []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = math.NaN()
		}
		return s
	}
	h.Rate, h.Latency, h.Replicas = nan(), nan(), nan()
	// Per-pod sums at each step, reduced to means after all queries.
	perPod := map[string][]map[string]float64{}
	pod := func(series string) func(m model.Metric, i int, v float64) {
		perPod[series] = make([]map[string]float64, n)
		return func(m model.Metric, i int, v float64) {
			name := string(m["pod"])
			if name == "" {
				return
			}
			at := perPod[series]
			if at[i] == nil {
				at[i] = map[string]float64{}
			}
			at[i][name] += v
		}
	}
	one := func(dst []float64) func(model.Metric, int, float64) {
		return func(_ model.Metric, i int, v float64) {
			if math.IsNaN(dst[i]) {
				dst[i] = 0
			}
			dst[i] += v // a query of one series; more are summed
		}
	}
	render := func(name string) (string, error) { return p.Render(name, d) }
	var jobs []job
	rateQuery, latencyQuery := q.RateQuery, ""
	if rateQuery == "" {
		if rateQuery, err = render(qRequestRate); err != nil {
			return h, err
		}
	}
	if q.SLOMetric != "" {
		if latencyQuery, err = render(qLatency); err != nil {
			return h, err
		}
	}
	cpuQuery, err := render(qCPU)
	if err != nil {
		return h, err
	}
	memQuery, err := render(qMemory)
	if err != nil {
		return h, err
	}
	jobs = append(jobs, job{"rate", rateQuery, one(h.Rate)})
	h.Sources["rate"] = rateQuery
	if latencyQuery != "" {
		jobs = append(jobs, job{"latency", latencyQuery, one(h.Latency)})
		h.Sources["latency"] = latencyQuery
	} else {
		h.Latency = nil
		h.Sources["latency"] = "none"
	}
	jobs = append(jobs, job{"cpu", cpuQuery, pod("cpu")}, job{"memory", memQuery, pod("memory")})
	if q.InFlightQuery != "" {
		t, err := parseQuery(qInFlight, q.InFlightQuery)
		if err != nil {
			return h, fmt.Errorf("in-flight query template: %w", err)
		}
		inFlightQuery, err := t.execute(d)
		if err != nil {
			return h, fmt.Errorf("in-flight query template: %w", err)
		}
		jobs = append(jobs, job{"inFlight", inFlightQuery, pod("inFlight")})
		h.Sources["inFlight"] = inFlightQuery
	}
	ksm := func(metric, resource string) string {
		return fmt.Sprintf(`sum by (pod) (%s{namespace="%s", pod=~"%s", resource="%s"})`, metric, q.Namespace, quote(q.PodRegex), resource)
	}
	for _, k := range []struct{ series, metric, resource string }{
		{"requestCPU", "kube_pod_container_resource_requests", "cpu"},
		{"requestMemory", "kube_pod_container_resource_requests", "memory"},
		{"limitCPU", "kube_pod_container_resource_limits", "cpu"},
		{"limitMemory", "kube_pod_container_resource_limits", "memory"},
	} {
		jobs = append(jobs, job{k.series, ksm(k.metric, k.resource), pod(k.series)})
	}
	sel2 := fmt.Sprintf(`{namespace="%s", pod=~"%s"}`, q.Namespace, quote(q.PodRegex))
	jobs = append(jobs, job{"startup", fmt.Sprintf(`max by (pod) (kube_pod_status_ready_time%s) - on (pod) max by (pod) (kube_pod_start_time%s)`, sel2, sel2), pod("startup")})
	if q.Deployment != "" {
		rq := fmt.Sprintf(`sum(kube_deployment_status_replicas{namespace="%s", deployment="%s"})`, q.Namespace, q.Deployment)
		jobs = append(jobs, job{"replicas", rq, one(h.Replicas)})
	}
	chunks := (n + MaxHistoryPoints - 1) / MaxHistoryPoints
	total, done := len(jobs)*chunks, 0
	for _, j := range jobs {
		for c := range chunks {
			first, last := c*MaxHistoryPoints, min((c+1)*MaxHistoryPoints, n)-1
			r := promv1.Range{Start: q.Start.Add(time.Duration(first) * q.Step), End: q.Start.Add(time.Duration(last) * q.Step), Step: q.Step}
			m, err := p.ranged(ctx, j.name, j.query, r, timeout)
			if err != nil {
				return h, classify(err)
			}
			for _, ss := range m {
				for _, v := range ss.Values {
					i, onGrid := index(v.Timestamp.Time(), q.Start, q.Step)
					if !onGrid || i < first || i > last {
						continue // Prometheus answers on the grid; anything else is not ours
					}
					x := float64(v.Value)
					if pr := problem(x); pr != "" {
						h.Dropped[pr]++
						continue
					}
					j.into(ss.Metric, i, x)
				}
			}
			done++
			if q.Progress != nil {
				q.Progress(done, total)
			}
		}
	}
	var sorted []float64
	means := func(series string) []float64 {
		out := nan()
		for i, pods := range perPod[series] {
			if len(pods) == 0 {
				continue
			}
			// Summed in the values' order, not the map's, which changes
			// from run to run: a history read twice is the same to the
			// bit, and so is all that is fitted and replayed from it.
			sorted = sorted[:0]
			for _, v := range pods {
				sorted = append(sorted, v)
			}
			slices.Sort(sorted)
			var s float64
			for _, v := range sorted {
				s += v
			}
			out[i] = s / float64(len(pods))
		}
		return out
	}
	h.CPU, h.Memory = means("cpu"), means("memory")
	if q.InFlightQuery != "" {
		h.InFlight = means("inFlight")
	}
	h.RequestCPU, h.RequestMemory = means("requestCPU"), means("requestMemory")
	h.LimitCPU, h.LimitMemory = means("limitCPU"), means("limitMemory")
	h.Sources["cpu"], h.Sources["memory"] = "cadvisor", "cadvisor"
	for _, s := range []string{"requestCPU", "requestMemory", "limitCPU", "limitMemory"} {
		h.Sources[s] = "kube-state-metrics"
		if !slices.ContainsFunc(perPod[s], func(m map[string]float64) bool { return len(m) > 0 }) {
			h.Sources[s] = "none"
		}
	}
	last := map[string]float64{}
	for _, pods := range perPod["startup"] {
		for name, v := range pods {
			last[name] = v
		}
	}
	for _, v := range last {
		h.StartupDelays = append(h.StartupDelays, v)
	}
	slices.Sort(h.StartupDelays)
	h.Sources["startup"] = "kube-state-metrics"
	if len(h.StartupDelays) == 0 {
		h.Sources["startup"] = "none"
	}
	h.Sources["replicas"] = "kube-state-metrics"
	if q.Deployment == "" || !slices.ContainsFunc(h.Replicas, func(x float64) bool { return !math.IsNaN(x) }) {
		// No kube-state-metrics: count the pods cAdvisor saw.
		h.Sources["replicas"] = "pod count"
		for i, c := range podCount(perPod["cpu"], perPod["memory"]) {
			if c > 0 {
				h.Replicas[i] = float64(c)
			}
		}
	}
	return h, nil
}

// podCount counts, at each step, the pods that lived then: from the first
// step any of the series has a sample of the pod to the last. A pod is
// counted through a step where its samples are missing or dropped (a
// rate() over two scrapes, one of them lost on a busy node, has no value)
// and from its first working set, a scrape before its first CPU rate.
// Counting only the pods with a CPU sample read a real HPA run's cost 9–12%
// below the cost of its pods' requests (docs/whatif.md).
func podCount(series ...[]map[string]float64) []int {
	n := 0
	for _, s := range series {
		n = max(n, len(s))
	}
	type span struct{ first, last int }
	spans := map[string]span{}
	for _, s := range series {
		for i, pods := range s {
			for name := range pods {
				sp, seen := spans[name]
				if !seen {
					sp = span{i, i}
				}
				sp.first, sp.last = min(sp.first, i), max(sp.last, i)
				spans[name] = sp
			}
		}
	}
	out := make([]int, n)
	for _, sp := range spans {
		for i := sp.first; i <= sp.last; i++ {
			out[i]++
		}
	}
	return out
}

// index maps t to its step on the grid start + i·step.
func index(t, start time.Time, step time.Duration) (int, bool) {
	d := t.Sub(start)
	if d < 0 || d%step != 0 {
		return 0, false
	}
	return int(d / step), true
}
