package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GetCertificateFunc returns the certificate served now, as
// tls.Config.GetCertificate does; FileReloader.GetCertificate and
// SelfManaged.GetCertificate are ones.
type GetCertificateFunc func(*tls.ClientHelloInfo) (*tls.Certificate, error)

// NotAfter returns when the certificate get serves now expires.
func NotAfter(get GetCertificateFunc) (time.Time, error) {
	c, err := get(nil)
	if err != nil {
		return time.Time{}, err
	}
	if c == nil || len(c.Certificate) == 0 {
		return time.Time{}, errors.New("no serving certificate")
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return time.Time{}, fmt.Errorf("parse the serving certificate: %w", err)
		}
	}
	return leaf.NotAfter, nil
}

// ExpiryMetricName is the gauge RegisterExpiry registers.
const ExpiryMetricName = "aware_admission_serving_certificate_expiry_timestamp_seconds"

// RegisterExpiry registers a gauge of when the serving certificate get
// serves now expires (Unix seconds), read at every scrape, so that it
// follows renewals and reloads. It is 0 while there is no certificate, so
// that an alert on the time left fires then too.
func RegisterExpiry(reg prometheus.Registerer, get GetCertificateFunc) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: ExpiryMetricName,
		Help: "When the webhook's serving certificate expires, in Unix seconds (0: no certificate loaded). Alert when it is less than a few days away: the API server then stops trusting the webhook, which fails open and leaves new pods unsized.",
	}, func() float64 {
		t, err := NotAfter(get)
		if err != nil {
			return 0
		}
		return float64(t.Unix())
	})
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register %s: %w", ExpiryMetricName, err)
	}
	return nil
}
