package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
)

// Options are the operational endpoint flags every component shares.
type Options struct {
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthBindAddress serves /healthz and /readyz.
	HealthBindAddress string
	// ShutdownGracePeriod bounds draining at shutdown.
	ShutdownGracePeriod time.Duration
}

// NewOptions returns the defaults: metrics on :8080, health on :8081.
func NewOptions() Options {
	return Options{MetricsBindAddress: ":8080", HealthBindAddress: ":8081", ShutdownGracePeriod: 10 * time.Second}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address to serve Prometheus metrics on (host:port); \"0\" disables the endpoint.")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "Address to serve /healthz and /readyz on (host:port).")
	fs.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", o.ShutdownGracePeriod, "How long in-flight work and HTTP connections may take at shutdown.")
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	var errs []error
	if o.MetricsBindAddress != "0" {
		if _, _, err := net.SplitHostPort(o.MetricsBindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address %q: %w", o.MetricsBindAddress, err))
		}
	}
	if _, _, err := net.SplitHostPort(o.HealthBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--health-bind-address %q: %w", o.HealthBindAddress, err))
	}
	if o.ShutdownGracePeriod < 0 {
		errs = append(errs, errors.New("--shutdown-grace-period must be >= 0"))
	}
	return errors.Join(errs...)
}

// Start serves e's handlers on the configured addresses in g until ctx
// ends. Both addresses serve the same mux (metrics and checks), so one
// address given for both is served once.
func (o *Options) Start(ctx context.Context, g *errgroup.Group, e *Endpoints) {
	if o.MetricsBindAddress != "0" && o.MetricsBindAddress != o.HealthBindAddress {
		g.Go(func() error { return Run(ctx, o.MetricsBindAddress, e.Handler(), o.ShutdownGracePeriod) })
	}
	g.Go(func() error { return Run(ctx, o.HealthBindAddress, e.Handler(), o.ShutdownGracePeriod) })
}
