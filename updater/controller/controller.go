// Package controller runs the updater's loop: every interval it reads each
// MultidimPodAutoscaler from an informer cache, its target's scale through
// pkg/kube/target and its pods from an informer cache, asks the pure core in
// updater/logic what to do, and does it: replicas through /scale, evictions
// through the Eviction API (so PodDisruptionBudgets hold), in-place resizes
// through pods/resize.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	mpalisters "github.com/aware-k8s/aware/pkg/generated/listers/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/podindex"
	"github.com/aware-k8s/aware/pkg/kube/target"
	"github.com/aware-k8s/aware/updater/logic"
)

// ScaleTarget is what the controller needs of pkg/kube/target.
type ScaleTarget interface {
	Selector(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, error)
	GetScale(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, error)
	UpdateReplicas(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference, replicas int32) error
}

var _ ScaleTarget = (*target.Resolver)(nil)

// PodSource lists the pods of a namespace that a selector selects.
// podindex.Lister answers from the pod informer's label index, so a loop
// costs O(pods of the targets) rather than O(autoscalers × pods of the
// namespace).
type PodSource interface {
	List(namespace string, sel labels.Selector) ([]*corev1.Pod, error)
}

var _ PodSource = (*podindex.Lister)(nil)

// Event reasons.
const (
	EventScaled              = "Scaled"
	EventScaleFailed         = "FailedScale"
	EventEvicted             = "EvictedByUpdater"
	EventEvictionBlocked     = "EvictionBlocked"
	EventEvictionFailed      = "FailedEviction"
	EventResized             = "ResizedInPlace"
	EventResizeFailed        = "FailedResize"
	EventStaleRecommendation = "StaleRecommendation"
	EventInvalidConstraints  = "InvalidConstraints"
	EventTargetUnavailable   = "FailedGetScale"
)

// Config is the controller's behaviour, set from flags.
type Config struct {
	// UpdateInterval is the loop period.
	UpdateInterval time.Duration
	// MaxRecommendationAge: older recommendations (or ones without a time)
	// are not acted on, in either dimension.
	MaxRecommendationAge time.Duration
	Vertical             logic.VerticalConfig
	// Eviction token buckets: rate per second (<= 0 unlimited) and burst.
	GlobalEvictionRate  float64
	GlobalEvictionBurst int
	// ResizeRate and ResizeBurst bound in-place resizes across all
	// workloads; a rate of 0 or less means unlimited.
	ResizeRate            float64
	ResizeBurst           int
	WorkloadEvictionRate  float64
	WorkloadEvictionBurst int
	// AdmissionLeaseNamespace/Name locate the admission controller's
	// heartbeat Lease; an empty name disables the guard.
	AdmissionLeaseNamespace string
	AdmissionLeaseName      string
	// DryRun logs every decision and changes nothing (no writes, no events).
	DryRun bool
	// ScaleUpPercent is the scale-up rate of the recommender's variant of
	// the fused default (fusion.Options.ScaleUpPercent): for an autoscaler
	// that sets no behavior.scaleUp, the replica count may grow by this
	// percent (or 4 pods) per 15 s. 0 keeps the HPA default (+100%).
	ScaleUpPercent int32
}

// Controller is the updater loop. RunOnce is not safe for concurrent use;
// Run calls it from one goroutine.
type Controller struct {
	cfg      Config
	kube     kubernetes.Interface
	mpas     versioned.Interface
	mpaList  mpalisters.MultidimPodAutoscalerLister
	pods     PodSource
	targets  ScaleTarget
	recorder record.EventRecorder
	metrics  *Metrics
	clock    clock.PassiveClock

	global    *logic.TokenBucket
	resizes   *logic.TokenBucket
	workloads map[types.UID]*workloadState
	// resizeRejected remembers pods whose resize the API server refused
	// (e.g. the InPlacePodVerticalScaling gate is off, or the change would
	// alter the QoS class), and what was refused: they are treated as
	// infeasible, so the next loop falls back to eviction
	// (InPlaceOrRecreate) or does not send the same resize again (InPlace).
	resizeRejected map[types.UID]rejectedResize
	// stale holds the autoscalers whose recommendation was too old at
	// their last loop: the Warning event is posted when one becomes stale,
	// not on every loop it stays so (at thousands of autoscalers that
	// would be thousands of events per loop); the gauge shows how many are.
	stale map[types.UID]bool
	// seenPods are the pods of this loop's autoscalers.
	seenPods map[types.UID]bool
	rotation int
}

// rejectedResize is a resize the API server refused, and why.
type rejectedResize struct {
	res []logic.ContainerResources
	msg string
}

type workloadState struct {
	generation int64
	horizontal *hpa.Horizontal
	hErr       error
	bucket     *logic.TokenBucket
}

// New returns a controller. clk may be nil for the real clock.
func New(cfg Config, kube kubernetes.Interface, mpas versioned.Interface, mpaList mpalisters.MultidimPodAutoscalerLister,
	pods PodSource, targets ScaleTarget, recorder record.EventRecorder, metrics *Metrics, clk clock.PassiveClock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{
		cfg: cfg, kube: kube, mpas: mpas, mpaList: mpaList, pods: pods, targets: targets,
		recorder: recorder, metrics: metrics, clock: clk,
		global:         logic.NewTokenBucket(cfg.GlobalEvictionRate, cfg.GlobalEvictionBurst),
		resizes:        logic.NewTokenBucket(cfg.ResizeRate, cfg.ResizeBurst),
		workloads:      map[types.UID]*workloadState{},
		resizeRejected: map[types.UID]rejectedResize{},
		stale:          map[types.UID]bool{},
	}
}

// Run calls RunOnce every UpdateInterval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	klog.FromContext(ctx).Info("Starting update loop", "interval", c.cfg.UpdateInterval, "dryRun", c.cfg.DryRun)
	wait.UntilWithContext(ctx, c.RunOnce, c.cfg.UpdateInterval)
}

// RunOnce is one pass over every MPA.
func (c *Controller) RunOnce(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() { c.metrics.loopDuration.Observe(c.clock.Since(start).Seconds()) }()

	all, err := c.mpaList.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing MultidimPodAutoscalers")
		return
	}
	admissionFresh := c.admissionFresh(ctx, start)
	if admissionFresh {
		c.metrics.admissionFresh.Set(1)
	} else {
		c.metrics.admissionFresh.Set(0)
	}

	// Sort for reproducible decisions, then rotate the starting point so a
	// scarce global eviction budget is not always spent on the same MPAs.
	slices.SortFunc(all, func(a, b *v1alpha1.MultidimPodAutoscaler) int {
		return compareKeys(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if n := len(all); n > 0 {
		r := c.rotation % n
		all = append(all[r:], all[:r]...)
		c.rotation++
	}
	shadowed := mpa.Shadowed(all)
	seen := map[types.UID]bool{}
	c.seenPods = map[types.UID]bool{}
	for _, m := range all {
		if ctx.Err() != nil {
			return
		}
		if g := shadowed[m.UID]; g != nil {
			// Not seen: any state it had is dropped below.
			c.skip(logic.SkipAmbiguousTarget)
			logger.V(3).Info("Skipping", "reason", logic.SkipAmbiguousTarget, "mpa", klog.KObj(m), "governedBy", klog.KObj(g))
			continue
		}
		seen[m.UID] = true
		c.updateOne(klog.NewContext(ctx, klog.LoggerWithValues(logger, "mpa", klog.KObj(m))), m, admissionFresh)
	}
	for uid := range c.workloads {
		if !seen[uid] {
			delete(c.workloads, uid)
		}
	}
	for uid := range c.stale {
		if !seen[uid] {
			delete(c.stale, uid)
		}
	}
	// A refused resize is remembered only for pods that still exist: under
	// InPlace a pod is not evicted, so nothing else would forget it.
	for uid := range c.resizeRejected {
		if !c.seenPods[uid] {
			delete(c.resizeRejected, uid)
		}
	}
	c.metrics.staleRecommendations.Set(float64(len(c.stale)))
}

func compareKeys(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// admissionFresh reads the admission controller's heartbeat Lease: fresh
// means renewTime + leaseDurationSeconds is still ahead of now. A missing
// Lease, a missing field or an API error all count as stale, because the
// cost of a wrong "fresh" is pods recreated without their recommendation.
func (c *Controller) admissionFresh(ctx context.Context, now time.Time) bool {
	if c.cfg.AdmissionLeaseName == "" {
		return true
	}
	logger := klog.FromContext(ctx)
	l, err := c.kube.CoordinationV1().Leases(c.cfg.AdmissionLeaseNamespace).Get(ctx, c.cfg.AdmissionLeaseName, metav1.GetOptions{})
	if err != nil {
		logger.Info("Admission controller heartbeat unavailable; evictions paused", "lease", klog.KRef(c.cfg.AdmissionLeaseNamespace, c.cfg.AdmissionLeaseName), "err", err)
		return false
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		logger.Info("Admission controller heartbeat Lease incomplete; evictions paused", "lease", klog.KObj(l))
		return false
	}
	expires := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	if !now.Before(expires) {
		logger.Info("Admission controller heartbeat stale; evictions paused", "lease", klog.KObj(l), "renewTime", l.Spec.RenewTime.Time)
		return false
	}
	return true
}

func (c *Controller) skip(r logic.SkipReason) {
	c.metrics.skips.WithLabelValues(string(r)).Inc()
}

func (c *Controller) state(m *v1alpha1.MultidimPodAutoscaler, cons workload.Constraints) *workloadState {
	st, ok := c.workloads[m.UID]
	if !ok {
		st = &workloadState{bucket: logic.NewTokenBucket(c.cfg.WorkloadEvictionRate, c.cfg.WorkloadEvictionBurst)}
		c.workloads[m.UID] = st
	}
	if st.horizontal == nil && st.hErr == nil || st.generation != m.Generation {
		// New spec, new behavior: start a fresh history. A fresh decider
		// does not scale down until a full window has passed.
		st.horizontal, st.hErr = hpa.NewHorizontal(fusion.WithScaleUp(cons, c.cfg.ScaleUpPercent))
		st.generation = m.Generation
	}
	return st
}

func (c *Controller) updateOne(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, admissionFresh bool) {
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	// Stale again below if its recommendation still is; any other outcome
	// (fresh, none, mode Off) ends the condition.
	wasStale := c.stale[m.UID]
	delete(c.stale, m.UID)
	mode := mpa.UpdateMode(m)
	if mode == v1alpha1.UpdateModeOff || mode == v1alpha1.UpdateModeInitial {
		logger.V(4).Info("Skipping", "reason", logic.SkipUpdateModeOff, "mode", mode)
		return
	}
	rivalOwnsReplicas := mpa.ReplicasLeftToRival(&m.Status)
	rec, hasRec := mpa.Recommendation(&m.Status)
	if !hasRec {
		// With both dimensions left to rivals there is nothing to apply.
		reason := logic.SkipNoRecommendation
		if rivalOwnsReplicas {
			reason = logic.SkipRivalAutoscaler
		}
		c.skip(reason)
		logger.V(3).Info("Skipping", "reason", reason)
		return
	}
	var recTime time.Time
	if m.Status.RecommendationTime != nil {
		recTime = m.Status.RecommendationTime.Time
	}
	if !logic.RecommendationFresh(now, recTime, c.cfg.MaxRecommendationAge) {
		c.skip(logic.SkipStaleRecommendation)
		c.stale[m.UID] = true
		if wasStale {
			logger.V(3).Info("Skipping stale recommendation", "recommendationTime", recTime, "maxAge", c.cfg.MaxRecommendationAge)
			return
		}
		logger.Info("Recommendation stale; not applying it until the recommender refreshes it", "recommendationTime", recTime, "maxAge", c.cfg.MaxRecommendationAge)
		c.event(m, corev1.EventTypeWarning, EventStaleRecommendation, "Recommendation from %s is older than %s; not applied until the recommender refreshes it", recTime.Format(time.RFC3339), c.cfg.MaxRecommendationAge)
		return
	}
	if wasStale {
		logger.Info("Recommendation fresh again", "recommendationTime", recTime)
	}
	ref := m.Spec.ScaleTargetRef
	scale, _, err := c.targets.GetScale(ctx, m.Namespace, ref)
	if err != nil {
		logger.Error(err, "Reading target scale")
		c.event(m, corev1.EventTypeWarning, EventTargetUnavailable, "Reading scale of %s: %v", refName(ref), err)
		return
	}
	cons := mpa.Constraints(m)
	st := c.state(m, cons)

	changed := false
	if rivalOwnsReplicas {
		// Another autoscaler owns the replica count: not even the
		// min/max bounds are enforced, or the two would flap.
		c.skip(logic.SkipRivalAutoscaler)
		logger.V(3).Info("Leaving replicas to another autoscaler", "reason", logic.SkipRivalAutoscaler)
	} else if mpa.ScalesHorizontally(mode) {
		changed = c.horizontal(ctx, m, st, now, scale.Spec.Replicas, rec.Replicas, rec.TargetCPU())
	}

	sel, err := c.targets.Selector(ctx, m.Namespace, ref)
	if err != nil {
		logger.Error(err, "Resolving target selector")
		return
	}
	pods, err := c.pods.List(m.Namespace, sel)
	if err != nil {
		logger.Error(err, "Listing pods")
		return
	}
	w := &logic.Workload{
		Key: m.Namespace + "/" + m.Name, Mode: mode, Constraints: cons,
		Recommendation: rec, HasRecommendation: true, RecommendationTime: recTime,
		Replicas: scale.Spec.Replicas,
	}
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		pm, ok := podModel(p)
		if !ok {
			continue
		}
		if r, ok := c.resizeRejected[p.UID]; ok && pm.Resize == logic.ResizeNone {
			pm.Resize, pm.ResizeSince = logic.ResizeInfeasible, now
			pm.Refused, pm.ResizeMessage = r.res, r.msg
		}
		w.Pods = append(w.Pods, pm)
		byName[p.Name] = p
		c.seenPods[p.UID] = true
	}
	plan := logic.DecideVertical(now, c.cfg.Vertical, w, logic.Guards{AdmissionFresh: admissionFresh, Global: c.global, Workload: st.bucket, Resize: c.resizes})
	if plan.Skip != "" {
		c.skip(plan.Skip)
	}
	for _, s := range plan.Skips {
		c.skip(s.Reason)
		logger.V(2).Info("Pod update skipped", "pod", klog.KRef(m.Namespace, s.Pod), "wanted", s.Wanted, "reason", s.Reason)
	}
	if plan.Skip == "" {
		c.reportInfeasible(ctx, m, plan.Infeasible, now)
	}
	for _, u := range plan.Updates {
		p := byName[u.Pod]
		switch u.Action {
		case logic.ActionEvict:
			changed = c.evict(ctx, m, p, u) || changed
		case logic.ActionResize:
			changed = c.resize(ctx, m, p, u) || changed
		}
	}
	if changed && !c.cfg.DryRun {
		c.recordScaleTime(ctx, m, now)
	}
}

// horizontal applies the replica decision; it reports whether it changed
// the target. unit is the recommendation's per-pod CPU target, in which
// the stabilization windows count (hpa.Horizontal.SetUnit).
func (c *Controller) horizontal(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, st *workloadState, now time.Time, current, desired int32, unit float64) bool {
	logger := klog.FromContext(ctx)
	if st.hErr != nil {
		c.skip(logic.SkipInvalidConstraints)
		logger.Error(st.hErr, "Invalid horizontal constraints; not scaling")
		c.event(m, corev1.EventTypeWarning, EventInvalidConstraints, "Not scaling: %v", st.hErr)
		return false
	}
	// The fused default's count was stabilized by the recommender; an
	// agent's, a safeguard's or an unknown recommender's was not.
	stabilized := m.Status.RL != nil && m.Status.RL.Source == v1alpha1.SourceDefault
	st.horizontal.SetUnit(unit)
	d := st.horizontal.Decide(now, current, desired, stabilized)
	logger.V(3).Info("Horizontal decision", "current", d.Current, "desired", d.Desired, "replicas", d.Replicas, "reason", d.Reason)
	if !d.Changed() {
		return false
	}
	dir := "up"
	if d.Replicas < d.Current {
		dir = "down"
	}
	ref := m.Spec.ScaleTargetRef
	if c.cfg.DryRun {
		c.metrics.scaleOperations.WithLabelValues(dir, resultDryRun).Inc()
		logger.Info("Dry run: would scale", "target", refName(ref), "from", d.Current, "to", d.Replicas, "reason", d.Reason)
		return false
	}
	if err := c.targets.UpdateReplicas(ctx, m.Namespace, ref, d.Replicas); err != nil {
		c.metrics.scaleOperations.WithLabelValues(dir, resultError).Inc()
		logger.Error(err, "Scaling target", "from", d.Current, "to", d.Replicas)
		c.event(m, corev1.EventTypeWarning, EventScaleFailed, "Scaling %s from %d to %d: %v", refName(ref), d.Current, d.Replicas, err)
		return false
	}
	c.metrics.scaleOperations.WithLabelValues(dir, resultSuccess).Inc()
	logger.Info("Scaled target", "target", refName(ref), "from", d.Current, "to", d.Replicas, "reason", d.Reason)
	msg := fmt.Sprintf("Scaled %s from %d to %d replicas (%s)", refName(ref), d.Current, d.Replicas, d.Reason)
	c.recorder.Event(m, corev1.EventTypeNormal, EventScaled, msg)
	c.recorder.Event(targetRef(m), corev1.EventTypeNormal, EventScaled, msg)
	return true
}

func (c *Controller) evict(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, p *corev1.Pod, u logic.PodUpdate) bool {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(p), "reason", u.Reason)
	if c.cfg.DryRun {
		c.metrics.evictions.WithLabelValues(string(u.Reason), resultDryRun).Inc()
		logger.Info("Dry run: would evict pod")
		return false
	}
	ev := &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		// The UID precondition keeps a StatefulSet's same-named successor
		// from being evicted by a decision made about its predecessor.
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}},
	}
	err := c.kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
	switch {
	case err == nil:
		c.metrics.evictions.WithLabelValues(string(u.Reason), resultSuccess).Inc()
		logger.Info("Evicted pod")
		c.recorder.Eventf(p, corev1.EventTypeNormal, EventEvicted, "Evicted by the AWARE updater to apply new resources (%s)", u.Reason)
		c.recorder.Eventf(m, corev1.EventTypeNormal, EventEvicted, "Evicted pod %s (%s)", p.Name, u.Reason)
		delete(c.resizeRejected, p.UID)
		return true
	case apierrors.IsTooManyRequests(err):
		// The Eviction API answers 429 when a PodDisruptionBudget forbids
		// the disruption now; the next loop tries again.
		c.metrics.evictions.WithLabelValues(string(u.Reason), resultBlockedByPDB).Inc()
		logger.Info("Eviction blocked by a PodDisruptionBudget; retrying next loop", "err", err)
		c.recorder.Eventf(m, corev1.EventTypeWarning, EventEvictionBlocked, "Eviction of pod %s blocked by a PodDisruptionBudget: %v", p.Name, err)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone or replaced since the cache saw it: nothing to do.
		logger.V(2).Info("Pod already gone", "err", err)
	default:
		c.metrics.evictions.WithLabelValues(string(u.Reason), resultError).Inc()
		logger.Error(err, "Evicting pod")
		c.recorder.Eventf(m, corev1.EventTypeWarning, EventEvictionFailed, "Evicting pod %s: %v", p.Name, err)
	}
	return false
}

func (c *Controller) resize(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, p *corev1.Pod, u logic.PodUpdate) bool {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(p), "reason", u.Reason)
	if c.cfg.DryRun {
		c.metrics.resizes.WithLabelValues(string(u.Reason), resultDryRun).Inc()
		logger.Info("Dry run: would resize pod in place", "resources", u.Resources)
		return false
	}
	err := c.sendResize(ctx, p, u.Resources)
	if errors.Is(err, errPodGone) {
		// The pod is going: typically the ReplicaSet controller picked it
		// when this loop scaled the target in, after the pod list was read
		// (on the real node, round twenty-three, this came back as an API
		// conflict and a FailedResize warning). Nothing failed.
		c.metrics.resizes.WithLabelValues(string(u.Reason), resultPodGone).Inc()
		logger.V(2).Info("Pod deleted before its in-place resize; skipped")
		return false
	}
	if err != nil {
		c.metrics.resizes.WithLabelValues(string(u.Reason), resultError).Inc()
		if refused(err) {
			c.resizeRejected[p.UID] = rejectedResize{res: u.Resources, msg: "the API server refused the resize: " + err.Error()}
			logger.Info("In-place resize refused; treated as infeasible from the next loop", "err", err)
		} else {
			logger.Error(err, "Resizing pod in place")
		}
		c.recorder.Eventf(m, corev1.EventTypeWarning, EventResizeFailed, "Resizing pod %s in place: %v", p.Name, err)
		return false
	}
	c.metrics.resizes.WithLabelValues(string(u.Reason), resultSuccess).Inc()
	delete(c.resizeRejected, p.UID)
	logger.Info("Resized pod in place", "resources", u.Resources)
	c.recorder.Eventf(p, corev1.EventTypeNormal, EventResized, "Resized in place by the AWARE updater (%s)", u.Reason)
	c.recorder.Eventf(m, corev1.EventTypeNormal, EventResized, "Resized pod %s in place (%s)", p.Name, u.Reason)
	return true
}

// errPodGone: the pod to resize was deleted, is being deleted, or its
// name now belongs to a successor.
var errPodGone = errors.New("pod deleted")

// sendResize writes res through pods/resize. The first attempt uses the
// cached pod; on a conflict (the pod changed since the cache saw it) it
// reads the pod again and retries, as client-go's RetryOnConflict does,
// unless the pod is going (errPodGone). A NotFound is errPodGone if the
// pod is gone; otherwise it is the API server's (no resize subresource).
func (c *Controller) sendResize(ctx context.Context, cached *corev1.Pod, res []logic.ContainerResources) error {
	pods := c.kube.CoreV1().Pods(cached.Namespace)
	cur := cached
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			fresh, err := pods.Get(ctx, cached.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return errPodGone
			case err != nil:
				return fmt.Errorf("reading pod after a conflict: %w", err)
			}
			cur = fresh
		}
		if cur.DeletionTimestamp != nil || cur.UID != cached.UID {
			return errPodGone
		}
		_, err := pods.UpdateResize(ctx, cur.Name, withResources(cur, res), metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			if _, gerr := pods.Get(ctx, cached.Name, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
				return errPodGone
			}
		}
		cur = nil // a conflict retries on a fresh read
		return err
	})
}

// withResources returns a copy of p with res written into its containers.
func withResources(p *corev1.Pod, res []logic.ContainerResources) *corev1.Pod {
	np := p.DeepCopy()
	for _, r := range res {
		for i := range np.Spec.Containers {
			ct := &np.Spec.Containers[i]
			if ct.Name == r.Name {
				ct.Resources.Requests = setResources(ct.Resources.Requests, r.Requests)
				ct.Resources.Limits = setResources(ct.Resources.Limits, r.Limits)
			}
		}
	}
	return np
}

// refused reports API errors that a retry of the same resize cannot fix.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err)
}

// setResources writes CPU and memory into rl (a copy), leaving other
// resources alone. A zero amount removes the entry: for limits that means
// "no limit", which is what vpa.Limits returns for a container without one.
func setResources(rl corev1.ResourceList, r workload.Resources) corev1.ResourceList {
	out := rl.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	want := mpa.ResourceList(r)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := want[name]; ok {
			out[name] = q
		} else {
			delete(out, name)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// recordScaleTime sets status.lastScaleTime with a merge patch on the
// status subresource, which touches no field the recommender writes.
func (c *Controller) recordScaleTime(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, now time.Time) {
	patch := fmt.Appendf(nil, `{"status":{"lastScaleTime":%q}}`, now.UTC().Format(time.RFC3339))
	_, err := c.mpas.AutoscalingV1alpha1().MultidimPodAutoscalers(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		klog.FromContext(ctx).Error(err, "Recording lastScaleTime")
	}
}

func (c *Controller) event(m *v1alpha1.MultidimPodAutoscaler, typ, reason, format string, args ...any) {
	if c.cfg.DryRun {
		return
	}
	c.recorder.Eventf(m, typ, reason, format, args...)
}

// targetRef is an object reference to the scale target for events; the
// recorder accepts an ObjectReference as the involved object.
func targetRef(m *v1alpha1.MultidimPodAutoscaler) *corev1.ObjectReference {
	ref := m.Spec.ScaleTargetRef
	if ref == nil {
		return &corev1.ObjectReference{Namespace: m.Namespace}
	}
	return &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, Namespace: m.Namespace}
}

func refName(ref *autoscalingv1.CrossVersionObjectReference) string {
	if ref == nil {
		return "<none>"
	}
	return ref.Kind + "/" + ref.Name
}

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid updater configuration")

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.UpdateInterval <= 0 {
		errs = append(errs, fmt.Errorf("update interval must be > 0, got %s", c.UpdateInterval))
	}
	if c.MaxRecommendationAge <= 0 {
		errs = append(errs, fmt.Errorf("max recommendation age must be > 0, got %s", c.MaxRecommendationAge))
	}
	if c.ScaleUpPercent < 0 {
		errs = append(errs, fmt.Errorf("scale-up percent must be >= 0, got %d", c.ScaleUpPercent))
	}
	if c.AdmissionLeaseName != "" && c.AdmissionLeaseNamespace == "" {
		errs = append(errs, errors.New("admission lease namespace is required with a lease name"))
	}
	if err := c.Vertical.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}
