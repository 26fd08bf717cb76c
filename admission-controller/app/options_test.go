package app

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestOptionsValidate(t *testing.T) {
	valid := func() *Options {
		o := NewOptions()
		o.TLSCertFile, o.TLSKeyFile = "tls.crt", "tls.key"
		return o
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   []string
	}{
		{"defaults plus certificate files", func(*Options) {}, nil},
		{"no certificate", func(o *Options) { o.TLSCertFile = "" }, []string{"--tls-cert-file"}},
		{"registration needs a CA and a timeout above ours", func(o *Options) {
			o.RegisterWebhook, o.WebhookTimeoutSeconds, o.AdmissionTimeout = true, 2, 2*time.Second
		}, []string{"--webhook-ca-bundle-file", "--admission-timeout 2s must be below"}},
		{"URL mode needs https", func(o *Options) {
			o.RegisterWebhook, o.WebhookCABundleFile, o.WebhookURL = true, "ca.crt", "http://127.0.0.1:8443/mutate-pods"
		}, []string{"must be an https URL"}},
		{"bad policy and path", func(o *Options) {
			o.RegisterWebhook, o.WebhookCABundleFile, o.WebhookFailurePolicy, o.WebhookPath = true, "ca.crt", "Maybe", "mutate"
		}, []string{"--webhook-failure-policy", "--webhook-path"}},
		{"namespace selector must parse", func(o *Options) {
			o.RegisterWebhook, o.WebhookCABundleFile, o.WebhookNamespaceSelector = true, "ca.crt", "kubernetes.io/metadata.name in (shop"
		}, []string{"--webhook-namespace-selector"}},
		{"namespace selector", func(o *Options) {
			o.RegisterWebhook, o.WebhookCABundleFile, o.WebhookNamespaceSelector = true, "ca.crt", "kubernetes.io/metadata.name in (shop),team=web"
		}, nil},
		{"heartbeat duration must exceed interval", func(o *Options) { o.HeartbeatLeaseName, o.HeartbeatLeaseDuration = "hb", o.HeartbeatInterval }, []string{"--heartbeat-lease-duration"}},
		{"heartbeat disabled needs no interval", func(o *Options) { o.HeartbeatLeaseName, o.HeartbeatInterval = "", 0 }, nil},
		{"no certificate source is an error", func(o *Options) { o.TLSCertFile, o.TLSKeyFile = "", "" }, []string{"--cert-mode=self-managed"}},
		{"explicit self-managed", func(o *Options) { o.TLSCertFile, o.TLSKeyFile, o.CertMode = "", "", CertModeSelfManaged }, nil},
		{"self-managed registration needs no CA file", func(o *Options) {
			o.TLSCertFile, o.TLSKeyFile, o.CertMode, o.RegisterWebhook = "", "", CertModeSelfManaged, true
		}, nil},
		{"self-managed rejects file flags", func(o *Options) {
			o.CertMode, o.RegisterWebhook, o.WebhookCABundleFile = CertModeSelfManaged, true, "ca.crt"
		}, []string{"--tls-cert-file and --tls-private-key-file are for --cert-mode=files", "--webhook-ca-bundle-file is for --cert-mode=files"}},
		{"unknown mode", func(o *Options) { o.CertMode = "vault" }, []string{`--cert-mode "vault"`}},
		{"self-managed durations must nest", func(o *Options) {
			o.TLSCertFile, o.TLSKeyFile, o.CertMode = "", "", CertModeSelfManaged
			o.CAOverlap, o.CertCheckInterval = time.Minute, time.Minute
			o.ServingCertRenewBefore = o.ServingCertValidity
			o.CARenewBefore = o.CAValidity
		}, []string{"--ca-overlap 1m0s must exceed --cert-check-interval", "--serving-cert-validity", "--ca-validity", "--ca-renew-before"}},
		{"self-managed SANs", func(o *Options) {
			o.TLSCertFile, o.TLSKeyFile, o.CertMode = "", "", CertModeSelfManaged
			o.CertExtraSANs = []string{"127.0.0.1", "webhook.example.com", "not a name"}
		}, []string{`--cert-extra-sans "not a name"`}},
		{"self-managed needs a name", func(o *Options) {
			o.TLSCertFile, o.TLSKeyFile, o.CertMode, o.WebhookServiceName, o.CertSecretName = "", "", CertModeSelfManaged, "", ""
		}, []string{"needs a name", "--cert-secret-name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.mutate(o)
			err := o.Validate()
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestRegistrationOffByDefault(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.RegisterWebhook || o.HeartbeatLeaseName != "" || o.EffectiveCertMode() == CertModeSelfManaged {
		t.Fatal("registration, the heartbeat Lease and the certificate Secret must be opt-in: started without flags the process writes nothing to the cluster")
	}
	if o.WebhookFailurePolicy != "Ignore" || o.WebhookTimeoutSeconds != 3 {
		t.Fatalf("unsafe registration defaults: %s, %ds", o.WebhookFailurePolicy, o.WebhookTimeoutSeconds)
	}
}

func TestEffectiveCertMode(t *testing.T) {
	o := NewOptions()
	if got := o.EffectiveCertMode(); got != "" {
		t.Fatalf("no flags: %q, want none: self-managed mode writes a Secret and must be chosen", got)
	}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--cert-mode=self-managed") {
		t.Fatalf("no certificate source: %v", err)
	}
	o.TLSCertFile = "tls.crt"
	if got := o.EffectiveCertMode(); got != CertModeFiles {
		t.Fatalf("with --tls-cert-file: %s, want files", got)
	}
	o.CertMode = CertModeSelfManaged
	if got := o.EffectiveCertMode(); got != CertModeSelfManaged {
		t.Fatalf("explicit mode: %s", got)
	}
}

func TestServingSANs(t *testing.T) {
	o := NewOptions()
	o.Namespace = "aware-system"
	o.WebhookURL = "https://127.0.0.1:8443/mutate-pods"
	o.CertExtraSANs = []string{"127.0.0.1", "::1", "webhook.example.com", "aware-admission-controller.aware-system.svc"}
	dns, ips := o.ServingSANs()
	if strings.Join(dns, ",") != "aware-admission-controller.aware-system.svc,aware-admission-controller.aware-system.svc.cluster.local,webhook.example.com" {
		t.Fatalf("DNS SANs %v", dns)
	}
	if len(ips) != 2 || ips[0].String() != "127.0.0.1" || ips[1].String() != "::1" {
		t.Fatalf("IP SANs %v", ips)
	}
}
