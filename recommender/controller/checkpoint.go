package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/vpa"
)

// CheckpointVersion is the format written into status.version. A
// recommender ignores checkpoints of other versions (e.g. a different
// histogram layout) rather than restoring nonsense.
const CheckpointVersion = "aware.v1"

// maxScaledWeight is the API's compact scale: the largest bucket is 10000.
const maxScaledWeight = 10000

// histograms is what a policy must offer to be checkpointed; the fused
// default (*fusion.Fused) does.
type histograms interface {
	Recommender() *vpa.Recommender
}

// checkpointName is <mpa>-<container>.
func checkpointName(mpaName, container string) string { return mpaName + "-" + container }

// toAPI converts a container's state to the API's compact form. The
// memory aggregation window (the current interval's peak) is not part of
// the API and is not saved: after a restore the current interval starts
// afresh, as in upstream VPA.
func toAPI(cp vpa.ContainerCheckpoint, now time.Time) v1alpha1.MultidimPodAutoscalerCheckpointStatus {
	return v1alpha1.MultidimPodAutoscalerCheckpointStatus{
		LastUpdateTime:    metav1.NewTime(now),
		Version:           CheckpointVersion,
		CPUHistogram:      histogramToAPI(cp.CPU),
		MemoryHistogram:   histogramToAPI(cp.Memory),
		FirstSampleStart:  metav1.NewTime(cp.FirstSampleStart),
		LastSampleStart:   metav1.NewTime(cp.LastSampleStart),
		TotalSamplesCount: cp.TotalSamplesCount,
	}
}

func histogramToAPI(h vpa.HistogramCheckpoint) v1alpha1.HistogramCheckpoint {
	out := v1alpha1.HistogramCheckpoint{ReferenceTimestamp: metav1.NewTime(h.ReferenceTime), TotalWeight: h.TotalWeight}
	top := 0.0
	for _, b := range h.Buckets {
		top = max(top, b.Weight)
	}
	if top <= 0 {
		return out
	}
	out.BucketWeights = map[string]int32{}
	for _, b := range h.Buckets {
		if w := int32(math.Round(b.Weight / top * maxScaledWeight)); w > 0 {
			out.BucketWeights[strconv.Itoa(b.Bucket)] = w
		}
	}
	return out
}

// fromAPI converts back; weights are rescaled so they sum to totalWeight.
func fromAPI(s *v1alpha1.MultidimPodAutoscalerCheckpointStatus) (vpa.ContainerCheckpoint, error) {
	if s.Version != CheckpointVersion {
		return vpa.ContainerCheckpoint{}, fmt.Errorf("checkpoint version %q is not %q", s.Version, CheckpointVersion)
	}
	cpuOpts, memOpts := vpa.CPUHistogramOptions(), vpa.MemoryHistogramOptions()
	cpu, err := histogramFromAPI(s.CPUHistogram, cpuOpts.NumBuckets())
	if err != nil {
		return vpa.ContainerCheckpoint{}, fmt.Errorf("cpu histogram: %w", err)
	}
	mem, err := histogramFromAPI(s.MemoryHistogram, memOpts.NumBuckets())
	if err != nil {
		return vpa.ContainerCheckpoint{}, fmt.Errorf("memory histogram: %w", err)
	}
	return vpa.ContainerCheckpoint{
		CPU: cpu, Memory: mem,
		FirstSampleStart: s.FirstSampleStart.Time, LastSampleStart: s.LastSampleStart.Time,
		TotalSamplesCount: s.TotalSamplesCount,
	}, nil
}

func histogramFromAPI(h v1alpha1.HistogramCheckpoint, numBuckets int) (vpa.HistogramCheckpoint, error) {
	out := vpa.HistogramCheckpoint{NumBuckets: numBuckets}
	if len(h.BucketWeights) == 0 {
		return out, nil
	}
	sum := 0.0
	for k, w := range h.BucketWeights {
		b, err := strconv.Atoi(k)
		if err != nil {
			return out, fmt.Errorf("bucket %q: %w", k, err)
		}
		if w < 0 {
			return out, fmt.Errorf("bucket %d: negative weight %d", b, w)
		}
		if w == 0 {
			continue
		}
		out.Buckets = append(out.Buckets, vpa.BucketWeight{Bucket: b, Weight: float64(w)})
		sum += float64(w)
	}
	if math.IsNaN(h.TotalWeight) || h.TotalWeight <= 0 || sum == 0 {
		return vpa.HistogramCheckpoint{NumBuckets: numBuckets}, nil
	}
	sort.Slice(out.Buckets, func(i, j int) bool { return out.Buckets[i].Bucket < out.Buckets[j].Bucket })
	total := 0.0
	for i := range out.Buckets {
		out.Buckets[i].Weight *= h.TotalWeight / sum
		total += out.Buckets[i].Weight
	}
	out.TotalWeight = total
	out.ReferenceTime = h.ReferenceTimestamp.Time
	return out, nil
}

// restore loads the checkpoints of m into the policy's histograms and
// returns how many containers were restored. A corrupt or foreign
// checkpoint is skipped (counted and logged): starting without history is
// safe, refusing to start is not.
func (c *Controller) restore(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, h histograms) int {
	cps, err := c.caches.checkpoints.MultidimPodAutoscalerCheckpoints(m.Namespace).List(labels.Everything())
	if err != nil {
		return 0
	}
	n := 0
	for _, cp := range cps {
		if cp.Spec.MPAObjectName != m.Name || cp.Spec.ContainerName == "" {
			continue
		}
		st, err := fromAPI(&cp.Status)
		if err == nil {
			err = h.Recommender().State(cp.Spec.ContainerName).Restore(st)
		}
		if err != nil {
			c.metrics.checkpoints.WithLabelValues("restore", "error").Inc()
			klog.FromContext(ctx).Info("Ignoring unusable checkpoint", "checkpoint", klog.KObj(cp), "err", err)
			continue
		}
		c.metrics.checkpoints.WithLabelValues("restore", "success").Inc()
		n++
	}
	return n
}

// saveCheckpoints writes the histograms of autoscalers whose checkpoints
// are oldest first, until budget is spent, so a large cluster spreads its
// checkpoint writes over several loops instead of stalling one.
func (c *Controller) saveCheckpoints(ctx context.Context, now time.Time, budget time.Duration) {
	deadline := c.clock.Now().Add(budget)
	// The budget also bounds each write: with etcd down the API server
	// holds a write until its own request timeout (about a minute), and
	// one checkpoint write then stopped the loop for the whole outage (e2e
	// TestControlPlaneFaults/etcd_restarted, 2026-11-29: no loop ended in
	// 30 s). A write cut here is retried at the next loop.
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type item struct {
		key  string
		last time.Time
	}
	var due []item
	for k, st := range c.loop.states {
		if len(st.containers) > 0 && now.Sub(st.lastCheckpoint) >= c.cfg.CheckpointInterval {
			due = append(due, item{k, st.lastCheckpoint})
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].last.Before(due[j].last) })
	for _, it := range due {
		if ctx.Err() != nil || c.clock.Now().After(deadline) {
			return
		}
		st := c.loop.states[it.key]
		h, ok := st.policy.(histograms)
		if !ok {
			continue
		}
		ok = true
		for _, name := range st.containers {
			s := h.Recommender().State(name)
			if s.Samples() == 0 && s.Memory().IsEmpty() {
				continue
			}
			if err := c.saveCheckpoint(ctx, st, name, toAPI(s.Checkpoint(), now)); err != nil {
				ok = false
				c.metrics.checkpoints.WithLabelValues("save", "error").Inc()
				klog.FromContext(ctx).Error(err, "Saving checkpoint", "mpa", klog.KRef(st.namespace, st.name), "container", name)
				continue
			}
			c.metrics.checkpoints.WithLabelValues("save", "success").Inc()
		}
		if ok {
			st.lastCheckpoint = now
		}
	}
}

func (c *Controller) saveCheckpoint(ctx context.Context, st *state, container string, status v1alpha1.MultidimPodAutoscalerCheckpointStatus) error {
	name := checkpointName(st.name, container)
	client := c.writes.client.AutoscalingV1alpha1().MultidimPodAutoscalerCheckpoints(st.namespace)
	existing, err := c.caches.checkpoints.MultidimPodAutoscalerCheckpoints(st.namespace).Get(name)
	if err == nil {
		cp := existing.DeepCopy()
		cp.Status = status
		if _, err := client.Update(ctx, cp, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating checkpoint %s/%s: %w", st.namespace, name, err)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading checkpoint %s/%s from cache: %w", st.namespace, name, err)
	}
	cp := &v1alpha1.MultidimPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: st.namespace,
			// The owner reference lets the garbage collector delete the
			// checkpoint with its autoscaler even when no recommender runs.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.SchemeGroupVersion.String(),
				Kind:       "MultidimPodAutoscaler",
				Name:       st.name,
				UID:        st.uid,
			}},
		},
		Spec:   v1alpha1.MultidimPodAutoscalerCheckpointSpec{MPAObjectName: st.name, ContainerName: container},
		Status: status,
	}
	_, err = client.Create(ctx, cp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache lagged; the next save updates it
	}
	if err != nil {
		return fmt.Errorf("creating checkpoint %s/%s: %w", st.namespace, name, err)
	}
	return nil
}

// collectGarbage deletes checkpoints whose autoscaler no longer exists.
// The owner reference normally lets the cluster's garbage collector do
// this; this catches checkpoints written without one and clusters where the
// garbage collector lags. It only runs on synced caches, so a cold cache
// never looks like "every autoscaler was deleted".
func (c *Controller) collectGarbage(ctx context.Context) error {
	cps, err := c.caches.checkpoints.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing checkpoints: %w", err)
	}
	var errs []error
	for _, cp := range cps {
		if c.ignored(cp.Namespace) {
			continue
		}
		_, err := c.caches.mpas.MultidimPodAutoscalers(cp.Namespace).Get(cp.Spec.MPAObjectName)
		if err == nil || !apierrors.IsNotFound(err) {
			continue
		}
		err = c.writes.client.AutoscalingV1alpha1().MultidimPodAutoscalerCheckpoints(cp.Namespace).Delete(ctx, cp.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &cp.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			c.metrics.checkpoints.WithLabelValues("delete", "error").Inc()
			errs = append(errs, fmt.Errorf("deleting checkpoint %s/%s: %w", cp.Namespace, cp.Name, err))
			continue
		}
		c.metrics.checkpoints.WithLabelValues("delete", "success").Inc()
		klog.FromContext(ctx).V(2).Info("Deleted checkpoint of a deleted autoscaler", "checkpoint", klog.KObj(cp))
	}
	return errors.Join(errs...)
}
