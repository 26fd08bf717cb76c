package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/pkg/kube/certs"
)

// Registration timing: the registration is re-applied (a read, and a
// write only when it differs) every registrationResync and, after a
// failure, registrationRetry later.
const (
	registrationResync = 10 * time.Minute
	registrationRetry  = 10 * time.Second
)

// certSource is where the serving certificate and the CA bundle to
// register come from.
type certSource struct {
	getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// bundle is nil in files mode without registration: nothing reads it.
	bundle register.BundleSource
	// run keeps the certificates current until ctx ends; nil when the
	// certificate reloads itself during handshakes and nothing else is
	// watched.
	run func(ctx context.Context)
}

// newCertSource loads the certificates of o's mode and fails if there are
// none to serve: files that do not load, or a Secret that cannot be read,
// created or used.
func newCertSource(ctx context.Context, o *Options, secrets corev1client.SecretsGetter, clk clock.WithTicker) (*certSource, error) {
	logger := klog.FromContext(ctx).WithName("certs")
	ctx = klog.NewContext(ctx, logger)
	switch mode := o.EffectiveCertMode(); mode {
	case CertModeFiles:
		reloader, err := certs.NewFileReloader(o.TLSCertFile, o.TLSKeyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		src := &certSource{getCertificate: reloader.GetCertificate}
		if o.RegisterWebhook {
			w, err := certs.NewBundleWatcher(o.WebhookCABundleFile, o.CertCheckInterval, clk)
			if err != nil {
				return nil, fmt.Errorf("webhook CA bundle: %w", err)
			}
			src.bundle, src.run = w, w.Run
		}
		logger.Info("Serving the certificate from files", "certFile", o.TLSCertFile)
		return src, nil
	case CertModeSelfManaged:
		dnsNames, ips := o.ServingSANs()
		m, err := certs.NewSelfManaged(certs.SelfManagedConfig{
			Client: secrets, Namespace: o.Namespace, Name: o.CertSecretName,
			DNSNames: dnsNames, IPs: ips,
			CAValidity: o.CAValidity, CARenewBefore: o.CARenewBefore, CAOverlap: o.CAOverlap,
			ServingValidity: o.ServingCertValidity, ServingRenewBefore: o.ServingCertRenewBefore,
			CheckInterval: o.CertCheckInterval, Clock: clk,
		})
		if err != nil {
			return nil, err
		}
		if err := m.Start(ctx); err != nil {
			return nil, fmt.Errorf("self-managed certificates: %w", err)
		}
		logger.Info("Serving a self-managed certificate", "secret", klog.KRef(o.Namespace, o.CertSecretName), "dnsNames", dnsNames, "ips", ips)
		return &certSource{getCertificate: m.GetCertificate, bundle: m, run: m.Run}, nil
	default:
		return nil, fmt.Errorf("unknown --cert-mode %q", mode)
	}
}

// newRegistrar returns the registration of o, following bundle.
func newRegistrar(o *Options, client admissionclient.MutatingWebhookConfigurationInterface, bundle register.BundleSource, clk clock.WithTicker) (*register.Registrar, error) {
	rc, err := o.Registration()
	if err != nil {
		return nil, err
	}
	probe := rc
	probe.CABundle = bundle.CABundle()
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("webhook registration: %w", err)
	}
	return &register.Registrar{
		Client: client, Config: rc, Source: bundle, Clock: clk,
		Resync: registrationResync, RetryInterval: registrationRetry,
	}, nil
}

// Registration is the MutatingWebhookConfiguration o registers, without
// its caBundle (which follows the certificates).
func (o *Options) Registration() (register.Config, error) {
	rc := register.Config{
		Name:               o.WebhookConfigName,
		URL:                o.WebhookURL,
		FailurePolicy:      admissionregistrationv1.FailurePolicyType(o.WebhookFailurePolicy),
		TimeoutSeconds:     o.WebhookTimeoutSeconds,
		ExcludedNamespaces: []string{"kube-system", o.Namespace},
	}
	sel, err := o.namespaceSelector()
	if err != nil {
		return register.Config{}, err
	}
	rc.NamespaceSelector = sel
	if o.WebhookURL == "" {
		rc.Service = &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: o.WebhookServiceName, Path: ptr.To(o.WebhookPath), Port: ptr.To(o.WebhookServicePort)}
	}
	return rc, nil
}
