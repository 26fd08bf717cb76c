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
	// Profiling serves Go's runtime profiles on the metrics address
	// (Endpoints.ProfilingHandler).
	Profiling bool
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
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, ProfilingHelp)
}

// ProfilingHelp is the help of every component's --profiling flag.
const ProfilingHelp = "Serve Go's runtime profiles (CPU, heap, goroutines, execution trace) under /debug/pprof/ on the metrics address. Off by default: a profile shows the process's internals to whoever reaches that address, and taking one costs CPU."

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
	if o.Profiling && o.MetricsBindAddress == "0" {
		errs = append(errs, errors.New("--profiling serves on the metrics address, which --metrics-bind-address=0 disables"))
	}
	return errors.Join(errs...)
}

// Start serves e's handlers on the configured addresses in g until ctx
// ends. Both addresses serve the same mux (metrics and checks), so one
// address given for both is served once.
func (o *Options) Start(ctx context.Context, g *errgroup.Group, e *Endpoints) {
	metrics, health := e.Handler(), e.Handler()
	if o.Profiling {
		metrics = e.ProfilingHandler()
	}
	switch {
	case o.MetricsBindAddress == o.HealthBindAddress:
		health = metrics // one server for both
	case o.MetricsBindAddress != "0":
		g.Go(func() error { return Run(ctx, o.MetricsBindAddress, metrics, o.ShutdownGracePeriod) })
	}
	g.Go(func() error { return Run(ctx, o.HealthBindAddress, health, o.ShutdownGracePeriod) })
}
