//go:build benchreal

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
	"github.com/aware-k8s/aware/e2e/testapp"
	"github.com/aware-k8s/aware/hack/benchreal/slo"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sloJob is the scrape job's name in the testbed's Prometheus.
const sloJob = "aware-bench-real-testapp"

// imageUID is the user the images run as (hack/images): the file_sd
// directory and the ensemble's members must be its.
const imageUID = 65532

// fileSDDir is the node directory the app's replicas write their file_sd
// targets into, and the scrape job reads.
func (h *harness) fileSDDir() string { return filepath.Join(h.env.NodeDir, "file-sd") }

// setupSLOMetrics makes the testbed's Prometheus scrape every replica of
// the test app (a file_sd job over fileSDDir) and reloads it; the returned
// function removes the job again. The recommender gets the Prometheus
// address through install (sloMutate).
func (h *harness) setupSLOMetrics(ctx context.Context) (func(), error) {
	dir := h.fileSDDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chown(dir, imageUID, imageUID); err != nil {
		return nil, err
	}
	// Targets left by an interrupted run name ports nobody listens on.
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	path := h.tb.Env["AWARE_PROMETHEUS_CONFIG"]
	if path == "" || h.tb.PrometheusURL == "" {
		return nil, fmt.Errorf("--slo-metrics: the testbed's env has no AWARE_PROMETHEUS_CONFIG or PROMETHEUS_URL")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var extra []string
	if h.o.mpa.whatif {
		// Without the cAdvisor job the runs still measure what they
		// measure; only their what-ifs fail (and say so).
		if job, err := h.cadvisorScrape(ctx); err != nil {
			logf("WARNING: --whatif: %v; the runs go on without cAdvisor's series", err)
		} else {
			extra = append(extra, job)
		}
	}
	if err := h.writeScrapeJobs(ctx, path, string(b), dir, extra); err != nil {
		if len(extra) == 0 {
			return nil, err
		}
		logf("WARNING: --whatif: Prometheus refused the cAdvisor job (%v); the runs go on without cAdvisor's series", err)
		if err := h.writeScrapeJobs(ctx, path, string(b), dir, nil); err != nil {
			return nil, err
		}
		extra = nil
	}
	logf("Prometheus %s scrapes the app's replicas (job %s, file_sd %s)", h.tb.PrometheusURL, sloJob, dir)
	if len(extra) > 0 {
		logf("Prometheus %s scrapes the node's cAdvisor (job %s) for --whatif", h.tb.PrometheusURL, cadvisorJob)
	}
	return func() {
		b, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(path, []byte(slo.WithoutScrapeJob(string(b))), 0o644)
		}
		if err == nil {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = h.reloadPrometheus(c)
		}
		if err != nil {
			logf("removing the scrape job: %v", err)
		}
	}, nil
}

// writeScrapeJobs writes config, the Prometheus configuration at path,
// with the app's job over dir and the extra jobs, and reloads Prometheus.
func (h *harness) writeScrapeJobs(ctx context.Context, path, config, dir string, extra []string) error {
	conf, err := slo.WithScrapeJob(config, slo.ScrapeJob(sloJob, dir, 5, extra...))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	return h.reloadPrometheus(ctx)
}

func (h *harness) reloadPrometheus(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.tb.PrometheusURL+"/-/reload", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reloading Prometheus: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("reloading Prometheus: %s: %s", resp.Status, b)
	}
	return nil
}

// sloMutate gives the recommender the testbed's Prometheus: deploy/'s
// install parameter prometheus-address (the ConfigMap aware-config, which
// the recommender reads into --prometheus-address), and the range of its
// SLO queries when --prometheus-window says one.
func sloMutate(promURL, window string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		switch {
		case o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "aware-config"):
			return unstructured.SetNestedField(o.Object, promURL, "data", "prometheus-address")
		case o.GetKind() == "Deployment" && o.GetName() == "aware-recommender" && window != "":
			return recommenderArgs(o, func(args []string) []string { return slo.RecommenderArgs(args, window) })
		}
		return nil
	}
}

// fitMutate runs mutate (when set), then gives the recommender
// --fit-to-nodes.
func fitMutate(mutate func(*unstructured.Unstructured) error) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		if mutate != nil {
			if err := mutate(o); err != nil {
				return err
			}
		}
		if o.GetKind() == "Deployment" && o.GetName() == "aware-recommender" {
			return recommenderArgs(o, func(args []string) []string { return append(args, "--fit-to-nodes") })
		}
		return nil
	}
}

// recommenderArgs edits the args of the recommender's Deployment o.
func recommenderArgs(o *unstructured.Unstructured, edit func([]string) []string) error {
	cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if err != nil || len(cs) != 1 {
		return fmt.Errorf("the recommender's containers: %v (%d)", err, len(cs))
	}
	c := cs[0].(map[string]any)
	args, _, err := unstructured.NestedStringSlice(c, "args")
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedStringSlice(c, edit(args), "args"); err != nil {
		return err
	}
	return unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", "containers")
}

// promWindow is the range of rate() in the harness's queries: the
// recommender's, so that the harness asks what the recommender asks.
func (o options) promWindow() string {
	if o.mpa.prometheusWindow != "" {
		return o.mpa.prometheusWindow
	}
	return slo.DefaultWindow
}

// query asks the testbed's Prometheus an instant query.
func query(ctx context.Context, promURL, q string) (float64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, promURL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, false, err
	}
	return slo.Scalar(b)
}

// sloLook asks what the recommender asks for namespace ns: the request
// rate and the p95 of the app's histogram. A failed query counts as no
// answer (logged).
func sloLook(ctx context.Context, promURL, ns, promWindow string) (l slo.Look) {
	var err error
	// A look cut short by the run's end (ctx done) is no news.
	if l.Rate, l.RateOK, err = query(ctx, promURL, slo.RateQuery(testapp.RequestDurationMetric, ns, promWindow)); err != nil && ctx.Err() == nil {
		logf("rate of %s: %v", ns, err)
	}
	if l.P95, l.P95OK, err = query(ctx, promURL, slo.LatencyQuery(testapp.RequestDurationMetric, ns, promWindow, 0.95)); err != nil && ctx.Err() == nil {
		logf("p95 of %s: %v", ns, err)
	}
	var podsOK bool
	if l.InFlight, l.InFlightOK, err = query(ctx, promURL, slo.InFlightQuery(testapp.InFlightMetric, ns)); err != nil && ctx.Err() == nil {
		logf("requests in flight of %s: %v", ns, err)
	}
	if l.InFlightPods, podsOK, err = query(ctx, promURL, slo.SeriesQuery(testapp.InFlightMetric, ns)); err != nil && ctx.Err() == nil {
		logf("pods with requests in flight of %s: %v", ns, err)
	}
	l.InFlightOK = l.InFlightOK && podsOK
	return l
}

// recommenderQueries reads the recommender's Prometheus query counters
// from its metrics endpoint (the host's network, nodeinstall.PortFor);
// nil when it cannot be read (logged).
func (h *harness) recommenderQueries(ctx context.Context) map[string]float64 {
	text, err := h.recommenderMetrics(ctx)
	var counts map[string]float64
	if err == nil {
		counts, err = slo.QueryCounts(text)
	}
	if err != nil {
		logf("the recommender's metrics: %v", err)
		return nil
	}
	return counts
}

// recommenderMetrics reads the recommender's /metrics.
func (h *harness) recommenderMetrics(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := fmt.Sprintf("http://127.0.0.1:%d/metrics", nodeinstall.PortFor(h.env, "recommender", "metrics"))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", u, resp.Status)
	}
	return string(b), err
}

// afterLoop returns phase after the end of the recommender's next loop,
// so that the load starts at the same point of its 15-s cycle in every
// run (--load-phase): where the first decision after the load begins
// falls decides the default's start-up path (docs/real-node.md).
func (h *harness) afterLoop(ctx context.Context, phase time.Duration) error {
	read := func() (float64, error) {
		text, err := h.recommenderMetrics(ctx)
		if err != nil {
			return 0, err
		}
		n, ok, err := slo.LoopCount(text)
		if err == nil && !ok {
			err = errors.New("the recommender exports no loop count")
		}
		return n, err
	}
	before, err := read()
	if err != nil {
		return fmt.Errorf("--load-phase: %w", err)
	}
	if err := framework.WaitFor(ctx, time.Minute, 100*time.Millisecond, "a recommender loop", func(context.Context) (bool, error) {
		n, err := read()
		return err == nil && n > before, nil
	}); err != nil {
		return fmt.Errorf("--load-phase: %w", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(phase):
		return nil
	}
}
