package usage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Reasons a Prometheus value is dropped. They equal the recommender's
// invalid-sample reasons so both land in one counter.
const (
	DropNaN      = "nan"
	DropInfinite = "infinite"
	DropNegative = "negative"
)

// Drops counts dropped values by reason.
type Drops map[string]int

// problem returns why x cannot be used, or "".
func problem(x float64) string {
	switch {
	case math.IsNaN(x):
		return DropNaN
	case math.IsInf(x, 0):
		return DropInfinite
	case x < 0:
		return DropNegative
	}
	return ""
}

// Queries are PromQL templates in Go's text/template syntax (the part of
// it query.go executes: fields, if/else/with, pipelines and the functions
// of QueryFuncNames). Each is executed with a QueryData; a zero field means
// its default (DefaultQueries).
type Queries struct {
	// CPU returns per-pod, per-container CPU usage in cores; its result
	// must carry the labels namespace, pod and container.
	CPU string
	// Memory returns per-pod, per-container working set in bytes, with
	// the same labels.
	Memory string
	// CPUPressure returns per-pod, per-container CPU pressure, the share
	// of the window in which some of the container's runnable work waited
	// for CPU (0 to 1), with the same labels.
	CPUPressure string
	// Latency returns the .Quantile latency (seconds) of the histogram
	// .Metric.
	Latency string
	// RequestRate returns requests per second counted by the histogram
	// .Metric.
	RequestRate string
	// ErrorRate returns failed (or timed-out) requests per second of the
	// workload whose latency histogram is .Metric.
	ErrorRate string
	// Pods returns a per-pod value of .Metric; its result must carry the
	// pod label.
	Pods string
	// Object returns the value of .Metric for the object .ObjectKind /
	// .ObjectName.
	Object string
	// External returns the value of the external metric .Metric.
	External string
}

// DefaultQueries are the templates used when none is configured. CPU and
// memory follow cAdvisor's metric names as scraped from the kubelet
// (container="" is the pod cgroup and "POD" the pause container, both
// excluded). CPU pressure is the rate of cAdvisor's PSI counter
// container_pressure_cpu_waiting_seconds_total (seconds in which some task
// of the container waited for CPU), which kubelets export on cgroup v2
// with the KubeletPSI feature (Kubernetes 1.34 and later); elsewhere the
// query returns nothing and pressure is not measured. Latency and request
// rate read a classic Prometheus histogram named by
// spec.rl.slo.metric.name (<name>_bucket, <name>_count). The
// error rate reads the counter of failed requests that goes with it by
// name: <prefix>_failed_requests_total for a histogram named
// <prefix>_request_duration_seconds (as the e2e workload emulator serves
// them, timed-out requests included); for a histogram named otherwise the
// counter is <name>_failed_requests_total, and a workload without such a
// counter has no error rate (the query returns nothing). Pods,
// Object and External read the named metric's instant value (a gauge); a
// counter needs a template with rate().
func DefaultQueries() Queries {
	return Queries{
		CPU: `sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{pod=~"{{.PodRegex}}"` +
			`{{if .Namespace}}, namespace="{{.Namespace}}"{{end}}, container!="", container!="POD"}[{{.Window}}]))`,
		Memory: `max by (namespace, pod, container) (max_over_time(container_memory_working_set_bytes{pod=~"{{.PodRegex}}"` +
			`{{if .Namespace}}, namespace="{{.Namespace}}"{{end}}, container!="", container!="POD"}[{{.Window}}]))`,
		CPUPressure: `sum by (namespace, pod, container) (rate(container_pressure_cpu_waiting_seconds_total{pod=~"{{.PodRegex}}"` +
			`{{if .Namespace}}, namespace="{{.Namespace}}"{{end}}, container!="", container!="POD"}[{{.Window}}]))`,
		Latency: `histogram_quantile({{.Quantile}}, sum by (le) (rate({{.Metric}}_bucket{namespace="{{.Namespace}}"` +
			`{{with .Selector}}, {{.}}{{end}}}[{{.Window}}])))`,
		RequestRate: `sum(rate({{.Metric}}_count{namespace="{{.Namespace}}"{{with .Selector}}, {{.}}{{end}}}[{{.Window}}]))`,
		ErrorRate: `sum(rate({{.Metric | trimSuffix "_request_duration_seconds"}}_failed_requests_total{namespace="{{.Namespace}}"` +
			`{{with .Selector}}, {{.}}{{end}}}[{{.Window}}]))`,
		Pods: `sum by (pod) ({{.Metric}}{namespace="{{.Namespace}}", pod=~"{{.PodRegex}}"{{with .Selector}}, {{.}}{{end}}})`,
		Object: `sum({{.Metric}}{namespace="{{.Namespace}}", {{.ObjectKind}}="{{.ObjectName}}"` +
			`{{with .Selector}}, {{.}}{{end}}})`,
		External: `sum({{.Metric}}{ {{- .Selector -}} })`,
	}
}

// QueryData is what a query template sees. String fields are escaped for
// use inside a double-quoted PromQL string; Metric, ObjectKind and
// Selector are validated to be safe where the defaults put them.
type QueryData struct {
	// Namespace is the autoscaler's namespace; empty for "all namespaces"
	// (CPU, Memory and CPUPressure only).
	Namespace string
	// PodRegex matches the pod names of interest (RE2, fully anchored by
	// PromQL).
	PodRegex string
	// Container names one container for a template that wants it; every
	// built-in caller leaves it empty (the CPU and memory queries return
	// all containers, told apart by their container label).
	Container string
	// Metric is a Prometheus metric name.
	Metric string
	// Selector is the metric's label selector as comma-separated PromQL
	// label matchers, without braces; empty when there is none. For an
	// External goal it starts with namespace="<the autoscaler's
	// namespace>" unless that namespace may read cluster-wide metrics
	// (PrometheusOptions.ClusterWideExternalNamespaces): a custom External
	// template must use it to stay scoped.
	Selector string
	// Percentile is the SLO percentile (e.g. 95); Quantile is the same as
	// a fraction (0.95), as histogram_quantile takes it.
	Percentile float64
	Quantile   float64
	// Window is a PromQL duration ("2m") for rate() and *_over_time().
	Window string
	// ObjectKind is the described object's kind in lower case (the label
	// name the object is exposed under, e.g. "ingress"); ObjectName its
	// name.
	ObjectKind string
	ObjectName string
}

// PrometheusOptions configure a Prometheus source.
type PrometheusOptions struct {
	// Address is the base URL of the Prometheus HTTP API, e.g.
	// http://prometheus.monitoring:9090.
	Address string
	// Timeout bounds each query (sent to Prometheus as its timeout too).
	Timeout time.Duration
	// Window is the rate window of instant queries (current usage, SLO,
	// goal metrics). It should cover at least two scrapes.
	Window time.Duration
	// Queries are the templates; zero fields mean defaults.
	Queries Queries
	// RoundTripper is the HTTP transport; nil means http.DefaultTransport.
	RoundTripper http.RoundTripper
	// Now is the clock of instant queries; nil means time.Now.
	Now func() time.Time
	// Observer, if set, is told the outcome of every query.
	Observer QueryObserver
	// ClusterWideExternalNamespaces are the namespaces whose External goal
	// metrics are read across the cluster. Elsewhere an External query is
	// scoped to the autoscaler's namespace (a namespace="..." matcher
	// leads its .Selector), so that an autoscaler's author cannot read
	// another namespace's series through status.currentMetrics.
	ClusterWideExternalNamespaces []string
}

// QueryObserver is told the outcome of every Prometheus query, e.g. to
// count failures: name is the template (cpu, memory, cpuPressure, latency,
// requestRate, errorRate, pods, object, external), err nil for an answer
// Prometheus gave (possibly empty) and the failure otherwise (unreachable,
// an error status, a malformed or unexpected answer). It must be safe for
// concurrent use.
type QueryObserver interface {
	ObservePrometheusQuery(name string, err error)
}

// Prometheus reads usage, CPU pressure, latency, request rate, goal
// metrics and usage history from the Prometheus HTTP API. It is safe for
// concurrent use.
type Prometheus struct {
	api     promv1.API
	client  api.Client // range queries, decoded by queryRange
	timeout time.Duration
	window  time.Duration
	now     func() time.Time
	tmpl    map[string]*queryTemplate
	obs     QueryObserver
	// clusterWide: namespaces whose External goals are not scoped.
	clusterWide map[string]bool
}

var _ Source = (*Prometheus)(nil)

// Template names, for errors and logs.
const (
	qCPU         = "cpu"
	qMemory      = "memory"
	qCPUPressure = "cpuPressure"
	qLatency     = "latency"
	qRequestRate = "requestRate"
	qErrorRate   = "errorRate"
	qPods        = "pods"
	qObject      = "object"
	qExternal    = "external"
)

// QueryNames lists the template names, as QueryObserver receives them.
func QueryNames() []string {
	return []string{qCPU, qMemory, qCPUPressure, qLatency, qRequestRate, qErrorRate, qPods, qObject, qExternal}
}

// NewPrometheus validates the options and parses the templates. It does
// not contact Prometheus.
func NewPrometheus(o PrometheusOptions) (*Prometheus, error) {
	if o.Address == "" {
		return nil, errors.New("prometheus address is empty")
	}
	if o.Timeout <= 0 || o.Window <= 0 {
		return nil, fmt.Errorf("prometheus timeout (%s) and window (%s) must be positive", o.Timeout, o.Window)
	}
	c, err := api.NewClient(api.Config{Address: o.Address, RoundTripper: o.RoundTripper})
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %q: %w", o.Address, err)
	}
	def := DefaultQueries()
	pick := func(v, d string) string {
		if strings.TrimSpace(v) == "" {
			return d
		}
		return v
	}
	p := &Prometheus{api: promv1.NewAPI(c), client: c, timeout: o.Timeout, window: o.Window, now: o.Now, tmpl: map[string]*queryTemplate{}, obs: o.Observer}
	if p.now == nil {
		p.now = time.Now
	}
	var errs []error
	p.clusterWide = map[string]bool{}
	for _, ns := range o.ClusterWideExternalNamespaces {
		if err := validNamespace(ns); err != nil {
			errs = append(errs, fmt.Errorf("cluster-wide external metrics namespace %q: %w", ns, err))
		}
		p.clusterWide[ns] = true
	}
	for name, text := range map[string]string{
		qCPU: pick(o.Queries.CPU, def.CPU), qMemory: pick(o.Queries.Memory, def.Memory),
		qLatency: pick(o.Queries.Latency, def.Latency), qRequestRate: pick(o.Queries.RequestRate, def.RequestRate),
		qErrorRate: pick(o.Queries.ErrorRate, def.ErrorRate), qPods: pick(o.Queries.Pods, def.Pods),
		qObject: pick(o.Queries.Object, def.Object), qExternal: pick(o.Queries.External, def.External),
		qCPUPressure: pick(o.Queries.CPUPressure, def.CPUPressure),
	} {
		t, err := parseQuery(name, text)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s query template: %w", name, err))
			continue
		}
		// Execute once with sample data so a template referring to an
		// unknown field fails at start-up, not at the first query.
		if _, err := t.execute(QueryData{}); err != nil {
			errs = append(errs, fmt.Errorf("%s query template: %w", name, err))
			continue
		}
		p.tmpl[name] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// Render executes the named template (cpu, memory, cpuPressure, latency,
// requestRate, errorRate, pods, object, external) with d.
func (p *Prometheus) Render(name string, d QueryData) (string, error) {
	t := p.tmpl[name]
	if t == nil {
		return "", fmt.Errorf("no query template %q", name)
	}
	q, err := t.execute(d)
	if err != nil {
		return "", fmt.Errorf("rendering the %s query: %w", name, err)
	}
	return q, nil
}

// Window formats d as a PromQL duration.
func Window(d time.Duration) string { return model.Duration(d).String() }

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// ValidMetricName reports an error unless n is a Prometheus metric name.
func ValidMetricName(n string) error {
	if !metricName.MatchString(n) {
		return fmt.Errorf("%q is not a Prometheus metric name", n)
	}
	return nil
}

// quote escapes s for use inside a double-quoted PromQL string.
func quote(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Matchers converts a Kubernetes label selector to PromQL label matchers
// (comma-separated, sorted, without braces): matchLabels k=v as k="v", In
// as k=~"v1|v2", NotIn as k!~"v1|v2", Exists as k!="", DoesNotExist as
// k="". Label names must be Prometheus label names (no dots or slashes).
func Matchers(sel *metav1.LabelSelector) (string, error) {
	if sel == nil {
		return "", nil
	}
	var out []string
	for k, v := range sel.MatchLabels {
		if !labelName.MatchString(k) {
			return "", fmt.Errorf("selector label %q is not a Prometheus label name", k)
		}
		out = append(out, fmt.Sprintf(`%s="%s"`, k, quote(v)))
	}
	for _, e := range sel.MatchExpressions {
		if !labelName.MatchString(e.Key) {
			return "", fmt.Errorf("selector label %q is not a Prometheus label name", e.Key)
		}
		alt := make([]string, len(e.Values))
		for i, v := range e.Values {
			alt[i] = regexp.QuoteMeta(v)
		}
		slices.Sort(alt)
		re := quote(strings.Join(alt, "|"))
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			out = append(out, fmt.Sprintf(`%s=~"%s"`, e.Key, re))
		case metav1.LabelSelectorOpNotIn:
			out = append(out, fmt.Sprintf(`%s!~"%s"`, e.Key, re))
		case metav1.LabelSelectorOpExists:
			out = append(out, e.Key+`!=""`)
		case metav1.LabelSelectorOpDoesNotExist:
			out = append(out, e.Key+`=""`)
		default:
			return "", fmt.Errorf("selector operator %q is not supported", e.Operator)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", "), nil
}

// instant runs an instant query and returns its samples.
func (p *Prometheus) instant(ctx context.Context, name, query string) (vec model.Vector, err error) {
	defer func() { p.observe(name, err) }()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	v, _, _, err := p.api.Query(ctx, query, p.now(), promv1.WithTimeout(p.timeout))
	if err != nil {
		return nil, fmt.Errorf("prometheus %s query %q: %w", name, query, err)
	}
	switch r := v.(type) {
	case model.Vector:
		return r, nil
	case *model.Scalar:
		return model.Vector{{Value: r.Value, Timestamp: r.Timestamp}}, nil
	}
	return nil, fmt.Errorf("prometheus %s query %q: result type %s, want vector", name, query, typeOf(v))
}

// ranged runs a range query.
func (p *Prometheus) ranged(ctx context.Context, name, query string, r promv1.Range, timeout time.Duration) (m model.Matrix, err error) {
	defer func() { p.observe(name, err) }()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if m, err = queryRange(ctx, p.client, query, r, timeout); err != nil {
		return nil, fmt.Errorf("prometheus %s range query %q: %w", name, query, err)
	}
	return m, nil
}

func (p *Prometheus) observe(name string, err error) {
	if p.obs != nil {
		p.obs.ObservePrometheusQuery(name, err)
	}
}

// typeOf names a result's type; a nil result (a "success" answer without
// data) must not panic.
func typeOf(v model.Value) string {
	if v == nil {
		return "none"
	}
	return v.Type().String()
}

// PodUsage implements Source: current CPU (rate over the window) and
// memory working set (peak over the window) of every pod in namespace
// ("" = all). Values are passed through unvalidated, as Source requires.
func (p *Prometheus) PodUsage(ctx context.Context, namespace string) ([]PodUsage, error) {
	d := QueryData{Namespace: quote(namespace), PodRegex: ".+", Window: Window(p.window)}
	type key struct{ ns, pod string }
	pods := map[key]*PodUsage{}
	var order []key
	for _, res := range []string{qCPU, qMemory} {
		q, err := p.Render(res, d)
		if err != nil {
			return nil, err
		}
		vec, err := p.instant(ctx, res, q)
		if err != nil {
			return nil, err
		}
		for _, s := range vec {
			k := key{string(s.Metric["namespace"]), string(s.Metric["pod"])}
			c := string(s.Metric["container"])
			if k.pod == "" || c == "" {
				continue // not a container series; the template lost a label
			}
			pu := pods[k]
			if pu == nil {
				pu = &PodUsage{Namespace: k.ns, Name: k.pod, Timestamp: s.Timestamp.Time(), Window: p.window}
				pods[k] = pu
				order = append(order, k)
			}
			i := slices.IndexFunc(pu.Containers, func(cu ContainerUsage) bool { return cu.Name == c })
			if i < 0 {
				pu.Containers = append(pu.Containers, ContainerUsage{Name: c})
				i = len(pu.Containers) - 1
			}
			if res == qCPU {
				pu.Containers[i].CPU = float64(s.Value)
			} else {
				pu.Containers[i].Memory = float64(s.Value)
			}
		}
	}
	out := make([]PodUsage, 0, len(order))
	for _, k := range order {
		out = append(out, *pods[k])
	}
	return out, nil
}

// validNamespace rejects what cannot be a namespace, so it is safe in a
// query.
func validNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}
