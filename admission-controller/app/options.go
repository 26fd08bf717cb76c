package app

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/admission-controller/pkg/heartbeat"
	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/admission-controller/pkg/webhook"
)

// Options are the admission-controller's command-line options.
type Options struct {
	// Kubeconfig is the path to a kubeconfig; empty means in-cluster.
	Kubeconfig string
	// MetricsBindAddress serves Prometheus metrics; "0" disables it.
	MetricsBindAddress string
	// HealthBindAddress serves /healthz and /readyz.
	HealthBindAddress string

	// Namespace is where the admission controller runs; it is excluded
	// from the webhook and holds the heartbeat Lease.
	Namespace string

	WebhookBindAddress string
	WebhookPath        string
	TLSCertFile        string
	TLSKeyFile         string
	MaxRequestBytes    int64
	AdmissionTimeout   time.Duration
	ShutdownGrace      time.Duration

	RegisterWebhook       bool
	WebhookConfigName     string
	WebhookServiceName    string
	WebhookServicePort    int32
	WebhookURL            string
	WebhookCABundleFile   string
	WebhookTimeoutSeconds int32
	WebhookFailurePolicy  string

	HeartbeatLeaseName     string
	HeartbeatInterval      time.Duration
	HeartbeatLeaseDuration time.Duration
}

// NewOptions returns options with defaults.
func NewOptions() *Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "aware-system"
	}
	return &Options{
		MetricsBindAddress:     ":8080",
		HealthBindAddress:      ":8081",
		Namespace:              ns,
		WebhookBindAddress:     ":8443",
		WebhookPath:            "/mutate-pods",
		MaxRequestBytes:        webhook.DefaultMaxBodyBytes,
		AdmissionTimeout:       webhook.DefaultTimeout,
		ShutdownGrace:          15 * time.Second,
		WebhookConfigName:      register.DefaultConfigName,
		WebhookServiceName:     "aware-admission-controller",
		WebhookServicePort:     443,
		WebhookTimeoutSeconds:  3,
		WebhookFailurePolicy:   "Ignore",
		HeartbeatLeaseName:     heartbeat.DefaultName,
		HeartbeatInterval:      10 * time.Second,
		HeartbeatLeaseDuration: 30 * time.Second,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file. Empty means the in-cluster configuration.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address to serve Prometheus metrics on (host:port); \"0\" disables the endpoint.")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "Address to serve /healthz and /readyz on (host:port).")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace the admission controller runs in (default from $POD_NAMESPACE). It is excluded from the webhook and holds the heartbeat Lease.")

	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress, "Address to serve the HTTPS admission webhook on (host:port).")
	fs.StringVar(&o.WebhookPath, "webhook-path", o.WebhookPath, "URL path of the pod mutation endpoint.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate (chain) for the webhook. Re-read when it changes.")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", o.TLSKeyFile, "PEM private key matching --tls-cert-file. Re-read when it changes.")
	fs.Int64Var(&o.MaxRequestBytes, "max-request-bytes", o.MaxRequestBytes, "Largest AdmissionReview body accepted; larger ones are admitted unchanged.")
	fs.DurationVar(&o.AdmissionTimeout, "admission-timeout", o.AdmissionTimeout, "Time to decide on one pod; past it the pod is admitted unchanged. Keep it below --webhook-timeout-seconds.")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace-period", o.ShutdownGrace, "Time to finish in-flight requests on SIGTERM.")

	fs.BoolVar(&o.RegisterWebhook, "register-webhook", o.RegisterWebhook, "Create or update the MutatingWebhookConfiguration at start. Off by default: without it the process changes nothing in the admission chain.")
	fs.StringVar(&o.WebhookConfigName, "webhook-config-name", o.WebhookConfigName, "Name of the MutatingWebhookConfiguration to register.")
	fs.StringVar(&o.WebhookServiceName, "webhook-service-name", o.WebhookServiceName, "Service (in --namespace) the API server calls, in service mode.")
	fs.Int32Var(&o.WebhookServicePort, "webhook-service-port", o.WebhookServicePort, "Port of --webhook-service-name.")
	fs.StringVar(&o.WebhookURL, "webhook-url", o.WebhookURL, "https URL the API server calls (URL mode, e.g. a webhook outside the cluster); overrides service mode.")
	fs.StringVar(&o.WebhookCABundleFile, "webhook-ca-bundle-file", o.WebhookCABundleFile, "PEM CA bundle the API server uses to verify the webhook; required with --register-webhook.")
	fs.Int32Var(&o.WebhookTimeoutSeconds, "webhook-timeout-seconds", o.WebhookTimeoutSeconds, "Registered webhook timeout (1-30s).")
	fs.StringVar(&o.WebhookFailurePolicy, "webhook-failure-policy", o.WebhookFailurePolicy, "Registered failure policy: Ignore (pods are created unsized when the webhook is down) or Fail.")

	fs.StringVar(&o.HeartbeatLeaseName, "heartbeat-lease-name", o.HeartbeatLeaseName, "Lease (in --namespace) renewed while the webhook can size pods; the updater reads it. Empty disables the heartbeat.")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "How often the heartbeat Lease is renewed.")
	fs.DurationVar(&o.HeartbeatLeaseDuration, "heartbeat-lease-duration", o.HeartbeatLeaseDuration, "leaseDurationSeconds written to the Lease: how long a renewal counts.")
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
	if _, _, err := net.SplitHostPort(o.WebhookBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--webhook-bind-address %q: %w", o.WebhookBindAddress, err))
	}
	if !strings.HasPrefix(o.WebhookPath, "/") {
		errs = append(errs, fmt.Errorf("--webhook-path %q must start with /", o.WebhookPath))
	}
	if o.TLSCertFile == "" || o.TLSKeyFile == "" {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are required"))
	}
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace must not be empty"))
	}
	if o.MaxRequestBytes < 4096 {
		errs = append(errs, fmt.Errorf("--max-request-bytes %d is too small for any pod", o.MaxRequestBytes))
	}
	if o.AdmissionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--admission-timeout must be positive, got %s", o.AdmissionTimeout))
	}
	if o.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace-period must not be negative, got %s", o.ShutdownGrace))
	}
	if o.RegisterWebhook {
		if o.WebhookCABundleFile == "" {
			errs = append(errs, errors.New("--webhook-ca-bundle-file is required with --register-webhook"))
		}
		if o.WebhookURL != "" {
			if u, err := url.Parse(o.WebhookURL); err != nil || u.Scheme != "https" || u.Host == "" {
				errs = append(errs, fmt.Errorf("--webhook-url %q must be an https URL", o.WebhookURL))
			}
		} else if o.WebhookServiceName == "" {
			errs = append(errs, errors.New("--webhook-service-name or --webhook-url is required with --register-webhook"))
		}
		if o.WebhookTimeoutSeconds < 1 || o.WebhookTimeoutSeconds > 30 {
			errs = append(errs, fmt.Errorf("--webhook-timeout-seconds %d must be within 1..30", o.WebhookTimeoutSeconds))
		} else if o.AdmissionTimeout >= time.Duration(o.WebhookTimeoutSeconds)*time.Second {
			errs = append(errs, fmt.Errorf("--admission-timeout %s must be below --webhook-timeout-seconds %d so we answer before the API server gives up", o.AdmissionTimeout, o.WebhookTimeoutSeconds))
		}
		if o.WebhookFailurePolicy != "Ignore" && o.WebhookFailurePolicy != "Fail" {
			errs = append(errs, fmt.Errorf("--webhook-failure-policy %q must be Ignore or Fail", o.WebhookFailurePolicy))
		}
	}
	if o.HeartbeatLeaseName != "" && (o.HeartbeatInterval <= 0 || o.HeartbeatLeaseDuration <= o.HeartbeatInterval) {
		errs = append(errs, fmt.Errorf("--heartbeat-lease-duration %s must exceed a positive --heartbeat-interval %s", o.HeartbeatLeaseDuration, o.HeartbeatInterval))
	}
	return errors.Join(errs...)
}
