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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aware-k8s/aware/admission-controller/pkg/heartbeat"
	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/admission-controller/pkg/webhook"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/serve"
)

// Certificate modes (--cert-mode).
const (
	// CertModeFiles serves --tls-cert-file/--tls-private-key-file, e.g. a
	// Secret kept by cert-manager and mounted into the pod.
	CertModeFiles = "files"
	// CertModeSelfManaged generates a CA and a serving certificate, keeps
	// them in the Secret --cert-secret-name and rotates them.
	CertModeSelfManaged = "self-managed"
)

// clusterDomain is the DNS suffix of in-cluster Service names; other
// suffixes go in --cert-extra-sans.
const clusterDomain = "cluster.local"

// Options are the admission-controller's command-line options.
type Options struct {
	Kube      apiclient.Options
	Endpoints serve.Options

	// Namespace is where the admission controller runs; it is excluded
	// from the webhook and holds the heartbeat Lease and the self-managed
	// certificate Secret.
	Namespace string

	WebhookBindAddress string
	WebhookPath        string
	// CertMode is CertModeFiles, CertModeSelfManaged or empty: files when
	// a certificate file is given, else self-managed (EffectiveCertMode).
	CertMode    string
	TLSCertFile string
	TLSKeyFile  string

	// Self-managed certificates.
	CertSecretName         string
	CertExtraSANs          []string
	CAValidity             time.Duration
	CARenewBefore          time.Duration
	CAOverlap              time.Duration
	ServingCertValidity    time.Duration
	ServingCertRenewBefore time.Duration
	// CertCheckInterval is how often the Secret (self-managed) or the CA
	// bundle file (files mode, with registration) is re-read.
	CertCheckInterval time.Duration

	MaxRequestBytes  int64
	AdmissionTimeout time.Duration

	RegisterWebhook       bool
	WebhookConfigName     string
	WebhookServiceName    string
	WebhookServicePort    int32
	WebhookURL            string
	WebhookCABundleFile   string
	WebhookTimeoutSeconds int32
	WebhookFailurePolicy  string
	// WebhookNamespaceSelector is a label selector (kubectl syntax) that
	// further restricts the namespaces the registered webhook sees.
	WebhookNamespaceSelector string

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
		Kube:                   apiclient.Options{QPS: 50, Burst: 100},
		Endpoints:              endpointOptions(),
		Namespace:              ns,
		WebhookBindAddress:     ":8443",
		WebhookPath:            "/mutate-pods",
		CertSecretName:         "aware-admission-controller-certs",
		CAValidity:             10 * 365 * 24 * time.Hour,
		CARenewBefore:          365 * 24 * time.Hour,
		CAOverlap:              24 * time.Hour,
		ServingCertValidity:    90 * 24 * time.Hour,
		ServingCertRenewBefore: 30 * 24 * time.Hour,
		CertCheckInterval:      30 * time.Second,
		MaxRequestBytes:        webhook.DefaultMaxBodyBytes,
		AdmissionTimeout:       webhook.DefaultTimeout,
		WebhookConfigName:      register.DefaultConfigName,
		WebhookServiceName:     "aware-admission-controller",
		WebhookServicePort:     443,
		WebhookTimeoutSeconds:  3,
		WebhookFailurePolicy:   "Ignore",
		HeartbeatInterval:      10 * time.Second,
		HeartbeatLeaseDuration: 30 * time.Second,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Kube.AddFlags(fs)
	o.Endpoints.AddFlags(fs)
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace the admission controller runs in (default from $POD_NAMESPACE). It is excluded from the webhook and holds the heartbeat Lease and the self-managed certificate Secret.")

	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", o.WebhookBindAddress, "Address to serve the HTTPS admission webhook on (host:port).")
	fs.StringVar(&o.WebhookPath, "webhook-path", o.WebhookPath, "URL path of the pod mutation endpoint.")
	fs.StringVar(&o.CertMode, "cert-mode", o.CertMode, "Where the serving certificate comes from: \"files\" (--tls-cert-file, --tls-private-key-file; e.g. cert-manager) or \"self-managed\" (a CA and certificate generated, kept in the Secret --cert-secret-name in --namespace, and rotated). Default: files when a certificate file is given; otherwise one of the two must be chosen.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "Files mode: PEM serving certificate (chain) for the webhook. Re-read when it changes.")
	fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", o.TLSKeyFile, "Files mode: PEM private key matching --tls-cert-file. Re-read when it changes.")
	fs.StringVar(&o.CertSecretName, "cert-secret-name", o.CertSecretName, "Self-managed mode: Secret (in --namespace) holding the CA and serving certificate, shared by all replicas. Created if missing; an existing Secret is used only if labelled app.kubernetes.io/managed-by=aware-admission-controller.")
	fs.StringSliceVar(&o.CertExtraSANs, "cert-extra-sans", o.CertExtraSANs, "Self-managed mode: extra DNS names or IP addresses for the serving certificate, besides <service>.<namespace>.svc[.cluster.local] and the --webhook-url host (e.g. 127.0.0.1 for a webhook reached by URL).")
	fs.DurationVar(&o.CAValidity, "ca-validity", o.CAValidity, "Self-managed mode: lifetime of a generated CA.")
	fs.DurationVar(&o.CARenewBefore, "ca-renew-before", o.CARenewBefore, "Self-managed mode: a new CA is created when the current one has less than this left.")
	fs.DurationVar(&o.CAOverlap, "ca-overlap", o.CAOverlap, "Self-managed mode: after a new CA is published in the caBundle, the old CA keeps signing for this long, then stays trusted for as long again.")
	fs.DurationVar(&o.ServingCertValidity, "serving-cert-validity", o.ServingCertValidity, "Self-managed mode: lifetime of a serving certificate (never past its CA's).")
	fs.DurationVar(&o.ServingCertRenewBefore, "serving-cert-renew-before", o.ServingCertRenewBefore, "Self-managed mode: the serving certificate is re-issued when it has less than this left.")
	fs.DurationVar(&o.CertCheckInterval, "cert-check-interval", o.CertCheckInterval, "How often the certificate Secret (self-managed) or the CA bundle file (files mode with --register-webhook) is re-read to pick up renewals.")
	fs.Int64Var(&o.MaxRequestBytes, "max-request-bytes", o.MaxRequestBytes, "Largest AdmissionReview body accepted; larger ones are admitted unchanged.")
	fs.DurationVar(&o.AdmissionTimeout, "admission-timeout", o.AdmissionTimeout, "Time to decide on one pod; past it the pod is admitted unchanged. Keep it below --webhook-timeout-seconds.")

	fs.BoolVar(&o.RegisterWebhook, "register-webhook", o.RegisterWebhook, "Keep the MutatingWebhookConfiguration --webhook-config-name (shipped in deploy/) in line with this process: patch its webhook and CA bundle at start and when the CA changes (create it if missing, which needs RBAC create). Off by default: without it the process changes nothing in the admission chain.")
	fs.StringVar(&o.WebhookConfigName, "webhook-config-name", o.WebhookConfigName, "Name of the MutatingWebhookConfiguration to register.")
	fs.StringVar(&o.WebhookServiceName, "webhook-service-name", o.WebhookServiceName, "Service (in --namespace) the API server calls, in service mode.")
	fs.Int32Var(&o.WebhookServicePort, "webhook-service-port", o.WebhookServicePort, "Port of --webhook-service-name.")
	fs.StringVar(&o.WebhookURL, "webhook-url", o.WebhookURL, "https URL the API server calls (URL mode, e.g. a webhook outside the cluster); overrides service mode.")
	fs.StringVar(&o.WebhookCABundleFile, "webhook-ca-bundle-file", o.WebhookCABundleFile, "Files mode: PEM CA bundle the API server uses to verify the webhook; required with --register-webhook. Re-read every --cert-check-interval and re-registered when it changes. Self-managed mode registers its own CA bundle.")
	fs.Int32Var(&o.WebhookTimeoutSeconds, "webhook-timeout-seconds", o.WebhookTimeoutSeconds, "Registered webhook timeout (1-30s).")
	fs.StringVar(&o.WebhookNamespaceSelector, "webhook-namespace-selector", o.WebhookNamespaceSelector, "Label selector (e.g. \"autoscaling.aware.dev/enabled=true\" or \"kubernetes.io/metadata.name in (shop)\") that further restricts the namespaces whose pods reach the registered webhook. kube-system and --namespace stay excluded whatever it says. Empty, the default: every other namespace.")
	fs.StringVar(&o.WebhookFailurePolicy, "webhook-failure-policy", o.WebhookFailurePolicy, "Registered failure policy: Ignore (pods are created unsized when the webhook is down) or Fail.")

	fs.StringVar(&o.HeartbeatLeaseName, "heartbeat-lease-name", o.HeartbeatLeaseName, "Lease (in --namespace) renewed while the webhook can size pods; the updater evicts only while it is fresh, so set it (the updater expects \""+heartbeat.DefaultName+"\") wherever the updater runs. Empty, the default, writes nothing.")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "How often the heartbeat Lease is renewed.")
	fs.DurationVar(&o.HeartbeatLeaseDuration, "heartbeat-lease-duration", o.HeartbeatLeaseDuration, "leaseDurationSeconds written to the Lease: how long a renewal counts.")
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	errs := []error{o.Kube.Validate(), o.Endpoints.Validate()}
	if _, _, err := net.SplitHostPort(o.WebhookBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--webhook-bind-address %q: %w", o.WebhookBindAddress, err))
	}
	if !strings.HasPrefix(o.WebhookPath, "/") {
		errs = append(errs, fmt.Errorf("--webhook-path %q must start with /", o.WebhookPath))
	}
	switch o.EffectiveCertMode() {
	case CertModeFiles:
		if o.TLSCertFile == "" || o.TLSKeyFile == "" {
			errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are required with --cert-mode=files"))
		}
		if o.RegisterWebhook && o.WebhookCABundleFile == "" {
			errs = append(errs, errors.New("--webhook-ca-bundle-file is required with --register-webhook and --cert-mode=files"))
		}
	case CertModeSelfManaged:
		errs = append(errs, o.validateSelfManaged()...)
	case "":
		errs = append(errs, errors.New("no serving certificate: give --tls-cert-file and --tls-private-key-file, or --cert-mode=self-managed to generate one and keep it in the Secret --cert-secret-name"))
	default:
		errs = append(errs, fmt.Errorf("--cert-mode %q must be %s or %s", o.CertMode, CertModeFiles, CertModeSelfManaged))
	}
	if o.CertCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("--cert-check-interval must be positive, got %s", o.CertCheckInterval))
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
	if o.RegisterWebhook {
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
		if _, err := o.namespaceSelector(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.HeartbeatLeaseName != "" && (o.HeartbeatInterval <= 0 || o.HeartbeatLeaseDuration <= o.HeartbeatInterval) {
		errs = append(errs, fmt.Errorf("--heartbeat-lease-duration %s must exceed a positive --heartbeat-interval %s", o.HeartbeatLeaseDuration, o.HeartbeatInterval))
	}
	return errors.Join(errs...)
}

// namespaceSelector parses --webhook-namespace-selector; nil when unset.
func (o *Options) namespaceSelector() (*metav1.LabelSelector, error) {
	if strings.TrimSpace(o.WebhookNamespaceSelector) == "" {
		return nil, nil
	}
	sel, err := metav1.ParseToLabelSelector(o.WebhookNamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("--webhook-namespace-selector %q: %w", o.WebhookNamespaceSelector, err)
	}
	return sel, nil
}

// EffectiveCertMode resolves an empty --cert-mode: files when a
// certificate file is given, else none (""). Self-managed certificates
// write a Secret, so they are never chosen implicitly: started without
// such flags, the process changes nothing in the cluster.
func (o *Options) EffectiveCertMode() string {
	if o.CertMode != "" {
		return o.CertMode
	}
	if o.TLSCertFile != "" || o.TLSKeyFile != "" {
		return CertModeFiles
	}
	return ""
}

func (o *Options) validateSelfManaged() []error {
	var errs []error
	if o.TLSCertFile != "" || o.TLSKeyFile != "" {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are for --cert-mode=files"))
	}
	if o.WebhookCABundleFile != "" {
		errs = append(errs, errors.New("--webhook-ca-bundle-file is for --cert-mode=files: self-managed mode registers its own CA bundle"))
	}
	if o.CertSecretName == "" {
		errs = append(errs, errors.New("--cert-secret-name is required with --cert-mode=self-managed"))
	}
	for _, san := range o.CertExtraSANs {
		if net.ParseIP(san) == nil && len(validation.IsDNS1123Subdomain(san)) > 0 {
			errs = append(errs, fmt.Errorf("--cert-extra-sans %q is neither an IP address nor a DNS name", san))
		}
	}
	if dns, ips := o.ServingSANs(); len(dns) == 0 && len(ips) == 0 {
		errs = append(errs, errors.New("the serving certificate needs a name: set --webhook-service-name, --webhook-url or --cert-extra-sans"))
	}
	if o.ServingCertRenewBefore <= 0 || o.ServingCertValidity <= o.ServingCertRenewBefore {
		errs = append(errs, fmt.Errorf("--serving-cert-validity %s must exceed a positive --serving-cert-renew-before %s", o.ServingCertValidity, o.ServingCertRenewBefore))
	}
	if o.CAOverlap <= o.CertCheckInterval {
		errs = append(errs, fmt.Errorf("--ca-overlap %s must exceed --cert-check-interval %s so every replica sees a new CA before it signs", o.CAOverlap, o.CertCheckInterval))
	}
	if o.CARenewBefore <= o.ServingCertRenewBefore+2*o.CAOverlap {
		errs = append(errs, fmt.Errorf("--ca-renew-before %s must exceed --serving-cert-renew-before %s plus twice --ca-overlap %s", o.CARenewBefore, o.ServingCertRenewBefore, o.CAOverlap))
	}
	if o.CAValidity <= o.CARenewBefore+2*o.CAOverlap {
		errs = append(errs, fmt.Errorf("--ca-validity %s must exceed --ca-renew-before %s plus twice --ca-overlap %s", o.CAValidity, o.CARenewBefore, o.CAOverlap))
	}
	return errs
}

// ServingSANs returns the self-managed serving certificate's names: the
// Service's in-cluster names, the --webhook-url host, and
// --cert-extra-sans, without duplicates.
func (o *Options) ServingSANs() (dnsNames []string, ips []net.IP) {
	var names []string
	if o.WebhookServiceName != "" {
		svc := o.WebhookServiceName + "." + o.Namespace + ".svc"
		names = append(names, svc, svc+"."+clusterDomain)
	}
	if u, err := url.Parse(o.WebhookURL); err == nil && u.Hostname() != "" {
		names = append(names, u.Hostname())
	}
	names = append(names, o.CertExtraSANs...)
	seen := map[string]bool{}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			n = ip.String()
			if !seen[n] {
				ips = append(ips, ip)
			}
		} else if !seen[n] {
			dnsNames = append(dnsNames, n)
		}
		seen[n] = true
	}
	return dnsNames, ips
}

// endpointOptions are serve's defaults with a longer drain: the API server
// retries a webhook call cut off by a rollout, but each retry delays a pod.
func endpointOptions() serve.Options {
	o := serve.NewOptions()
	o.ShutdownGracePeriod = 15 * time.Second
	return o
}
