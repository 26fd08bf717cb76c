package certs

import (
	"crypto/tls"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aware-k8s/aware/pkg/kube/serve"
)

// TestExpiryGauge: the gauge is the NotAfter of the certificate served at
// scrape time, follows a renewal, and is 0 without a certificate.
func TestExpiryGauge(t *testing.T) {
	ca, err := NewCA("test-ca", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(validity time.Duration) (*tls.Certificate, time.Time) {
		t.Helper()
		now := time.Now().Truncate(time.Second)
		certPEM, keyPEM, err := ca.Serving([]string{"svc.ns.svc"}, nil, now, validity)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		c.Leaf = nil // as some loaders leave it: parsed from the DER
		na, err := NotAfter(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &c, nil })
		if err != nil {
			t.Fatal(err)
		}
		return &c, na
	}
	var cur atomic.Pointer[tls.Certificate]
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c := cur.Load()
		if c == nil {
			return nil, errors.New("no serving certificate loaded yet")
		}
		return c, nil
	}
	reg := prometheus.NewRegistry()
	if err := RegisterExpiry(reg, get); err != nil {
		t.Fatal(err)
	}
	if err := serve.LintMetrics(reg, "admission"); err != nil {
		t.Error(err)
	}
	value := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 {
			t.Fatalf("gather: %v %v", mfs, err)
		}
		return mfs[0].GetMetric()[0].GetGauge().GetValue()
	}
	if got := value(); got != 0 {
		t.Errorf("without a certificate: %v, want 0", got)
	}
	for _, validity := range []time.Duration{time.Hour, 12 * time.Hour} {
		c, notAfter := issue(validity)
		cur.Store(c)
		if got := value(); got != float64(notAfter.Unix()) {
			t.Errorf("valid for %s: gauge %v, want %v", validity, got, notAfter.Unix())
		}
		if d := time.Until(notAfter); d < validity-time.Minute || d > validity+time.Minute {
			t.Errorf("NotAfter %v is not %s away", notAfter, validity)
		}
	}
	if n, err := testutil.GatherAndCount(reg, ExpiryMetricName); err != nil || n != 1 {
		t.Errorf("series of %s: %d %v", ExpiryMetricName, n, err)
	}
	if _, err := NotAfter(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }); err == nil || !strings.Contains(err.Error(), "no serving certificate") {
		t.Errorf("empty certificate: %v", err)
	}
}
