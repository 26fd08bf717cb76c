package app

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/certs"
	"github.com/aware-k8s/aware/pkg/kube/leader"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/pkg/kube/usage"
	"github.com/aware-k8s/aware/recommender/controller"
)

// Options are the recommender's command-line options.
type Options struct {
	Kube      apiclient.Options
	Endpoints serve.Options
	Leader    leader.Options

	RecommenderName       string
	Interval              time.Duration
	StatusRefreshInterval time.Duration
	StatusWriteTimeout    time.Duration
	FailureWarning        time.Duration
	CheckpointInterval    time.Duration
	RivalScanInterval     time.Duration
	Namespace             string
	IgnoredNamespaces     []string
	// FitToNodes fits every recommendation to the nodes' room.
	FitToNodes bool
	// ClusterWideExternalNamespaces may read External goal metrics across
	// namespaces.
	ClusterWideExternalNamespaces []string
	Workers                       int
	LowConfidenceHistory          time.Duration

	PrometheusAddress     string
	PrometheusTimeout     time.Duration
	PrometheusWindow      time.Duration
	PrometheusConcurrency int
	PrometheusQueries     usage.Queries
	HistoryLength         time.Duration
	HistoryResolution     time.Duration
	HistoryConcurrency    int
	HistoryTimeout        time.Duration

	// DefaultVariant is the variant of the fused default the recommender
	// computes (fusion.ParseVariant); empty: the fused default.
	DefaultVariant string

	RLAgentEndpoint string
	// RLAgentTLS is the mutual TLS of the agent link.
	RLAgentTLS              certs.LinkOptions
	RLAgentTimeout          time.Duration
	RLAgentFailureThreshold int
	RLAgentCooldown         time.Duration
}

// defaultInterval is the simulator's window, on which the agent's features
// and episodes are trained (docs/results/evidence-slo.md), and the HPA's sync
// period.
const defaultInterval = 15 * time.Second

// NewOptions returns options with defaults.
func NewOptions() *Options {
	return &Options{
		Kube:                    apiclient.Options{QPS: 50, Burst: 100},
		Endpoints:               serve.NewOptions(),
		Leader:                  leader.NewOptions("aware-recommender"),
		RecommenderName:         controller.DefaultRecommenderName,
		Interval:                defaultInterval,
		StatusRefreshInterval:   5 * time.Minute,
		StatusWriteTimeout:      controller.DefaultStatusWriteTimeout,
		FailureWarning:          controller.DefaultFailureWarning,
		CheckpointInterval:      10 * time.Minute,
		RivalScanInterval:       time.Minute,
		Workers:                 4,
		LowConfidenceHistory:    24 * time.Hour,
		PrometheusTimeout:       10 * time.Second,
		PrometheusWindow:        2 * time.Minute,
		PrometheusConcurrency:   8,
		PrometheusQueries:       usage.DefaultQueries(),
		HistoryLength:           8 * 24 * time.Hour,
		HistoryResolution:       time.Hour,
		HistoryConcurrency:      4,
		HistoryTimeout:          5 * time.Minute,
		RLAgentTLS:              certs.NewLinkOptions("rl-agent-tls-", certs.LinkClient, "aware-recommender", nil),
		RLAgentTimeout:          2 * time.Second,
		RLAgentFailureThreshold: 5,
		RLAgentCooldown:         30 * time.Second,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Kube.AddFlags(fs)
	o.Endpoints.AddFlags(fs)
	o.Leader.AddFlags(fs)
	fs.StringVar(&o.RecommenderName, "recommender-name", o.RecommenderName, "Handle the MultidimPodAutoscalers whose spec.recommenders[0].name is this; \""+controller.DefaultRecommenderName+"\" also handles those naming no recommender.")
	fs.DurationVar(&o.Interval, "recommender-interval", o.Interval, "How often recommendations are computed; also the observation window. An rl-agent's policies are trained on 15-s windows (the simulator's), and its features read the last 20 windows as five minutes.")
	fs.DurationVar(&o.StatusWriteTimeout, "status-write-timeout", o.StatusWriteTimeout, "Abandon a status write after this long and retry it with backoff, so a request the API server holds (e.g. while etcd is unreachable; its own timeout is 60s) does not block a worker. A write that succeeds after failed ones records a StatusWriteRecovered event.")
	fs.DurationVar(&o.StatusRefreshInterval, "status-refresh-interval", o.StatusRefreshInterval, "Rewrite status.recommendationTime at least this often while recommendations are being made, even if nothing changed, so the updater can tell a live recommender from a dead one.")
	fs.DurationVar(&o.FailureWarning, "api-failure-warning", o.FailureWarning, "Record a Warning event (StatusWriteFailing, APIReadFailing) on the autoscalers concerned once their status writes, or the list of other autoscalers, have failed for this long, and again every such period while they fail; the call's success after it records StatusWriteRecovered or APIReadRecovered. aware_recommender_api_failing_seconds shows the current run of failures meanwhile.")
	fs.DurationVar(&o.RivalScanInterval, "rival-scan-interval", o.RivalScanInterval, "How often the other autoscalers (HPA, VPA, KEDA ScaledObject, Knative PodAutoscaler) of the targets are listed; loops in between use the last complete scan, so an autoscaler created or deleted on a target is noticed within this much time. 0 lists them every loop (each list reads every such object in --namespace).")
	fs.DurationVar(&o.CheckpointInterval, "checkpoints-interval", o.CheckpointInterval, "How often each autoscaler's usage histograms are saved in MultidimPodAutoscalerCheckpoint objects, and checkpoints of deleted autoscalers are deleted.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Only watch this namespace (autoscalers, pods, checkpoints, metrics). Empty means all namespaces.")
	fs.StringSliceVar(&o.IgnoredNamespaces, "ignored-namespaces", o.IgnoredNamespaces, "Comma-separated namespaces whose autoscalers are ignored.")
	fs.BoolVar(&o.FitToNodes, "fit-to-nodes", o.FitToNodes, "Fit every recommendation to the room the nodes have now for the autoscaler's pods (their allocatable less every other pod's requests, on the nodes the pods' selector, required affinity and tolerations allow): no pod larger than any node's room, and no more replicas than fit at the recommended pod size (fewer than run now if need be; below minReplicas the pods' CPU is lowered instead). For clusters of fixed size; leave it off where a cluster autoscaler adds nodes for pending pods. Needs all namespaces (--namespace empty) and permission to list and watch nodes.")
	fs.StringSliceVar(&o.ClusterWideExternalNamespaces, "external-metrics-cluster-wide-namespaces", o.ClusterWideExternalNamespaces, "Comma-separated namespaces whose autoscalers' External goals.metrics read series from any namespace. Everywhere else an External query carries namespace=\"<the autoscaler's namespace>\", so that an autoscaler's author cannot read another namespace's series through status.currentMetrics. Grant it only to namespaces whose authors may see every series in Prometheus.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Concurrent status writers.")
	fs.DurationVar(&o.LowConfidenceHistory, "low-confidence-history", o.LowConfidenceHistory, "Set the LowConfidence condition while a container has less usage history than this (VPA's confidence measure).")
	fs.StringVar(&o.PrometheusAddress, "prometheus-address", o.PrometheusAddress, "Base URL of the Prometheus HTTP API (e.g. http://prometheus.monitoring:9090), for SLO latency, request rate and error rate, goals.metrics of type Pods/Object/External (which drive the replica count with the HPA's semantics), usage history at start-up, and the containers' CPU pressure (the kubelet's container_pressure_cpu_waiting_seconds_total, cgroup v2 with KubeletPSI; without it pressure is not measured). Empty disables them all; goals.metrics of those types then count as missing metrics, which block scale-downs.")
	fs.DurationVar(&o.PrometheusTimeout, "prometheus-timeout", o.PrometheusTimeout, "Timeout of each Prometheus query.")
	fs.DurationVar(&o.PrometheusWindow, "prometheus-window", o.PrometheusWindow, "Range of rate() in the SLO, CPU-pressure and current-usage queries ({{.Window}}); should cover at least two scrapes.")
	fs.IntVar(&o.PrometheusConcurrency, "prometheus-concurrency", o.PrometheusConcurrency, "Concurrent SLO and goal-metric queries per loop; all of a loop's queries share a budget of half --recommender-interval.")
	q := &o.PrometheusQueries
	const tmplHelp = " PromQL template in Go's text/template syntax over .Namespace .PodRegex .Container .Metric .Selector .Percentile .Quantile .Window .ObjectKind .ObjectName, with if/else/with, pipelines and the functions trimSuffix, trimPrefix, printf, print, println, len, not, and, or, eq, ne, lt, le, gt, ge (range, variables and define are refused at start)."
	fs.StringVar(&q.CPU, "prometheus-query-cpu", q.CPU, "Per-pod, per-container CPU usage in cores, with labels namespace, pod, container."+tmplHelp)
	fs.StringVar(&q.Memory, "prometheus-query-memory", q.Memory, "Per-pod, per-container memory working set in bytes, with labels namespace, pod, container."+tmplHelp)
	fs.StringVar(&q.CPUPressure, "prometheus-query-cpu-pressure", q.CPUPressure, "Per-pod, per-container CPU pressure: the share of the window (0 to 1) in which some of the container's runnable work waited for CPU, with labels namespace, pod, container; no series means not measured. The fused default counts a container at 0.05 or more as CPU-saturated."+tmplHelp)
	fs.StringVar(&q.Latency, "prometheus-query-latency", q.Latency, "Latency in seconds at .Quantile of the histogram spec.rl.slo.metric."+tmplHelp)
	fs.StringVar(&q.RequestRate, "prometheus-query-request-rate", q.RequestRate, "Requests per second counted by the histogram spec.rl.slo.metric."+tmplHelp)
	fs.StringVar(&q.ErrorRate, "prometheus-query-error-rate", q.ErrorRate, "Failed requests per second of the workload whose latency histogram is spec.rl.slo.metric (the RL agent's error rate; no answer means not measured)."+tmplHelp)
	fs.StringVar(&q.Pods, "prometheus-query-pods", q.Pods, "Per-pod value of a Pods goal metric, with label pod (AverageValue target: the replica count follows the mean per pod)."+tmplHelp)
	fs.StringVar(&q.Object, "prometheus-query-object", q.Object, "Value of an Object goal metric for the described object (Value or AverageValue target)."+tmplHelp)
	fs.StringVar(&q.External, "prometheus-query-external", q.External, "Value of an External goal metric (Value or AverageValue target)."+tmplHelp)
	fs.DurationVar(&o.HistoryLength, "history-length", o.HistoryLength, "How much usage history is loaded from Prometheus for an autoscaler without a checkpoint.")
	fs.DurationVar(&o.HistoryResolution, "history-resolution", o.HistoryResolution, "Step of the history range queries.")
	fs.IntVar(&o.HistoryConcurrency, "history-concurrency", o.HistoryConcurrency, "History loads running at once.")
	fs.DurationVar(&o.HistoryTimeout, "history-timeout", o.HistoryTimeout, "How long an autoscaler waits for its history (queueing included) before it starts without; FetchingHistory is True meanwhile.")
	fs.StringVar(&o.DefaultVariant, "default-variant", o.DefaultVariant, "The variant of the fused default the recommender computes: "+fusion.VariantHelp+". The RL agent is told it with every request, and refuses to act (FAILED_PRECONDITION, status.rl.reason AgentRefusedDefault) unless its policy was trained beside the same variant (rl-agent train --anchor).")
	fs.StringVar(&o.RLAgentEndpoint, "rl-agent-endpoint", o.RLAgentEndpoint, "gRPC address (host:port) of the RL agent, for autoscalers with spec.rl.mode Shadow or On. Empty means defaults only. The connection uses mutual TLS (--rl-agent-tls-*) unless --rl-agent-tls-mode=plaintext.")
	o.RLAgentTLS.AddFlags(fs)
	fs.DurationVar(&o.RLAgentTimeout, "rl-agent-timeout", o.RLAgentTimeout, "Deadline of each call to the RL agent.")
	fs.IntVar(&o.RLAgentFailureThreshold, "rl-agent-failure-threshold", o.RLAgentFailureThreshold, "Consecutive agent failures that open the circuit breaker.")
	fs.DurationVar(&o.RLAgentCooldown, "rl-agent-cooldown", o.RLAgentCooldown, "How long an open circuit breaker stops calling the agent before one trial call.")
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	errs := []error{o.Kube.Validate(), o.Endpoints.Validate(), o.Leader.Validate()}
	if o.RecommenderName == "" {
		errs = append(errs, errors.New("--recommender-name must not be empty"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--recommender-interval", o.Interval}, {"--status-refresh-interval", o.StatusRefreshInterval}, {"--status-write-timeout", o.StatusWriteTimeout}, {"--api-failure-warning", o.FailureWarning}, {"--checkpoints-interval", o.CheckpointInterval}, {"--low-confidence-history", o.LowConfidenceHistory}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	if o.FitToNodes && o.Namespace != "" {
		errs = append(errs, fmt.Errorf("--fit-to-nodes needs every pod of the cluster to measure the nodes' room, which --namespace %q hides", o.Namespace))
	}
	if o.RivalScanInterval < 0 {
		errs = append(errs, fmt.Errorf("--rival-scan-interval must not be negative, got %s", o.RivalScanInterval))
	}
	if o.StatusRefreshInterval < o.Interval {
		errs = append(errs, fmt.Errorf("--status-refresh-interval %s must not be shorter than --recommender-interval %s", o.StatusRefreshInterval, o.Interval))
	}
	if o.RLAgentTimeout <= 0 || o.RLAgentCooldown <= 0 || o.RLAgentFailureThreshold < 1 {
		errs = append(errs, errors.New("--rl-agent-timeout and --rl-agent-cooldown must be positive and --rl-agent-failure-threshold at least 1"))
	}
	if o.PrometheusAddress != "" {
		if u, err := url.Parse(o.PrometheusAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--prometheus-address %q must be an http(s) URL", o.PrometheusAddress))
		}
		if o.PrometheusTimeout <= 0 || o.PrometheusWindow <= 0 || o.PrometheusConcurrency < 1 {
			errs = append(errs, errors.New("--prometheus-timeout and --prometheus-window must be positive and --prometheus-concurrency at least 1"))
		}
		if o.HistoryLength <= 0 || o.HistoryResolution <= 0 || o.HistoryTimeout <= 0 || o.HistoryConcurrency < 1 {
			errs = append(errs, errors.New("--history-length, --history-resolution and --history-timeout must be positive and --history-concurrency at least 1"))
		} else if n := o.HistoryLength / o.HistoryResolution; n > usage.MaxHistoryPoints {
			errs = append(errs, fmt.Errorf("--history-length / --history-resolution is %d points, more than Prometheus serves (%d)", n, usage.MaxHistoryPoints))
		}
	}
	if o.RLAgentEndpoint != "" {
		errs = append(errs, o.RLAgentTLS.Validate())
	}
	if f, err := o.defaultPolicy(); err != nil {
		errs = append(errs, err)
	} else if f.PressureHold > 0 && o.PrometheusAddress == "" {
		// The hold starts on the pods' CPU pressure, which only Prometheus
		// provides: without it the pods would count on their limits
		// whatever their nodes' load.
		errs = append(errs, fmt.Errorf("--default-variant %q holds on the pods' CPU pressure, which is read from Prometheus: set --prometheus-address", o.DefaultVariant))
	} else if f.BurstRatio > 0 && o.PrometheusAddress == "" {
		// The burst gate reads the request rate, which only Prometheus
		// provides (for MPAs with spec.rl.slo.metric): without it bursty
		// workloads would count on their limits.
		errs = append(errs, fmt.Errorf("--default-variant %q gates on the request rate's bursts, which is read from Prometheus: set --prometheus-address", o.DefaultVariant))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	return errors.Join(errs...)
}

// defaultPolicy returns the options of the fused default --default-variant
// names.
func (o *Options) defaultPolicy() (fusion.Options, error) {
	f, err := fusion.ParseVariant(o.DefaultVariant)
	if err != nil {
		return fusion.Options{}, fmt.Errorf("--default-variant: %w", err)
	}
	return f, nil
}
