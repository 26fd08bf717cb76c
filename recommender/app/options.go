package app

import (
	"errors"
	"fmt"
	"net"

	"github.com/spf13/pflag"
)

// Options are the recommender's command-line options.
type Options struct {
	// Kubeconfig is the path to a kubeconfig; empty means in-cluster.
	Kubeconfig string
	// MetricsBindAddress serves Prometheus metrics; "0" disables it.
	MetricsBindAddress string
	// HealthBindAddress serves /healthz and /readyz.
	HealthBindAddress string
}

// NewOptions returns options with defaults.
func NewOptions() *Options {
	return &Options{
		MetricsBindAddress: ":8080",
		HealthBindAddress:  ":8081",
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file. Empty means the in-cluster configuration.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address to serve Prometheus metrics on (host:port); \"0\" disables the endpoint.")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "Address to serve /healthz and /readyz on (host:port).")
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
	return errors.Join(errs...)
}
