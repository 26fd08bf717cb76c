package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testNS     = "aware-system"
	testSecret = "aware-admission-controller-certs"
	testDNS    = "aware-admission-controller.aware-system.svc"
)

var (
	t0         = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

func testConfig(client *fake.Clientset, clk *clocktesting.FakeClock) SelfManagedConfig {
	return SelfManagedConfig{
		Client: client.CoreV1(), Namespace: testNS, Name: testSecret,
		DNSNames: []string{testDNS, testDNS + ".cluster.local"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1")},
		// CA: rotated 200h before its expiry, overlap 10h. Serving: 100h,
		// renewed 30h before expiry.
		CAValidity: 1000 * time.Hour, CARenewBefore: 200 * time.Hour, CAOverlap: 10 * time.Hour,
		ServingValidity: 100 * time.Hour, ServingRenewBefore: 30 * time.Hour,
		CheckInterval: time.Minute, Clock: clk,
	}
}

// newClient returns a fake clientset whose secret updates fail with a
// Conflict unless they carry the stored resourceVersion, as the API server
// does (the fake tracker alone accepts any update).
func newClient(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	client.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().(*corev1.Secret)
		cur, err := client.Tracker().Get(secretsGVR, obj.Namespace, obj.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*corev1.Secret).ResourceVersion != obj.ResourceVersion {
			return true, nil, apierrors.NewConflict(secretsGVR.GroupResource(), obj.Name, nil)
		}
		return false, nil, nil
	})
	return client
}

func start(ctx context.Context, t *testing.T, cfg SelfManagedConfig) *SelfManaged {
	t.Helper()
	m, err := NewSelfManaged(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

func writes(client *fake.Clientset) (creates, updates int) {
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "secrets" {
			continue
		}
		switch a.GetVerb() {
		case "create":
			creates++
		case "update":
			updates++
		}
	}
	return creates, updates
}

func getSecret(ctx context.Context, t *testing.T, client *fake.Clientset) *corev1.Secret {
	t.Helper()
	s, err := client.CoreV1().Secrets(testNS).Get(ctx, testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parseBundle(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// verifyServing checks that the served leaf chains to the published bundle
// at now for the service's DNS name, and returns the leaf.
func verifyServing(t *testing.T, m *SelfManaged, now time.Time) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(m.CABundle()) {
		t.Fatal("CA bundle holds no certificate")
	}
	leaf := m.Current().Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: testDNS, CurrentTime: now}); err != nil {
		t.Fatalf("served certificate does not verify against the bundle: %v", err)
	}
	return leaf
}

func signedBy(leaf, ca *x509.Certificate) bool {
	return leaf.CheckSignatureFrom(ca) == nil
}

func drained(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

func TestSelfManagedFirstStartCreatesSecret(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	m := start(ctx, t, testConfig(client, clk))

	if c, u := writes(client); c != 1 || u != 0 {
		t.Fatalf("creates %d updates %d, want 1 and 0", c, u)
	}
	s := getSecret(ctx, t, client)
	if s.Labels[ManagedByLabel] != ManagedByValue || s.Type != corev1.SecretTypeTLS {
		t.Fatalf("secret labels %v type %s", s.Labels, s.Type)
	}
	for _, k := range []string{SecretCABundleKey, SecretCAKeyKey, corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if len(s.Data[k]) == 0 {
			t.Errorf("secret lacks %s", k)
		}
	}
	if _, ok := s.Data[SecretPreviousCAKeyKey]; ok {
		t.Error("a fresh secret has no previous CA")
	}
	if !bytes.Equal(s.Data[SecretCABundleKey], m.CABundle()) || !bytes.Equal(s.Data[corev1.TLSCertKey], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.Current().Certificate[0]})) {
		t.Fatal("served bundle or certificate differ from the Secret")
	}
	cas := parseBundle(t, m.CABundle())
	if len(cas) != 1 || !cas[0].IsCA || !cas[0].NotAfter.Equal(t0.Add(1000*time.Hour)) {
		t.Fatalf("bundle: %d certs, %+v", len(cas), cas)
	}
	leaf := verifyServing(t, m, t0)
	if strings.Join(leaf.DNSNames, ",") != testDNS+","+testDNS+".cluster.local" || len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Fatalf("SANs %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if !leaf.NotAfter.Equal(t0.Add(100 * time.Hour)) {
		t.Fatalf("serving notAfter %s", leaf.NotAfter)
	}
	if drained(m.Changed()) {
		t.Fatal("the first bundle must be announced")
	}
}

func TestSelfManagedSecondInstanceLoadsSameCA(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	a := start(ctx, t, testConfig(client, clk))
	client.ClearActions()

	clk.Step(time.Hour)
	b := start(ctx, t, testConfig(client, clk))
	if c, u := writes(client); c != 0 || u != 0 {
		t.Fatalf("second instance wrote: creates %d updates %d", c, u)
	}
	if !bytes.Equal(a.CABundle(), b.CABundle()) {
		t.Fatal("second instance has another CA")
	}
	if a.Current().Leaf.SerialNumber.Cmp(b.Current().Leaf.SerialNumber) != 0 {
		t.Fatal("second instance serves another certificate")
	}
}

func TestSelfManagedCreationRaceConverges(t *testing.T) {
	t.Run("AlreadyExists", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		clk := clocktesting.NewFakeClock(t0)
		// The winner's Secret, made by another instance.
		other := newClient()
		winner := start(ctx, t, testConfig(other, clk))
		won := getSecret(ctx, t, other)
		won.ResourceVersion = ""

		client := newClient()
		var once sync.Once
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			handled := false
			once.Do(func() {
				// The other replica's create lands between our get and
				// our create.
				if err := client.Tracker().Add(won); err != nil {
					t.Error(err)
				}
				handled = true
			})
			if handled {
				return true, nil, apierrors.NewAlreadyExists(secretsGVR.GroupResource(), testSecret)
			}
			return false, nil, nil
		})
		m := start(ctx, t, testConfig(client, clk))
		if !bytes.Equal(m.CABundle(), winner.CABundle()) || m.Current().Leaf.SerialNumber.Cmp(winner.Current().Leaf.SerialNumber) != 0 {
			t.Fatal("the loser did not adopt the winner's CA and certificate")
		}
		if c, u := writes(client); c != 1 || u != 0 {
			t.Fatalf("creates %d updates %d, want the one failed create", c, u)
		}
	})
	t.Run("concurrent starts", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		client := newClient()
		clk := clocktesting.NewFakeClock(t0)
		ms := make([]*SelfManaged, 4)
		var wg sync.WaitGroup
		for i := range ms {
			m, err := NewSelfManaged(testConfig(client, clk))
			if err != nil {
				t.Fatal(err)
			}
			ms[i] = m
			wg.Go(func() {
				if err := m.Start(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		stored := getSecret(ctx, t, client).Data[SecretCABundleKey]
		for i, m := range ms {
			if !bytes.Equal(m.CABundle(), stored) {
				t.Fatalf("replica %d did not converge on the stored CA", i)
			}
		}
	})
}

func TestSelfManagedRenewsServingBeforeExpiry(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	m := start(ctx, t, testConfig(client, clk))
	<-m.Changed()
	first := m.Current().Leaf
	bundle := m.CABundle()
	client.ClearActions()

	// 30h01m before expiry: not due yet, nothing written.
	clk.SetTime(first.NotAfter.Add(-30*time.Hour - time.Minute))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, u := writes(client); u != 0 || m.Current().Leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("renewed too early (%d updates)", u)
	}
	// 29h59m before expiry: renewed by the same CA.
	clk.Step(2 * time.Minute)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	second := verifyServing(t, m, clk.Now())
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("serving certificate not renewed")
	}
	if !bytes.Equal(m.CABundle(), bundle) || !signedBy(second, parseBundle(t, bundle)[0]) {
		t.Fatal("renewal changed the CA")
	}
	if !drained(m.Changed()) {
		t.Fatal("a serving renewal must not announce a bundle change")
	}
	if !second.NotAfter.Equal(clk.Now().Add(100 * time.Hour)) {
		t.Fatalf("renewed notAfter %s", second.NotAfter)
	}
	if _, u := writes(client); u != 1 {
		t.Fatalf("%d updates, want 1", u)
	}
	if got := getSecret(ctx, t, client).Data[corev1.TLSCertKey]; !bytes.Contains(got, []byte("CERTIFICATE")) || !bytes.Equal(got, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: second.Raw})) {
		t.Fatal("renewed certificate not stored")
	}
}

func TestSelfManagedCARotationOverlap(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	m := start(ctx, t, testConfig(client, clk))
	<-m.Changed()
	oldCA := parseBundle(t, m.CABundle())[0]

	// Just before the rotation window: one CA.
	clk.SetTime(oldCA.NotAfter.Add(-200*time.Hour - time.Minute))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(parseBundle(t, m.CABundle())); n != 1 {
		t.Fatalf("%d CAs before the rotation window", n)
	}

	// Phase 1: a new CA is published, the old one still signs.
	clk.Step(2 * time.Minute)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cas := parseBundle(t, m.CABundle())
	if len(cas) != 2 || !cas[1].Equal(oldCA) || cas[0].Equal(oldCA) {
		t.Fatalf("phase 1 bundle: %d CAs, want new then old", len(cas))
	}
	newCA := cas[0]
	if !newCA.NotAfter.Equal(clk.Now().Add(1000 * time.Hour)) {
		t.Fatalf("new CA notAfter %s", newCA.NotAfter)
	}
	if drained(m.Changed()) {
		t.Fatal("the new bundle must be announced")
	}
	if leaf := verifyServing(t, m, clk.Now()); !signedBy(leaf, oldCA) {
		t.Fatal("phase 1: the serving certificate must stay with the old CA")
	}
	// A replica starting now loads both CAs, including the old CA's key,
	// and writes nothing.
	client.ClearActions()
	late := start(ctx, t, testConfig(client, clk))
	if _, u := writes(client); u != 0 || !bytes.Equal(late.CABundle(), m.CABundle()) {
		t.Fatalf("late replica: %d updates, same bundle %v", u, bytes.Equal(late.CABundle(), m.CABundle()))
	}
	if !bytes.Contains(getSecret(ctx, t, client).Data[SecretPreviousCAKeyKey], []byte("PRIVATE KEY")) {
		t.Fatal("the previous CA's key is not kept during the rotation")
	}

	// Phase 2: after the overlap the new CA signs; both are still trusted.
	clk.Step(10 * time.Hour)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(parseBundle(t, m.CABundle())); n != 2 {
		t.Fatalf("phase 2: %d CAs, want 2", n)
	}
	if leaf := verifyServing(t, m, clk.Now()); !signedBy(leaf, newCA) {
		t.Fatal("phase 2: the serving certificate must be signed by the new CA")
	}
	if !drained(m.Changed()) {
		t.Fatal("phase 2 does not change the bundle")
	}

	// Phase 3: the old CA leaves the bundle.
	clk.Step(10 * time.Hour)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cas = parseBundle(t, m.CABundle())
	if len(cas) != 1 || !cas[0].Equal(newCA) {
		t.Fatalf("phase 3: %d CAs, want the new one only", len(cas))
	}
	if drained(m.Changed()) {
		t.Fatal("retiring the old CA must be announced")
	}
	verifyServing(t, m, clk.Now())
	if _, ok := getSecret(ctx, t, client).Data[SecretPreviousCAKeyKey]; ok {
		t.Fatal("the previous CA's key outlived the rotation")
	}
}

func TestSelfManagedExpiredCAIsReplaced(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	m := start(ctx, t, testConfig(client, clk))
	old := parseBundle(t, m.CABundle())[0]
	// Down for longer than the CA lived: no overlap is possible.
	clk.SetTime(old.NotAfter.Add(time.Hour))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cas := parseBundle(t, m.CABundle())
	if len(cas) != 1 || cas[0].Equal(old) {
		t.Fatal("an expired CA must be replaced, not kept")
	}
	verifyServing(t, m, clk.Now())
}

// handshake connects to a TLS server on loopback that uses getCert, and
// returns the leaf it served, verified against roots at now.
func handshakeAt(t *testing.T, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), roots *x509.CertPool, serverName string, now time.Time) *x509.Certificate {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: serverName, Time: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func TestSelfManagedTLSServesRotatedCertificate(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	m := start(ctx, t, testConfig(client, clk))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(m.CABundle())

	first := handshakeAt(t, m.GetCertificate, roots, testDNS, clk.Now())
	if first.SerialNumber.Cmp(m.Current().Leaf.SerialNumber) != 0 {
		t.Fatal("handshake did not serve the current certificate")
	}
	clk.SetTime(first.NotAfter.Add(-time.Hour))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	second := handshakeAt(t, m.GetCertificate, roots, testDNS, clk.Now())
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 || second.SerialNumber.Cmp(m.Current().Leaf.SerialNumber) != 0 {
		t.Fatalf("after renewal the server served serial %s, want %s", second.SerialNumber, m.Current().Leaf.SerialNumber)
	}
	// URL mode: the IP SAN verifies too.
	handshakeAt(t, m.GetCertificate, roots, "127.0.0.1", clk.Now())
}

func TestSelfManagedRunRenewsOnTicks(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	m := start(ctx, t, testConfig(client, clk))
	first := m.Current().Leaf.SerialNumber

	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run never waited on its ticker")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(75 * time.Hour) // past renew-before; the ticker fires
	for m.Current().Leaf.SerialNumber.Cmp(first) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not renew the certificate")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSelfManagedUpdateConflictRetries(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(t0)
	a := start(ctx, t, testConfig(client, clk))
	b := start(ctx, t, testConfig(client, clk))

	// Both are due; a writes first between b's get and b's update.
	clk.SetTime(a.Current().Leaf.NotAfter.Add(-time.Hour))
	var once sync.Once
	client.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		var err error
		once.Do(func() {
			// Runs under the fake's lock: write through the tracker, as
			// replica a would.
			sec := getSecretFromTracker(t, client)
			cur, _ := decode(sec.Data, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			next, _, perr := a.plan(clk.Now(), cur)
			if perr != nil {
				t.Error(perr)
			}
			sec.Data = next.data(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			if uerr := client.Tracker().Update(secretsGVR, sec, testNS); uerr != nil {
				t.Error(uerr)
			}
			err = apierrors.NewConflict(secretsGVR.GroupResource(), testSecret, nil)
		})
		return err != nil, nil, err
	})
	client.ClearActions()
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Current().Leaf.SerialNumber.Cmp(b.Current().Leaf.SerialNumber) != 0 {
		t.Fatal("replicas did not converge on one serving certificate after a conflict")
	}
	if _, u := writes(client); u != 1 {
		t.Fatalf("%d update attempts, want the single conflicting one", u)
	}
}

func getSecretFromTracker(t *testing.T, client *fake.Clientset) *corev1.Secret {
	t.Helper()
	obj, err := client.Tracker().Get(secretsGVR, testNS, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Secret).DeepCopy()
}

func TestSelfManagedUnusableContents(t *testing.T) {
	labelled := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSecret, Labels: map[string]string{ManagedByLabel: ManagedByValue}},
			Type:       corev1.SecretTypeTLS, Data: data,
		}
	}
	t.Run("garbage CA is regenerated with an error log", func(t *testing.T) {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
		ctx := klog.NewContext(context.Background(), logger)
		client := newClient(labelled(map[string][]byte{SecretCABundleKey: []byte("garbage"), SecretCAKeyKey: []byte("garbage"), "note": []byte("kept")}))
		clk := clocktesting.NewFakeClock(t0)
		m := start(ctx, t, testConfig(client, clk))
		verifyServing(t, m, t0)
		s := getSecret(ctx, t, client)
		if !bytes.Equal(s.Data[SecretCABundleKey], m.CABundle()) || string(s.Data["note"]) != "kept" {
			t.Fatal("regenerated contents not stored, or foreign keys dropped")
		}
		log := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
		if !strings.Contains(log, "holds no usable CA; generating a new CA") {
			t.Fatalf("no clear log of the regeneration:\n%s", log)
		}
	})
	t.Run("mismatched serving pair is re-issued by the same CA", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		client := newClient()
		clk := clocktesting.NewFakeClock(t0)
		m := start(ctx, t, testConfig(client, clk))
		s := getSecret(ctx, t, client)
		other, err := NewCA("other", t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		s.Data[corev1.TLSPrivateKeyKey] = other.KeyPEM
		if _, err := client.CoreV1().Secrets(testNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		bundle, serial := m.CABundle(), m.Current().Leaf.SerialNumber
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.CABundle(), bundle) || m.Current().Leaf.SerialNumber.Cmp(serial) == 0 {
			t.Fatal("want the same CA and a new serving certificate")
		}
		verifyServing(t, m, t0)
	})
	t.Run("an unusable previous CA is dropped during a rotation", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		client := newClient()
		clk := clocktesting.NewFakeClock(t0)
		m := start(ctx, t, testConfig(client, clk))
		clk.SetTime(t0.Add(801 * time.Hour)) // phase 1
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		s := getSecret(ctx, t, client)
		s.Data[SecretPreviousCAKeyKey] = []byte("lost")
		if _, err := client.CoreV1().Secrets(testNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		cas := parseBundle(t, getSecret(ctx, t, client).Data[SecretCABundleKey])
		if len(cas) != 1 || !bytes.Equal(m.CABundle(), getSecret(ctx, t, client).Data[SecretCABundleKey]) {
			t.Fatalf("stored bundle has %d CAs, want the new CA only, as served", len(cas))
		}
		if leaf := verifyServing(t, m, clk.Now()); !signedBy(leaf, cas[0]) {
			t.Fatal("the serving certificate must move to the new CA")
		}
	})
	t.Run("changed SANs re-issue the serving certificate", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		client := newClient()
		clk := clocktesting.NewFakeClock(t0)
		a := start(ctx, t, testConfig(client, clk))
		cfg := testConfig(client, clk)
		cfg.IPs = append(cfg.IPs, net.ParseIP("::1"))
		b := start(ctx, t, cfg)
		if !bytes.Equal(a.CABundle(), b.CABundle()) || len(b.Current().Leaf.IPAddresses) != 2 {
			t.Fatal("want the same CA and a certificate with the new SANs")
		}
	})
	t.Run("a Secret we do not manage is never overwritten", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		foreign := labelled(map[string][]byte{"tls.crt": []byte("theirs")})
		foreign.Labels = nil
		client := newClient(foreign)
		m, err := NewSelfManaged(testConfig(client, clocktesting.NewFakeClock(t0)))
		if err != nil {
			t.Fatal(err)
		}
		err = m.Start(ctx)
		if err == nil || !strings.Contains(err.Error(), "refusing to replace") || !strings.Contains(err.Error(), testSecret) {
			t.Fatalf("error %v, want a refusal naming the Secret", err)
		}
		if c, u := writes(client); c != 0 || u != 0 {
			t.Fatal("a foreign Secret was written")
		}
		if _, err := m.GetCertificate(nil); err == nil {
			t.Fatal("no certificate may be served after a failed start")
		}
	})
}

func TestSelfManagedConfigValidate(t *testing.T) {
	client := newClient()
	good := testConfig(client, clocktesting.NewFakeClock(t0))
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := good
	bad.CAOverlap = 90 * time.Hour // renew-before 200h < 30h + 2×90h
	bad.ServingValidity = bad.ServingRenewBefore
	bad.DNSNames, bad.IPs = nil, nil
	err := bad.Validate()
	for _, want := range []string{"CA renew-before", "serving certificate validity", "at least one DNS name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to mention %q", err, want)
		}
	}
}

func TestLoadCA(t *testing.T) {
	ca, err := NewCA("x", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadCA(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := got.Serving([]string{"a"}, nil, t0, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !signedBy(leaf, ca.Cert) || !leaf.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Fatalf("loaded CA signs wrongly or the leaf outlives it: %s vs %s", leaf.NotAfter, ca.Cert.NotAfter)
	}
	other, _ := NewCA("y", t0, time.Hour)
	if _, err := LoadCA(ca.CertPEM, other.KeyPEM); err == nil {
		t.Fatal("a mismatched key must fail")
	}
}
