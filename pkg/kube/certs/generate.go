// Package certs provides the certificates of the admission webhook and of
// the mutual-TLS link between the recommender and the rl-agent: read from
// files and reloaded when they change (FileReloader), and a small CA to
// generate certificates (used for self-managed certificates and tests).
// SelfManaged keeps a CA and a certificate in a Secret and rotates them;
// BundleWatcher re-reads a CA bundle file. The mutual-TLS configurations
// (mtls.go) verify peers against a bundle that may change, and Link
// (link.go) builds them from one set of flags.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// clockSkew is how far before "now" a generated certificate's validity
// starts, so that peers whose clocks lag a little accept it.
const clockSkew = time.Minute

// CA is a certificate authority able to sign serving certificates.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
	key     crypto.Signer
}

// LoadCA parses a PEM CA certificate and its PEM private key (EC, PKCS#1
// or PKCS#8), and checks that they match and that the certificate is a CA.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse CA key pair: %w", err)
	}
	if len(pair.Certificate) != 1 {
		return nil, fmt.Errorf("CA certificate PEM holds %d certificates, want 1", len(pair.Certificate))
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse CA certificate: %w", err)
		}
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("certificate is not a CA able to sign certificates")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA private key of type %T cannot sign", pair.PrivateKey)
	}
	return &CA{Cert: cert, CertPEM: bytes.Clone(certPEM), KeyPEM: bytes.Clone(keyPEM), key: signer}, nil
}

// created is when the CA was made: its validity starts clockSkew earlier.
func created(c *x509.Certificate) time.Time { return c.NotBefore.Add(clockSkew) }

// NewCA creates a self-signed CA valid from now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM, key: key}, nil
}

// Leaf describes a certificate to issue: a serving certificate, a client
// certificate, or one that is both (a peer of a mutual-TLS link).
type Leaf struct {
	// CommonName is the subject's name; a mutual-TLS server reads it as
	// the client's identity. Empty: the first DNS name.
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// Usages are the extended key usages; empty means server
	// authentication only.
	Usages []x509.ExtKeyUsage
}

func (l Leaf) usages() []x509.ExtKeyUsage {
	if len(l.Usages) == 0 {
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	return l.Usages
}

func (l Leaf) commonName() string {
	switch {
	case l.CommonName != "":
		return l.CommonName
	case len(l.DNSNames) > 0:
		return l.DNSNames[0]
	}
	return "aware-admission-controller"
}

// Serving signs a serving certificate for the given DNS names and IPs and
// returns it and its key, PEM-encoded. Its validity ends no later than the
// CA's.
func (ca *CA) Serving(dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	return ca.Issue(Leaf{DNSNames: dnsNames, IPs: ips}, now, validity)
}

// Issue signs a certificate for l and returns it and its key,
// PEM-encoded. Its validity ends no later than the CA's.
func (ca *CA) Issue(l Leaf, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.commonName()},
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  l.usages(),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return n
}
