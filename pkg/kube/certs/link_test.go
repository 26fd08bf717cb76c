package certs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"crypto/x509"
	"net"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

func serverLink() LinkOptions {
	return NewLinkOptions("tls-", LinkServer, "aware-rl-agent", []string{"agent.test", "127.0.0.1"})
}

func clientLink() LinkOptions {
	return NewLinkOptions("rl-agent-tls-", LinkClient, "aware-recommender", nil)
}

func TestLinkOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    func() LinkOptions
		want []string // substrings of the error; none: valid
	}{
		{name: "nothing chosen", o: serverLink, want: []string{"no TLS for the agent link", "--tls-mode=plaintext"}},
		{name: "plaintext is explicit", o: func() LinkOptions { o := serverLink(); o.Mode = LinkModePlaintext; return o }},
		{name: "files implied by a file", o: func() LinkOptions { o := clientLink(); o.CertFile = "c"; return o }, want: []string{"--rl-agent-tls-cert-file, --rl-agent-tls-key-file and --rl-agent-tls-ca-file are required"}},
		{name: "files complete", o: func() LinkOptions { o := clientLink(); o.CertFile, o.KeyFile, o.CAFile = "c", "k", "ca"; return o }},
		{name: "self-managed", o: func() LinkOptions { o := serverLink(); o.Mode = LinkModeSelfManaged; return o }},
		{name: "self-managed client needs no names", o: func() LinkOptions { o := clientLink(); o.Mode = LinkModeSelfManaged; return o }},
		{name: "self-managed with files", o: func() LinkOptions {
			o := serverLink()
			o.Mode, o.CAFile = LinkModeSelfManaged, "ca"
			return o
		}, want: []string{"are for files mode"}},
		{name: "self-managed server without names", o: func() LinkOptions {
			o := serverLink()
			o.Mode, o.ServerNames = LinkModeSelfManaged, nil
			return o
		}, want: []string{"--tls-server-names must name"}},
		{name: "bad identity and names", o: func() LinkOptions {
			o := serverLink()
			o.Mode, o.Identity, o.ServerNames = LinkModeSelfManaged, "Not An Identity", []string{"bad name"}
			return o
		}, want: []string{"--tls-identity", "--tls-server-names \"bad name\""}},
		{name: "unknown mode", o: func() LinkOptions { o := serverLink(); o.Mode = "tls"; return o }, want: []string{"--tls-mode \"tls\" must be"}},
		{name: "check interval", o: func() LinkOptions {
			o := serverLink()
			o.Mode, o.CheckInterval = LinkModePlaintext, 0
			return o
		}, want: []string{"--tls-check-interval must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o()
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

// TestLinkSelfManaged starts both sides on one Secret: the first creates
// the CA, the second joins it, each keeps its own certificate, and they
// complete a mutual handshake in which the server sees the client's
// identity.
func TestLinkSelfManaged(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newClient()
	clk := clocktesting.NewFakeClock(time.Now())
	so, co := serverLink(), clientLink()
	so.Mode, co.Mode = LinkModeSelfManaged, LinkModeSelfManaged
	if err := so.Validate(); err != nil {
		t.Fatal(err)
	}
	server, err := so.Open(ctx, client.CoreV1(), clk)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := co.Open(ctx, client.CoreV1(), clk)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := client.CoreV1().Secrets(so.SecretNamespace).Get(ctx, so.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Type != corev1.SecretTypeOpaque || sec.Labels[ManagedByLabel] != LinkManagedBy {
		t.Fatalf("Secret type %s labels %v", sec.Type, sec.Labels)
	}
	for _, k := range []string{SecretCABundleKey, SecretCAKeyKey, "aware-rl-agent.crt", "aware-rl-agent.key", "aware-recommender.crt", "aware-recommender.key"} {
		if len(sec.Data[k]) == 0 {
			t.Errorf("Secret lacks %s", k)
		}
	}
	for _, name := range []string{"agent.test", "127.0.0.1"} {
		cc := cl.ClientConfig(name)
		ids, serr, cerr := mutualHandshake(t, server.ServerConfig(), cc)
		if serr != nil || cerr != nil {
			t.Fatalf("%s: server %v, client %v", name, serr, cerr)
		}
		if !slices.Equal(ids, []string{"aware-recommender"}) {
			t.Fatalf("server saw %v", ids)
		}
	}

	// The client's certificate cannot serve: it is for client auth only.
	leaf, _ := cl.getClient(nil)
	if !slices.Equal(leaf.Leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Fatalf("client certificate usages %v", leaf.Leaf.ExtKeyUsage)
	}
	srv, _ := server.getCert(nil)
	if !slices.Equal(srv.Leaf.DNSNames, []string{"agent.test"}) || len(srv.Leaf.IPAddresses) != 1 || !srv.Leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Fatalf("server certificate SANs %v %v", srv.Leaf.DNSNames, srv.Leaf.IPAddresses)
	}
}

func TestLinkFiles(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	ca, err := NewCA("files", time.Now(), time.Hour)
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
	caFile := write("ca.crt", ca.CertPEM)
	sc, sk, err := ca.Issue(Leaf{DNSNames: []string{"agent.test"}}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cc, ck, err := ca.Issue(Leaf{CommonName: "aware-recommender", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	so, co := serverLink(), clientLink()
	so.CertFile, so.KeyFile, so.CAFile = write("s.crt", sc), write("s.key", sk), caFile
	co.CertFile, co.KeyFile, co.CAFile, co.ServerName = write("c.crt", cc), write("c.key", ck), caFile, "agent.test"
	clk := clocktesting.NewFakeClock(time.Now())
	server, err := so.Open(ctx, nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := co.Open(ctx, nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	ids, serr, cerr := mutualHandshake(t, server.ServerConfig(), cl.ClientConfig("127.0.0.1"))
	if serr != nil || cerr != nil || !slices.Equal(ids, []string{"aware-recommender"}) {
		t.Fatalf("server %v, client %v, identities %v", serr, cerr, ids)
	}

	bad := serverLink()
	bad.CertFile, bad.KeyFile, bad.CAFile = so.CertFile, so.KeyFile, write("garbage.crt", []byte("garbage"))
	if _, err := bad.Open(ctx, nil, clk); err == nil || !strings.Contains(err.Error(), "CA bundle") {
		t.Fatalf("a garbage CA file: %v", err)
	}
	pt := serverLink()
	pt.Mode = LinkModePlaintext
	if l, err := pt.Open(context.Background(), nil, clk); l != nil || err != nil {
		t.Fatalf("plaintext: %v %v", l, err)
	}
}
