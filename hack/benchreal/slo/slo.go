// Package slo holds the pure parts of the real-node benchmark's SLO inputs
// (make bench-real, hack/benchreal, --slo-metrics): the testbed
// Prometheus's scrape job for the test app's replicas (found through the
// file_sd targets each replica writes, e2e/cmd/testapp --file-sd), the
// request-rate and p95 queries the recommender runs for spec.rl.slo (its
// default templates, pkg/kube/usage.DefaultQueries), the parse of an
// instant query's answer, and the check that the inputs were there. The
// simulator's policies see the request rate and the p95 in every window;
// without this the fused default on the real node saw neither (rules 3, 7
// and 8 of pkg/core/fusion were off), so the comparison was not like for
// like. It does no I/O, so all of it is unit-tested.
package slo

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The markers around the job WithScrapeJob adds, so that it is replaced
// (not added twice) by a second invocation and removed by WithoutScrapeJob.
const (
	beginMarker = "# BEGIN aware bench-real scrape job"
	endMarker   = "# END aware bench-real scrape job"
)

// ScrapeJob is the scrape_configs entry for the test app's replicas: every
// file_sd target file in dir (dir/*.json, one per replica, labelled
// namespace and pod), scraped every interval seconds. Prometheus re-reads
// the files every interval, so a new replica is scraped within about two
// intervals and a removed one stops being scraped. extra are further
// entries (CAdvisorJob) kept between the same markers, so that
// WithoutScrapeJob removes them too.
func ScrapeJob(name, dir string, intervalSeconds int, extra ...string) string {
	return fmt.Sprintf(`%s
- job_name: %s
  scrape_interval: %ds
  scrape_timeout: %ds
  file_sd_configs:
  - files: ['%s/*.json']
    refresh_interval: %ds
%s%s
`, beginMarker, name, intervalSeconds, max(1, intervalSeconds-1), dir, intervalSeconds, strings.Join(extra, ""), endMarker)
}

// CAdvisorJob is the scrape_configs entry for a real kubelet's cAdvisor
// metrics (container_cpu_usage_seconds_total,
// container_memory_working_set_bytes per namespace, pod and container),
// which recommender whatif reads: the kubelet at target (host:port) over
// TLS, verified with caFile, as the client certFile/keyFile (one the
// kubelet's webhook authorizer lets read metrics, such as the API
// server's kubelet client).
func CAdvisorJob(name, target, caFile, certFile, keyFile string, intervalSeconds int) string {
	return fmt.Sprintf(`- job_name: %s
  scrape_interval: %ds
  scrape_timeout: %ds
  scheme: https
  metrics_path: /metrics/cadvisor
  tls_config:
    ca_file: %s
    cert_file: %s
    key_file: %s
  static_configs:
  - targets: ['%s']
`, name, intervalSeconds, max(1, intervalSeconds-1), caFile, certFile, keyFile, target)
}

// WithScrapeJob returns config (a Prometheus configuration whose last
// top-level key is scrape_configs, as hack/testbed/up.sh writes it) with
// job appended to its scrape_configs, replacing a job added before.
func WithScrapeJob(config, job string) (string, error) {
	base := WithoutScrapeJob(config)
	if !strings.Contains(base, "\nscrape_configs:") && !strings.HasPrefix(base, "scrape_configs:") {
		return "", fmt.Errorf("the Prometheus configuration has no scrape_configs")
	}
	if i := strings.LastIndex(base, "\nscrape_configs:"); i >= 0 {
		// Nothing may follow scrape_configs at the top level, or the job
		// would land in another key.
		for _, line := range strings.Split(base[i+1:], "\n")[1:] {
			if line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "#") {
				return "", fmt.Errorf("the Prometheus configuration has the top-level key %q after scrape_configs", line)
			}
		}
	}
	if !strings.HasSuffix(base, "\n") {
		base += "\n"
	}
	return base + job, nil
}

// WithoutScrapeJob removes the job WithScrapeJob added, if any.
func WithoutScrapeJob(config string) string {
	i := strings.Index(config, beginMarker)
	if i < 0 {
		return config
	}
	j := strings.Index(config[i:], endMarker)
	if j < 0 {
		return config[:i]
	}
	rest := config[i+j+len(endMarker):]
	return config[:i] + strings.TrimPrefix(rest, "\n")
}

// RateQuery is the recommender's default request-rate query
// (--prometheus-query-request-rate) for the histogram metric in namespace
// over window, rendered.
func RateQuery(metric, namespace, window string) string {
	return fmt.Sprintf(`sum(rate(%s_count{namespace="%s"}[%s]))`, metric, namespace, window)
}

// LatencyQuery is the recommender's default latency query
// (--prometheus-query-latency) at quantile q (0.95 for the p95).
func LatencyQuery(metric, namespace, window string, q float64) string {
	return fmt.Sprintf(`histogram_quantile(%s, sum by (le) (rate(%s_bucket{namespace="%s"}[%s])))`,
		strconv.FormatFloat(q, 'f', -1, 64), metric, namespace, window)
}

// InFlightQuery sums a gauge over namespace's pods at their last scrape:
// for the app's in-flight gauge, the requests its replicas held then (a
// series a real cluster has wherever its app exports one).
func InFlightQuery(metric, namespace string) string {
	return fmt.Sprintf(`sum(%s{namespace="%s"})`, metric, namespace)
}

// SeriesQuery counts the gauge's series in namespace at their last scrape:
// the pods InFlightQuery summed (a pod whose last scrape failed has none).
func SeriesQuery(metric, namespace string) string {
	return fmt.Sprintf(`count(%s{namespace="%s"})`, metric, namespace)
}

// Scalar reads the one value of an instant query's answer (the body of
// /api/v1/query). ok is false when the answer has no sample, or a NaN or
// infinite one (histogram_quantile over no requests): the recommender
// then has no reading either.
func Scalar(body []byte) (v float64, ok bool, err error) {
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return 0, false, fmt.Errorf("prometheus answer: %w", err)
	}
	if resp.Status != "success" {
		return 0, false, fmt.Errorf("prometheus answer: status %q: %s", resp.Status, resp.Error)
	}
	if resp.Data.ResultType != "vector" {
		return 0, false, fmt.Errorf("prometheus answer: result type %q, want vector", resp.Data.ResultType)
	}
	switch len(resp.Data.Result) {
	case 0:
		return 0, false, nil
	case 1:
	default:
		return 0, false, fmt.Errorf("prometheus answer: %d series, want one", len(resp.Data.Result))
	}
	s, isString := resp.Data.Result[0].Value[1].(string)
	if !isString {
		return 0, false, fmt.Errorf("prometheus answer: value %v is not a string", resp.Data.Result[0].Value[1])
	}
	v, err = strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("prometheus answer: %w", err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false, nil
	}
	return v, true, nil
}

// Reasons are the ScalingActive reasons with which the recommender says it
// could not use spec.rl.slo (recommender/controller, applySLO).
var Reasons = []string{"NoSLOSource", "SLOMetricsUnavailable", "SLOMetricMissing", "SLOMetricInvalid"}

// Look is one window's view of the SLO inputs: what Prometheus answered to
// the recommender's queries, and the reason of the autoscaler's
// ScalingActive condition.
type Look struct {
	// Traffic: the load generator sent requests in the window.
	Traffic bool
	// Rate and P95 are the answers; RateOK and P95OK whether there was one.
	Rate, P95     float64
	RateOK, P95OK bool
	// InFlight is the app's requests in flight (InFlightQuery) over
	// InFlightPods pods (SeriesQuery); InFlightOK whether Prometheus had both.
	InFlight, InFlightPods float64
	InFlightOK             bool
	// Reason of ScalingActive, "" where the autoscaler had none yet (or
	// the policy has no autoscaler).
	Reason string
}

// Check is the verdict over a run's windows.
type Check struct {
	// Windows with traffic after the warm-up; WithRate and WithP95 those
	// of them in which the recommender's queries had an answer; Refused
	// those in which the autoscaler said it could not use the SLO.
	Windows, WithRate, WithP95, Refused int
	// Reasons counts the SLO reasons seen.
	Reasons map[string]int
}

// Judge checks the looks after the first warmup windows (the first
// replica's series need two scrapes and a rate() window before any query
// answers).
func Judge(looks []Look, warmup int) Check {
	c := Check{Reasons: map[string]int{}}
	for i, l := range looks {
		if i < warmup || !l.Traffic {
			continue
		}
		c.Windows++
		if l.RateOK && l.Rate > 0 {
			c.WithRate++
		}
		if l.P95OK && l.P95 > 0 {
			c.WithP95++
		}
		for _, r := range Reasons {
			if l.Reason == r {
				c.Refused++
				c.Reasons[r]++
			}
		}
	}
	return c
}

// Missing says why the inputs count as missing, or "" if they were there:
// a rate and a p95 in at least half the windows with traffic, and the
// autoscaler refusing the SLO in at most a quarter of them (a window or
// two of "no requests in the window" at a scale-down is expected).
func (c Check) Missing() string {
	var why []string
	switch {
	case c.Windows == 0:
		return "no window with traffic after the warm-up"
	case 2*c.WithRate < c.Windows:
		why = append(why, fmt.Sprintf("a request rate in %d of %d windows", c.WithRate, c.Windows))
	}
	if 2*c.WithP95 < c.Windows {
		why = append(why, fmt.Sprintf("a p95 in %d of %d windows", c.WithP95, c.Windows))
	}
	if 4*c.Refused > c.Windows {
		why = append(why, fmt.Sprintf("the autoscaler refused the SLO in %d of %d windows (%v)", c.Refused, c.Windows, c.Reasons))
	}
	return strings.Join(why, "; ")
}

// queriesMetric counts the recommender's Prometheus queries by template
// and result (recommender/controller).
const queriesMetric = "aware_recommender_prometheus_queries_total"

// QueryCounts reads the recommender's query counters from its /metrics
// text: "requestRate/success" → count, and so on.
func QueryCounts(text string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, queriesMetric+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		if end < 0 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len(queriesMetric)+1:end], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
		}
		v, err := strconv.ParseFloat(strings.Fields(line[end+1:])[0], 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		out[labels["query"]+"/"+labels["result"]] = v
	}
	return out, nil
}

// loopsMetric counts the recommender's loops (its loop-duration
// histogram's count).
const loopsMetric = "aware_recommender_loop_duration_seconds_count"

// LoopCount reads how many loops the recommender has run from its metrics
// text; false when the series is absent.
func LoopCount(text string) (float64, bool, error) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, loopsMetric)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndex(rest, "}"); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false, fmt.Errorf("malformed line %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("line %q: %w", line, err)
		}
		return v, true, nil
	}
	return 0, false, nil
}

// Delta is after − before, by key, keeping the keys that changed.
func Delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// RecommenderMissing says which of the SLO queries the recommender never
// ran successfully during a run (counts: Delta of QueryCounts over the
// run), "" if it ran both.
func RecommenderMissing(counts map[string]float64) string {
	var why []string
	for _, q := range []string{"requestRate", "latency"} {
		if counts[q+"/success"] == 0 {
			why = append(why, fmt.Sprintf("the recommender ran no successful %s query (%v errors)", q, counts[q+"/error"]))
		}
	}
	return strings.Join(why, "; ")
}

// DefaultWindow is the recommender's default --prometheus-window, the
// range of rate() in its SLO queries.
const DefaultWindow = "2m"

// RecommenderArgs are the recommender's arguments with
// --prometheus-window=window in place of any given before; window ""
// leaves them as they are (the recommender's default, DefaultWindow).
func RecommenderArgs(args []string, window string) []string {
	if window == "" {
		return args
	}
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--prometheus-window=") {
			out = append(out, a)
		}
	}
	return append(out, "--prometheus-window="+window)
}
