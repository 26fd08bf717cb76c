package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
)

// Bundle is a PEM CA bundle that may change: a BundleWatcher's file or a
// SelfManaged Secret's ca.crt.
type Bundle interface {
	CABundle() []byte
}

// pool is the certificate pool of a Bundle, rebuilt when its bytes change,
// so a rotated CA is trusted from the next handshake on without a restart.
type pool struct {
	src Bundle

	mu   sync.Mutex
	last []byte
	pool *x509.CertPool
}

func (p *pool) get() (*x509.CertPool, error) {
	b := p.src.CABundle()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool != nil && bytes.Equal(b, p.last) {
		return p.pool, nil
	}
	cp := x509.NewCertPool()
	if !cp.AppendCertsFromPEM(b) {
		return nil, errors.New("the trusted CA bundle holds no certificate")
	}
	p.last, p.pool = b, cp
	return cp, nil
}

// MutualServerConfig returns a server's mutual-TLS configuration: it
// serves getCert and requires a client certificate that verifies against
// trust as it is at the handshake.
func MutualServerConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), trust Bundle) *tls.Config {
	p := &pool{src: trust}
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCert,
		ClientAuth:     tls.RequireAndVerifyClientCert,
	}
	cfg := base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cp, err := p.get()
		if err != nil {
			return nil, err
		}
		c := base.Clone()
		c.ClientCAs = cp
		return c, nil
	}
	return cfg
}

// MutualClientConfig returns a client's mutual-TLS configuration: it
// presents getCert and verifies the server's chain against trust as it is
// at the handshake, and its name against serverName (the dialled host when
// empty).
//
// The standard verification reads a fixed RootCAs; it is switched off and
// done here instead, with the same checks, so that the trusted bundle can
// change under a long-lived client.
func MutualClientConfig(getCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error), trust Bundle, serverName string) *tls.Config {
	p := &pool{src: trust}
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: getCert,
		ServerName:           serverName,
		// Verified in VerifyConnection, which every handshake runs.
		InsecureSkipVerify: true, //nolint:gosec // see VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, p, serverName)
		},
	}
}

func verifyServer(cs tls.ConnectionState, p *pool, serverName string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate")
	}
	roots, err := p.get()
	if err != nil {
		return err
	}
	name := serverName
	if name == "" {
		name = cs.ServerName
	}
	if name == "" {
		return errors.New("no server name to verify the server's certificate against")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		DNSName:       name,
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("verify the server's certificate: %w", err)
	}
	return nil
}

// Identities returns the identities a verified peer certificate carries:
// its subject's common name, then its URI SANs (e.g. SPIFFE IDs).
func Identities(c *x509.Certificate) []string {
	var ids []string
	if c.Subject.CommonName != "" {
		ids = append(ids, c.Subject.CommonName)
	}
	for _, u := range c.URIs {
		ids = append(ids, u.String())
	}
	return ids
}
