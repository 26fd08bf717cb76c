package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// staticBundle is a Bundle tests can change.
type staticBundle struct {
	mu sync.Mutex
	b  []byte
}

func (s *staticBundle) CABundle() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b)
}

func (s *staticBundle) set(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = b
}

func issue(t *testing.T, ca *CA, l Leaf) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(l, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// mutualHandshake runs one handshake over loopback and returns the
// identities the server saw and each side's error.
func mutualHandshake(t *testing.T, server, client *tls.Config) (ids []string, serverErr, clientErr error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			serverErr = err
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if serverErr = tc.Handshake(); serverErr == nil {
			ids = Identities(tc.ConnectionState().PeerCertificates[0])
		}
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		// TLS 1.3: the server checks the client's certificate after the
		// client's handshake returns; a read sees its verdict.
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		if err != nil && (strings.Contains(err.Error(), "timeout") || strings.Contains(err.Error(), "EOF")) {
			err = nil
		}
		conn.Close()
	}
	<-done
	return ids, serverErr, err
}

func TestMutualTLS(t *testing.T) {
	ca, err := NewCA("link", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serverCert := issue(t, ca, Leaf{DNSNames: []string{"agent.test"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	clientCert := issue(t, ca, Leaf{CommonName: "aware-recommender", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	strangerCert := issue(t, other, Leaf{CommonName: "aware-recommender", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	serverOnly := issue(t, ca, Leaf{CommonName: "aware-recommender", DNSNames: []string{"x"}}) // no client usage
	wrongName := issue(t, ca, Leaf{DNSNames: []string{"elsewhere.test"}})
	trust := &staticBundle{b: ca.CertPEM}
	fixed := func(c *tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c, nil }
	}
	present := func(c *tls.Certificate) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c == nil {
				return &tls.Certificate{}, nil
			}
			return c, nil
		}
	}
	for _, tc := range []struct {
		name       string
		serve      *tls.Certificate
		present    *tls.Certificate
		serverName string
		wantErr    string // "" = success
	}{
		{name: "verified both ways", serve: serverCert, present: clientCert, serverName: "agent.test"},
		{name: "verified by IP", serve: serverCert, present: clientCert, serverName: "127.0.0.1"},
		{name: "client without a certificate", serve: serverCert, present: nil, serverName: "agent.test", wantErr: "certificate"},
		{name: "client certificate of another CA", serve: serverCert, present: strangerCert, serverName: "agent.test", wantErr: "certificate"},
		{name: "client certificate without client usage", serve: serverCert, present: serverOnly, serverName: "agent.test", wantErr: "certificate"},
		{name: "server certificate for another name", serve: wrongName, present: clientCert, serverName: "agent.test", wantErr: "verify the server's certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, serr, cerr := mutualHandshake(t, MutualServerConfig(fixed(tc.serve), trust), MutualClientConfig(present(tc.present), trust, tc.serverName))
			if tc.wantErr == "" {
				if serr != nil || cerr != nil {
					t.Fatalf("handshake failed: server %v, client %v", serr, cerr)
				}
				if !slices.Equal(ids, []string{"aware-recommender"}) {
					t.Fatalf("server saw identities %v", ids)
				}
				return
			}
			if serr == nil && cerr == nil {
				t.Fatal("handshake succeeded")
			}
			if !strings.Contains(errString(serr)+" "+errString(cerr), tc.wantErr) {
				t.Fatalf("errors %v / %v, want one mentioning %q", serr, cerr, tc.wantErr)
			}
		})
	}

	t.Run("a changed bundle is trusted without a restart", func(t *testing.T) {
		newCA, err := NewCA("link-2", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		newClient := issue(t, newCA, Leaf{CommonName: "aware-recommender", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		server := MutualServerConfig(fixed(serverCert), trust)
		client := MutualClientConfig(present(newClient), trust, "agent.test")
		if _, serr, cerr := mutualHandshake(t, server, client); serr == nil && cerr == nil {
			t.Fatal("a certificate of a CA not yet trusted was accepted")
		}
		trust.set(append(bytes.Clone(newCA.CertPEM), ca.CertPEM...))
		if _, serr, cerr := mutualHandshake(t, server, client); serr != nil || cerr != nil {
			t.Fatalf("after the rotation: server %v, client %v", serr, cerr)
		}
		trust.set(ca.CertPEM)
	})
	t.Run("an empty bundle refuses every peer", func(t *testing.T) {
		empty := &staticBundle{}
		if _, serr, cerr := mutualHandshake(t, MutualServerConfig(fixed(serverCert), empty), MutualClientConfig(present(clientCert), trust, "agent.test")); serr == nil && cerr == nil {
			t.Fatal("handshake succeeded without a trusted CA on the server")
		}
		if _, serr, cerr := mutualHandshake(t, MutualServerConfig(fixed(serverCert), trust), MutualClientConfig(present(clientCert), empty, "agent.test")); serr == nil && cerr == nil {
			t.Fatal("handshake succeeded without a trusted CA on the client")
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestIdentities(t *testing.T) {
	ca, err := NewCA("x", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := issue(t, ca, Leaf{CommonName: "aware-recommender", DNSNames: []string{"a.svc"}})
	if got := Identities(c.Leaf); !slices.Equal(got, []string{"aware-recommender"}) {
		t.Fatalf("identities %v; DNS names are not identities", got)
	}
}
