package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/leader"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/updater/controller"
	"github.com/aware-k8s/aware/updater/logic"
)

// Options are the updater's command-line options.
type Options struct {
	Kube      apiclient.Options
	Endpoints serve.Options
	Leader    leader.Options
	// Namespace restricts the updater to one namespace; empty means all.
	Namespace string

	UpdateInterval        time.Duration
	MaxRecommendationAge  time.Duration
	MinReplicas           int32
	SmallWorkloadPolicy   string
	DriftThreshold        float64
	DriftMinAge           time.Duration
	OOMWindow             time.Duration
	ResizeDeferredTimeout time.Duration
	EvictionRateLimit     float64
	EvictionRateBurst     int
	WorkloadEvictionRate  float64
	WorkloadEvictionBurst int
	ResizeRateLimit       float64
	ResizeRateBurst       int
	AdmissionLeaseName    string
	AdmissionLeaseNS      string
	DryRun                bool
	// DefaultVariant is the recommender's --default-variant; the updater
	// uses its scale-up rate.
	DefaultVariant string
}

// defaultInterval is the recommender's default --recommender-interval, so
// that a replica count is applied in the window it was made for.
const defaultInterval = 15 * time.Second

// NewOptions returns options with defaults.
func NewOptions() *Options {
	v := logic.DefaultVerticalConfig()
	return &Options{
		Kube:                  apiclient.Options{QPS: 20, Burst: 40},
		Endpoints:             serve.NewOptions(),
		Leader:                leader.NewOptions("aware-updater"),
		UpdateInterval:        defaultInterval,
		MaxRecommendationAge:  15 * time.Minute,
		MinReplicas:           v.MinReplicas,
		SmallWorkloadPolicy:   string(v.SmallWorkloads),
		DriftThreshold:        v.DriftThreshold,
		DriftMinAge:           v.DriftMinAge,
		OOMWindow:             v.OOMWindow,
		ResizeDeferredTimeout: v.ResizeDeferredTimeout,
		EvictionRateLimit:     1,
		EvictionRateBurst:     10,
		WorkloadEvictionRate:  0.1,
		WorkloadEvictionBurst: 1,
		ResizeRateLimit:       10,
		ResizeRateBurst:       100,
		AdmissionLeaseName:    "aware-admission-controller",
		AdmissionLeaseNS:      "aware-system",
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Kube.AddFlags(fs)
	o.Endpoints.AddFlags(fs)
	o.Leader.AddFlags(fs)
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Only act on this namespace (autoscalers and pods). Empty means all namespaces.")

	fs.DurationVar(&o.UpdateInterval, "update-interval", o.UpdateInterval, "How often every MultidimPodAutoscaler's recommendation is applied; keep it at the recommender's --recommender-interval.")
	fs.DurationVar(&o.MaxRecommendationAge, "max-recommendation-age", o.MaxRecommendationAge, "Do not act, in either dimension, on a recommendation whose status.recommendationTime is older than this (or unset). Must exceed the recommender's --status-refresh-interval.")
	fs.Int32Var(&o.MinReplicas, "min-replicas", o.MinReplicas, "An eviction never leaves fewer than this many running and ready pods of a workload.")
	fs.StringVar(&o.SmallWorkloadPolicy, "small-workload-policy", o.SmallWorkloadPolicy, "What to do with workloads of at most --min-replicas replicas, single-replica ones included, which cannot keep --min-replicas pods alive during an eviction: \"Never\" evicts none of their pods (they change by in-place resize in InPlaceOrRecreate and InPlace modes, or at their next rollout); \"OutsideBounds\" accepts a short outage to evict one pod at a time, only while all replicas are alive and only when the pod is outside the recommendation's bounds, OOM-killed, or its resize failed.")
	fs.Float64Var(&o.DriftThreshold, "drift-threshold", o.DriftThreshold, "A pod within the recommended bounds is still updated when a request differs from the target by at least this fraction of the target and the pod is older than --drift-min-age.")
	fs.DurationVar(&o.DriftMinAge, "drift-min-age", o.DriftMinAge, "How long a pod must have run before drift alone gets it updated.")
	fs.DurationVar(&o.OOMWindow, "oom-window", o.OOMWindow, "A container OOM-killed this recently makes its pod urgent when the recommended memory exceeds its request.")
	fs.DurationVar(&o.ResizeDeferredTimeout, "resize-deferred-timeout", o.ResizeDeferredTimeout, "In InPlaceOrRecreate mode, a resize the kubelet has deferred for this long falls back to eviction (an infeasible one falls back at once). InPlace mode never evicts: it leaves a deferred resize to the kubelet. In both, a deferred resize the recommendation has fallen below is replaced by the smaller one at once.")
	fs.Float64Var(&o.EvictionRateLimit, "eviction-rate-limit", o.EvictionRateLimit, "Evictions per second across all workloads; 0 or less means unlimited.")
	fs.IntVar(&o.EvictionRateBurst, "eviction-rate-burst", o.EvictionRateBurst, "Burst of evictions across all workloads.")
	fs.Float64Var(&o.WorkloadEvictionRate, "workload-eviction-rate-limit", o.WorkloadEvictionRate, "Evictions per second within one workload; 0 or less means unlimited.")
	fs.IntVar(&o.WorkloadEvictionBurst, "workload-eviction-rate-burst", o.WorkloadEvictionBurst, "Burst of evictions within one workload.")
	fs.Float64Var(&o.ResizeRateLimit, "in-place-resize-rate-limit", o.ResizeRateLimit, "In-place resizes per second across all workloads (InPlaceOrRecreate and InPlace modes); 0 or less means unlimited. Resizes beyond it wait for a later loop.")
	fs.IntVar(&o.ResizeRateBurst, "in-place-resize-rate-burst", o.ResizeRateBurst, "Burst of in-place resizes across all workloads.")
	fs.StringVar(&o.AdmissionLeaseName, "admission-lease-name", o.AdmissionLeaseName, "Name of the admission controller's heartbeat Lease; while it is stale (renewTime older than its leaseDurationSeconds) or missing, no pod is evicted, since evicted pods would come back unchanged. Empty disables the guard.")
	fs.StringVar(&o.AdmissionLeaseNS, "admission-lease-namespace", o.AdmissionLeaseNS, "Namespace of the admission controller's heartbeat Lease.")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "Log what would be scaled, evicted or resized, and change nothing (no writes, no events).")
	fs.StringVar(&o.DefaultVariant, "default-variant", o.DefaultVariant, "The recommender's --default-variant (the same value): with /scale-up=P the updater lets the replica count of an autoscaler without its own behavior.scaleUp grow by P percent per 15 s, as the recommender computed it, instead of cutting it back to the HPA's +100%. Its other settings concern the recommender only. Syntax: "+fusion.VariantHelp)

}

// ControllerConfig is the controller configuration the options describe.
func (o *Options) ControllerConfig() controller.Config {
	return controller.Config{
		UpdateInterval:       o.UpdateInterval,
		MaxRecommendationAge: o.MaxRecommendationAge,
		Vertical: logic.VerticalConfig{
			MinReplicas:           o.MinReplicas,
			SmallWorkloads:        logic.SmallWorkloadPolicy(o.SmallWorkloadPolicy),
			DriftThreshold:        o.DriftThreshold,
			DriftMinAge:           o.DriftMinAge,
			OOMWindow:             o.OOMWindow,
			ResizeDeferredTimeout: o.ResizeDeferredTimeout,
		},
		GlobalEvictionRate:      o.EvictionRateLimit,
		GlobalEvictionBurst:     o.EvictionRateBurst,
		WorkloadEvictionRate:    o.WorkloadEvictionRate,
		WorkloadEvictionBurst:   o.WorkloadEvictionBurst,
		ResizeRate:              o.ResizeRateLimit,
		ResizeBurst:             o.ResizeRateBurst,
		AdmissionLeaseNamespace: o.AdmissionLeaseNS,
		AdmissionLeaseName:      o.AdmissionLeaseName,
		DryRun:                  o.DryRun,
		ScaleUpPercent:          o.scaleUpPercent(),
	}
}

// scaleUpPercent is --default-variant's scale-up rate; 0 when it sets none
// or does not parse (Validate reports that).
func (o *Options) scaleUpPercent() int32 {
	v, err := fusion.ParseVariant(o.DefaultVariant)
	if err != nil {
		return 0
	}
	return v.ScaleUpPercent
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	errs := []error{o.Kube.Validate(), o.Endpoints.Validate(), o.Leader.Validate()}
	if o.EvictionRateBurst < 1 || o.WorkloadEvictionBurst < 1 || o.ResizeRateBurst < 1 {
		errs = append(errs, errors.New("--eviction-rate-burst, --workload-eviction-rate-burst and --in-place-resize-rate-burst must be >= 1"))
	}
	if _, err := fusion.ParseVariant(o.DefaultVariant); err != nil {
		errs = append(errs, fmt.Errorf("--default-variant: %w", err))
	}
	if err := o.ControllerConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
