package controller

// Writing the status: the workers take the statuses the loop queued and
// write them through the status subresource, retrying with backoff, and
// say so with an event when writes succeed again after failing.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
)

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.writes.queue.Get()
	if quit {
		return false
	}
	defer c.writes.queue.Done(key)
	if err := c.writeStatus(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Writing status; will retry", "mpa", key)
		c.noteWriteFailure(ctx, key, err)
		c.writes.queue.AddRateLimited(key)
		return true
	}
	c.writes.queue.Forget(key)
	return true
}

// DefaultStatusWriteTimeout is Config.StatusWriteTimeout's default.
const DefaultStatusWriteTimeout = 10 * time.Second

// ReasonStatusWriteRecovered is the event of a status write that
// succeeded after failures.
const ReasonStatusWriteRecovered = "StatusWriteRecovered"

// writeStatus writes the pending status of key through the status
// subresource. The first attempt starts from the cached object; on a
// conflict the object is re-read from the API server and the recommender's
// fields are merged into the fresh status again.
func (c *Controller) writeStatus(ctx context.Context, key string) error {
	c.writes.mu.Lock()
	ours := c.writes.pending[key]
	c.writes.mu.Unlock()
	if ours == nil {
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StatusWriteTimeout)
	defer cancel()
	client := c.writes.client.AutoscalingV1alpha1().MultidimPodAutoscalers(ns)
	cur, err := c.caches.mpas.MultidimPodAutoscalers(ns).Get(name)
	var before *v1alpha1.MultidimPodAutoscalerStatus
	var sent *v1alpha1.MultidimPodAutoscaler
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err != nil { // first attempt's cache read failed, or a conflict
			if cur, err = client.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		sent = cur.DeepCopy()
		before = &cur.Status
		merge(&sent.Status, ours)
		// The events below are recorded on the object as sent: they need
		// only its identity, and the watch brings the stored one. (An API
		// server just restarted has been seen to acknowledge a write with
		// an object that names nothing; an event on that would be refused
		// and the operator would never hear of the outage.)
		err = c.writes.writer.WriteStatus(ctx, sent)
		if apierrors.IsConflict(err) {
			c.metrics.statusWrites.WithLabelValues("conflict").Inc()
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		c.dropPending(key, ours)
		c.forgetWriteFailures(key)
		return nil
	}
	if err != nil {
		c.metrics.statusWrites.WithLabelValues("error").Inc()
		return fmt.Errorf("updating status of %s: %w", key, err)
	}
	c.metrics.statusWrites.WithLabelValues("success").Inc()
	c.dropPending(key, ours)
	c.writeRecovered(key, sent)
	c.emitEvents(sent, before, ours)
	return nil
}

// mpasByKey reads the autoscaler of key from the informer's cache.
func (c *Controller) mpasByKey(key string) (*v1alpha1.MultidimPodAutoscaler, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	return c.caches.mpas.MultidimPodAutoscalers(ns).Get(name)
}

// dropPending forgets ours unless a newer status replaced it meanwhile.
func (c *Controller) dropPending(key string, ours *v1alpha1.MultidimPodAutoscalerStatus) {
	c.writes.mu.Lock()
	defer c.writes.mu.Unlock()
	if c.writes.pending[key] == ours {
		delete(c.writes.pending, key)
	}
}

// emitEvents records an event for each condition that changed status.
// Conditions describing trouble are warnings.
func (c *Controller) emitEvents(obj *v1alpha1.MultidimPodAutoscaler, before, after *v1alpha1.MultidimPodAutoscalerStatus) {
	if c.recorder == nil || obj == nil {
		return
	}
	bad := map[v1alpha1.MultidimPodAutoscalerConditionType]corev1.ConditionStatus{
		v1alpha1.ConfigUnsupported: corev1.ConditionTrue, v1alpha1.NoPodsMatched: corev1.ConditionTrue,
		v1alpha1.ScalingActive: corev1.ConditionFalse, v1alpha1.AbleToScale: corev1.ConditionFalse,
		v1alpha1.RecommendationProvided: corev1.ConditionFalse,
	}
	for _, t := range ownedConditions {
		a := condition(after, t)
		if a == nil {
			continue
		}
		if b := condition(before, t); b != nil && b.Status == a.Status {
			continue
		}
		bs, isBad := bad[t]
		if !isBad {
			continue // LowConfidence, FetchingHistory, ScalingLimited: status only, too chatty as events
		}
		typ := corev1.EventTypeNormal
		if bs == a.Status {
			typ = corev1.EventTypeWarning
		} else if condition(before, t) == nil {
			continue // a healthy first status is not news
		}
		c.recorder.Eventf(obj, typ, a.Reason, "%s is %s: %s", t, a.Status, a.Message)
	}
}

// StatusWriter writes an autoscaler's status through the status
// subresource (PUT .../status with obj, whose resourceVersion must still be
// current).
type StatusWriter interface {
	WriteStatus(ctx context.Context, obj *v1alpha1.MultidimPodAutoscaler) error
}

// typedStatusWriter writes through the generated client, which decodes the
// object the API server returns.
type typedStatusWriter struct{ client versioned.Interface }

var _ StatusWriter = typedStatusWriter{}

func (w typedStatusWriter) WriteStatus(ctx context.Context, obj *v1alpha1.MultidimPodAutoscaler) error {
	_, err := w.client.AutoscalingV1alpha1().MultidimPodAutoscalers(obj.Namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	return err
}

// RESTStatusWriter writes statuses without decoding the API server's
// answer: the recommender never reads it (the watch brings the stored
// object), and at 1,000 autoscalers, while most statuses still changed
// every loop, decoding the JSON of every written object was 13% of its CPU
// (docs/results/performance.md). Errors are decoded
// as the generated client decodes them (a conflict is still a conflict).
type RESTStatusWriter struct {
	// Client is the autoscaling.aware.dev/v1alpha1 REST client
	// (versioned.Interface's AutoscalingV1alpha1().RESTClient()).
	Client rest.Interface
}

var _ StatusWriter = RESTStatusWriter{}

// WriteStatus implements StatusWriter.
func (w RESTStatusWriter) WriteStatus(ctx context.Context, obj *v1alpha1.MultidimPodAutoscaler) error {
	return w.Client.Put().Namespace(obj.Namespace).Resource("multidimpodautoscalers").Name(obj.Name).
		SubResource("status").Body(obj).Do(ctx).Error()
}
