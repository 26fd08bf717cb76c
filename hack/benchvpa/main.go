//go:build benchvpa

// Command benchvpa measures AWARE's recommender, updater and admission
// webhook side by side with the Vertical Pod Autoscaler's, on the loopback
// control plane of hack/testbed, and prints the ratios. Run it through
// `make bench-vpa` (hack/bench-vpa.sh), which builds both sides and starts
// the testbed; docs/performance.md explains every measure.
//
// Each measure runs both sides in the same minutes: the webhook runs
// alternate between the sides in short rounds, and the four loop
// components run at the same time, so the machine's noise hits both.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/hack/benchvpa/bench"
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
	webhookTogether                     bool
	reportFrom                          string
	maxWait                             time.Duration
	kubeQPS                             int
	// profile is how long a CPU profile of each of our loop components is
	// taken for, from the start of each measurement window; 0 takes none.
	profile time.Duration
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
	flag.BoolVar(&o.skipScale, "skip-scale", false, "Skip the loop measures at scale.")
	flag.DurationVar(&o.profile, "profile", 0, "Run our recommender and updater with --profiling and take a CPU profile of each for this long from the start of every measurement window, into --out as cpu-<component>-<targets>.pprof (read with go tool pprof -top). Sampling costs the profiled process a little CPU inside the window. 0: no profiles.")
	flag.StringVar(&o.reportFrom, "report-from", "", "Comma-separated results.json files of earlier runs: merge them (webhook rows of the first that has any, scale points of all, by number of targets) into --out's results.md, results.json and SVG, without touching a cluster.")
	flag.Parse()
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
	o        options
	tb       *framework.Testbed
	dyn      dynamic.Interface
	apiURL   *url.URL
	logDir   string
	procs    []*proc
	results  results
	certFile string
	keyFile  string
	notesMu  sync.Mutex
}

// results is what results.json holds.
type results struct {
	Machine   string        `json:"machine"`
	Started   time.Time     `json:"started"`
	Webhook   []bench.Row   `json:"webhook"`
	Scale     []scalePoint  `json:"scale"`
	AwareOnly []scalePoint  `json:"awareOnly,omitempty"`
	Notes     []string      `json:"notes,omitempty"`
	Options   optionsReport `json:"options"`
}

type optionsReport struct {
	PodsPerTarget   int     `json:"podsPerTarget"`
	IntervalSeconds float64 `json:"intervalSeconds"`
	Loops           int     `json:"loops"`
	WebhookRate     float64 `json:"webhookRate"`
	WebhookRequests int     `json:"webhookRequests"`
	WebhookRounds   int     `json:"webhookRounds"`
	WebhookClients  int     `json:"webhookClients"`
	WebhookTogether bool    `json:"webhookTogether"`
	KubeAPIQPS      int     `json:"kubeApiQps"`
}

// loopCost is one loop component's cost over a measurement window.
type loopCost struct {
	Loops          float64 `json:"loops"`
	CPUPerLoop     float64 `json:"cpuPerLoopSeconds"`
	RequestsPerLp  float64 `json:"apiRequestsPerLoop"`
	Watches        int64   `json:"watchesOpenedInWindow"`
	RSSBytes       float64 `json:"rssBytes"`
	PeakRSSBytes   float64 `json:"peakRssBytes"`
	WindowSeconds  float64 `json:"windowSeconds"`
	CPUInWindowSec float64 `json:"cpuInWindowSeconds"`
	// CPUTicksInWindowSec is the same from /proc/PID/stat's 10-ms ticks,
	// a check on the thread sum.
	CPUTicksInWindowSec float64 `json:"cpuTicksInWindowSeconds"`
}

type scalePoint struct {
	Targets int `json:"targets"`
	Pods    int `json:"pods"`
	// RunningPods is how many of Pods ran when the components started.
	RunningPods int                 `json:"runningPods"`
	Load        float64             `json:"load1"`
	Cost        map[string]loopCost `json:"cost"` // by process name
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
	if h.certFile, h.keyFile, err = servingCert(tb.CAFile, filepath.Join(tb.Dir, "certs", "ca.key"), o.out); err != nil {
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
	if !o.skipWebhook {
		if err := h.webhookPhase(ctx, webhooks); err != nil {
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

// startProc starts a component of side with a counting proxy and a
// kubeconfig for the ServiceAccount namespace/sa.
func (h *harness) start(ctx context.Context, name, side, bin, namespace, sa string, args func(p *proc, kubeconfig string) []string) (*proc, error) {
	proxy, err := newCountingProxy(h.apiURL, h.tb.CAFile, h.certFile, h.keyFile)
	if err != nil {
		return nil, err
	}
	token, err := h.tb.ServiceAccountToken(ctx, namespace, sa, 6*time.Hour)
	if err != nil {
		proxy.close()
		return nil, err
	}
	kc := filepath.Join(h.o.out, name+".kubeconfig")
	if err := writeKubeconfig(kc, proxy.addr, h.tb.CAFile, token, namespace+"/"+sa); err != nil {
		proxy.close()
		return nil, err
	}
	p := &proc{name: name, side: side, proxy: proxy}
	// Loop components are measured between the loop starts their proxy
	// sees (measureOne).
	proxy.marker, proxy.sample = bench.LoopMarker(name), p.sample
	h.procs = append(h.procs, p)
	return p, startProc(ctx, p, h.logDir, bin, args(p, kc)...)
}

func (h *harness) stopProc(p *proc) {
	p.stop()
	if p.proxy != nil {
		p.proxy.close()
	}
}

func (h *harness) stopAll() {
	for _, p := range h.procs {
		h.stopProc(p)
	}
}

// Ports of a component: metrics and health (ours) or the one metrics
// address (VPA's).
func ports() (metrics, health string) {
	m, _ := freeAddr()
	hl, _ := freeAddr()
	return m, hl
}

func (h *harness) startAdmissionControllers(ctx context.Context) ([]webhookTarget, error) {
	ours, err := h.start(ctx, "aware-admission-controller", "AWARE", filepath.Join(h.o.awareBin, "admission-controller"), "aware-system", "aware-admission-controller",
		func(p *proc, kc string) []string {
			m, hl := ports()
			p.readyAddr, _ = freeAddr()
			p.metricsURL, p.readyURL = "http://"+m+"/metrics", "http://"+hl+"/readyz"
			return append([]string{"--kubeconfig=" + kc, "--metrics-bind-address=" + m, "--health-bind-address=" + hl,
				"--namespace=aware-system", "--webhook-bind-address=" + p.readyAddr, "--cert-mode=files",
				"--tls-cert-file=" + h.certFile, "--tls-private-key-file=" + h.keyFile, "--register-webhook=false",
				// The Lease our updater checks before it evicts (VPA's updater
				// checks its admission controller's status Lease the same way).
				"--heartbeat-lease-name=aware-admission-controller"}, h.qpsArgs()...)
		})
	if err != nil {
		return nil, err
	}
	theirs, err := h.start(ctx, "vpa-admission-controller", "VPA", filepath.Join(h.o.vpaBin, "admission-controller"), "kube-system", "vpa-admission-controller",
		func(p *proc, kc string) []string {
			m, _ := ports()
			p.readyAddr, _ = freeAddr()
			p.metricsURL = "http://" + m + "/metrics"
			_, port, _ := strings.Cut(p.readyAddr, ":")
			return append([]string{"--kubeconfig=" + kc, "--address=" + m, "--port=" + port,
				"--client-ca-file=" + h.tb.CAFile, "--tls-cert-file=" + h.certFile, "--tls-private-key=" + h.keyFile,
				"--register-webhook=false", "--v=1"}, h.qpsArgs()...)
		})
	if err != nil {
		return nil, err
	}
	return []webhookTarget{
		{side: "AWARE", url: "https://" + ours.readyAddr + "/mutate-pods", proc: ours},
		{side: "VPA", url: "https://" + theirs.readyAddr + "/", proc: theirs},
	}, nil
}

// fixedRateConns bounds the requests in flight of an open-loop run.
const fixedRateConns = 64

func (h *harness) webhookPhase(ctx context.Context, targets []webhookTarget) error {
	o := h.o
	// Each side admits a pod of its own Deployment of target 0; the two
	// pods differ only in their names.
	bodiesOf := map[string][][]byte{}
	for _, t := range targets {
		name := awareName(0)
		if t.side == "VPA" {
			name = vpaName(0)
		}
		pod, err := podTemplateFor(ctx, h.tb.Client, name)
		if err != nil {
			return err
		}
		if bodiesOf[t.side], err = reviewBodies(pod, o.webhookRequests); err != nil {
			return err
		}
	}
	// One client per side: neither waits on the other's connection pool.
	clients := map[string]*http.Client{}
	for _, t := range targets {
		c, err := webhookClient(h.tb.CAFile, max(fixedRateConns, o.closedConns))
		if err != nil {
			return err
		}
		clients[t.side] = c
	}
	// Both must patch the pod before anything is timed (their informers
	// sync after start).
	for _, t := range targets {
		var last error
		for i := 0; i < 60; i++ {
			if last = checkPatched(ctx, clients[t.side], t, bodiesOf[t.side][0]); last == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if last != nil {
			return last
		}
	}
	logf("both webhooks patch the pod; %d rounds of %d requests per side, fixed rate %.0f/s and closed loop with %d clients",
		o.webhookRounds, o.webhookRequests, o.webhookRate, o.closedConns)
	// Warm-up, not recorded, in both modes: connections and TLS sessions
	// up to the fixed-rate concurrency, caches, lazily grown pools.
	for _, t := range targets {
		for _, rate := range []float64{o.webhookRate, 0} {
			if _, err := runLoad(ctx, clients[t.side], t, bodiesOf[t.side][:min(1000, o.webhookRequests)], rate, fixedRateConns, 30*time.Second); err != nil {
				return err
			}
		}
	}
	type agg struct {
		lat     []float64
		cpu     float64
		n, errs int
		elapsed time.Duration
		loadSum float64
		loadN   int
	}
	fixed := map[string]*agg{}
	closed := map[string]*agg{}
	for _, t := range targets {
		fixed[t.side], closed[t.side] = &agg{}, &agg{}
	}
	budget := time.Duration(float64(o.webhookRequests)/o.webhookRate*float64(time.Second))*3 + 10*time.Second
	for r := 0; r < o.webhookRounds; r++ {
		order := targets
		if r%2 == 1 {
			order = []webhookTarget{targets[1], targets[0]}
		}
		for _, mode := range []struct {
			rate float64
			into map[string]*agg
		}{{o.webhookRate, fixed}, {0, closed}} {
			conns := o.closedConns
			if mode.rate > 0 {
				conns = fixedRateConns
			}
			record := func(t webhookTarget, res loadResult) {
				a := mode.into[t.side]
				a.lat = append(a.lat, res.latencies...)
				a.cpu += res.cpu
				a.n += len(res.latencies)
				a.errs += res.errors
				a.elapsed += res.elapsed
				a.loadSum += loadAvg()
				a.loadN++
			}
			if mode.rate > 0 && o.webhookTogether {
				// Both sides in the same seconds: a stall of the machine
				// lands in both sides' tails.
				res := make([]loadResult, len(order))
				errs := make([]error, len(order))
				var wg sync.WaitGroup
				for i, t := range order {
					wg.Go(func() { res[i], errs[i] = runLoad(ctx, clients[t.side], t, bodiesOf[t.side], mode.rate, conns, budget) })
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					return err
				}
				for i, t := range order {
					record(t, res[i])
				}
				continue
			}
			for _, t := range order {
				res, err := runLoad(ctx, clients[t.side], t, bodiesOf[t.side], mode.rate, conns, budget)
				if err != nil {
					return err
				}
				record(t, res)
			}
		}
		logf("webhook round %d/%d done", r+1, o.webhookRounds)
	}
	pcts := func(a *agg) []float64 {
		p, err := bench.Percentiles(a.lat, 50, 99, 99.9)
		if err != nil {
			return []float64{0, 0, 0}
		}
		return p
	}
	fo, fv := pcts(fixed["AWARE"]), pcts(fixed["VPA"])
	co, cv := pcts(closed["AWARE"]), pcts(closed["VPA"])
	load := func(m map[string]*agg) float64 {
		return (m["AWARE"].loadSum + m["VPA"].loadSum) / float64(m["AWARE"].loadN+m["VPA"].loadN)
	}
	perReq := func(a *agg) float64 { return a.cpu / float64(max(a.n, 1)) * 1e6 }
	rate := fmt.Sprintf("%.0f req/s", o.webhookRate)
	lf, lc := load(fixed), load(closed)
	h.results.Webhook = []bench.Row{
		{Measure: "webhook p50, " + rate, Unit: "ms", Ours: fo[0], VPA: fv[0], Load: lf},
		{Measure: "webhook p99, " + rate, Unit: "ms", Ours: fo[1], VPA: fv[1], Goal: 0.6, Load: lf},
		{Measure: "webhook p99.9, " + rate, Unit: "ms", Ours: fo[2], VPA: fv[2], Load: lf},
		{Measure: "webhook server CPU per request, " + rate, Unit: "µs", Ours: perReq(fixed["AWARE"]), VPA: perReq(fixed["VPA"]), Load: lf},
		{Measure: fmt.Sprintf("webhook throughput, closed loop, %d clients", o.closedConns), Unit: "req/s",
			Ours: float64(closed["AWARE"].n) / closed["AWARE"].elapsed.Seconds(), VPA: float64(closed["VPA"].n) / closed["VPA"].elapsed.Seconds(), Load: lc},
		{Measure: fmt.Sprintf("webhook p50, closed loop, %d clients", o.closedConns), Unit: "ms", Ours: co[0], VPA: cv[0], Load: lc},
		{Measure: fmt.Sprintf("webhook p99, closed loop, %d clients", o.closedConns), Unit: "ms", Ours: co[1], VPA: cv[1], Load: lc},
		{Measure: fmt.Sprintf("webhook p99.9, closed loop, %d clients", o.closedConns), Unit: "ms", Ours: co[2], VPA: cv[2], Load: lc},
		{Measure: "webhook server CPU per request, closed loop", Unit: "µs", Ours: perReq(closed["AWARE"]), VPA: perReq(closed["VPA"]), Load: lc},
	}
	for _, side := range []string{"AWARE", "VPA"} {
		if e := fixed[side].errs + closed[side].errs; e > 0 {
			h.results.Notes = append(h.results.Notes, fmt.Sprintf("%s webhook: %d failed requests (not in the latencies)", side, e))
		}
	}
	_ = bench.WriteTable(os.Stderr, h.results.Webhook)
	return nil
}

// loopProcs starts the loop components of the given sides.
func (h *harness) loopProcs(ctx context.Context, sides ...string) ([]*proc, error) {
	iv := h.o.interval.String()
	var out []*proc
	for _, side := range sides {
		switch side {
		case "AWARE":
			for _, c := range []string{"recommender", "updater"} {
				p, err := h.awareLoop(ctx, c)
				if err != nil {
					return out, err
				}
				out = append(out, p)
			}
		case "VPA":
			for _, c := range []struct{ name, flag string }{{"recommender", "--recommender-interval=" + iv}, {"updater", "--updater-interval=" + iv}} {
				p, err := h.start(ctx, "vpa-"+c.name, side, filepath.Join(h.o.vpaBin, c.name), "kube-system", "vpa-"+c.name,
					func(p *proc, kc string) []string {
						m, _ := ports()
						p.metricsURL, p.readyURL = "http://"+m+"/metrics", "http://"+m+"/metrics"
						return append([]string{"--kubeconfig=" + kc, "--address=" + m, c.flag, "--v=1"}, h.qpsArgs()...)
					})
				if err != nil {
					return out, err
				}
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// awareLoop starts our loop component c, "recommender" or "updater".
func (h *harness) awareLoop(ctx context.Context, c string) (*proc, error) {
	flag := "--recommender-interval=" + h.o.interval.String()
	if c == "updater" {
		flag = "--update-interval=" + h.o.interval.String()
	}
	return h.start(ctx, "aware-"+c, "AWARE", filepath.Join(h.o.awareBin, c), "aware-system", "aware-"+c,
		func(p *proc, kc string) []string {
			m, hl := ports()
			p.metricsURL, p.readyURL = "http://"+m+"/metrics", "http://"+hl+"/readyz"
			args := []string{"--kubeconfig=" + kc, "--metrics-bind-address=" + m, "--health-bind-address=" + hl, flag, "--leader-elect=false", "--v=1"}
			if h.o.profile > 0 {
				p.profileURL = "http://" + m + "/debug/pprof/profile"
				args = append(args, "--profiling")
			}
			return append(args, h.qpsArgs()...)
		})
}

// qpsArgs give every component the same client rate limit. The defaults
// differ (VPA 50/100, ours lower), and a loop that waits on its own rate
// limiter at a thousand targets measures the limiter, not the work.
func (h *harness) qpsArgs() []string {
	return []string{fmt.Sprintf("--kube-api-qps=%d", h.o.kubeQPS), fmt.Sprintf("--kube-api-burst=%d", 2*h.o.kubeQPS)}
}

// loopMetric is the counter of completed loops of each loop component.
func loopMetric(p *proc) (string, map[string]string) {
	switch p.name {
	case "aware-recommender":
		return "aware_recommender_loop_duration_seconds", nil
	case "aware-updater":
		return "aware_updater_loop_duration_seconds", nil
	case "vpa-recommender":
		return "vpa_recommender_execution_latency_seconds", map[string]string{"step": "total"}
	default:
		return "vpa_updater_execution_latency_seconds", map[string]string{"step": "total"}
	}
}

func loops(ctx context.Context, p *proc) (float64, error) {
	name, labels := loopMetric(p)
	return p.metric(ctx, name, labels)
}

// measureLoops measures each process between loop boundaries: it waits
// for the warm-up loop to end (the first one lists everything and loads
// history), takes a sample as the next loop ends, and another when o.loops
// more have ended (or, if a side's loops are slow, at the last loop end
// before the deadline). The window is thus whole loops and the idle time
// between them, whatever the loop's length; all processes run at the same
// time, so the machine's noise hits both sides.
func (h *harness) measureLoops(ctx context.Context, ps []*proc, targets int) (map[string]loopCost, error) {
	type result struct {
		name string
		cost loopCost
		err  error
	}
	deadline := time.Now().Add(time.Duration(h.o.loops+2)*h.o.interval + h.o.maxWait)
	ch := make(chan result, len(ps))
	var profiles sync.WaitGroup
	defer profiles.Wait()
	for _, p := range ps {
		go func() {
			c, err := h.measureOne(ctx, p, deadline, func() {
				if p.profileURL == "" {
					return
				}
				profiles.Add(1)
				go func() {
					defer profiles.Done()
					path := filepath.Join(h.o.out, fmt.Sprintf("cpu-%s-%d.pprof", p.name, targets))
					if err := fetchProfile(ctx, p.profileURL, h.o.profile, path); err != nil {
						logf("%s: no CPU profile: %v", p.name, err)
						return
					}
					logf("%s: CPU profile of %s in %s", p.name, h.o.profile, path)
				}()
			})
			ch <- result{p.name, c, err}
		}()
	}
	out := map[string]loopCost{}
	var errs []error
	for range ps {
		r := <-ch
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		out[r.name] = r.cost
		c := r.cost
		logf("%s: %.0f loops in %.0f s, %.3f s CPU per loop, %.1f API requests per loop, RSS %.0f MiB", r.name, c.Loops, c.WindowSeconds, c.CPUPerLoop, c.RequestsPerLp, c.RSSBytes/(1<<20))
	}
	return out, errors.Join(errs...)
}

// loopPoll is how often the harness looks at the loop starts its proxy
// has seen: an in-memory read that costs the component nothing.
const loopPoll = 250 * time.Millisecond

// warmupLoops are the loops before a window opens: the first lists
// everything and loads history, the second still writes most statuses.
const warmupLoops = 2

// measureOne measures p between loop starts (measureLoops); opened is
// called as its window opens.
//
// The boundaries are the request each loop component makes once as each
// loop starts (bench.LoopMarker), seen by its counting proxy, which samples
// the process's CPU, RSS and requests from /proc and its own counters right
// then. So nothing inside the window costs either side CPU: the harness
// scraped each side's /metrics every 2 s before, which was 16% of our
// recommender's CPU per loop at 100 targets (docs/performance.md). The
// window from the start of loop warmupLoops+1 to the start of loop
// warmupLoops+1+loops holds whole loops and the idle time after each.
// After the window (outside it) the loop counter is read once from
// /metrics to check that the markers were one per loop.
func (h *harness) measureOne(ctx context.Context, p *proc, deadline time.Time, opened func()) (loopCost, error) {
	// wait returns the n-th loop start (1-based) once the proxy has seen
	// it; ok is false if the deadline passed first.
	wait := func(n int) (mark, bool, error) {
		for {
			ms := p.proxy.markers()
			if len(ms) >= n {
				return ms[n-1], true, ms[n-1].err
			}
			if err := p.alive(); err != nil {
				return mark{}, false, err
			}
			if time.Now().After(deadline) {
				return mark{}, false, nil
			}
			select {
			case <-time.After(loopPoll):
			case <-ctx.Done():
				return mark{}, false, ctx.Err()
			}
		}
	}
	open := warmupLoops + 1
	first, ok, err := wait(open)
	if err != nil || !ok {
		return loopCost{}, errors.Join(err, fmt.Errorf("%s started %d loops only by the deadline", p.name, len(p.proxy.markers())))
	}
	opened()
	last, lastN := first, open
	for lastN < open+h.o.loops {
		m, ok, err := wait(lastN + 1)
		if err != nil {
			return loopCost{}, err
		}
		if !ok {
			break
		}
		last, lastN = m, lastN+1
	}
	n := float64(lastN - open)
	if n == 0 {
		return loopCost{}, fmt.Errorf("%s finished no loop inside the window by the deadline", p.name)
	}
	// The check, outside the window: markers seen up to the window's end
	// against the loops the component counts.
	if counted, err := loops(ctx, p); err != nil {
		h.note(fmt.Sprintf("%s: loop counter not read after the window: %v", p.name, err))
	} else if !bench.MarkersMatchLoops(int64(lastN), counted) {
		h.note(fmt.Sprintf("%s: %d loop-start requests but %.0f loops counted by its metrics: the window is not %0.f whole loops", p.name, lastN, counted, n))
	}
	c := loopCost{Loops: n, WindowSeconds: last.at.Sub(first.at).Seconds(),
		CPUInWindowSec: last.u.cpu - first.u.cpu, CPUTicksInWindowSec: last.u.cpuTicks - first.u.cpuTicks,
		RSSBytes: last.u.rss, PeakRSSBytes: last.u.peak, Watches: last.u.watches - first.u.watches}
	c.CPUPerLoop = c.CPUInWindowSec / n
	c.RequestsPerLp = float64(last.u.requests-first.u.requests) / n
	return c, nil
}

// note adds a note to the results (safe from the measuring goroutines).
func (h *harness) note(s string) {
	h.notesMu.Lock()
	defer h.notesMu.Unlock()
	h.results.Notes = append(h.results.Notes, s)
	logf("%s", s)
}

func (h *harness) scalePhase(ctx context.Context) error {
	prev := 1
	for _, n := range h.o.scales {
		if err := createTargets(ctx, h.tb.Client, h.dyn, prev, n, int32(h.o.replicas), true, 2*n*h.o.replicas, logf); err != nil {
			return fmt.Errorf("%d targets: %w", n, err)
		}
		prev = n
		running, err := runningPods(ctx, h.tb.Client)
		if err != nil {
			return err
		}
		if running > 2*n*h.o.replicas {
			// BENCH_VPA_USE_RUNNING with a larger earlier run's objects still
			// in the namespace: both sides watch all of it.
			h.note(fmt.Sprintf("%d targets: the namespace holds %d running pods, more than this scale's %d (an earlier run's targets): this point measures more targets than its label", n, running, 2*n*h.o.replicas))
		}
		logf("%d targets, %d pods running: starting both recommenders and updaters", n, running)
		ps, err := h.loopProcs(ctx, "AWARE", "VPA")
		if err != nil {
			return err
		}
		load0 := loadAvg()
		cost, err := h.measureLoops(ctx, ps, n)
		for _, p := range ps {
			h.stopProc(p)
		}
		// What was measured is kept even if a side did not finish its
		// loops in time: the report says which.
		h.results.Scale = append(h.results.Scale, scalePoint{Targets: n, Pods: 2 * n * h.o.replicas, RunningPods: running, Load: (load0 + loadAvg()) / 2, Cost: cost})
		if err := h.writeOutputs(); err != nil {
			return err
		}
		if err != nil {
			return fmt.Errorf("%d targets: %w", n, err)
		}
	}
	if h.o.awareOnlyScale > prev {
		n := h.o.awareOnlyScale
		// Only MPAs beyond the shared scales: VPA does not run here.
		if err := createTargets(ctx, h.tb.Client, h.dyn, prev, n, int32(h.o.replicas), false, (n+prev)*h.o.replicas, logf); err != nil {
			return fmt.Errorf("%d MPAs: %w", n, err)
		}
		running, err := runningPods(ctx, h.tb.Client)
		if err != nil {
			return err
		}
		// The recommender alone: the updater is not part of this measure,
		// and at 10,000 MPAs and 15,000 pods it did not sync its caches
		// within the 90 s a component has to become ready.
		logf("%d MPAs, %d pods running: starting AWARE's recommender alone", n, running)
		rec, err := h.awareLoop(ctx, "recommender")
		if err != nil {
			return err
		}
		load0 := loadAvg()
		cost, err := h.measureLoops(ctx, []*proc{rec}, n)
		h.stopProc(rec)
		if err != nil {
			return fmt.Errorf("%d MPAs: %w", n, err)
		}
		h.results.AwareOnly = append(h.results.AwareOnly, scalePoint{Targets: n, Pods: (n + prev) * h.o.replicas, RunningPods: running, Load: (load0 + loadAvg()) / 2, Cost: cost})
	}
	return nil
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

var authUser = authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller",
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}

func rawExt(b []byte) k8sruntime.RawExtension { return k8sruntime.RawExtension{Raw: b} }

// writeOutputs writes results.json, results.md and the SVG from what has
// been measured so far, so an interrupted run still leaves its numbers.
func (h *harness) writeOutputs() error {
	b, err := json.MarshalIndent(h.results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.o.out, "results.json"), b, 0o644); err != nil {
		return err
	}
	md, err := os.Create(filepath.Join(h.o.out, "results.md"))
	if err != nil {
		return err
	}
	defer md.Close()
	if err := writeMarkdown(md, h.results); err != nil {
		return err
	}
	svg, err := os.Create(filepath.Join(h.o.out, "recommender-cpu-per-loop.svg"))
	if err != nil {
		return err
	}
	defer svg.Close()
	if err := costPlot(h.results).WriteSVG(svg); err != nil && len(h.results.Scale) > 0 {
		return err
	}
	return nil
}

// mergeReports combines the results of several runs (e.g. one run per
// scale on a machine that cannot hold every scale in one sitting).
func mergeReports(out string, files []string) error {
	var merged results
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r results
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if merged.Machine == "" {
			merged.Machine, merged.Started, merged.Options = r.Machine, r.Started, r.Options
		}
		if len(merged.Webhook) == 0 {
			merged.Webhook = r.Webhook
		}
		merged.Scale = append(merged.Scale, r.Scale...)
		merged.AwareOnly = append(merged.AwareOnly, r.AwareOnly...)
		merged.Notes = append(merged.Notes, r.Notes...)
	}
	slices.SortStableFunc(merged.Scale, func(a, b scalePoint) int { return a.Targets - b.Targets })
	slices.SortStableFunc(merged.AwareOnly, func(a, b scalePoint) int { return a.Targets - b.Targets })
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	h := &harness{o: options{out: out}, results: merged}
	return h.report()
}

func (h *harness) report() error {
	if err := h.writeOutputs(); err != nil {
		return err
	}
	return writeMarkdown(os.Stdout, h.results)
}
