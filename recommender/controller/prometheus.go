package controller

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// SLOSource reads the request rate and latency percentiles of a
// workload's latency histogram (spec.rl.slo).
type SLOSource interface {
	SLO(ctx context.Context, q usage.SLOQuery) (usage.SLOReading, error)
}

// GoalSource reads spec.goals.metrics entries of type Pods, Object and
// External.
type GoalSource interface {
	Goal(ctx context.Context, q usage.GoalQuery) (usage.GoalReading, error)
}

// HistorySource reads past CPU and memory usage.
type HistorySource interface {
	History(ctx context.Context, q usage.HistoryQuery) (usage.History, error)
}

// PressureSource reads the CPU pressure of every container in a namespace
// ("" = all).
type PressureSource interface {
	CPUPressure(ctx context.Context, namespace string) (usage.PressureReading, error)
}

var (
	_ SLOSource      = (*usage.Prometheus)(nil)
	_ GoalSource     = (*usage.Prometheus)(nil)
	_ HistorySource  = (*usage.Prometheus)(nil)
	_ PressureSource = (*usage.Prometheus)(nil)
)

// readPressure reads the containers' CPU pressure once per loop, adding
// the values the source dropped to dropped. A failed read is no failure of
// the loop: usage comes from the metrics source, and a pressure not read
// is 0, "not measured", which no policy reads as the absence of pressure.
// The failure is counted in aware_recommender_prometheus_queries_total.
func (c *Controller) readPressure(ctx context.Context, dropped map[string]int) map[usage.ContainerKey]float64 {
	if c.sources.pressure == nil {
		return nil
	}
	r, err := c.sources.pressure.CPUPressure(ctx, c.cfg.Namespace)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("CPU pressure not read; it is not measured this loop", "err", err)
		return nil
	}
	for k, v := range r.Dropped {
		dropped[k] += v
	}
	return r.Containers
}

// HistoryConfig bounds the history loaded at start-up for autoscalers
// without a checkpoint.
type HistoryConfig struct {
	// Length is how far back history is read (e.g. 8 days).
	Length time.Duration
	// Step is the resolution of the range queries.
	Step time.Duration
	// Concurrency bounds the loads running at once.
	Concurrency int
	// Timeout bounds each autoscaler's wait for its history, queueing for a
	// slot included; afterwards it goes on without.
	Timeout time.Duration
}

// defaultSLOPercentile is the API default of spec.rl.slo.percentile.
const defaultSLOPercentile = 95

// maxHistoryRepeat bounds how many live-loop samples one history point
// stands for.
const maxHistoryRepeat = 1440

// external is what Prometheus said about one autoscaler this loop.
type external struct {
	slo      *usage.SLOReading
	sloErr   error
	goals    []*usage.GoalReading // aligned with spec.goals.metrics; nil when not read
	goalErrs []error
}

// readExternal reads the SLO histogram and the Pods/Object/External goals
// of every handled autoscaler that has them, with bounded concurrency and
// a budget of half the interval, so a slow Prometheus delays the loop by
// at most that. Reads not done within the budget fail with the context's
// error and are reported like any other failure.
func (c *Controller) readExternal(ctx context.Context, handled []*v1alpha1.MultidimPodAutoscaler) map[string]*external {
	if c.sources.slo == nil && c.sources.goals == nil {
		return nil
	}
	out := map[string]*external{}
	type job struct {
		m  *v1alpha1.MultidimPodAutoscaler
		e  *external
		gi int // goal index, or -1 for the SLO
	}
	var jobs []job
	for _, m := range handled {
		hasSLO := c.sources.slo != nil && m.Spec.RL != nil && m.Spec.RL.SLO != nil
		hasGoals := c.sources.goals != nil && m.Spec.Goals != nil && len(m.Spec.Goals.Metrics) > 0
		if !hasSLO && !hasGoals {
			continue
		}
		e := &external{}
		if hasSLO {
			jobs = append(jobs, job{m, e, -1})
		}
		if hasGoals {
			e.goals = make([]*usage.GoalReading, len(m.Spec.Goals.Metrics))
			e.goalErrs = make([]error, len(m.Spec.Goals.Metrics))
			for i, g := range m.Spec.Goals.Metrics {
				switch g.Type {
				case autoscalingv2.PodsMetricSourceType, autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType:
					jobs = append(jobs, job{m, e, i})
				}
			}
		}
		out[m.Namespace+"/"+m.Name] = e
	}
	if len(jobs) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Interval/2)
	defer cancel()
	sem := make(chan struct{}, c.cfg.PrometheusConcurrency)
	var wg sync.WaitGroup
	for _, j := range jobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			// Out of budget: the remaining jobs fail without a request.
			if j.gi < 0 {
				j.e.sloErr = fmt.Errorf("prometheus read budget exhausted: %w", ctx.Err())
			} else {
				j.e.goalErrs[j.gi] = fmt.Errorf("prometheus read budget exhausted: %w", ctx.Err())
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			m := j.m
			if j.gi < 0 {
				slo := m.Spec.RL.SLO
				pc := slo.Percentile
				if pc == 0 {
					pc = defaultSLOPercentile
				}
				r, err := c.sources.slo.SLO(ctx, usage.SLOQuery{Namespace: m.Namespace, Metric: slo.Metric.Name, Selector: slo.Metric.Selector, Percentile: pc})
				j.e.slo, j.e.sloErr = &r, err
				return
			}
			r, err := c.sources.goals.Goal(ctx, usage.GoalQuery{Namespace: m.Namespace, Spec: m.Spec.Goals.Metrics[j.gi]})
			j.e.goals[j.gi], j.e.goalErrs[j.gi] = &r, err
		})
	}
	wg.Wait()
	return out
}

// countDrops adds the invalid samples Prometheus returned to dropped.
func (e *external) countDrops(dropped map[string]int) {
	if e == nil {
		return
	}
	if e.slo != nil {
		for k, v := range e.slo.Dropped {
			dropped[k] += v
		}
	}
	for _, g := range e.goals {
		if g != nil {
			for k, v := range g.Dropped {
				dropped[k] += v
			}
		}
	}
}

// applySLO fills obs.SLO, RequestRate, ErrorRate and Latency from the
// reading. The
// fused policy and the agent compare Latency.P95 with SLO, so P95 carries
// the latency at the SLO's percentile (p95 by default; for an SLO at p90
// it is the p90), while P50 and P99 are the p50 and p99. When the latency
// cannot be used it stays zero ("no requests completed", which no policy
// reads as fast) and the returned reason and message say why; SLO stays
// set because it is configuration, not a measurement. It never writes a
// NaN: the source drops invalid values.
func (c *Controller) applySLO(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, obs *workload.Observation, e *external) (reason, msg string) {
	if m.Spec.RL == nil || m.Spec.RL.SLO == nil {
		return "", ""
	}
	slo := m.Spec.RL.SLO
	if t := slo.Target.Duration.Seconds(); t > 0 && !math.IsInf(t, 0) {
		obs.SLO = t
	}
	pc := slo.Percentile
	if pc == 0 {
		pc = defaultSLOPercentile
	}
	switch {
	case c.sources.slo == nil:
		return "NoSLOSource", "spec.rl.slo is set but no --prometheus-address is configured: latency is not measured"
	case e == nil || e.slo == nil && e.sloErr == nil:
		return "", ""
	case e.sloErr != nil:
		return "SLOMetricsUnavailable", "Prometheus could not be queried for the SLO histogram: latency and request rate are not used"
	}
	r := e.slo
	if r.RequestRate.OK {
		obs.RequestRate, obs.RateWindow = r.RequestRate.Value, r.Window
	}
	// The error rate is an input of the agent only: without a usable
	// value it stays 0 ("not measured", like the request rate), which the
	// conditions need not report.
	if r.ErrorRate.OK {
		obs.ErrorRate = r.ErrorRate.Value
	} else {
		klog.FromContext(ctx).V(4).Info("No error rate", "mpa", klog.KObj(m), "problem", r.ErrorRate.Problem)
	}
	at := r.Latency[pc]
	if !at.OK {
		if at.Problem == usage.NoData {
			return "SLOMetricMissing", fmt.Sprintf("the SLO histogram %q returned no data: latency is not used", slo.Metric.Name)
		}
		return "SLOMetricInvalid", fmt.Sprintf("the p%d latency of %q was NaN, infinite or negative (e.g. no requests in the window): latency is not used", pc, slo.Metric.Name)
	}
	obs.Latency.P95 = at.Value
	if l := r.Latency[50]; l.OK {
		obs.Latency.P50 = l.Value
	}
	if l := r.Latency[99]; l.OK {
		obs.Latency.P99 = l.Value
	}
	return "", ""
}

// goalStatuses are the currentMetrics entries of the Pods, Object and
// External goals that could be read.
func goalStatuses(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, e *external, pods []*corev1.Pod) []autoscalingv2.MetricStatus {
	if e == nil || m.Spec.Goals == nil {
		return nil
	}
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	var out []autoscalingv2.MetricStatus
	for i, g := range e.goals {
		if err := e.goalErrs[i]; err != nil {
			klog.FromContext(ctx).V(2).Info("Reading goal metric", "mpa", klog.KObj(m), "index", i, "err", err)
			continue
		}
		if g == nil {
			continue
		}
		if st, ok := usage.MetricStatus(m.Spec.Goals.Metrics[i], *g, names); ok {
			out = append(out, st)
		}
	}
	return out
}

// historyLoad is one autoscaler's history read, running in the
// background; result and err are set before done is closed.
type historyLoad struct {
	done   chan struct{}
	cancel context.CancelFunc
	result usage.History
	err    error
}

// podRegex matches the pods of a workload, including past ones where the
// name says how: a pod with a pod-template-hash label (a Deployment's)
// matches every ReplicaSet of its Deployment (<deployment>-<hash>-<id>);
// other pods (StatefulSets' stable names) match by name.
func podRegex(pods []*corev1.Pod) string {
	set := map[string]bool{}
	for _, p := range pods {
		if h := p.Labels["pod-template-hash"]; h != "" {
			if i := strings.LastIndex(p.Name, "-"+h+"-"); i > 0 {
				set[regexp.QuoteMeta(p.Name[:i+1])+"[a-z0-9]+-[a-z0-9]+"] = true
				continue
			}
		}
		set[regexp.QuoteMeta(p.Name)] = true
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	slices.Sort(out)
	return strings.Join(out, "|")
}

// startHistory reads the history of m's pods in the background, bounded by
// the history concurrency and timeout.
func (c *Controller) startHistory(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, pods []*corev1.Pod) *historyLoad {
	hc := c.cfg.History
	lctx, cancel := context.WithTimeout(ctx, hc.Timeout)
	l := &historyLoad{done: make(chan struct{}), cancel: cancel}
	end := c.clock.Now()
	q := usage.HistoryQuery{Namespace: m.Namespace, PodRegex: podRegex(pods), Start: end.Add(-hc.Length), End: end, Step: hc.Step, Timeout: hc.Timeout}
	c.background.Go(func() {
		defer close(l.done)
		defer cancel()
		select {
		case c.historySlots <- struct{}{}:
		case <-lctx.Done():
			l.err = fmt.Errorf("waiting for a history slot: %w", lctx.Err())
			return
		}
		defer func() { <-c.historySlots }()
		l.result, l.err = c.sources.history.History(lctx, q)
	})
	return l
}

// applyHistory feeds a loaded history into the policy's histograms, with
// the current requests as CPU weights. A point stands for step/interval
// live samples, so a day of history weighs (and counts towards confidence)
// as a day of live observation. It returns the containers loaded.
func (c *Controller) applyHistory(st *state, pods []*corev1.Pod, h usage.History) (int, error) {
	hs, ok := st.policy.(histograms)
	if !ok {
		return 0, nil
	}
	newest := pods[0]
	for _, p := range pods[1:] {
		if p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	repeat := 1
	if c.cfg.Interval > 0 {
		repeat = int(min(max(math.Round(float64(c.cfg.History.Step)/float64(c.cfg.Interval)), 1), maxHistoryRepeat))
	}
	n := 0
	for _, ch := range h.Containers {
		i := slices.IndexFunc(newest.Spec.Containers, func(co corev1.Container) bool { return co.Name == ch.Name })
		if i < 0 || st.constraints.ContainerPolicy(ch.Name).Mode == workload.ContainerModeOff {
			continue // a container the template no longer has, or not sized
		}
		req := mpa.Resources(newest.Spec.Containers[i].Resources.Requests).CPU
		s := hs.Recommender().State(ch.Name)
		for _, p := range ch.CPU {
			for range repeat {
				if err := s.AddCPUSample(p.Time, p.Value, req); err != nil {
					return n, fmt.Errorf("container %q cpu history: %w", ch.Name, err)
				}
			}
		}
		for _, p := range ch.Memory {
			if err := s.AddMemorySample(p.Time, p.Value); err != nil {
				return n, fmt.Errorf("container %q memory history: %w", ch.Name, err)
			}
		}
		if len(ch.CPU)+len(ch.Memory) > 0 {
			n++
		}
	}
	return n, nil
}

// loadHistory starts m's history load if needed and reports whether it is
// over (loaded, failed or timed out); when it is, the history is fed into
// the histograms and the state says how it went. It is called on the loop
// goroutine only, so the policy is never touched concurrently; the load
// started in this loop is never reported over in the same loop, so
// FetchingHistory=True is always written once.
func (c *Controller) loadHistory(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, st *state, pods []*corev1.Pod, dropped map[string]int) bool {
	if st.history.load == nil {
		st.history.load = c.startHistory(ctx, m, pods)
		return false
	}
	select {
	case <-st.history.load.done:
	default:
		return false
	}
	st.history.pending = false
	logger := klog.FromContext(ctx)
	l := st.history.load
	for k, v := range l.result.Dropped {
		dropped[k] += v
	}
	if l.err != nil {
		st.history.err = l.err
		logger.Error(l.err, "Loading usage history from Prometheus; starting without", "mpa", klog.KObj(m))
		return true
	}
	n, err := c.applyHistory(st, pods, l.result)
	st.history.loaded = n
	if err != nil {
		st.history.err = err
		logger.Error(err, "Applying usage history", "mpa", klog.KObj(m))
		return true
	}
	logger.V(2).Info("Loaded usage history from Prometheus", "mpa", klog.KObj(m), "containers", n)
	return true
}

// setHistoryCondition sets FetchingHistory=False with the reason history
// is what it is.
func setHistoryCondition(s *v1alpha1.MultidimPodAutoscalerStatus, st *state, now time.Time) {
	reason, msg := "NoHistorySource", "no checkpoint found and no --prometheus-address is configured: history starts empty"
	switch {
	case st.restored > 0:
		reason, msg = "CheckpointRestored", "history restored from checkpoints"
	case st.history.pending:
		reason, msg = "HistoryPending", "history is loaded from Prometheus once the target's pods are known"
	case st.history.err != nil:
		reason, msg = "HistoryUnavailable", "no checkpoint found and loading history from Prometheus failed: history starts empty"
	case st.history.load != nil && st.history.loaded == 0:
		reason, msg = "NoHistoryFound", "Prometheus holds no usage history for the target's pods: history starts empty"
	case st.history.load != nil:
		reason, msg = "HistoryLoaded", "history loaded from Prometheus"
	}
	setCondition(s, v1alpha1.FetchingHistory, corev1.ConditionFalse, reason, msg, now)
}
