package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/rival"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// RunOnce is one loop: read metrics once, recommend for every handled
// autoscaler, queue the statuses that changed, and save checkpoints and
// collect garbage when due.
func (c *Controller) RunOnce(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := time.Now() // wall time for the duration metric, not the injected clock
	now := c.clock.Now()
	all, err := c.caches.mpas.List(labels.Everything())
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
	c.loop.roomSnap = nil
	if c.caches.room != nil && len(handled) > 0 {
		var err error
		if c.loop.roomSnap, err = c.caches.room.snapshot(); err != nil {
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
				c.writes.mu.Lock()
				c.writes.pending[key] = status
				c.writes.mu.Unlock()
				c.writes.queue.Add(key)
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
			c.writes.mu.Lock()
			c.writes.pending[key] = status
			c.writes.mu.Unlock()
			c.writes.queue.Add(key)
		}
	}
	var present map[types.UID]bool
	for k, st := range c.loop.states {
		if !seen[k] {
			if present == nil {
				present = make(map[types.UID]bool, len(all))
				for _, m := range all {
					present[m.UID] = true
				}
			}
			c.forgetAgentState(ctx, st, !present[st.uid])
			if st.history.load != nil {
				st.history.load.cancel()
			}
			delete(c.loop.states, k)
		}
	}
	for r, n := range dropped {
		c.metrics.invalidSamples.WithLabelValues(r).Add(float64(n))
	}
	c.metrics.autoscalers.Set(float64(len(handled)))
	if now.Sub(c.loop.lastCollect) >= c.cfg.CheckpointInterval {
		c.saveCheckpoints(ctx, now, c.cfg.Interval/2)
		if err := c.collectGarbage(ctx); err != nil {
			logger.Error(err, "Collecting checkpoints of deleted autoscalers")
		}
		c.loop.lastCollect = now
	}
	c.metrics.loopDuration.Observe(time.Since(start).Seconds())
	logger.V(4).Info("Loop done", "autoscalers", len(handled), "duration", time.Since(start))
}

func (c *Controller) readUsage(ctx context.Context) (map[string]map[string]*usage.PodUsage, error) {
	list, err := c.sources.usage.PodUsage(ctx, c.cfg.Namespace)
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
