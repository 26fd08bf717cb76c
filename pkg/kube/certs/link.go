package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Modes of a mutual-TLS link (LinkOptions.Mode).
const (
	// LinkModeFiles reads the certificate, its key and the CA bundle that
	// verifies the peer from files (e.g. a Secret kept by cert-manager),
	// re-reading them when they change.
	LinkModeFiles = "files"
	// LinkModeSelfManaged shares a CA through a Secret: whichever side
	// starts first creates it, each side issues its own certificate into
	// it and renews it, and the CA is rotated with an overlap.
	LinkModeSelfManaged = "self-managed"
	// LinkModePlaintext turns TLS off. Anyone who reaches the port can
	// call the agent: only for a loopback address or a trusted network.
	LinkModePlaintext = "plaintext"

	// LinkManagedBy labels the Secret of a self-managed link.
	LinkManagedBy = "aware-agent-link"
)

// LinkRole is the side of a link: the server authenticates to clients by
// DNS name, a client to the server by identity.
type LinkRole int

const (
	LinkServer LinkRole = iota
	LinkClient
)

// LinkOptions configure one side of the mutual-TLS link between the
// recommender and the rl-agent. Both sides take the same flags, under
// their own prefix.
type LinkOptions struct {
	prefix string
	role   LinkRole

	// Mode is one of the LinkMode constants, or empty: files when a
	// certificate file is given; otherwise Validate fails.
	Mode     string
	CertFile string
	KeyFile  string
	CAFile   string

	SecretName      string
	SecretNamespace string
	// Identity is the common name of the self-managed certificate, the
	// identity the server authorises a client by.
	Identity string
	// ServerNames are the DNS names and IPs of the server's self-managed
	// certificate (server side).
	ServerNames []string
	// ServerName overrides the name the client verifies the server's
	// certificate against (client side); empty: the dialled host.
	ServerName string
	// CheckInterval is how often the CA bundle file or the Secret is
	// re-read.
	CheckInterval time.Duration

	// Lifetimes of self-managed certificates (not flags).
	CAValidity, CARenewBefore, CAOverlap time.Duration
	CertValidity, CertRenewBefore        time.Duration
}

// NewLinkOptions returns the defaults of one side of the link, whose flags
// are named prefix+"mode", prefix+"cert-file" and so on.
func NewLinkOptions(prefix string, role LinkRole, identity string, serverNames []string) LinkOptions {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "aware-system"
	}
	return LinkOptions{
		prefix: prefix, role: role,
		SecretName:      "aware-rl-agent-tls",
		SecretNamespace: ns,
		Identity:        identity,
		ServerNames:     serverNames,
		CheckInterval:   30 * time.Second,
		CAValidity:      10 * 365 * 24 * time.Hour,
		CARenewBefore:   365 * 24 * time.Hour,
		CAOverlap:       24 * time.Hour,
		CertValidity:    90 * 24 * time.Hour,
		CertRenewBefore: 30 * 24 * time.Hour,
	}
}

func (o *LinkOptions) flag(name string) string { return "--" + o.prefix + name }

// AddFlags binds the options to fs.
func (o *LinkOptions) AddFlags(fs *pflag.FlagSet) {
	peer := "the recommender"
	if o.role == LinkClient {
		peer = "the rl-agent"
	}
	fs.StringVar(&o.Mode, o.prefix+"mode", o.Mode, fmt.Sprintf("Mutual TLS with %s: %q (%s, %s and %s), %q (a CA shared with %s through the Secret %s, created if missing; each side issues and renews its own certificate) or %q (no TLS and no authentication: anyone who reaches the port may call; logged as a warning). Default: files when a certificate file is given; otherwise one must be chosen.",
		peer, LinkModeFiles, o.flag("cert-file"), o.flag("key-file"), o.flag("ca-file"), LinkModeSelfManaged, peer, o.flag("secret-name"), LinkModePlaintext))
	fs.StringVar(&o.CertFile, o.prefix+"cert-file", o.CertFile, "Files mode: PEM certificate (chain) presented to "+peer+". Re-read when it changes.")
	fs.StringVar(&o.KeyFile, o.prefix+"key-file", o.KeyFile, "Files mode: PEM private key of "+o.flag("cert-file")+".")
	fs.StringVar(&o.CAFile, o.prefix+"ca-file", o.CAFile, "Files mode: PEM CA bundle that verifies "+peer+"'s certificate. Re-read every "+o.flag("check-interval")+".")
	fs.StringVar(&o.SecretName, o.prefix+"secret-name", o.SecretName, "Self-managed mode: Secret holding the link's CA and both sides' certificates. An existing Secret is used only if labelled "+ManagedByLabel+"="+LinkManagedBy+".")
	fs.StringVar(&o.SecretNamespace, o.prefix+"secret-namespace", o.SecretNamespace, "Self-managed mode: namespace of "+o.flag("secret-name")+" (default from $POD_NAMESPACE).")
	fs.StringVar(&o.Identity, o.prefix+"identity", o.Identity, "Self-managed mode: common name of this side's certificate; the rl-agent authorises callers by it.")
	if o.role == LinkServer {
		fs.StringSliceVar(&o.ServerNames, o.prefix+"server-names", o.ServerNames, "Self-managed mode: DNS names and IP addresses the recommender reaches the rl-agent by (the certificate's SANs).")
	} else {
		fs.StringVar(&o.ServerName, o.prefix+"server-name", o.ServerName, "Name the rl-agent's certificate must carry; empty: the host of the endpoint.")
	}
	fs.DurationVar(&o.CheckInterval, o.prefix+"check-interval", o.CheckInterval, "How often the CA bundle file (files mode) or the Secret (self-managed mode) is re-read to pick up renewals and CA rotations.")
}

// EffectiveMode resolves an empty Mode: files when a certificate file is
// given, else "" (none chosen). Plaintext is never implied.
func (o *LinkOptions) EffectiveMode() string {
	if o.Mode != "" {
		return o.Mode
	}
	if o.CertFile != "" || o.KeyFile != "" || o.CAFile != "" {
		return LinkModeFiles
	}
	return ""
}

// Validate reports every invalid option at once.
func (o *LinkOptions) Validate() error {
	var errs []error
	switch o.EffectiveMode() {
	case LinkModeFiles:
		if o.CertFile == "" || o.KeyFile == "" || o.CAFile == "" {
			errs = append(errs, fmt.Errorf("%s, %s and %s are required in files mode", o.flag("cert-file"), o.flag("key-file"), o.flag("ca-file")))
		}
	case LinkModeSelfManaged:
		if o.CertFile != "" || o.KeyFile != "" || o.CAFile != "" {
			errs = append(errs, fmt.Errorf("%s, %s and %s are for files mode", o.flag("cert-file"), o.flag("key-file"), o.flag("ca-file")))
		}
		if o.SecretName == "" || o.SecretNamespace == "" {
			errs = append(errs, fmt.Errorf("%s and %s are required in self-managed mode", o.flag("secret-name"), o.flag("secret-namespace")))
		}
		if msgs := validation.IsDNS1123Subdomain(o.Identity); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q must be a DNS-1123 name (it also names the Secret's keys): %v", o.flag("identity"), o.Identity, msgs))
		}
		if o.role == LinkServer {
			if len(o.ServerNames) == 0 {
				errs = append(errs, fmt.Errorf("%s must name at least one DNS name or IP address", o.flag("server-names")))
			}
			for _, n := range o.ServerNames {
				if net.ParseIP(n) == nil && len(validation.IsDNS1123Subdomain(n)) > 0 {
					errs = append(errs, fmt.Errorf("%s %q is neither an IP address nor a DNS name", o.flag("server-names"), n))
				}
			}
		}
	case LinkModePlaintext:
	case "":
		errs = append(errs, fmt.Errorf("no TLS for the agent link: give %s, %s and %s, or %s=%s, or %s=%s to go without TLS (insecure)",
			o.flag("cert-file"), o.flag("key-file"), o.flag("ca-file"), o.flag("mode"), LinkModeSelfManaged, o.flag("mode"), LinkModePlaintext))
	default:
		errs = append(errs, fmt.Errorf("%s %q must be %s, %s or %s", o.flag("mode"), o.Mode, LinkModeFiles, LinkModeSelfManaged, LinkModePlaintext))
	}
	if o.CheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive, got %s", o.flag("check-interval"), o.CheckInterval))
	}
	return errors.Join(errs...)
}

// NeedsSecrets reports whether Open needs a Secrets client.
func (o *LinkOptions) NeedsSecrets() bool { return o.EffectiveMode() == LinkModeSelfManaged }

// Link is one side's certificates: its own, and the CA bundle that
// verifies the peer. Run keeps them current.
type Link struct {
	getCert   func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	getClient func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	trust     Bundle
	run       func(context.Context)
	// serverName is the client's override (LinkOptions.ServerName).
	serverName string
}

// Open loads the certificates of o's mode; nil in plaintext mode.
// secrets is used in self-managed mode only.
func (o *LinkOptions) Open(ctx context.Context, secrets corev1client.SecretsGetter, clk clock.WithTicker) (*Link, error) {
	logger := klog.FromContext(ctx).WithName("agent-link")
	ctx = klog.NewContext(ctx, logger)
	l := &Link{serverName: o.ServerName}
	switch mode := o.EffectiveMode(); mode {
	case LinkModePlaintext:
		return nil, nil
	case LinkModeFiles:
		r, err := NewFileReloader(o.CertFile, o.KeyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("agent link certificate: %w", err)
		}
		w, err := NewBundleWatcher(o.CAFile, o.CheckInterval, clk)
		if err != nil {
			return nil, fmt.Errorf("agent link CA bundle: %w", err)
		}
		l.getCert, l.getClient, l.trust, l.run = r.GetCertificate, r.GetClientCertificate, w, w.Run
		logger.Info("Agent link: mutual TLS from files", "certFile", o.CertFile, "caFile", o.CAFile)
	case LinkModeSelfManaged:
		if secrets == nil {
			return nil, errors.New("self-managed agent link certificates need a Kubernetes client")
		}
		cfg := SelfManagedConfig{
			Client: secrets, Namespace: o.SecretNamespace, Name: o.SecretName,
			CommonName: o.Identity,
			CertKey:    o.Identity + ".crt", KeyKey: o.Identity + ".key",
			ManagedBy: LinkManagedBy, CACommonName: "aware-agent-link-ca",
			CAValidity: o.CAValidity, CARenewBefore: o.CARenewBefore, CAOverlap: o.CAOverlap,
			ServingValidity: o.CertValidity, ServingRenewBefore: o.CertRenewBefore,
			CheckInterval: o.CheckInterval, Clock: clk,
		}
		if o.role == LinkServer {
			cfg.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			for _, n := range o.ServerNames {
				if ip := net.ParseIP(n); ip != nil {
					cfg.IPs = append(cfg.IPs, ip)
				} else {
					cfg.DNSNames = append(cfg.DNSNames, n)
				}
			}
		} else {
			cfg.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}
		m, err := NewSelfManaged(cfg)
		if err != nil {
			return nil, err
		}
		if err := m.Start(ctx); err != nil {
			return nil, fmt.Errorf("self-managed agent link certificates: %w", err)
		}
		l.getCert, l.getClient, l.trust, l.run = m.GetCertificate, m.GetClientCertificate, m, m.Run
		logger.Info("Agent link: mutual TLS with a self-managed CA", "secret", klog.KRef(o.SecretNamespace, o.SecretName), "identity", o.Identity)
	default:
		return nil, fmt.Errorf("unknown agent link mode %q", mode)
	}
	return l, nil
}

// ServerConfig is the server side's TLS configuration: client
// certificates are required and verified.
func (l *Link) ServerConfig() *tls.Config { return MutualServerConfig(l.getCert, l.trust) }

// ClientConfig is the client side's TLS configuration for a server
// dialled as host: its certificate must carry that name, or
// LinkOptions.ServerName when set.
func (l *Link) ClientConfig(host string) *tls.Config {
	name := l.serverName
	if name == "" {
		name = host
	}
	return MutualClientConfig(l.getClient, l.trust, name)
}

// Run keeps the certificates and the CA bundle current until ctx ends.
func (l *Link) Run(ctx context.Context) { l.run(ctx) }
