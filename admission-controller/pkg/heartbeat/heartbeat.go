// Package heartbeat keeps a coordination.k8s.io/v1 Lease renewed while the
// admission controller can size new pods, so that the updater knows
// whether evicting a pod will lead to a correctly sized replacement.
//
// # Contract with the updater
//
// The Lease is named DefaultName ("aware-admission-controller") in the
// admission controller's namespace (flags --heartbeat-lease-name and
// --namespace). Every replica renews it every Interval (default 10s) while
// it is ready — serving TLS with its MPA, owner and LimitRange caches
// synced — by setting spec.renewTime to now, spec.holderIdentity to its own
// identity (pod name) and spec.leaseDurationSeconds to Duration (default
// 30s). The Lease is not a lock: replicas overwrite each other's
// holderIdentity, and any renewal proves that some replica is up.
//
// The admission controller is alive when now < renewTime +
// leaseDurationSeconds; Alive implements exactly that. The updater should
// not evict pods for vertical changes (Recreate, Auto) while it is not
// alive: a replacement pod would be created with its old resources. A
// missing Lease means "not alive". The Lease is never deleted on shutdown,
// so it simply expires.
package heartbeat

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// DefaultName is the Lease's default name.
const DefaultName = "aware-admission-controller"

// Alive reports whether the Lease was renewed within its duration at now.
func Alive(l *coordinationv1.Lease, now time.Time) bool {
	if l == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// Heartbeat renews the Lease.
type Heartbeat struct {
	Client    coordinationclient.LeasesGetter
	Namespace string
	Name      string
	Identity  string
	Interval  time.Duration
	Duration  time.Duration
	// Ready gates renewal: no renewal while it returns false.
	Ready func() bool
	Clock clock.PassiveClock
}

// Run renews until ctx ends. Failures are logged and retried at the next
// tick: a missed renewal must not stop the webhook from serving.
func (h *Heartbeat) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(h.Namespace, h.Name))
	failing := false
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if h.Ready != nil && !h.Ready() {
			logger.V(4).Info("Not ready; heartbeat not renewed")
			return
		}
		if err := h.Renew(ctx); err != nil {
			logger.Error(err, "Renewing heartbeat Lease")
			failing = true
			return
		}
		if failing {
			logger.Info("Heartbeat Lease renewed again")
			failing = false
		}
	}, h.Interval)
}

// Renew creates or renews the Lease once.
func (h *Heartbeat) Renew(ctx context.Context) error {
	now := metav1.NewMicroTime(h.Clock.Now())
	leases := h.Client.Leases(h.Namespace)
	cur, err := leases.Get(ctx, h.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: h.Name}}
		h.fill(l, now)
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Lease %s/%s: %w", h.Namespace, h.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Lease %s/%s: %w", h.Namespace, h.Name, err)
	}
	l := cur.DeepCopy()
	h.fill(l, now)
	// A conflict means another replica renewed a moment ago, which is as
	// good as our own renewal; the next tick tries again anyway.
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("update Lease %s/%s: %w", h.Namespace, h.Name, err)
	}
	return nil
}

func (h *Heartbeat) fill(l *coordinationv1.Lease, now metav1.MicroTime) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != h.Identity {
		l.Spec.AcquireTime = &now
	}
	l.Spec.HolderIdentity = ptr.To(h.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(h.Duration / time.Second))
	l.Spec.RenewTime = &now
}
