// Package leader runs a component's work only while it holds a Lease, so
// several replicas can run and exactly one acts. A standby replica reports
// ready (it can take over); the leader reports ready once its own readiness
// check passes. Losing leadership ends Run with an error, because a
// component must not keep acting, or rebuild state, after another replica
// took over: the process exits and restarts clean.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/kube/serve"
)

// ErrLostLeadership is returned by Run when another replica took over.
var ErrLostLeadership = errors.New("lost leadership")

// Options configure leader election.
type Options struct {
	Enabled        bool
	LeaseName      string
	LeaseNamespace string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
}

// NewOptions returns enabled election on the Lease name in aware-system,
// with client-go's usual timings.
func NewOptions(name string) Options {
	return Options{
		Enabled:        true,
		LeaseName:      name,
		LeaseNamespace: "aware-system",
		LeaseDuration:  15 * time.Second,
		RenewDeadline:  10 * time.Second,
		RetryPeriod:    2 * time.Second,
	}
}

// AddFlags binds the options to fs under the Kubernetes flag names.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "leader-elect", o.Enabled, "Elect a leader on a Lease so several replicas can run; only the leader acts.")
	fs.StringVar(&o.LeaseName, "leader-elect-resource-name", o.LeaseName, "Name of the Lease used for leader election.")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", o.LeaseNamespace, "Namespace of the Lease used for leader election.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a non-leader waits after the last renewal before taking over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps retrying a renewal before giving up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "Interval between leader election attempts.")
}

// Validate reports inconsistent options; disabled election is always valid.
func (o *Options) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if o.LeaseName == "" || o.LeaseNamespace == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name and --leader-elect-resource-namespace must be set"))
	}
	if !(o.LeaseDuration > o.RenewDeadline && o.RenewDeadline > o.RetryPeriod && o.RetryPeriod > 0) {
		errs = append(errs, fmt.Errorf("leader election needs lease-duration (%s) > renew-deadline (%s) > retry-period (%s) > 0", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
	}
	return errors.Join(errs...)
}

// Run calls lead while this replica leads (at once when election is
// disabled) and returns when ctx ends (nil) or leadership is lost
// (ErrLostLeadership). ready is the leader's readiness; Run registers it,
// and the election watchdog, on endpoints.
func Run(ctx context.Context, o Options, kube kubernetes.Interface, recorder record.EventRecorder, endpoints *serve.Endpoints, ready func() error, lead func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	if !o.Enabled {
		endpoints.AddReadyCheck("controller", ready)
		return lead(ctx)
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	id := host + "_" + uuid.NewString()
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	endpoints.AddHealthCheck("leader-election", func() error { return watchdog.Check(nil) })
	var leading atomic.Bool
	endpoints.AddReadyCheck("controller", func() error {
		if !leading.Load() {
			return nil
		}
		return ready()
	})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: o.LeaseNamespace, Name: o.LeaseName},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder},
		},
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            o.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Acquired leadership", "identity", id, "lease", klog.KRef(o.LeaseNamespace, o.LeaseName))
				leading.Store(true)
				if err := lead(ctx); err != nil {
					logger.Error(err, "Leader's work failed")
				}
			},
			OnStoppedLeading: func() { leading.Store(false) },
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	if ctx.Err() == nil {
		return ErrLostLeadership
	}
	return nil
}
