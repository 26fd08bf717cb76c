package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/pkg/kube/certs"
)

func countPEM(b []byte) int {
	n := 0
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return n
		}
		n++
	}
}

func registered(ctx context.Context, t *testing.T, client *fake.Clientset) []byte {
	t.Helper()
	mwc, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, register.DefaultConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mwc.Webhooks[0].ClientConfig.CABundle
}

// runUntil runs the certificate source and the registrar on clk, moves
// the clock to at once both wait on it, and waits for cond.
func runUntil(ctx context.Context, t *testing.T, src *certSource, r *register.Registrar, clk *clocktesting.FakeClock, at time.Time, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() { src.run(ctx); done <- struct{}{} }()
	go func() { r.Run(ctx); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the loops never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	clk.SetTime(at)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSelfManagedWiring(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := NewOptions()
	o.Namespace, o.RegisterWebhook, o.CertMode = "aware-system", true, CertModeSelfManaged
	o.CertExtraSANs = []string{"127.0.0.1"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	src, err := newCertSource(ctx, o, client.CoreV1(), clk)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := client.CoreV1().Secrets("aware-system").Get(ctx, o.CertSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the default mode must create the Secret: %v", err)
	}
	cert, err := src.getCertificate(&tls.ClientHelloInfo{ServerName: "aware-admission-controller.aware-system.svc"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.Leaf.VerifyHostname("aware-admission-controller.aware-system.svc"); err != nil {
		t.Fatal(err)
	}
	if err := cert.Leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}

	r, err := newRegistrar(o, client.AdmissionregistrationV1().MutatingWebhookConfigurations(), src.bundle, clk)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(registered(ctx, t, client), sec.Data[certs.SecretCABundleKey]) {
		t.Fatal("the registered caBundle is not the Secret's CA")
	}

	// CA rotation: the new CA reaches the registration next to the old.
	rotation := t0.Add(o.CAValidity - o.CARenewBefore + time.Hour)
	runUntil(ctx, t, src, r, clk, rotation, func() bool { return countPEM(registered(ctx, t, client)) == 2 })
}

func TestFilesWiring(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	now := time.Now()
	ca, err := certs.NewCA("files-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Serving([]string{"aware-admission-controller.aware-system.svc"}, []net.IP{net.ParseIP("127.0.0.1")}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	o := NewOptions()
	o.Namespace, o.RegisterWebhook = "aware-system", true
	o.TLSCertFile, o.TLSKeyFile = write("tls.crt", certPEM), write("tls.key", keyPEM)
	o.WebhookCABundleFile = write("ca.crt", ca.CertPEM)
	o.WebhookNamespaceSelector = "kubernetes.io/metadata.name=shop"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(now)
	src, err := newCertSource(ctx, o, client.CoreV1(), clk)
	if err != nil {
		t.Fatal(err)
	}
	if len(client.Actions()) != 0 {
		t.Fatalf("files mode touched the API: %v", client.Actions())
	}
	r, err := newRegistrar(o, client.AdmissionregistrationV1().MutatingWebhookConfigurations(), src.bundle, clk)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	mwc, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, register.DefaultConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(mwc.Webhooks[0].NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set{"kubernetes.io/metadata.name": "shop"}) || sel.Matches(labels.Set{"kubernetes.io/metadata.name": "other"}) {
		t.Fatalf("--webhook-namespace-selector not registered: %v", sel)
	}
	// cert-manager (say) adds a new CA to the mounted bundle.
	next, err := certs.NewCA("files-ca-2", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	both := append(bytes.Clone(next.CertPEM), ca.CertPEM...)
	write("ca.crt", both)
	runUntil(ctx, t, src, r, clk, now.Add(o.CertCheckInterval), func() bool { return bytes.Equal(registered(ctx, t, client), both) })
}
