//go:build benchvpa

// Command benchvpa measures AWARE's recommender, updater and admission
// webhook side by side with the Vertical Pod Autoscaler's, on the loopback
// control plane of hack/testbed, and prints the ratios. Run it through
// `make bench-vpa` (hack/bench-vpa.sh), which builds both sides and starts
// the testbed; docs/results/performance.md explains every measure.
//
// Each measure runs both sides in the same minutes: the webhook runs
// alternate between the sides in short rounds, and the four loop
// components run at the same time, so the machine's noise hits both.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/aware-k8s/aware/e2e/framework"
)

type options struct {
	awareBin, vpaBin, vpaDir, repo, out string
	scales                              []int
	awareOnlyScale                      int
	replicas                            int
	interval                            time.Duration
	loops                               int
	webhookRate                         float64
	webhookRequests, webhookRounds      int
	closedConns                         int
	skipWebhook, skipScale              bool
	// webhookAtScales measures the webhooks again at each shared scale,
	// once its targets exist; skipLoops leaves out the loop measures there.
	webhookAtScales, skipLoops bool
	webhookTogether            bool
	reportFrom                 string
	maxWait                    time.Duration
	kubeQPS                    int
	// profile is how long a CPU profile of each of our loop components is
	// taken for, from the start of each measurement window; 0 takes none.
	profile time.Duration
	// webhookFloor measures a minimal Go TLS webhook (floor.go) beside
	// both sides.
	webhookFloor bool
}

func main() {
	var o options
	var scales string
	flag.StringVar(&o.awareBin, "aware-bin", "", "Directory with AWARE's recommender, updater and admission-controller.")
	flag.StringVar(&o.vpaBin, "vpa-bin", "", "Directory with VPA's recommender, updater and admission-controller.")
	flag.StringVar(&o.vpaDir, "vpa-module-dir", "", "VPA's module directory (its deploy/ holds the CRD and RBAC).")
	flag.StringVar(&o.repo, "repo", ".", "This repository (its deploy/ holds our CRDs and RBAC).")
	flag.StringVar(&o.out, "out", "bench-vpa-out", "Directory for results.md, results.json, the SVG and the components' logs.")
	flag.StringVar(&scales, "scales", "100,1000,5000", "Numbers of targets (a Deployment with an MPA and one with a VPA each), measured in turn with both sides; empty: none (only --aware-only-scale).")
	flag.IntVar(&o.awareOnlyScale, "aware-only-scale", 10000, "After the shared scales, grow to this many MPAs and measure AWARE's recommender alone (0: skip).")
	flag.IntVar(&o.replicas, "pods-per-target", 1, "Pods of each Deployment (a target has two: one under an MPA, one under a VPA).")
	flag.DurationVar(&o.interval, "interval", 15*time.Second, "Loop interval of both recommenders and both updaters.")
	flag.IntVar(&o.loops, "loops", 4, "Loop intervals in each measurement window.")
	flag.Float64Var(&o.webhookRate, "webhook-rate", 1000, "Fixed request rate (req/s) of the open-loop webhook runs.")
	flag.IntVar(&o.webhookRequests, "webhook-requests", 3000, "Requests per side in each webhook run.")
	flag.IntVar(&o.webhookRounds, "webhook-rounds", 4, "Webhook rounds; each runs both sides in turn, alternating which goes first.")
	flag.IntVar(&o.closedConns, "webhook-clients", 8, "Clients of the closed-loop webhook runs.")
	flag.DurationVar(&o.maxWait, "max-wait", 15*time.Minute, "How much longer than its loops×interval a measurement window may last when a side's loops overrun the interval.")
	flag.IntVar(&o.kubeQPS, "kube-api-qps", 200, "Client QPS to the API server of all six components (burst twice that); the same for both sides.")
	flag.BoolVar(&o.webhookTogether, "webhook-together", true, "Run the fixed-rate webhook runs of both sides at the same time (each at --webhook-rate), so the machine's stalls hit both; false runs them one after the other.")
	flag.DurationVar(&podsTimeout, "pods-timeout", podsTimeout, "How long to wait for a scale's pods to run. KWOK brought pods to Running at 4-30 per second on 2 busy cores.")
	flag.BoolVar(&allowPending, "allow-pending", false, "Measure a scale even if not all its pods run by --pods-timeout (the report gives how many ran).")
	flag.BoolVar(&o.skipWebhook, "skip-webhook", false, "Skip the webhook measures.")
	flag.BoolVar(&o.skipScale, "skip-scale", false, "Skip the scale steps (no targets beyond the webhook's first).")
	flag.BoolVar(&o.webhookAtScales, "webhook-at-scales", true, "Measure the webhooks again at each of --scales once its targets exist, beside the measure before the first step (with one target); not with --skip-webhook.")
	flag.BoolVar(&o.skipLoops, "skip-loops", false, "At each of --scales, create the targets (and measure the webhooks there) but skip the recommender and updater measures; --aware-only-scale is skipped too.")
	flag.DurationVar(&o.profile, "profile", 0, "Run our recommender and updater with --profiling and take a CPU profile of each for this long from the start of every measurement window, into --out as cpu-<component>-<targets>.pprof (read with go tool pprof -top). Sampling costs the profiled process a little CPU inside the window. 0: no profiles.")
	flag.BoolVar(&o.webhookFloor, "webhook-floor", true, "Measure the floor beside both webhooks, in the same rounds and seconds: a minimal Go TLS server that answers a fixed review (the least a Go webhook does here), in rows of their own.")
	var floorAddr, floorCert, floorKey string
	flag.StringVar(&floorAddr, "serve-floor", "", "Internal: serve the floor webhook on this address (the harness starts itself so).")
	flag.StringVar(&floorCert, "floor-cert", "", "Internal: the floor's TLS certificate file.")
	flag.StringVar(&floorKey, "floor-key", "", "Internal: the floor's TLS key file.")
	flag.StringVar(&o.reportFrom, "report-from", "", "Comma-separated results.json files of earlier runs: merge them (webhook rows of the first that has any, scale points of all, by number of targets) into --out's results.md, results.json and SVG, without touching a cluster.")
	flag.Parse()
	if floorAddr != "" {
		if err := serveFloor(floorAddr, floorCert, floorKey); err != nil {
			fmt.Fprintf(os.Stderr, "bench-vpa: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.reportFrom != "" {
		if err := mergeReports(o.out, strings.Split(o.reportFrom, ",")); err != nil {
			fmt.Fprintf(os.Stderr, "bench-vpa: %v\n", err)
			os.Exit(1)
		}
		return
	}
	// An empty --scales measures no shared scale: with --aware-only-scale
	// on a namespace already grown by an earlier run, only that step runs.
	for _, s := range strings.FieldsFunc(scales, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench-vpa: --scales: %q is not a positive number\n", s)
			os.Exit(2)
		}
		o.scales = append(o.scales, n)
	}
	if o.awareBin == "" || o.vpaBin == "" || o.vpaDir == "" {
		fmt.Fprintln(os.Stderr, "bench-vpa: --aware-bin, --vpa-bin and --vpa-module-dir are required (run it through make bench-vpa)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench-vpa: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench-vpa: %s (load %.2f)\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...), loadAvg())
}

// harness holds what every phase needs.
type harness struct {
	o      options
	tb     *framework.Testbed
	dyn    dynamic.Interface
	apiURL *url.URL
	logDir string
	procs  []*proc
	// webhooks are both admission controllers, running from before the
	// first scale step to the end.
	webhooks []webhookTarget
	results  results
	certFile string
	keyFile  string
	notesMu  sync.Mutex
}

func run(ctx context.Context, o options) error {
	tb, err := framework.Load()
	if err != nil {
		return err
	}
	h := &harness{o: o, tb: tb}
	h.results.Started = time.Now().UTC()
	h.results.Machine = machine()
	h.results.Options = optionsReport{o.replicas, o.interval.Seconds(), o.loops, o.webhookRate, o.webhookRequests, o.webhookRounds, o.closedConns, o.webhookTogether, o.kubeQPS}
	if h.apiURL, err = url.Parse(tb.Config.Host); err != nil {
		return err
	}
	tb.Config.QPS, tb.Config.Burst = 400, 800
	if h.dyn, err = dynamic.NewForConfig(tb.Config); err != nil {
		return err
	}
	h.logDir = filepath.Join(o.out, "logs")
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return err
	}
	defer h.stopAll()

	files, err := awareManifestFiles(o.repo)
	if err != nil {
		return err
	}
	logf("installing AWARE's and VPA's CRDs and RBAC")
	if err := applyManifests(ctx, h.dyn, tb.Client.Discovery(), append(files, vpaManifestFiles(o.vpaDir)...)...); err != nil {
		return err
	}
	for _, gvr := range []struct{ g string }{{"mpa"}, {"vpa"}} {
		r := mpaGVR
		if gvr.g == "vpa" {
			r = vpaGVR
		}
		if err := waitServed(ctx, h.dyn, r); err != nil {
			return err
		}
	}
	if err := ensureNamespace(ctx, tb.Client); err != nil {
		return err
	}
	if h.certFile, h.keyFile, err = tb.ServingCert(o.out, "webhook"); err != nil {
		return err
	}
	// One target exists before anything starts: the webhook's pod.
	if err := createTargets(ctx, tb.Client, h.dyn, 0, 1, int32(o.replicas), true, 2*o.replicas, logf); err != nil {
		return err
	}
	if err := writeStatuses(ctx, h.dyn, 0, int32(o.replicas)); err != nil {
		return err
	}
	// The admission controllers run from here to the end: both updaters
	// skip their loop without a live admission controller.
	webhooks, err := h.startAdmissionControllers(ctx)
	if err != nil {
		return err
	}
	h.webhooks = webhooks
	if !o.skipWebhook {
		if h.results.Webhook, err = h.webhookPhase(ctx, webhooks, 0); err != nil {
			return err
		}
	}
	var scaleErr error
	if !o.skipScale {
		if scaleErr = h.scalePhase(ctx); scaleErr != nil {
			// Report what was measured before the failure, then fail.
			h.results.Notes = append(h.results.Notes, "scale phase stopped: "+scaleErr.Error())
			logf("scale phase stopped: %v", scaleErr)
		}
	}
	return errors.Join(h.report(), scaleErr)
}

func machine() string {
	host, _ := os.Hostname()
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d logical CPUs (%s), %s %s/%s", host, runtime.NumCPU(), cpu, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
