package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

func writePair(t *testing.T, dir string, ca *CA, mod time.Time) *x509.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Serving([]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}

// handshake connects over loopback and returns the served leaf, verified
// against the CA.
func handshake(t *testing.T, r *FileReloader, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate})
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
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func TestFileReloader(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	base := time.Now().Add(-time.Hour)
	first := writePair(t, dir, ca, base)

	r, err := NewFileReloader(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), ktesting.NewLogger(t, ktesting.NewConfig()))
	if err != nil {
		t.Fatal(err)
	}
	r.CheckInterval = 0
	if got := handshake(t, r, roots); got.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("first handshake did not serve the file's certificate")
	}

	second := writePair(t, dir, ca, base.Add(time.Minute))
	if got := handshake(t, r, roots); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatal("changed files were not reloaded")
	}

	// A half-written update (key not matching) keeps the last good pair.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := handshake(t, r, roots); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatal("a broken update replaced the served certificate")
	}

	// Checks are rate-limited: with a long interval a change waits.
	r.CheckInterval = time.Hour
	third := writePair(t, dir, ca, base.Add(2*time.Minute))
	if got := handshake(t, r, roots); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatal("files re-read within CheckInterval")
	}
	r.CheckInterval = 0
	if got := handshake(t, r, roots); got.SerialNumber.Cmp(third.SerialNumber) != 0 {
		t.Fatal("third pair not loaded")
	}
}

func TestNewFileReloaderErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewFileReloader(filepath.Join(dir, "missing.crt"), filepath.Join(dir, "missing.key"), ktesting.NewLogger(t, ktesting.NewConfig())); err == nil {
		t.Fatal("missing files must fail at start")
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("not pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewFileReloader(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), ktesting.NewLogger(t, ktesting.NewConfig())); err == nil {
		t.Fatal("garbage files must fail at start")
	}
}
