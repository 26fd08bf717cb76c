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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cfg         Config
	client      versioned.Interface
	writer      StatusWriter
	mpas        listers.MultidimPodAutoscalerLister
	checkpoints listers.MultidimPodAutoscalerCheckpointLister
	pods        *podindex.Lister
	synced      []cache.InformerSynced
	targets     TargetResolver
	usage       usage.Source
	slo         SLOSource
	goals       GoalSource
	history     HistorySource
	pressure    PressureSource
	rivals      RivalSource
	// room is nil without --fit-to-nodes; roomSnap is the current loop's
	// (loop goroutine only; nil when it could not be read).
	room      *roomReader
	roomSnap  *roomSnapshot
	newPolicy workload.PolicyFactory
	advisor   Advisor
	recorder  record.EventRecorder
	clock     clock.PassiveClock
	metrics   *Metrics
	queue     workqueue.TypedRateLimitingInterface[string]

	// states is touched by the loop goroutine only.
	states      map[string]*state
	lastCollect time.Time
	// lastRivals is the last complete scan of other autoscalers (loop
	// goroutine only): a failed scan adds it to what it could read, so
	// that a rival is never forgotten for a failed list.
	lastRivals map[mpa.Target][]rival.Rival
	// lastRivalScan is when lastRivals was read (loop goroutine only);
	// zero before the first complete scan.
	lastRivalScan time.Time

	mu      sync.Mutex
	pending map[string]*v1alpha1.MultidimPodAutoscalerStatus
	// writeFailures are the autoscalers whose status writes fail
	// (outage.go).
	writeFailures map[string]*failures
	// readFailures is the current run of failed scans of other
	// autoscalers (loop goroutine only; outage.go).
	readFailures failures

	ready atomic.Bool

	// historySlots bounds concurrent history loads; background tracks
	// them so Run returns only after they ended.
	historySlots chan struct{}
	background   sync.WaitGroup
}

// carrier is a policy that takes over what its predecessor learned about
// the workload, beyond the histograms, when a spec change rebuilds it.
type carrier interface {
	CarryOver(old workload.Policy) bool
}

// state is the model of one autoscaler.
type state struct {
	namespace, name string
	uid             types.UID
	generation      int64
	policy          workload.Policy
	constraints     workload.Constraints
	configErr       error
	lastObs         time.Time
	containers      []string
	lastCheckpoint  time.Time
	restored        int
	// historyPending: no checkpoint was found and history is to be loaded
	// before the first recommendation; history is the load, once started.
	historyPending bool
	history        *historyLoad
	historyLoaded  int
	historyErr     error
	// askedAgent: the advisor was asked for this autoscaler, so the agent
	// keeps state for it to be dropped when it is deleted.
	askedAgent bool
	// lastStage is the last RL stage the agent reported (noteStage).
	lastStage v1alpha1.RLStage
	// noted is the last recommendation change noteChange recorded, with
	// the status it was measured against.
	noted string
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
		cfg:         cfg,
		client:      d.Client,
		writer:      d.StatusWriter,
		mpas:        d.MPAInformer.Lister(),
		checkpoints: d.CheckpointInformer.Lister(),
		pods:        podindex.New(d.PodInformer.Informer().GetIndexer()),
		synced:      []cache.InformerSynced{d.MPAInformer.Informer().HasSynced, d.CheckpointInformer.Informer().HasSynced, d.PodInformer.Informer().HasSynced},
		targets:     d.Targets,
		usage:       d.Usage,
		slo:         d.SLO,
		goals:       d.Goals,
		history:     d.History,
		pressure:    d.Pressure,
		rivals:      d.Rivals,
		newPolicy:   d.NewPolicy,
		advisor:     d.Advisor,
		recorder:    d.Recorder,
		clock:       d.Clock,
		metrics:     m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "recommender-status"}),
		states:  map[string]*state{},
		pending: map[string]*v1alpha1.MultidimPodAutoscalerStatus{},

		writeFailures: map[string]*failures{},

		historySlots: make(chan struct{}, max(cfg.History.Concurrency, 1)),
	}
	if d.Nodes != nil {
		c.room = &roomReader{nodes: d.Nodes.Lister(), pods: d.PodInformer.Lister()}
		c.synced = append(c.synced, d.Nodes.Informer().HasSynced)
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
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		c.queue.ShutDown()
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
	c.queue.ShutDown()
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

// RunOnce is one loop: read metrics once, recommend for every handled
// autoscaler, queue the statuses that changed, and save checkpoints and
// collect garbage when due.
func (c *Controller) RunOnce(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := time.Now() // wall time for the duration metric, not the injected clock
	now := c.clock.Now()
	all, err := c.mpas.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing autoscalers from cache")
		return
	}
	var handled []*v1alpha1.MultidimPodAutoscaler
	for _, m := range all {
		if c.Handles(m) {
			handled = append(handled, m)
		}
	}
	// The API reads of a loop get half an interval, as the Prometheus
	// reads do (readExternal): while etcd is down the API server holds a
	// request for its own timeout (60s), and a loop stuck on a list would
	// neither refresh nor report anything until then.
	readCtx, cancel := context.WithTimeout(ctx, c.cfg.Interval/2)
	defer cancel()
	var use map[string]map[string]*usage.PodUsage
	var useErr error
	if len(handled) > 0 {
		use, useErr = c.readUsage(readCtx)
		if useErr != nil {
			logger.Error(useErr, "Reading pod metrics; keeping the last recommendations")
		}
	}
	dropped := map[string]int{}
	var pressure map[usage.ContainerKey]float64
	if len(handled) > 0 && useErr == nil {
		pressure = c.readPressure(readCtx, dropped)
	}
	c.roomSnap = nil
	if c.room != nil && len(handled) > 0 {
		var err error
		if c.roomSnap, err = c.room.snapshot(); err != nil {
			logger.Error(err, "Reading the nodes' room; recommendations are not fitted to it in this loop")
		}
	}
	ext := c.readExternal(ctx, handled)
	rivals := c.scanRivals(readCtx, handled, now)
	seen := make(map[string]bool, len(handled))
	// Over every autoscaler, handled or not: one of another recommender
	// can still be the one governing a target.
	shadowed := mpa.Shadowed(all)
	for _, m := range handled {
		key := m.Namespace + "/" + m.Name
		if g := shadowed[m.UID]; g != nil {
			// Not seen: any model it had is dropped below.
			if status := shadowedStatus(m, g, now); c.needsWrite(&m.Status, status, false, now) {
				c.mu.Lock()
				c.pending[key] = status
				c.mu.Unlock()
				c.queue.Add(key)
			}
			continue
		}
		seen[key] = true
		e := ext[key]
		e.countDrops(dropped)
		var rs []rival.Rival
		if t, ok := mpa.TargetOf(m); ok {
			rs = rivals[t]
		}
		status, fresh := c.recommend(ctx, key, m, now, use[m.Namespace], useErr, pressure, e, rs, dropped)
		// Whatever path recommend took, a contested dimension is left to
		// the rival: the updater and the webhook find nothing to apply.
		leaveContested(status, m, rs)
		if c.needsWrite(&m.Status, status, fresh, now) {
			c.mu.Lock()
			c.pending[key] = status
			c.mu.Unlock()
			c.queue.Add(key)
		}
	}
	var present map[types.UID]bool
	for k, st := range c.states {
		if !seen[k] {
			if present == nil {
				present = make(map[types.UID]bool, len(all))
				for _, m := range all {
					present[m.UID] = true
				}
			}
			c.forgetAgentState(ctx, st, !present[st.uid])
			if st.history != nil {
				st.history.cancel()
			}
			delete(c.states, k)
		}
	}
	for r, n := range dropped {
		c.metrics.invalidSamples.WithLabelValues(r).Add(float64(n))
	}
	c.metrics.autoscalers.Set(float64(len(handled)))
	if now.Sub(c.lastCollect) >= c.cfg.CheckpointInterval {
		c.saveCheckpoints(ctx, now, c.cfg.Interval/2)
		if err := c.collectGarbage(ctx); err != nil {
			logger.Error(err, "Collecting checkpoints of deleted autoscalers")
		}
		c.lastCollect = now
	}
	c.metrics.loopDuration.Observe(time.Since(start).Seconds())
	logger.V(4).Info("Loop done", "autoscalers", len(handled), "duration", time.Since(start))
}

// noteStage counts and announces (an event on the autoscaler) a change of
// the RL stage the agent reports. An answer without a stage (the agent was
// not reached) changes nothing, so a change during an outage shows when the
// agent answers again; the first stage of a new model is compared with the
// one in the status, so a restarted recommender announces nothing twice.
func (c *Controller) noteStage(m *v1alpha1.MultidimPodAutoscaler, st *state, stage v1alpha1.RLStage) {
	if stage == "" {
		return
	}
	prev := st.lastStage
	if prev == "" && m.Status.RL != nil {
		prev = m.Status.RL.Stage
	}
	st.lastStage = stage
	if prev == "" || prev == stage {
		return
	}
	c.metrics.rlStages.WithLabelValues(string(prev), string(stage)).Inc()
	if c.recorder != nil {
		c.recorder.Eventf(m, corev1.EventTypeNormal, ReasonRLStageChanged, "the RL agent's stage changed from %s to %s: %s", prev, stage, stageMeaning(stage))
	}
}

// ReasonRLStageChanged is the reason of the event noteStage records.
const ReasonRLStageChanged = "RLStageChanged"

func stageMeaning(s v1alpha1.RLStage) string {
	switch s {
	case v1alpha1.RLStageBootstrapping:
		return "the defaults act while the agent learns from them"
	case v1alpha1.RLStageOnlineTraining:
		return "the agent acts (with spec.rl.mode On) and keeps learning"
	case v1alpha1.RLStageServing:
		return "the agent acts (with spec.rl.mode On) with the policy it was promoted with"
	case v1alpha1.RLStageRetraining:
		return "the agent's reward degraded: the defaults act again while it relearns"
	}
	return "unknown stage"
}

// forgetAgentState drops the advisor's memory of st and, if its
// autoscaler was deleted (not merely shadowed or handed to another
// recommender) and the agent was ever asked about it, tells the agent to
// drop what it learned, so that a deleted or re-created autoscaler does not
// keep a slot in the agent.
func (c *Controller) forgetAgentState(ctx context.Context, st *state, deleted bool) {
	if f, ok := c.advisor.(interface{ Forget(types.UID) }); ok {
		f.Forget(st.uid)
	}
	r, ok := c.advisor.(Remover)
	if !ok || !deleted || !st.askedAgent {
		return
	}
	if err := r.Remove(ctx, st.namespace, st.name, st.uid); err != nil {
		klog.FromContext(ctx).Info("The agent could not be told that an autoscaler was deleted; it forgets it after its --workload-ttl",
			"mpa", klog.KRef(st.namespace, st.name), "uid", st.uid, "err", err)
	}
}

func (c *Controller) readUsage(ctx context.Context) (map[string]map[string]*usage.PodUsage, error) {
	list, err := c.usage.PodUsage(ctx, c.cfg.Namespace)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]*usage.PodUsage{}
	for i := range list {
		pu := &list[i]
		ns := out[pu.Namespace]
		if ns == nil {
			ns = map[string]*usage.PodUsage{}
			out[pu.Namespace] = ns
		}
		ns[pu.Name] = pu
	}
	return out, nil
}

// needsWrite: write when anything but timestamps and currentMetrics
// changed, or when a fresh recommendation is due for its periodic
// recommendationTime refresh.
func (c *Controller) needsWrite(old, cur *v1alpha1.MultidimPodAutoscalerStatus, fresh bool, now time.Time) bool {
	if !sameIgnoringTimes(old, cur) {
		return true
	}
	return fresh && (old.RecommendationTime == nil || now.Sub(old.RecommendationTime.Time) >= c.cfg.StatusRefreshInterval)
}

// stateFor returns the model of m, creating the policy (and restoring
// checkpoints) the first time, and rebuilding it, histograms kept, when the
// spec changes.
func (c *Controller) stateFor(ctx context.Context, key string, m *v1alpha1.MultidimPodAutoscaler) *state {
	st := c.states[key]
	if st != nil && st.uid == m.UID && st.generation == m.Generation {
		return st
	}
	if st != nil && st.uid != m.UID {
		// Deleted and re-created under the same name between two loops.
		c.forgetAgentState(ctx, st, true)
		if st.history != nil {
			st.history.cancel()
		}
	}
	// lastCheckpoint starts now: there is nothing new to save before a
	// checkpoint interval of samples has been seen.
	ns := &state{namespace: m.Namespace, name: m.Name, uid: m.UID, generation: m.Generation, constraints: mpa.Constraints(m), lastCheckpoint: c.clock.Now()}
	if err := mpa.CheckQuantities(m); err != nil {
		// Read as another value (0 is "unbounded"), such a bound would
		// be silently ignored.
		ns.configErr = fmt.Errorf("invalid constraints: %w", err)
	} else if err := ns.constraints.Validate(); err != nil {
		ns.configErr = fmt.Errorf("invalid constraints: %w", err)
	} else if p, err := c.newPolicy(ns.constraints); err != nil {
		ns.configErr = err
	} else {
		ns.policy = p
	}
	if cp, ok := ns.policy.(carrier); ok && st != nil && st.uid == m.UID && st.policy != nil {
		// Spec changed: what the policy learned about the workload besides
		// the histograms (the fused default's CPU-per-request estimate)
		// carries over, as they do below.
		cp.CarryOver(st.policy)
	}
	h, ok := ns.policy.(histograms)
	switch {
	case !ok:
	case st != nil && st.uid == m.UID:
		// Spec changed: carry the histograms over to the new policy. The
		// HPA stabilization history starts afresh with the new behavior.
		if old, ok := st.policy.(histograms); ok {
			for _, name := range st.containers {
				if err := h.Recommender().State(name).Restore(old.Recommender().State(name).Checkpoint()); err != nil {
					klog.FromContext(ctx).Error(err, "Carrying history over a spec change", "mpa", klog.KObj(m), "container", name)
				}
			}
		}
		ns.containers, ns.lastObs, ns.lastCheckpoint, ns.restored = st.containers, st.lastObs, st.lastCheckpoint, st.restored
		ns.historyPending, ns.history, ns.historyLoaded, ns.historyErr = st.historyPending, st.history, st.historyLoaded, st.historyErr
		ns.askedAgent, ns.lastStage = st.askedAgent, st.lastStage
	default:
		ns.restored = c.restore(ctx, m, h)
		ns.historyPending = ns.restored == 0 && c.history != nil
	}
	c.states[key] = ns
	return ns
}

// recommend computes the new status of m. fresh is true when a new
// recommendation was made this loop (only then may recommendationTime
// advance: a recommendation kept while metrics are missing must age so the
// updater's staleness guard can act).
func (c *Controller) recommend(ctx context.Context, key string, m *v1alpha1.MultidimPodAutoscaler, now time.Time,
	use map[string]*usage.PodUsage, useErr error, pressure map[usage.ContainerKey]float64, ext *external, rivals []rival.Rival, dropped map[string]int) (*v1alpha1.MultidimPodAutoscalerStatus, bool) {
	s := m.Status.DeepCopy()
	s.ObservedGeneration = m.Generation
	st := c.stateFor(ctx, key, m)

	setHistoryCondition(s, st, now)

	if st.configErr != nil {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "InvalidConfiguration", st.configErr.Error(), now)
		setCondition(s, v1alpha1.RecommendationProvided, corev1.ConditionFalse, "InvalidConfiguration", "the configuration cannot be acted on", now)
		return s, false
	}
	// Bounded as the loop's other API reads (RunOnce).
	tctx, cancel := context.WithTimeout(ctx, c.cfg.Interval/2)
	tgt, err := c.targets.Target(tctx, m.Namespace, m.Spec.ScaleTargetRef)
	cancel()
	if err != nil {
		switch {
		case errors.Is(err, ErrTargetNotFound):
			setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "TargetNotFound", err.Error(), now)
		case errors.Is(err, ErrTargetUnsupported):
			setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "TargetUnsupported", err.Error(), now)
		default:
			klog.FromContext(ctx).Error(err, "Resolving scale target", "mpa", klog.KObj(m))
		}
		setCondition(s, v1alpha1.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the scale target cannot be read", now)
		return s, false
	}
	if len(rivals) > 0 {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, ReasonConflictingAutoscaler, rivalMessage(m, rivals), now)
	} else if msg := c.unconfiguredSources(m); msg != "" {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, ReasonMetricSourceNotConfigured, msg, now)
	} else {
		setCondition(s, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported", "", now)
	}
	setCondition(s, v1alpha1.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the scale target was read", now)

	all, err := c.pods.List(m.Namespace, tgt.Selector)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing pods from cache", "mpa", klog.KObj(m))
		return s, false
	}
	pods := activePods(all)
	if len(pods) == 0 {
		setCondition(s, v1alpha1.NoPodsMatched, corev1.ConditionTrue, "NoPodsMatched", "the target's selector matches no running pods", now)
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "NoPodsMatched", "no pods to measure", now)
		return s, false
	}
	setCondition(s, v1alpha1.NoPodsMatched, corev1.ConditionFalse, "PodsMatched", "", now)
	if st.historyPending {
		if !c.loadHistory(ctx, m, st, pods, dropped) {
			setCondition(s, v1alpha1.FetchingHistory, corev1.ConditionTrue, "FetchingHistory", "loading usage history from Prometheus; the first recommendation waits for it", now)
			return s, false
		}
		setHistoryCondition(s, st, now)
	}
	if useErr != nil {
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", "the metrics source failed; the last recommendation is kept", now)
		return s, false
	}
	since := st.lastObs
	if since.IsZero() {
		since = now.Add(-c.cfg.Interval)
	}
	obs := observation(now, c.cfg.Interval, since, pods, use, pressure, dropped)
	// The current scale is the target's, as for the HPA; the pods only
	// give the per-pod values.
	obs.Replicas = tgt.Replicas
	sloReason, sloMsg := c.applySLO(ctx, m, &obs, ext)
	goalProblems := c.applyGoals(ctx, m, &obs, ext)
	// Without usage the last recommendation is kept, unless a container
	// was OOM-killed: one killed at start (CrashLoopBackOff) never reports
	// usage, and would otherwise never get more memory. The policy records
	// the kill (the memory at the kill, bumped, as VPA does) and keeps the
	// replica count, which nothing measures.
	oomOnly := obs.Samples == 0 && anyOOMKill(&obs)
	if obs.Samples == 0 && !oomOnly {
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "MetricsMissing", "no valid usage for any matched pod; the last recommendation is kept", now)
		return s, false
	}
	def, err := st.policy.Recommend(ctx, obs)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Computing recommendation", "mpa", klog.KObj(m))
		setCondition(s, v1alpha1.RecommendationProvided, corev1.ConditionFalse, "RecommendationFailed", "the default policy could not use the observation", now)
		return s, false
	}
	st.lastObs = now
	st.containers = st.containers[:0]
	for _, co := range obs.Containers {
		st.containers = append(st.containers, co.Name)
	}

	rec := def
	rl := &v1alpha1.RLStatus{Source: v1alpha1.SourceDefault, Reason: "RLOff", Message: "spec.rl.mode is Off: the fused default decides"}
	if m.Spec.RL != nil && m.Spec.RL.Mode != "" && m.Spec.RL.Mode != v1alpha1.RLModeOff {
		if c.advisor != nil {
			st.askedAgent = true
			rec, rl = c.advisor.Advise(ctx, m, &obs, &st.constraints, def)
		} else {
			rl = &v1alpha1.RLStatus{Source: v1alpha1.SourceDefault, Reason: "NoAgentEndpoint", Message: "no --rl-agent-endpoint is configured: the fused default decides"}
		}
	}
	reason := def.Reason
	if c.roomSnap != nil {
		// Whoever decided, nothing is asked that the nodes cannot place.
		if fitted, note := workload.Fit(rec, c.roomSnap.For(all), &st.constraints, obs.Containers); note != "" {
			rec, reason = fitted, reason+"; "+note
			c.metrics.fits.Inc()
		}
	}
	c.metrics.recommendations.WithLabelValues(string(rl.Source)).Inc()
	c.noteStage(m, st, rl.Stage)

	s.RecommendationTime = &metav1.Time{Time: now}
	s.CurrentReplicas = obs.Replicas
	s.DesiredReplicas = rec.Replicas
	s.Recommendation = mpa.RecommendedPodResources(rec)
	s.CurrentMetrics = append(currentMetrics(&obs), goalStatuses(ctx, m, ext, pods)...)
	s.RL = rl
	c.noteChange(ctx, m, st, s, reason)
	setCondition(s, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided", "", now)
	from := "the replica count was computed from CPU utilization"
	if len(obs.Goals) > 0 {
		from += " and goals.metrics"
	}
	if goalProblems != "" {
		from += "; " + goalProblems
	}
	switch {
	case oomOnly:
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "MetricsMissing", "no valid usage for any matched pod; memory was raised after an OOM kill and the replica count is kept", now)
	case strings.Contains(def.Reason, "FailedGetGoalMetric"):
		msg := "the other metrics would scale down, which a goal without a reading prevents (as in the HPA): the replica count is kept"
		if goalProblems != "" {
			msg += "; " + goalProblems
		}
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetGoalMetric", msg, now)
	case strings.Contains(def.Reason, "FailedGetResourceMetric"):
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", "CPU utilization could not be computed (are requests set?)", now)
	case sloReason != "":
		// Scaling goes on from CPU; the reason says the SLO input is missing.
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionTrue, sloReason, from+"; "+sloMsg, now)
	default:
		setCondition(s, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", from, now)
	}
	setLimitedCondition(s, m, &st.constraints, def.Reason, now)
	if h, ok := st.policy.(histograms); ok {
		low := false
		for _, name := range st.containers {
			if st.constraints.ContainerPolicy(name).Mode != workload.ContainerModeOff && h.Recommender().State(name).Confidence() < c.cfg.LowConfidenceDays {
				low = true
			}
		}
		if low {
			setCondition(s, v1alpha1.LowConfidence, corev1.ConditionTrue, "InsufficientHistory", "some container has less usage history than --low-confidence-history", now)
		} else {
			setCondition(s, v1alpha1.LowConfidence, corev1.ConditionFalse, "EnoughHistory", "", now)
		}
	}
	return s, true
}
