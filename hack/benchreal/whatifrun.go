//go:build benchreal

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/e2e/testapp"
	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/hack/benchreal/simside"
	"github.com/aware-k8s/aware/hack/benchreal/slo"
	"github.com/aware-k8s/aware/pkg/kube/usage"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

// cadvisorJob is the scrape job of the real kubelet's cAdvisor metrics,
// which recommender whatif reads (--whatif).
const cadvisorJob = "aware-bench-real-cadvisor"

// appContainer is the test app's container (e2e/nodeinstall's manifest).
const appContainer = "app"

// whatifPolicies are the policies whose runs' histories --whatif reads:
// the real HPA's, whose pods keep the Deployment's requests, which is what
// the what-if assumes without kube-state-metrics.
var whatifPolicies = []string{"hpa"}

// cadvisorScrape is the scrape job of the node's kubelet cAdvisor
// endpoint: its port from the Node's status, the testbed's CA, and the API
// server's kubelet client certificate, which the kubelet's webhook
// authorizer lets read metrics.
func (h *harness) cadvisorScrape(ctx context.Context) (string, error) {
	n, err := h.tb.Client.CoreV1().Nodes().Get(ctx, h.env.Node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("--whatif: reading node %s: %w", h.env.Node, err)
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		return "", fmt.Errorf("--whatif: node %s reports no kubelet endpoint", h.env.Node)
	}
	ca := h.tb.Env["AWARE_TESTBED_CA"]
	if ca == "" {
		return "", fmt.Errorf("--whatif: the testbed's env has no AWARE_TESTBED_CA")
	}
	certs := filepath.Dir(ca)
	return slo.CAdvisorJob(cadvisorJob, fmt.Sprintf("127.0.0.1:%d", port), ca,
		filepath.Join(certs, "apiserver-kubelet-client.crt"), filepath.Join(certs, "apiserver-kubelet-client.key"), 5), nil
}

// InFlightQuery is the what-if's --in-flight-query for the test app: each
// pod's peak requests in flight over the range its working set is read
// over (--prometheus-window).
var InFlightQuery = usage.PeakInFlightQuery(testapp.InFlightMetric)

// whatIf runs recommender whatif on the history of the run that loaded ns
// from start for the run's duration, while its Deployment still exists:
// the period of the load at the windows' step, the fused default
// predicted. A refusal of the fit is a result, not an error.
func (h *harness) whatIf(ctx context.Context, ns, policy string, rep int, start time.Time) (*result.WhatIf, error) {
	end := start.Add(h.o.duration)
	// The last window's rate needs the scrapes after it (every 5 s).
	if d := time.Until(end.Add(15 * time.Second)); d > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
	}
	dir := filepath.Join(h.o.out, fmt.Sprintf("whatif-%s-%d", policySlug(policy), rep))
	args := []string{"whatif",
		"--kubeconfig", h.tb.KubeconfigPath, "--prometheus-address", h.tb.PrometheusURL,
		"--namespace", ns, "--deployment", "testapp",
		"--slo-metric", testapp.RequestDurationMetric, "--slo", h.o.slo.String(),
		"--period", h.o.duration.String(), "--end", end.UTC().Format(time.RFC3339), "--step", h.o.window.String(),
		// The kubelet refreshes cAdvisor's counters every 10-15 s
		// (housekeeping): a rate over two windows sees at least two.
		"--prometheus-window", (2 * h.o.window).String(),
		// An 8-minute run at 15 s has 32 steps; the default asks 60.
		"--fit-min-points", "20",
		"--policies", "fused", "--seeds", "3", "--output", dir,
		// As the real fused run: resized in place (its MPA asks
		// InPlaceOrRecreate), and the rate and p95 over its
		// recommender's --prometheus-window.
		"--resize", "InPlace", "--rate-window", h.o.promWindow(),
		// As the real runs' autoscalers, created after the load began:
		// a replayed one acting from the start scaled out a minute
		// early and predicted the fused default 8% dear on average
		// (docs/whatif.md, "Installed when the real one was").
		"--install-after", h.o.mpa.autoscalerAfter.String(),
		// The node's cores, which the burst latency model runs on, and
		// the replay's model of the node and the test app (--sim-tick,
		// the load generator's timeout, an app that serves its requests
		// past it).
		"--node-cpu", fmt.Sprint(simside.DefaultNodeCores),
		"--node-tick", h.o.sim.tick.String(),
		"--client-timeout", simside.LoadGenTimeout.String(), "--serves-timed-out",
		// The pod's cgroup holds the pause container and the page cache
		// too: its working set moves more than the app's (31% RMS in the
		// first run, against the default bound of 25%).
		"--fit-max-memory-residual", "0.5",
		"--prometheus-query-cpu", podCgroupQuery("sum", "rate", "container_cpu_usage_seconds_total"),
		"--prometheus-query-memory", podCgroupQuery("max", "max_over_time", "container_memory_working_set_bytes"),
		// The app's in-flight gauge, at its peak over the same range as
		// the working set's: the memory fit pairs the two instead of
		// estimating the requests in flight by Little's law.
		"--in-flight-query", InFlightQuery}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, h.o.bin.recommender, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if werr := os.WriteFile(filepath.Join(h.logDir, fmt.Sprintf("whatif-%s-%d.log", policySlug(policy), rep)), out.Bytes(), 0o644); werr != nil {
		logf("writing the what-if's log: %v", werr)
	}
	if err != nil {
		// Every workload refused: the command fails, and its output
		// says why (a refusal is a result, not an error).
		if why := refusal(out.String()); why != "" {
			return &result.WhatIf{Dir: dir, Refused: why}, nil
		}
		return nil, fmt.Errorf("recommender %v: %w\n%s", args, err, out.Bytes())
	}
	f, err := os.Open(filepath.Join(dir, "whatif.json"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := whatif.ReadResult(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return whatIfOf(res, dir)
}

// refusal is the reason recommender whatif printed for a workload it did
// not predict ("<ns>/<name>: not predicted: <why>"), or "".
func refusal(output string) string {
	for _, line := range strings.Split(output, "\n") {
		if _, why, ok := strings.Cut(line, ": not predicted: "); ok {
			return why
		}
	}
	return ""
}

// podCgroupQuery is a whatif usage template over the pods' own cgroups
// (container=""), named after the app's container: the node's kubelet
// finds its containerd at the testbed's socket, not at the default one
// cAdvisor looks for, so cAdvisor labels no container-level series with
// their container, only the pods' (namespace, pod). The pause container
// counts in it, at a few millicores and MiB.
func podCgroupQuery(agg, fn, metric string) string {
	return fmt.Sprintf(`%s by (namespace, pod, container) (label_replace(%s(%s{pod=~"{{.PodRegex}}", namespace="{{.Namespace}}", container=""}[{{.Window}}]), "container", %q, "", ""))`,
		agg, fn, metric, appContainer)
}

// whatIfOf keeps what bench-real reports of a what-if's result for one
// workload.
func whatIfOf(res *whatif.Result, dir string) (*result.WhatIf, error) {
	if len(res.Fits) != 1 {
		return nil, fmt.Errorf("%s: %d fits, want the one workload's", dir, len(res.Fits))
	}
	fit := res.Fits[0]
	w := &result.WhatIf{Dir: dir, Refused: fit.Refused, CPUSecondsPerRequest: fit.CPU.Slope, CPUR2: fit.CPU.R2}
	if fit.Refused != "" {
		return w, nil
	}
	if len(res.Consistency) == 1 {
		w.RecordedCost, w.ReplayCost = res.Consistency[0].RecordedCost, res.Consistency[0].ReplayCost
	}
	if res.Report == nil {
		return nil, fmt.Errorf("%s: a fit but no replay", dir)
	}
	w.Predicted = map[string]result.Prediction{}
	for _, s := range res.Report.Summaries {
		if s.Runs > 0 {
			w.Predicted[s.Policy] = result.Prediction{Cost: s.Cost / float64(s.Runs), Violations: s.SLOViolationRate}
		}
	}
	if _, ok := w.Predicted[whatif.PolicyFused]; !ok {
		return nil, fmt.Errorf("%s: no replay of %s", dir, whatif.PolicyFused)
	}
	return w, nil
}
