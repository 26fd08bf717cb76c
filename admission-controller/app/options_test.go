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
		{"heartbeat duration must exceed interval", func(o *Options) { o.HeartbeatLeaseDuration = o.HeartbeatInterval }, []string{"--heartbeat-lease-duration"}},
		{"heartbeat disabled needs no interval", func(o *Options) { o.HeartbeatLeaseName, o.HeartbeatInterval = "", 0 }, nil},
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
	if o.RegisterWebhook {
		t.Fatal("registration must be opt-in")
	}
	if o.WebhookFailurePolicy != "Ignore" || o.WebhookTimeoutSeconds != 3 {
		t.Fatalf("unsafe registration defaults: %s, %ds", o.WebhookFailurePolicy, o.WebhookTimeoutSeconds)
	}
}
