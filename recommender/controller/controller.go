// Package controller is the recommender's control loop, in the style of the
// VPA recommender: input (informer caches of autoscalers, pods and
// checkpoints, plus one metrics read per loop) → model (one stateful
// workload.Policy per autoscaler, holding the histograms) → logic (the
// fused HPA+VPA default, optionally the RL agent) → routines (status
// writes through a rate-limited workqueue, checkpoints, garbage
// collection). The maths never touches the API server: a loop reads caches
// and one metrics list, and only changed statuses are queued for writing.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	informers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions/autoscaling/v1alpha1"
	listers "github.com/aware-k8s/aware/pkg/generated/listers/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/podindex"
	"github.com/aware-k8s/aware/pkg/kube/rival"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// DefaultRecommenderName is the name that also covers autoscalers naming
// no recommender.
const DefaultRecommenderName = "default"

// Errors a TargetResolver wraps to say the scaleTargetRef cannot be acted
// on (reported with ConfigUnsupported) rather than failed transiently
// (retried).
var (
	ErrTargetNotFound    = errors.New("scale target not found")
	ErrTargetUnsupported = errors.New("scale target unsupported")
)

// TargetResolver reads a scaleTargetRef's scale subresource.
type TargetResolver interface {
	Target(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (Target, error)
}

// Target is what the scale subresource says of a scaleTargetRef.
type Target struct {
	// Selector selects the target's pods (status.selector).
	Selector labels.Selector
	// Replicas is spec.replicas: the current scale, as the HPA reads it
	// (pods being created or deleted do not change it).
	Replicas int32
}

// Advisor asks the RL agent. It returns the recommendation to apply
// (def when the agent is not used) and the status.rl to write, whose
// Reason says why. A nil Advisor means defaults only.
type Advisor interface {
	Advise(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, obs *workload.Observation, c *workload.Constraints, def workload.Recommendation) (workload.Recommendation, *v1alpha1.RLStatus)
}

// RivalSource lists the other autoscalers of every target in a namespace
// ("" for all); rival.Scanner is one. With an error it returns what it
// could read.
type RivalSource interface {
	Scan(ctx context.Context, namespace string) (map[mpa.Target][]rival.Rival, error)
}

var _ RivalSource = (*rival.Scanner)(nil)

// Remover is implemented by an Advisor that can tell the agent an
// autoscaler was deleted, so that the agent drops its state.
type Remover interface {
	Remove(ctx context.Context, namespace, name string, uid types.UID) error
}

// Config holds the loop's settings.
type Config struct {
	// RecommenderName selects the autoscalers handled: those whose
	// recommenders[0].name equals it; DefaultRecommenderName also covers
	// autoscalers naming none.
	RecommenderName string
	// Interval between loops; also the observation window.
	Interval time.Duration
	// StatusRefreshInterval bounds the age of status.recommendationTime
	// while recommendations are being made, so the updater's staleness
	// guard only fires when the recommender really stopped.
	StatusRefreshInterval time.Duration
	// StatusWriteTimeout bounds one status write (its re-reads and
	// conflict retries included); zero means DefaultStatusWriteTimeout.
	// A request the API server holds (e.g. while etcd is unreachable, up
	// to its own 60s timeout) is abandoned sooner, counts as failed, is
	// retried with backoff, and the write that succeeds says so
	// (StatusWriteRecovered).
	StatusWriteTimeout time.Duration
	// FailureWarning is how long status writes of an autoscaler, or the
	// list of other autoscalers, must have been failing before a Warning
	// event says so, and how often it is repeated while they fail
	// (outage.go); zero means DefaultFailureWarning.
	FailureWarning time.Duration
	// CheckpointInterval is how often each autoscaler's histograms are
	// saved, and how often orphaned checkpoints are collected.
	CheckpointInterval time.Duration
	// RivalScanInterval is how often the other autoscalers (HPA, VPA,
	// KEDA, Knative) are listed; the loops in between use the last
	// complete scan. Zero scans every loop. The scan lists every such
	// object in the namespace, and was the largest part of a loop's CPU
	// that the recommender controls (docs/results/performance-history.md), while rivals
	// come and go rarely.
	RivalScanInterval time.Duration
	// Namespace limits the metrics read to one namespace ("" = all); the
	// informers are expected to be scoped the same way.
	Namespace string
	// IgnoredNamespaces are skipped entirely.
	IgnoredNamespaces []string
	// Workers write statuses concurrently.
	Workers int
	// LowConfidenceDays: a container with less history (VPA's confidence,
	// in days) sets LowConfidence.
	LowConfidenceDays float64
	// PrometheusConcurrency bounds the SLO and goal-metric reads running
	// at once in a loop (default 8).
	PrometheusConcurrency int
	// History bounds the history loaded for autoscalers without a
	// checkpoint (used when Deps.History is set).
	History HistoryConfig
}

// Deps are the controller's collaborators; everything that touches the
// outside world or time is injected.
type Deps struct {
	Client             versioned.Interface
	MPAInformer        informers.MultidimPodAutoscalerInformer
	CheckpointInformer informers.MultidimPodAutoscalerCheckpointInformer
	PodInformer        coreinformers.PodInformer
	Targets            TargetResolver
	Usage              usage.Source
	// SLO, Goals and History are the Prometheus-backed sources; nil
	// disables each (latency is then not measured, goal metrics are not
	// reported, and autoscalers without a checkpoint start empty).
	SLO     SLOSource
	Goals   GoalSource
	History HistorySource
	// Pressure reads the containers' CPU pressure; nil, or a container
	// without a series, leaves it 0 (not measured).
	Pressure PressureSource
	// Rivals finds other autoscalers of the targets (HPA, VPA, KEDA,
	// Knative); nil looks for none.
	Rivals RivalSource
	// Nodes, when set, fits every recommendation to the room the nodes
	// have for the autoscaler's pods (--fit-to-nodes); PodInformer must
	// then hold every pod of the cluster.
	Nodes      coreinformers.NodeInformer
	NewPolicy  workload.PolicyFactory
	Advisor    Advisor
	Recorder   record.EventRecorder
	Clock      clock.PassiveClock
	Registerer prometheus.Registerer
	// Metrics, if set, is used instead of registering new ones (so the
	// agent advisor can share them).
	Metrics *Metrics
	// StatusWriter writes a status through the status subresource; nil
	// writes through Client (which decodes the object the API server
	// returns). The binary uses RESTStatusWriter, which does not.
	StatusWriter StatusWriter
}

// Controller is the recommender loop.
type Controller struct {
	cfg     Config
	caches  caches
	sources sources
	// newPolicy builds an autoscaler's model; advisor, if set, is the RL
	// agent its recommendation is offered to.
	newPolicy workload.PolicyFactory
	advisor   Advisor
	recorder  record.EventRecorder
	clock     clock.PassiveClock
	metrics   *Metrics

	loop   loopState
	writes writes

	ready atomic.Bool

	// historySlots bounds concurrent history loads; background tracks
	// them so Run returns only after they ended.
	historySlots chan struct{}
	background   sync.WaitGroup
}

// caches are the informer caches a loop reads instead of the API server.
type caches struct {
	mpas        listers.MultidimPodAutoscalerLister
	checkpoints listers.MultidimPodAutoscalerCheckpointLister
	pods        *podindex.Lister
	// room is nil without --fit-to-nodes.
	room   *roomReader
	synced []cache.InformerSynced
}

// sources are the reads of a loop beyond the caches. A nil slo, goals,
// history, pressure or rivals disables its input (Deps).
type sources struct {
	targets  TargetResolver
	usage    usage.Source
	slo      SLOSource
	goals    GoalSource
	history  HistorySource
	pressure PressureSource
	rivals   RivalSource
}

// loopState is what one loop leaves to the next. It is touched by the loop
// goroutine only, so it needs no lock.
type loopState struct {
	states      map[string]*state
	lastCollect time.Time
	// lastRivals is the last complete scan of other autoscalers: a failed
	// scan adds it to what it could read, so that a rival is never
	// forgotten for a failed list.
	lastRivals map[mpa.Target][]rival.Rival
	// lastRivalScan is when lastRivals was read; zero before the first
	// complete scan.
	lastRivalScan time.Time
	// roomSnap is the current loop's room on the nodes; nil without
	// --fit-to-nodes or when it could not be read.
	roomSnap *roomSnapshot
	// readFailures is the current run of failed scans of other
	// autoscalers (outage.go).
	readFailures failures
}

// writes are the controller's writes to the API server: statuses, which
// the loop queues and the workers write, and checkpoints, written through
// client directly.
type writes struct {
	client versioned.Interface
	writer StatusWriter
	queue  workqueue.TypedRateLimitingInterface[string]
	// mu guards pending and writeFailures, which the loop and the workers
	// share.
	mu      sync.Mutex
	pending map[string]*v1alpha1.MultidimPodAutoscalerStatus
	// writeFailures are the autoscalers whose status writes fail
	// (outage.go).
	writeFailures map[string]*failures
}

// New builds the controller. The pod informer should carry TrimPod as its
// transform (set before it starts).
func New(cfg Config, d Deps) (*Controller, error) {
	if cfg.StatusWriteTimeout == 0 {
		cfg.StatusWriteTimeout = DefaultStatusWriteTimeout
	}
	if cfg.FailureWarning == 0 {
		cfg.FailureWarning = DefaultFailureWarning
	}
	if cfg.Interval <= 0 || cfg.StatusRefreshInterval <= 0 || cfg.CheckpointInterval <= 0 || cfg.StatusWriteTimeout < 0 || cfg.FailureWarning < 0 {
		return nil, errors.New("intervals must be positive")
	}
	if cfg.RecommenderName == "" {
		cfg.RecommenderName = DefaultRecommenderName
	}
	cfg.Workers = max(cfg.Workers, 1)
	if cfg.PrometheusConcurrency <= 0 {
		cfg.PrometheusConcurrency = 8
	}
	if d.History != nil {
		h := &cfg.History
		if h.Length <= 0 || h.Step <= 0 || h.Timeout <= 0 {
			return nil, fmt.Errorf("history length (%s), step (%s) and timeout (%s) must be positive", h.Length, h.Step, h.Timeout)
		}
		h.Concurrency = max(h.Concurrency, 1)
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	m := d.Metrics
	if m == nil {
		var err error
		if m, err = NewMetrics(d.Registerer); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	// The label index must be added before the informer starts.
	if err := podindex.Add(d.PodInformer.Informer()); err != nil {
		return nil, err
	}
	if d.StatusWriter == nil {
		d.StatusWriter = typedStatusWriter{d.Client}
	}
	c := &Controller{
		cfg: cfg,
		caches: caches{
			mpas:        d.MPAInformer.Lister(),
			checkpoints: d.CheckpointInformer.Lister(),
			pods:        podindex.New(d.PodInformer.Informer().GetIndexer()),
			synced:      []cache.InformerSynced{d.MPAInformer.Informer().HasSynced, d.CheckpointInformer.Informer().HasSynced, d.PodInformer.Informer().HasSynced},
		},
		sources: sources{
			targets:  d.Targets,
			usage:    d.Usage,
			slo:      d.SLO,
			goals:    d.Goals,
			history:  d.History,
			pressure: d.Pressure,
			rivals:   d.Rivals,
		},
		newPolicy: d.NewPolicy,
		advisor:   d.Advisor,
		recorder:  d.Recorder,
		clock:     d.Clock,
		metrics:   m,
		loop:      loopState{states: map[string]*state{}},
		writes: writes{
			client: d.Client,
			writer: d.StatusWriter,
			queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
				workqueue.TypedRateLimitingQueueConfig[string]{Name: "recommender-status"}),
			pending:       map[string]*v1alpha1.MultidimPodAutoscalerStatus{},
			writeFailures: map[string]*failures{},
		},

		historySlots: make(chan struct{}, max(cfg.History.Concurrency, 1)),
	}
	if d.Nodes != nil {
		c.caches.room = &roomReader{nodes: d.Nodes.Lister(), pods: d.PodInformer.Lister()}
		c.caches.synced = append(c.caches.synced, d.Nodes.Informer().HasSynced)
	}
	return c, nil
}

// Ready reports whether the caches have synced and the loop runs.
func (c *Controller) Ready() error {
	if !c.ready.Load() {
		return errors.New("caches not synced yet")
	}
	return nil
}

// Run waits for the caches, then runs the loop every interval and the
// status writers until ctx ends. In-flight writes finish before it returns.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.caches.synced...) {
		c.writes.queue.ShutDown()
		return errors.New("timed out waiting for caches to sync")
	}
	c.ready.Store(true)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	logger.Info("Recommender loop started", "interval", c.cfg.Interval, "recommenderName", c.cfg.RecommenderName)
	wait.UntilWithContext(ctx, c.RunOnce, c.cfg.Interval)
	c.writes.queue.ShutDown()
	wg.Wait()
	c.background.Wait() // history loads end with ctx
	logger.Info("Recommender loop stopped")
	return nil
}

func (c *Controller) ignored(ns string) bool { return slices.Contains(c.cfg.IgnoredNamespaces, ns) }

// Handles reports whether this recommender is responsible for m.
func (c *Controller) Handles(m *v1alpha1.MultidimPodAutoscaler) bool {
	if c.ignored(m.Namespace) {
		return false
	}
	n := mpa.RecommenderName(m)
	if n == "" {
		return c.cfg.RecommenderName == DefaultRecommenderName
	}
	return n == c.cfg.RecommenderName
}
