//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/kube/certs"
)

// agentLinkSecret is the Secret the shipped manifests share the agent
// link's CA through (deploy/rl-agent). The agent and the recommender run
// with deploy/'s link flags (self-managed mutual TLS, this Secret in
// aware-system, only aware-recommender may report); the agent's
// certificate names 127.0.0.1 among its defaults, which is where the e2e
// reaches it.
const agentLinkSecret = "aware-rl-agent-tls"

// agentConn dials the agent at addr with a client certificate for
// identity, issued by the link's CA read from its Secret, as an operator's
// tool holding the CA would.
func agentConn(t *testing.T, addr, identity string) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sec, err := tb.Client.CoreV1().Secrets("aware-system").Get(ctx, agentLinkSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the agent link's Secret: %v", err)
	}
	bundle := sec.Data[certs.SecretCABundleKey]
	blk, _ := pem.Decode(bundle)
	if blk == nil {
		t.Fatalf("Secret %s holds no CA certificate", agentLinkSecret)
	}
	ca, err := certs.LoadCA(pem.EncodeToMemory(blk), sec.Data[certs.SecretCAKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(certs.Leaf{CommonName: identity, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12,
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
