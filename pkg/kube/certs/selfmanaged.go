package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Layout of the self-managed certificate Secret.
const (
	// SecretCABundleKey holds the PEM CA bundle clients must trust: the
	// current CA first and, during a CA rotation, the previous one. It is
	// the key cert-manager uses, so the Secret can also feed cainjector or
	// a mounted --webhook-ca-bundle-file.
	SecretCABundleKey = "ca.crt"
	// SecretCAKeyKey holds the current CA's private key.
	SecretCAKeyKey = "ca.key"
	// SecretPreviousCAKeyKey holds the previous CA's private key, only
	// while a CA rotation is in progress.
	SecretPreviousCAKeyKey = "ca-previous.key"
	// ManagedByLabel, set to SelfManagedConfig.ManagedBy (ManagedByValue
	// by default), marks a Secret whose contents SelfManaged may replace.
	// A Secret without it is never written.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "aware-admission-controller"

	defaultCACommonName = "aware-admission-controller-ca"
)

// SelfManagedConfig configures SelfManaged.
//
// CA rotation runs in three phases, timed from the new CA's creation, so
// that no client ever sees a serving certificate it cannot verify:
//
//  1. when the current CA has less than CARenewBefore left, a new CA is
//     created and published in the bundle next to the old one, while the
//     serving certificate stays signed by the old CA;
//  2. after CAOverlap the serving certificate is re-issued by the new CA;
//     the bundle still holds both;
//  3. after 2×CAOverlap (or when the old CA expires) the old CA leaves the
//     bundle.
//
// CAOverlap must therefore exceed the time every replica and the API
// server need to see a new bundle (CheckInterval plus the registration).
type SelfManagedConfig struct {
	Client    corev1client.SecretsGetter
	Namespace string
	Name      string

	// DNSNames and IPs are the serving certificate's SANs.
	DNSNames []string
	IPs      []net.IP
	// CommonName and Usages describe the certificate further (Leaf);
	// zero values: the first DNS name, server authentication only. A
	// certificate for client authentication only needs no SAN.
	CommonName string
	Usages     []x509.ExtKeyUsage

	// CertKey and KeyKey are the Secret's keys of this certificate; empty:
	// tls.crt and tls.key (a kubernetes.io/tls Secret). Components that
	// share one Secret, and so one CA, each keep their own certificate
	// under their own keys (an Opaque Secret); each re-issues only its own.
	CertKey, KeyKey string
	// ManagedBy is the value of ManagedByLabel the Secret must carry;
	// empty: ManagedByValue. CACommonName names generated CAs; empty: the
	// admission controller's.
	ManagedBy    string
	CACommonName string

	CAValidity         time.Duration
	CARenewBefore      time.Duration
	CAOverlap          time.Duration
	ServingValidity    time.Duration
	ServingRenewBefore time.Duration
	// CheckInterval is how often the Secret is re-read: to renew what is
	// due and to pick up what another replica wrote.
	CheckInterval time.Duration
	Clock         clock.WithTicker
}

// Validate reports every inconsistency at once.
func (c *SelfManagedConfig) Validate() error {
	var errs []error
	if c.Client == nil || c.Clock == nil {
		errs = append(errs, errors.New("a Secrets client and a clock are required"))
	}
	if c.Namespace == "" || c.Name == "" {
		errs = append(errs, errors.New("the Secret's namespace and name are required"))
	}
	if len(c.DNSNames) == 0 && len(c.IPs) == 0 && c.leaf().serves() {
		errs = append(errs, errors.New("the serving certificate needs at least one DNS name or IP"))
	}
	if (c.CertKey == "") != (c.KeyKey == "") || (c.CertKey != "" && c.CertKey == c.KeyKey) {
		errs = append(errs, fmt.Errorf("the certificate's Secret keys %q and %q must both be set, and differ, or both be empty", c.CertKey, c.KeyKey))
	}
	for _, k := range []string{c.CertKey, c.KeyKey} {
		if k == SecretCABundleKey || k == SecretCAKeyKey || k == SecretPreviousCAKeyKey {
			errs = append(errs, fmt.Errorf("the certificate's Secret key %q is the CA's", k))
		}
	}
	if c.CheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("check interval %s must be positive", c.CheckInterval))
	}
	if c.ServingRenewBefore <= 0 || c.ServingValidity <= c.ServingRenewBefore {
		errs = append(errs, fmt.Errorf("serving certificate validity %s must exceed a positive renew-before %s", c.ServingValidity, c.ServingRenewBefore))
	}
	if c.CAOverlap <= c.CheckInterval {
		errs = append(errs, fmt.Errorf("CA overlap %s must exceed the check interval %s so every replica sees a new CA before it signs", c.CAOverlap, c.CheckInterval))
	}
	// The old CA must outlive the overlap and still sign serving
	// certificates that need no immediate renewal.
	if c.CARenewBefore <= c.ServingRenewBefore+2*c.CAOverlap {
		errs = append(errs, fmt.Errorf("CA renew-before %s must exceed serving renew-before %s plus twice the CA overlap %s", c.CARenewBefore, c.ServingRenewBefore, c.CAOverlap))
	}
	// A new CA must not be due for rotation before its own rotation ends.
	if c.CAValidity <= c.CARenewBefore+2*c.CAOverlap {
		errs = append(errs, fmt.Errorf("CA validity %s must exceed CA renew-before %s plus twice the CA overlap %s", c.CAValidity, c.CARenewBefore, c.CAOverlap))
	}
	return errors.Join(errs...)
}

// leaf is the certificate the configuration issues.
func (c *SelfManagedConfig) leaf() Leaf {
	return Leaf{CommonName: c.CommonName, DNSNames: c.DNSNames, IPs: c.IPs, Usages: c.Usages}
}

// keys returns the Secret keys of the certificate and its key.
func (c *SelfManagedConfig) keys() (certKey, keyKey string) {
	if c.CertKey == "" {
		return corev1.TLSCertKey, corev1.TLSPrivateKeyKey
	}
	return c.CertKey, c.KeyKey
}

func (c *SelfManagedConfig) managedBy() string {
	if c.ManagedBy == "" {
		return ManagedByValue
	}
	return c.ManagedBy
}

// serves reports whether the certificate authenticates a server.
func (l Leaf) serves() bool { return slices.Contains(l.usages(), x509.ExtKeyUsageServerAuth) }

// SelfManaged keeps a CA and a serving certificate in a Secret, shared by
// every replica, and serves the certificate found there.
//
// Every sync reads the Secret and writes it only when something is due,
// with the resourceVersion it read: when two replicas race, one write
// wins and the other re-reads and uses what the winner wrote, so all
// replicas converge on one CA. A missing Secret is created; on
// AlreadyExists the winner's Secret is loaded.
//
// Contents that cannot be used are regenerated, not fatal, as long as the
// Secret carries ManagedByLabel: an unusable CA is replaced by a new one
// (logged as an error, since the webhook's caBundle changes), an unusable
// serving pair is re-issued by the existing CA. A Secret of that name
// without the label is never overwritten: syncing fails, naming it.
type SelfManaged struct {
	cfg SelfManagedConfig

	cert    atomic.Pointer[tls.Certificate]
	mu      sync.Mutex // serialises adopt and guards bundle
	bundle  []byte
	changed chan struct{}
}

// NewSelfManaged validates cfg. Start loads or creates the certificates.
func NewSelfManaged(cfg SelfManagedConfig) (*SelfManaged, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("self-managed certificates: %w", err)
	}
	return &SelfManaged{cfg: cfg, changed: make(chan struct{}, 1)}, nil
}

var (
	_ Bundle = (*SelfManaged)(nil)
	_ Bundle = (*BundleWatcher)(nil)
)

// Start performs the first sync: afterwards a certificate is served.
func (m *SelfManaged) Start(ctx context.Context) error {
	return m.Sync(ctx)
}

// Run re-syncs every CheckInterval until ctx ends. A failed sync is
// logged and keeps the current certificate.
func (m *SelfManaged) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	t := m.cfg.Clock.NewTicker(m.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := m.Sync(ctx); err != nil {
				logger.Error(err, "Syncing self-managed certificates; keeping the current ones")
			}
		}
	}
}

// GetCertificate is for tls.Config.GetCertificate.
func (m *SelfManaged) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := m.cert.Load()
	if c == nil {
		return nil, errors.New("no serving certificate loaded yet")
	}
	return c, nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate: the
// certificate is presented to a mutual-TLS server.
func (m *SelfManaged) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return m.GetCertificate(nil)
}

// Current returns the certificate now served, nil before Start.
func (m *SelfManaged) Current() *tls.Certificate { return m.cert.Load() }

// CABundle returns the PEM CA bundle clients must trust now.
func (m *SelfManaged) CABundle() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.bundle)
}

// Changed receives a value after the CA bundle changed. It is meant for a
// single consumer; notifications that are not yet received coalesce.
func (m *SelfManaged) Changed() <-chan struct{} { return m.changed }

// Sync reads the Secret, creates or updates it when something is missing
// or due, retrying on conflicts, and serves the result.
func (m *SelfManaged) Sync(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("secret", klog.KRef(m.cfg.Namespace, m.cfg.Name))
	var st *state
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		var err error
		st, err = m.syncOnce(ctx, logger)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			logger.V(2).Info("Another replica wrote the certificate Secret first; re-reading it", "err", err)
		}
		return err
	})
	if err != nil {
		return err
	}
	m.adopt(logger, st)
	return nil
}

func (m *SelfManaged) syncOnce(ctx context.Context, logger klog.Logger) (*state, error) {
	secrets := m.cfg.Client.Secrets(m.cfg.Namespace)
	now := m.cfg.Clock.Now()
	sec, err := secrets.Get(ctx, m.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		st, _, err := m.plan(now, &state{})
		if err != nil {
			return nil, err
		}
		typ := corev1.SecretTypeTLS
		if m.cfg.CertKey != "" {
			typ = corev1.SecretTypeOpaque
		}
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.cfg.Namespace, Name: m.cfg.Name, Labels: map[string]string{ManagedByLabel: m.cfg.managedBy()}},
			Type:       typ,
			Data:       st.data(m.cfg.keys()),
		}
		if _, err := secrets.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create Secret %s/%s: %w", m.cfg.Namespace, m.cfg.Name, err)
		}
		logger.Info("Created the certificate Secret with a new CA", "caSerial", st.ca.Cert.SerialNumber, "caNotAfter", st.ca.Cert.NotAfter)
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Secret %s/%s: %w", m.cfg.Namespace, m.cfg.Name, err)
	}
	if sec.Labels[ManagedByLabel] != m.cfg.managedBy() {
		return nil, fmt.Errorf("secret %s/%s exists without the label %s=%s: refusing to replace certificates this controller does not manage (delete the Secret, choose another Secret name, or use certificate files)",
			m.cfg.Namespace, m.cfg.Name, ManagedByLabel, m.cfg.managedBy())
	}
	certKey, keyKey := m.cfg.keys()
	cur, caErr := decode(sec.Data, certKey, keyKey)
	if caErr != nil {
		logger.Error(caErr, "The certificate Secret holds no usable CA; generating a new CA, which changes the webhook's caBundle")
	}
	next, reasons, err := m.plan(now, cur)
	if err != nil {
		return nil, err
	}
	if len(reasons) == 0 {
		return cur, nil
	}
	upd := sec.DeepCopy()
	if upd.Data == nil {
		upd.Data = map[string][]byte{}
	}
	delete(upd.Data, SecretPreviousCAKeyKey)
	for k, v := range next.data(m.cfg.keys()) {
		upd.Data[k] = v
	}
	if _, err := secrets.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("update Secret %s/%s: %w", m.cfg.Namespace, m.cfg.Name, err)
	}
	logger.Info("Updated the certificate Secret", "reasons", reasons, "caSerial", next.ca.Cert.SerialNumber, "servingSerial", next.serving.Leaf.SerialNumber, "servingNotAfter", next.serving.Leaf.NotAfter)
	return next, nil
}

// adopt serves st: its serving pair from the next handshake on, and its
// CA bundle, announced on Changed when it differs.
func (m *SelfManaged) adopt(logger klog.Logger, st *state) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.cert.Load(); old == nil || !bytes.Equal(old.Certificate[0], st.serving.Certificate[0]) {
		m.cert.Store(st.serving)
		logger.Info("Serving certificate loaded", "serial", st.serving.Leaf.SerialNumber, "notAfter", st.serving.Leaf.NotAfter, "issuer", st.serving.Leaf.Issuer.String())
	}
	bundle := st.bundle()
	if bytes.Equal(bundle, m.bundle) {
		return
	}
	m.bundle = bundle
	logger.Info("CA bundle loaded", "cas", st.caCount())
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// state is the Secret's contents, parsed. Fields are nil when missing or
// unusable.
type state struct {
	ca, prev                      *CA
	servingCertPEM, servingKeyPEM []byte
	serving                       *tls.Certificate
	// unusable says what decode dropped that the Secret still holds, so
	// that plan rewrites it.
	unusable []string
}

func (s *state) caCount() int {
	if s.prev != nil {
		return 2
	}
	return 1
}

func (s *state) bundle() []byte {
	b := bytes.Clone(s.ca.CertPEM)
	if s.prev != nil {
		b = append(b, s.prev.CertPEM...)
	}
	return b
}

// data is the Secret's data for s, the certificate under certKey and
// keyKey.
func (s *state) data(certKey, keyKey string) map[string][]byte {
	d := map[string][]byte{
		SecretCABundleKey: s.bundle(),
		SecretCAKeyKey:    s.ca.KeyPEM,
		certKey:           s.servingCertPEM,
		keyKey:            s.servingKeyPEM,
	}
	if s.prev != nil {
		d[SecretPreviousCAKeyKey] = s.prev.KeyPEM
	}
	return d
}

// decode parses the Secret's data. It returns an error only when there is
// no usable current CA; an unusable previous CA or serving pair is left
// nil and replaced by plan.
func decode(data map[string][]byte, certKey, keyKey string) (*state, error) {
	st := &state{}
	if pair, err := tls.X509KeyPair(data[certKey], data[keyKey]); err == nil && pair.Leaf != nil {
		st.serving = &pair
		st.servingCertPEM, st.servingKeyPEM = data[certKey], data[keyKey]
	}
	blocks, err := certBlocks(data[SecretCABundleKey])
	if err != nil {
		return st, fmt.Errorf("%s: %w", SecretCABundleKey, err)
	}
	if len(blocks) > 2 {
		return st, fmt.Errorf("%s holds %d certificates, at most 2 expected", SecretCABundleKey, len(blocks))
	}
	if st.ca, err = LoadCA(pem.EncodeToMemory(blocks[0]), data[SecretCAKeyKey]); err != nil {
		return st, fmt.Errorf("current CA (%s, %s): %w", SecretCABundleKey, SecretCAKeyKey, err)
	}
	if len(blocks) == 2 {
		// An unusable previous CA is dropped and the Secret rewritten;
		// a serving certificate it signed is re-issued by the current CA.
		if st.prev, err = LoadCA(pem.EncodeToMemory(blocks[1]), data[SecretPreviousCAKeyKey]); err != nil {
			st.unusable = append(st.unusable, "previous CA unusable: "+err.Error())
		}
	}
	return st, nil
}

// certBlocks splits PEM into its CERTIFICATE blocks and fails on anything
// else or on nothing.
func certBlocks(b []byte) ([]*pem.Block, error) {
	var out []*pem.Block
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("unexpected PEM block %q", blk.Type)
		}
		out = append(out, blk)
	}
	if len(bytes.TrimSpace(b)) != 0 {
		return nil, errors.New("trailing data after the PEM certificates")
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// plan returns the state the Secret should hold at now, and why it
// differs from cur (no reasons: keep cur).
func (m *SelfManaged) plan(now time.Time, cur *state) (*state, []string, error) {
	next := *cur
	next.unusable = nil
	reasons := slices.Clone(cur.unusable)
	newCA := func(why string) error {
		// A distinct name per CA keeps the old and new CA apart in the
		// bundle, in logs and in tools.
		name := m.cfg.CACommonName
		if name == "" {
			name = defaultCACommonName
		}
		ca, err := NewCA(fmt.Sprintf("%s@%d", name, now.Unix()), now, m.cfg.CAValidity)
		if err != nil {
			return err
		}
		next.ca = ca
		reasons = append(reasons, why)
		return nil
	}
	switch {
	case next.ca == nil:
		next.prev = nil
		if err := newCA("no usable CA"); err != nil {
			return nil, nil, err
		}
	case !now.Before(next.ca.Cert.NotAfter):
		// Too late for an overlap: nothing can still be verified by it.
		next.prev = nil
		if err := newCA("CA expired at " + next.ca.Cert.NotAfter.UTC().Format(time.RFC3339)); err != nil {
			return nil, nil, err
		}
	}
	if next.prev != nil && (!now.Before(created(next.ca.Cert).Add(2*m.cfg.CAOverlap)) || !now.Before(next.prev.Cert.NotAfter)) {
		next.prev = nil
		reasons = append(reasons, "previous CA retired after the overlap")
	}
	if next.prev == nil && next.ca.Cert.NotAfter.Sub(now) < m.cfg.CARenewBefore {
		next.prev = next.ca
		if err := newCA("CA rotation: the current CA expires at " + next.ca.Cert.NotAfter.UTC().Format(time.RFC3339)); err != nil {
			return nil, nil, err
		}
	}
	// Phase 1 of a rotation: keep signing with the previous CA until every
	// client had the time to trust the new one.
	signer := next.ca
	if next.prev != nil && now.Before(created(next.ca.Cert).Add(m.cfg.CAOverlap)) {
		signer = next.prev
	}
	if why := m.servingDue(now, next.serving, signer); why != "" {
		certPEM, keyPEM, err := signer.Issue(m.cfg.leaf(), now, m.cfg.ServingValidity)
		if err != nil {
			return nil, nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("parse issued serving certificate: %w", err)
		}
		next.servingCertPEM, next.servingKeyPEM, next.serving = certPEM, keyPEM, &pair
		reasons = append(reasons, why)
	}
	return &next, reasons, nil
}

// servingDue says why the serving certificate must be re-issued, or "".
func (m *SelfManaged) servingDue(now time.Time, serving *tls.Certificate, signer *CA) string {
	if serving == nil {
		return "no usable serving certificate"
	}
	leaf := serving.Leaf
	if err := leaf.CheckSignatureFrom(signer.Cert); err != nil || !bytes.Equal(leaf.RawIssuer, signer.Cert.RawSubject) {
		return "serving certificate not signed by the signing CA"
	}
	if leaf.NotAfter.Sub(now) < m.cfg.ServingRenewBefore {
		return "serving certificate expires at " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	want := m.cfg.leaf()
	if !slices.Equal(leaf.DNSNames, want.DNSNames) || !slices.EqualFunc(leaf.IPAddresses, want.IPs, net.IP.Equal) ||
		leaf.Subject.CommonName != want.commonName() || !slices.Equal(leaf.ExtKeyUsage, want.usages()) {
		return "serving certificate names or usages changed"
	}
	return ""
}
