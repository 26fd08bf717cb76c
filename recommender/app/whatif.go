package app

// The what-if command lives in the recommender because the recommender is
// what reads a cluster's Prometheus: it takes the same --prometheus-address
// and query templates, reads the same MPAs, and ships in the image a new
// user already runs, so no extra binary or kubectl plugin has to be
// installed. pkg/kube/usage reads the history and pkg/lab/whatif (pure)
// fits and replays it; this file only wires the two, which the layering
// allows a binary's app package alone to do.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/usage"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/progress"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

// WhatifOptions configure `recommender whatif`.
type WhatifOptions struct {
	Kube              apiclient.Options
	PrometheusAddress string
	PrometheusTimeout time.Duration
	PrometheusWindow  time.Duration
	// PrometheusConcurrency is how many workloads' histories are read at
	// once; each workload's range queries run one after the other.
	PrometheusConcurrency int
	// PrometheusGzip asks Prometheus for gzipped answers: a sixth of the
	// bytes, for about twice Prometheus's CPU (the benchmark of
	// docs/whatif.md); worth it over a slow link only.
	PrometheusGzip bool
	Queries        usage.Queries
	// Namespace holds the workloads; MPAs (names) or Selector (a label
	// selector on MPAs) pick them, or Deployments names them directly.
	Namespace   string
	Selector    string
	MPAs        []string
	Deployments []string
	// SLOMetric, SLO and RateQuery apply to every workload and override
	// an MPA's spec.rl.slo.
	SLOMetric string
	SLO       time.Duration
	RateQuery string
	// InFlightQuery is a query template of each pod's requests in flight
	// (usage.WorkloadQuery.InFlightQuery); "": the memory fit estimates
	// them by Little's law.
	InFlightQuery string
	Period        time.Duration
	// End is when the period ends, RFC 3339 ("": now), so that a past
	// incident or a finished benchmark run can be read after the fact.
	End    string
	Step   time.Duration
	Output string
	// From is a whatif.json whose histories are fitted and replayed
	// again, with this command's fit and replay settings, instead of
	// reading Prometheus (no cluster is needed).
	From   string
	Replay WhatifReplay
	Fit    whatif.FitOptions
	// MPAUpdateMode is the updateMode of the manifests written to Output.
	MPAUpdateMode string
	// Progress draws a progress bar on stderr even when it is not a
	// terminal (it is drawn on a terminal anyway).
	Progress bool
	// showProgress is Progress, or stderr is a terminal; set by the
	// command, so that tests, which call runWhatif, draw none.
	showProgress bool
}

// WhatifReplay are the settings of the replay itself.
type WhatifReplay struct {
	Seeds    int
	Policies []string
	// Resize is how the replay's vertical changes reach running pods:
	// sim.ResizeInPlace or sim.ResizeRestart; "" follows MPAUpdateMode
	// (Restart for Recreate and Auto, which evict; InPlace otherwise).
	Resize string
	// RateWindow is the recommender's --prometheus-window: the replayed
	// policies see the request rate and the p95 over it, as the
	// recommender reads them from Prometheus.
	RateWindow time.Duration
	// SampledLatency replays each step's percentiles as its requests'
	// sample gives them (sim.Config.SampledLatency).
	SampledLatency bool
	// ClientTimeout is when the workloads' clients give a request up
	// (sim.Config.Timeout): a request answered later is lost.
	ClientTimeout time.Duration
	// ReadyWithinWindow lets a new pod serve from the moment it is Ready,
	// within its step (sim.Config.ReadyWithinWindow); false: from the
	// next step.
	ReadyWithinWindow bool
	// InstallAfter replays the policies as if installed this long after
	// the period begins (whatif.ReplayOptions.InstallAfter).
	InstallAfter time.Duration
}

// cluster is the replay's simulated cluster.
func (o *WhatifOptions) cluster() sim.Config {
	return sim.Config{Resize: o.resize(), RateWindow: o.Replay.RateWindow, SampledLatency: o.Replay.SampledLatency,
		Timeout: o.Replay.ClientTimeout, ReadyWithinWindow: o.Replay.ReadyWithinWindow,
		NodeCores: o.Fit.NodeCPU, NodeTick: o.Fit.NodeTick}
}

// resize is the replay's resize mode (Resize, or what MPAUpdateMode implies).
func (o *WhatifOptions) resize() sim.ResizeMode {
	if o.Replay.Resize != "" {
		return sim.ResizeMode(o.Replay.Resize)
	}
	switch v1alpha1.UpdateMode(o.MPAUpdateMode) {
	case v1alpha1.UpdateModeRecreate, v1alpha1.UpdateModeAuto:
		return sim.ResizeRestart
	}
	return sim.ResizeInPlace
}

// NewWhatifOptions returns the defaults: the last 7 days at one minute.
func NewWhatifOptions() *WhatifOptions {
	fit := whatif.DefaultFitOptions()
	// CONFIG_HZ=250, the kernel's default and the real node's: with it
	// the replay of what ran comes nearer the recorded SLO-violating steps
	// (docs/whatif.md, "The cluster replayed as bench-real replays it").
	fit.NodeTick = 4 * time.Millisecond
	return &WhatifOptions{
		Kube:              apiclient.Options{QPS: 20, Burst: 40},
		PrometheusTimeout: 30 * time.Second,
		PrometheusWindow:  2 * time.Minute,
		// Prometheus evaluates a query on one core: four at once keep
		// both cores of a small server busy while the answers are
		// decoded (docs/whatif.md, the benchmark).
		PrometheusConcurrency: 4,
		// Compressing the answers took half of Prometheus's CPU in the
		// benchmark: a cost paid on the user's Prometheus to save bytes
		// on a cluster's network, which carries them faster than gzip
		// makes them.
		PrometheusGzip: false,
		Queries:        usage.DefaultQueries(),
		Namespace:      "default",
		Period:         7 * 24 * time.Hour,
		Step:           time.Minute,
		Output:         "aware-whatif",
		Replay: WhatifReplay{
			Seeds:    5,
			Policies: whatif.Policies()[1:], // what actually ran is always replayed, first
			// The recommender's own default --prometheus-window.
			RateWindow: NewOptions().PrometheusWindow,
			// The simulator's own.
			ClientTimeout: sim.DefaultConfig().Timeout,
			// What a kubelet does: a pod takes traffic once Ready.
			ReadyWithinWindow: true,
		},
		Fit:           fit,
		MPAUpdateMode: string(v1alpha1.UpdateModeOff),
	}
}

// AddFlags binds the options to fs.
func (o *WhatifOptions) AddFlags(fs *pflag.FlagSet) {
	o.Kube.AddFlags(fs)
	fs.StringVar(&o.PrometheusAddress, "prometheus-address", o.PrometheusAddress, "Base URL of the Prometheus HTTP API holding the cluster's history (the recommender's --prometheus-address). Required.")
	fs.DurationVar(&o.PrometheusTimeout, "prometheus-timeout", o.PrometheusTimeout, "Timeout of each range query (a long period is read in several).")
	fs.IntVar(&o.PrometheusConcurrency, "prometheus-concurrency", o.PrometheusConcurrency, "Workloads whose histories are read at once (each one's range queries in turn).")
	fs.BoolVar(&o.PrometheusGzip, "prometheus-gzip", o.PrometheusGzip, "Ask Prometheus for gzipped answers: a sixth of the bytes (a week at one minute is about 6 MB of JSON per workload) for about twice Prometheus's CPU (docs/whatif.md). Turn it on over a slow link such as kubectl port-forward.")
	fs.DurationVar(&o.PrometheusWindow, "prometheus-window", o.PrometheusWindow, "Least range of rate() ({{.Window}} is the larger of it and --step); should cover two scrapes.")
	tmpl := " PromQL template in Go's text/template syntax, as the recommender's flag of the same name takes it."
	fs.StringVar(&o.Queries.CPU, "prometheus-query-cpu", o.Queries.CPU, "Per-pod, per-container CPU usage in cores."+tmpl)
	fs.StringVar(&o.Queries.Memory, "prometheus-query-memory", o.Queries.Memory, "Per-pod, per-container working set in bytes."+tmpl)
	fs.StringVar(&o.Queries.Latency, "prometheus-query-latency", o.Queries.Latency, "Latency at .Quantile of the SLO histogram."+tmpl)
	fs.StringVar(&o.Queries.RequestRate, "prometheus-query-request-rate", o.Queries.RequestRate, "Requests per second counted by the SLO histogram."+tmpl)
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "Namespace of the workloads.")
	fs.StringVarP(&o.Selector, "selector", "l", o.Selector, "Label selector of the MultidimPodAutoscalers whose workloads are replayed (all in the namespace when no --mpa or --deployment is given).")
	fs.StringSliceVar(&o.MPAs, "mpa", o.MPAs, "Names of MultidimPodAutoscalers whose Deployments are replayed.")
	fs.StringSliceVar(&o.Deployments, "deployment", o.Deployments, "Names of Deployments to replay, with or without an MPA; give --slo-metric or --rate-query.")
	fs.StringVar(&o.SLOMetric, "slo-metric", o.SLOMetric, "Latency histogram of every workload (its _count gives the request rate, its buckets the p95); overrides the MPAs' spec.rl.slo.metric.")
	fs.DurationVar(&o.SLO, "slo", o.SLO, "p95 latency objective of every workload; overrides the MPAs' spec.rl.slo.target. 0 with no MPA SLO: SLO violations are not counted.")
	fs.StringVar(&o.RateQuery, "rate-query", o.RateQuery, "PromQL of the request rate (requests/s, one series), for workloads without an SLO histogram; the same for every workload.")
	fs.StringVar(&o.InFlightQuery, "in-flight-query", o.InFlightQuery, "PromQL template of each pod's requests in flight, one series per pod labelled pod (e.g. sum by (pod) (http_requests_in_flight{namespace=\"{{.Namespace}}\", pod=~\"{{.PodRegex}}\"})), with {{.Namespace}}, {{.PodRegex}} and {{.Window}} as in the --prometheus-query-* templates. The memory fit then regresses the working set on it instead of on Little's law's estimate, which under overload counts too few requests and gives each too much memory. Empty: Little's law.")
	fs.DurationVar(&o.Period, "period", o.Period, "How far back to read, ending at --end.")
	fs.StringVar(&o.End, "end", o.End, "When the period ends, as an RFC 3339 time (e.g. 2026-11-30T01:00:00Z); empty: now.")
	fs.DurationVar(&o.Step, "step", o.Step, "Resolution of the history, and the replay's decision interval.")
	fs.StringVar(&o.From, "from", o.From, "A whatif.json written before: fit and replay its histories again with this command's --fit-*, --node-cpu, --node-tick, --serves-timed-out, --startup-delay, --policies, --seeds, --resize, --rate-window, --sampled-latency, --client-timeout and --ready-within-window, reading neither Prometheus nor the cluster (no MPA manifest is written).")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Directory receiving whatif.json, a plot (plot-<namespace>-<deployment>.svg) and an MPA manifest (mpa-<namespace>-<deployment>.yaml) per replayed workload.")
	fs.StringVar(&o.MPAUpdateMode, "mpa-update-mode", o.MPAUpdateMode, "updateMode of the MPA manifests written: Off (recommend only; the default, to watch before AWARE acts), Initial, Recreate, InPlaceOrRecreate, InPlace or Auto.")
	fs.BoolVar(&o.Progress, "progress", o.Progress, "Draw a progress bar of the range queries and the replay on stderr even when it is not a terminal (on a terminal it is always drawn).")
	fs.IntVar(&o.Replay.Seeds, "seeds", o.Replay.Seeds, "Arrival seeds each workload is replayed with; the paired comparison's pairs are (workload, seed).")
	fs.StringSliceVar(&o.Replay.Policies, "policies", o.Replay.Policies, "Policies to replay against what actually ran: hpa, vpa, hpa+vpa, fused, and variants of the fused default as fused:SPEC, SPEC one of "+fusion.VariantHelp+".")
	fs.StringVar(&o.Replay.Resize, "resize", o.Replay.Resize, "How the replay's vertical changes reach running pods: InPlace (resized without a restart, as the updater's InPlace and InPlaceOrRecreate modes do) or Restart (evicted and recreated, as Recreate and Auto do). Empty: as --mpa-update-mode implies (Restart for Recreate and Auto, InPlace otherwise).")
	fs.BoolVar(&o.Replay.SampledLatency, "sampled-latency", o.Replay.SampledLatency, "Replay each step's latency percentiles as a sample of its requests gives them, varying from step to step around the model's as a histogram's do (docs/simulator.md); off: the model's, the same in every calm step.")
	fs.DurationVar(&o.Replay.ClientTimeout, "client-timeout", o.Replay.ClientTimeout, "When the workloads' clients give a request up: a request the replay answers later is lost (and, with --serves-timed-out, still served).")
	fs.DurationVar(&o.Replay.InstallAfter, "install-after", o.Replay.InstallAfter, "Replay every policy but what ran as if installed this long after the period begins: until its first look past it the pods are what ran, then it decides from there, as an autoscaler created on a running workload. 0: every policy decides from the start.")
	fs.BoolVar(&o.Replay.ReadyWithinWindow, "ready-within-window", o.Replay.ReadyWithinWindow, "A replayed pod serves from the moment it is Ready, within its step, as a real one does; off: from the next step.")
	fs.DurationVar(&o.Fit.NodeTick, "node-tick", o.Fit.NodeTick, "The nodes' scheduler tick (1/CONFIG_HZ: 4ms at 250 Hz, 1ms at 1000 Hz), at which the kernel finds a CFS quota spent: the burst latency model runs a request on to the tick and takes the overrun off the next period. 0: the quota is enforced to the instant.")
	fs.BoolVar(&o.Fit.ServesTimedOut, "serves-timed-out", o.Fit.ServesTimedOut, "Replay the apps as servers that serve every request they hold to the end, past its client's timeout, sharing the CPU among them, so that an overloaded pod answers nothing in time (as a Go HTTP handler that does not watch its request's context); off: a request that cannot be answered in time is dropped as it arrives and the pod answers at capacity.")
	fs.DurationVar(&o.Replay.RateWindow, "rate-window", o.Replay.RateWindow, "The recommender's --prometheus-window: the replayed policies see the request rate and the p95 over it, as the recommender reads them; 0 or not longer than --step: each step's own.")
	fs.IntVar(&o.Fit.MinPoints, "fit-min-points", o.Fit.MinPoints, "Fewest usable steps a workload's fit accepts.")
	fs.Float64Var(&o.Fit.MinCPUR2, "fit-min-cpu-r2", o.Fit.MinCPUR2, "Least share of the CPU's variance the request rate must explain, or the workload is not predicted.")
	fs.Float64Var(&o.Fit.MaxMemoryResidual, "fit-max-memory-residual", o.Fit.MaxMemoryResidual, "Largest RMS residual of the per-pod working set, as a share of its mean, the memory fit may leave, or the workload is not predicted.")
	fs.DurationVar(&o.Fit.StartupDelay, "startup-delay", o.Fit.StartupDelay, "Pods' start-up delay in the replay when kube-state-metrics reports it for fewer than --fit-min-startup-pods pods; otherwise the median of theirs.")
	fs.IntVar(&o.Fit.MinStartupPods, "fit-min-startup-pods", o.Fit.MinStartupPods, "Fewest pods with a measured start-up delay for the median to be used.")
	fs.Float64Var(&o.Fit.NodeCPU, "node-cpu", o.Fit.NodeCPU, "Cores of the workloads' nodes: the CPU a pod without a CPU limit may use, and how many cores a pod's requests run on at once in the burst latency model.")
	fs.Float64Var(&o.Fit.CPUFitMaxLoad, "fit-cpu-max-load", o.Fit.CPUFitMaxLoad, "Fit CPU per request on the steady steps only: the pods' CPU below this share of their limit in the step and the one before, the replicas unchanged (a pod at its limit queues work its usage does not show; after it, it works the queue off). 1 or more: on every step. With fewer than --fit-min-points steady steps, or a steady line whose slope is not positive or whose R² is under --fit-min-cpu-r2, every step.")
	fs.StringVar(&o.Fit.Idle, "fit-idle", o.Fit.Idle, "Whether the replay's pods use the CPU line's intercept as idle CPU, on top of their requests' work (the intercept over the mean replicas, per pod): auto (when it is not negative and at most --fit-max-idle-share of the pods' mean CPU), on (whenever it is not negative) or off. The fit line says what was replayed.")
	fs.Float64Var(&o.Fit.IdleCPU, "fit-idle-cpu", o.Fit.IdleCPU, "The pods' idle CPU per pod in cores, where it is known (a pod's usage without traffic): CPU per request is fitted on the CPU less this per replica, and the replay's pods use it idle, whatever --fit-idle says. A history whose replicas followed its rate (an HPA's) cannot tell the two apart, and the fit line says so. 0: --fit-idle decides.")
	fs.Float64Var(&o.Fit.MaxIdleShare, "fit-max-idle-share", o.Fit.MaxIdleShare, "Largest idle CPU per pod, as a share of the pods' mean CPU, that --fit-idle auto replays.")
	fs.StringVar(&o.Fit.LatencyModel, "fit-latency", o.Fit.LatencyModel, "Latency model of the replay: fluid (a request shares the pod's CPU limit), burst (it runs at one core while the CFS quota lasts, as requests of nearly constant CPU time do), or auto: the one whose p95 is nearer the recorded p95 over the calm steps (fluid without a recorded p95).")
}

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate reports every bad flag at once.
func (o *WhatifOptions) Validate() error {
	var errs []error
	if o.From != "" && (len(o.MPAs) > 0 || len(o.Deployments) > 0 || o.Selector != "") {
		errs = append(errs, errors.New("--from replays the workloads of its file; --mpa, --deployment and --selector choose them in a cluster"))
	}
	if u, err := url.Parse(o.PrometheusAddress); o.From == "" && (o.PrometheusAddress == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		errs = append(errs, fmt.Errorf("--prometheus-address %q must be an http(s) URL", o.PrometheusAddress))
	}
	if o.PrometheusTimeout <= 0 || o.PrometheusWindow <= 0 {
		errs = append(errs, errors.New("--prometheus-timeout and --prometheus-window must be positive"))
	}
	if o.PrometheusConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--prometheus-concurrency %d: at least 1", o.PrometheusConcurrency))
	}
	if o.Step <= 0 || o.Period < o.Step {
		errs = append(errs, fmt.Errorf("--step (%s) must be positive and --period (%s) at least one step", o.Step, o.Period))
	} else if o.Step%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--step %s must be whole seconds", o.Step))
	}
	if !(o.Fit.NodeCPU > 0) || math.IsInf(o.Fit.NodeCPU, 0) {
		errs = append(errs, fmt.Errorf("--node-cpu %g must be a finite number of cores > 0", o.Fit.NodeCPU))
	}
	if !(o.Fit.MaxMemoryResidual > 0) || math.IsInf(o.Fit.MaxMemoryResidual, 0) {
		errs = append(errs, fmt.Errorf("--fit-max-memory-residual %g must be a finite share > 0", o.Fit.MaxMemoryResidual))
	}
	if !(o.Fit.CPUFitMaxLoad > 0) || math.IsInf(o.Fit.CPUFitMaxLoad, 0) {
		errs = append(errs, fmt.Errorf("--fit-cpu-max-load %g must be a finite share > 0", o.Fit.CPUFitMaxLoad))
	}
	if _, err := o.endTime(time.Time{}); err != nil {
		errs = append(errs, err)
	}
	if !dns1123.MatchString(o.Namespace) {
		errs = append(errs, fmt.Errorf("--namespace %q is not a namespace name", o.Namespace))
	}
	if len(o.Deployments) > 0 && (len(o.MPAs) > 0 || o.Selector != "") {
		errs = append(errs, errors.New("give --deployment, or --mpa / --selector, not both"))
	}
	if len(o.Deployments) > 0 && o.SLOMetric == "" && o.RateQuery == "" {
		errs = append(errs, errors.New("--deployment needs --slo-metric or --rate-query: the request rate is read from one of them"))
	}
	if o.SLOMetric != "" {
		if err := usage.ValidMetricName(o.SLOMetric); err != nil {
			errs = append(errs, fmt.Errorf("--slo-metric: %w", err))
		}
	}
	if o.SLO < 0 {
		errs = append(errs, fmt.Errorf("--slo %s must not be negative", o.SLO))
	}
	if o.InFlightQuery != "" && o.From != "" {
		errs = append(errs, errors.New("--in-flight-query reads Prometheus; --from replays its file's histories, with the requests in flight they recorded"))
	}
	if o.InFlightQuery != "" {
		if err := usage.CheckTemplate("in-flight", o.InFlightQuery); err != nil {
			errs = append(errs, fmt.Errorf("--in-flight-query: %w", err))
		}
	}
	if o.Replay.Seeds < 2 {
		errs = append(errs, fmt.Errorf("--seeds %d: at least 2, for the paired comparison's interval", o.Replay.Seeds))
	}
	if o.Replay.ClientTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--client-timeout %s must be positive", o.Replay.ClientTimeout))
	}
	// The kernel's CFS period, 100 ms: a tick longer than it is no tick.
	if o.Fit.NodeTick < 0 || o.Fit.NodeTick > 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--node-tick %s: want 0 to the CFS period of 100ms", o.Fit.NodeTick))
	}
	switch sim.ResizeMode(o.Replay.Resize) {
	case "", sim.ResizeInPlace, sim.ResizeRestart:
	default:
		errs = append(errs, fmt.Errorf("--resize %q: want InPlace or Restart", o.Replay.Resize))
	}
	switch o.Fit.LatencyModel {
	case whatif.LatencyAuto, whatif.LatencyFluid, whatif.LatencyBurst:
	default:
		errs = append(errs, fmt.Errorf("--fit-latency %q: want auto, fluid or burst", o.Fit.LatencyModel))
	}
	switch o.Fit.Idle {
	case whatif.IdleAuto, whatif.IdleOn, whatif.IdleOff:
	default:
		errs = append(errs, fmt.Errorf("--fit-idle %q: want auto, on or off", o.Fit.Idle))
	}
	if !(o.Fit.IdleCPU >= 0 && o.Fit.IdleCPU < o.Fit.NodeCPU) {
		errs = append(errs, fmt.Errorf("--fit-idle-cpu %g: want cores per pod in [0, --node-cpu %g)", o.Fit.IdleCPU, o.Fit.NodeCPU))
	}
	if !(o.Fit.MaxIdleShare > 0 && o.Fit.MaxIdleShare <= 1) {
		errs = append(errs, fmt.Errorf("--fit-max-idle-share %g: want a share of the pods' CPU in (0, 1]", o.Fit.MaxIdleShare))
	}
	if o.Replay.InstallAfter < 0 {
		errs = append(errs, fmt.Errorf("--install-after %s must not be negative", o.Replay.InstallAfter))
	}
	if o.Replay.RateWindow < 0 {
		errs = append(errs, fmt.Errorf("--rate-window %s must not be negative", o.Replay.RateWindow))
	}
	for _, p := range o.Replay.Policies {
		if err := whatif.ValidPolicy(p); err != nil {
			errs = append(errs, fmt.Errorf("--policies: %w", err))
		}
	}
	if o.Output == "" {
		errs = append(errs, errors.New("--output must name a directory"))
	}
	switch v1alpha1.UpdateMode(o.MPAUpdateMode) {
	case v1alpha1.UpdateModeOff, v1alpha1.UpdateModeInitial, v1alpha1.UpdateModeRecreate, v1alpha1.UpdateModeInPlaceOrRecreate, v1alpha1.UpdateModeInPlace, v1alpha1.UpdateModeAuto:
	default:
		errs = append(errs, fmt.Errorf("--mpa-update-mode %q: want Off, Initial, Recreate, InPlaceOrRecreate, InPlace or Auto", o.MPAUpdateMode))
	}
	if err := o.Kube.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// endTime is --end, or now when it is empty.
func (o *WhatifOptions) endTime(now time.Time) (time.Time, error) {
	if o.End == "" {
		return now, nil
	}
	t, err := time.Parse(time.RFC3339, o.End)
	if err != nil {
		return time.Time{}, fmt.Errorf("--end %q is not an RFC 3339 time (e.g. 2026-11-30T01:00:00Z): %w", o.End, err)
	}
	return t, nil
}

func newWhatifCommand() *cobra.Command {
	o := NewWhatifOptions()
	cmd := &cobra.Command{
		Use:   "whatif",
		Short: "Replays the autoscaling policies on a workload's own Prometheus history",
		Long: `whatif reads each workload's request rate, CPU and memory per pod,
replicas, requests and limits (and latency, where an SLO histogram is known)
from Prometheus over --period, fits the simulator's model of the workload to
it, and replays what actually ran, the HPA, the VPA, both, and the fused
default on the recorded rate. It prints each fit's quality (or why it
refuses to predict), how closely the replay of what ran reproduces the
history (the what-if's error bar), the policies' table and their paired
comparison against what ran, and writes the whole as whatif.json in
--output, with a plot of each workload's recorded and replayed replicas and
CPU requests, and the MultidimPodAutoscaler to apply (updateMode Off unless
--mpa-update-mode says otherwise). It changes nothing in the cluster.
To add a trained agent to the replay, run
"rl-agent whatif-replay --from <output>/whatif.json --checkpoint FILE".
See docs/whatif.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if o.From != "" {
				return runWhatif(cmd.Context(), o, nil, time.Time{}, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			clients, err := apiclient.NewClients(o.Kube, "aware-whatif")
			if err != nil {
				return err
			}
			o.showProgress = o.Progress || isTerminal(cmd.ErrOrStderr())
			end, err := o.endTime(time.Now())
			if err != nil {
				return err
			}
			return runWhatif(cmd.Context(), o, kubeWorkloads{clients}, end, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// whatifTarget is one workload to replay, as the cluster describes it now.
type whatifTarget struct {
	Namespace, Deployment, Container string
	SLOMetric                        string
	Selector                         *metav1.LabelSelector
	Percentile                       float64
	// SLO is the p95 objective (seconds); 0 means none.
	SLO float64
	// Requests and limits per pod (summed over containers) of the current
	// spec, used where kube-state-metrics has no history.
	RequestCPU, RequestMemory, LimitCPU, LimitMemory float64
}

// workloadLister finds the workloads to replay.
type workloadLister interface {
	Workloads(ctx context.Context, o *WhatifOptions) ([]whatifTarget, error)
}

// podRegex matches a Deployment's pods: <name>-<template hash>-<suffix>.
func podRegex(deployment string) string {
	return regexp.QuoteMeta(deployment) + `-[a-z0-9]+-[a-z0-9]+`
}

// isTerminal reports whether w is a character device (a terminal), where a
// redrawn progress line is wanted; a file or pipe would collect every
// redraw.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func runWhatif(ctx context.Context, o *WhatifOptions, lister workloadLister, now time.Time, stdout, stderr io.Writer) error {
	var targets []whatifTarget
	var bar *progress.Bar
	if o.showProgress {
		bar = progress.NewBar(stderr)
	}
	// The recorded p95 is a quantile over the latency query's range.
	o.Fit.LatencyWindow = o.PrometheusWindow
	ro := whatif.ReplayOptions{
		Seeds: o.Replay.Seeds, Policies: o.Replay.Policies, Plot: true,
		Config: o.cluster(), InstallAfter: o.Replay.InstallAfter,
	}
	var res *whatif.Result
	var err error
	if o.From != "" {
		var ws []whatif.Workload
		if ws, err = refitFrom(o.From, o.Fit); err != nil {
			return err
		}
		if bar != nil {
			ro.Progress = bar
		}
		res, err = whatif.Replay(ctx, ws, ro)
	} else {
		if targets, err = lister.Workloads(ctx, o); err != nil {
			return err
		}
		if len(targets) == 0 {
			return fmt.Errorf("no workloads to replay in namespace %q", o.Namespace)
		}
		res, err = readAndReplay(ctx, o, targets, now, bar, ro)
	}
	if res != nil {
		res.FitOptions = o.Fit
		if werr := res.WriteText(stdout); werr != nil {
			return werr
		}
	}
	if err != nil {
		return err
	}
	files, err := res.WriteFiles(o.Output)
	if err != nil {
		return err
	}
	byName := map[string]whatifTarget{}
	for _, t := range targets {
		byName[t.Namespace+"/"+t.Deployment] = t
	}
	// With --from the cluster was not read: no target to write an MPA for.
	for _, p := range res.Plots {
		t, ok := byName[p.History.Name]
		if !ok {
			continue
		}
		var fused *eval.Series
		for i, r := range p.Replayed.Series {
			if r.Policy == whatif.PolicyFused {
				fused = &p.Replayed.Series[i]
			}
		}
		path, err := writeMPA(o.Output, t, p.History, fused, v1alpha1.UpdateMode(o.MPAUpdateMode))
		if err != nil {
			return err
		}
		files = append(files, path)
	}
	fmt.Fprintf(stdout, "\nWrote %s\n", strings.Join(files, "\n      "))
	return nil
}

// readAndReplay reads every target's history from Prometheus,
// PrometheusConcurrency workloads at a time, fits it, and hands it to the
// replay at once: the replay of the workloads read runs on the cores
// Prometheus leaves while it answers the next ones' queries. The result
// keeps the targets' order.
func readAndReplay(ctx context.Context, o *WhatifOptions, targets []whatifTarget, now time.Time, bar *progress.Bar, ro whatif.ReplayOptions) (*whatif.Result, error) {
	logger := klog.FromContext(ctx).WithName("whatif")
	po := usage.PrometheusOptions{Address: o.PrometheusAddress, Timeout: o.PrometheusTimeout, Window: o.PrometheusWindow, Queries: o.Queries}
	if !o.PrometheusGzip {
		// Go's transport asks for gzip unless told not to.
		rt := http.DefaultTransport.(*http.Transport).Clone()
		rt.DisableCompression = true
		po.RoundTripper = rt
	}
	prom, err := usage.NewPrometheus(po)
	if err != nil {
		return nil, err
	}
	// A failed read stops the replay of the workloads read before it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wp *whatifProgress
	if bar != nil {
		wp = &whatifProgress{bar: bar, workloads: len(targets)}
		ro.Progress = wp
	}
	replayer, err := whatif.NewReplayer(ctx, ro)
	if err != nil {
		return nil, err
	}
	if wp != nil {
		wp.runs = replayer.JobsPerWorkload()
	}
	// The grid ends at the last whole step, so every query of every
	// workload shares it.
	end := now.Truncate(o.Step)
	steps := int(o.Period / o.Step)
	start := end.Add(-time.Duration(steps-1) * o.Step)
	// The first failure cancels the reads under way.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.PrometheusConcurrency)
	for i, t := range targets {
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // another workload failed: its error is the one returned
			}
			name := t.Namespace + "/" + t.Deployment
			logger.Info("Reading history", "workload", name, "index", i+1, "of", len(targets), "start", start, "steps", steps)
			h, err := prom.WorkloadHistory(gctx, usage.WorkloadQuery{
				Namespace: t.Namespace, PodRegex: podRegex(t.Deployment), Deployment: t.Deployment,
				SLOMetric: t.SLOMetric, Selector: t.Selector, Percentile: t.Percentile, RateQuery: o.RateQuery,
				InFlightQuery: o.InFlightQuery, Start: start, Steps: steps, Step: o.Step,
				Progress: func(done, total int) {
					logger.V(1).Info("Progress", "workload", name, "queries", done, "of", total)
					wp.query(i, name, done, total)
				},
			})
			if err != nil {
				return fmt.Errorf("reading the history of %s: %w", name, err)
			}
			logger.Info("Read history", "workload", name, "sources", h.Sources, "dropped", h.Dropped)
			s := toSeries(name, t, h)
			f, err := whatif.FitApp(s, o.Fit)
			if err != nil && !errors.Is(err, whatif.ErrTooThin) && !errors.Is(err, whatif.ErrPoorFit) && !errors.Is(err, whatif.ErrSeries) {
				return err
			}
			wp.fitted(i, f.Refused == "")
			return replayer.Add(i, whatif.Workload{Series: s, Fit: f})
		})
	}
	if err := g.Wait(); err != nil {
		cancel()
		replayer.Result() // stops the replay; the read's error is the one returned
		wp.end()
		return nil, err
	}
	res, err := replayer.Result()
	wp.end()
	return res, err
}

// refitFrom fits the histories of a whatif.json again with fo: what a
// fit refuses is kept (and reported), as from Prometheus.
func refitFrom(path string, fo whatif.FitOptions) ([]whatif.Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	defer f.Close()
	prev, err := whatif.ReadResult(f)
	if err != nil {
		return nil, fmt.Errorf("--from %s: %w", path, err)
	}
	if len(prev.History) == 0 {
		return nil, fmt.Errorf("--from %s holds no history to replay", path)
	}
	ws := make([]whatif.Workload, 0, len(prev.History))
	for i, s := range prev.History {
		if s == nil {
			return nil, fmt.Errorf("--from %s: history %d is empty", path, i)
		}
		fit, err := whatif.FitApp(s, fo)
		if err != nil && !errors.Is(err, whatif.ErrTooThin) && !errors.Is(err, whatif.ErrPoorFit) && !errors.Is(err, whatif.ErrSeries) {
			return nil, err
		}
		ws = append(ws, whatif.Workload{Series: s, Fit: fit})
	}
	return ws, nil
}

// toSeries converts a read history; requests and limits that
// kube-state-metrics did not serve come from the current spec.
func toSeries(name string, t whatifTarget, h usage.WorkloadHistory) *whatif.Series {
	spec := func(v []float64, current float64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			if math.IsNaN(x) {
				x = current
			}
			out[i] = x
		}
		return out
	}
	return &whatif.Series{
		Name: name, Container: t.Container, Start: h.Start, Step: h.Step,
		Rate: h.Rate, CPU: h.CPU, Memory: h.Memory, Replicas: h.Replicas, P95: h.Latency, InFlight: h.InFlight, SLO: t.SLO,
		StartupDelays: h.StartupDelays,
		RequestCPU:    spec(h.RequestCPU, t.RequestCPU), RequestMemory: spec(h.RequestMemory, t.RequestMemory),
		LimitCPU: spec(h.LimitCPU, t.LimitCPU), LimitMemory: spec(h.LimitMemory, t.LimitMemory),
	}
}

// kubeWorkloads reads the MPAs and Deployments from the cluster.
type kubeWorkloads struct{ c *apiclient.Clients }

var _ workloadLister = kubeWorkloads{}

func (k kubeWorkloads) Workloads(ctx context.Context, o *WhatifOptions) ([]whatifTarget, error) {
	var out []whatifTarget
	deploy := func(name string, t whatifTarget) error {
		d, err := k.c.Kube.AppsV1().Deployments(o.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("deployment %s/%s: %w", o.Namespace, name, err)
		}
		t.Namespace, t.Deployment = o.Namespace, name
		specResources(&t, d.Spec.Template.Spec.Containers)
		if o.SLOMetric != "" {
			t.SLOMetric = o.SLOMetric
		}
		if o.SLO > 0 {
			t.SLO = o.SLO.Seconds()
		}
		out = append(out, t)
		return nil
	}
	if len(o.Deployments) > 0 {
		for _, d := range o.Deployments {
			if err := deploy(d, whatifTarget{}); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	api := k.c.MPA.AutoscalingV1alpha1().MultidimPodAutoscalers(o.Namespace)
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: o.Selector})
	if err != nil {
		return nil, fmt.Errorf("listing MultidimPodAutoscalers in %s: %w", o.Namespace, err)
	}
	want, missing := map[string]bool{}, map[string]bool{}
	for _, n := range o.MPAs {
		want[n], missing[n] = true, true
	}
	for _, m := range list.Items {
		if len(want) > 0 && !want[m.Name] {
			continue
		}
		delete(missing, m.Name)
		ref := m.Spec.ScaleTargetRef
		if ref == nil || ref.Kind != "Deployment" {
			klog.FromContext(ctx).Info("Skipping an MPA whose target is not a Deployment (only Deployments are replayed so far)", "mpa", m.Name)
			continue
		}
		var t whatifTarget
		if rl := m.Spec.RL; rl != nil && rl.SLO != nil {
			t.SLOMetric, t.Selector = rl.SLO.Metric.Name, rl.SLO.Metric.Selector
			t.Percentile, t.SLO = float64(rl.SLO.Percentile), rl.SLO.Target.Seconds()
			if t.Percentile != 0 && t.Percentile != 95 {
				// The replay counts p95 violations: read the p95.
				t.Percentile, t.SLO = 95, 0
			}
		}
		if err := deploy(ref.Name, t); err != nil {
			return nil, err
		}
	}
	for _, n := range o.MPAs {
		if missing[n] {
			return nil, fmt.Errorf("MultidimPodAutoscaler %s/%s not found (or not matching --selector)", o.Namespace, n)
		}
	}
	return out, nil
}

// specResources sets t's container (the first) and per-pod requests and
// limits, summed over the containers.
func specResources(t *whatifTarget, cs []corev1.Container) {
	for i, c := range cs {
		if i == 0 {
			t.Container = c.Name
		}
		t.RequestCPU += c.Resources.Requests.Cpu().AsApproximateFloat64()
		t.RequestMemory += c.Resources.Requests.Memory().AsApproximateFloat64()
		t.LimitCPU += c.Resources.Limits.Cpu().AsApproximateFloat64()
		t.LimitMemory += c.Resources.Limits.Memory().AsApproximateFloat64()
	}
}
