package app

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/hpa"
)

// TestDefaultVariant checks --default-variant: the default is the fused
// default itself (fusion.Options{}, as before the flag), a variant is
// parsed into the controller's policy options, and a spec that names no
// variant is refused at start-up saying what is accepted.
func TestDefaultVariant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    fusion.Options
		wantErr string
	}{
		{"unset", nil, fusion.Options{}, ""},
		{"empty", []string{"--default-variant="}, fusion.Options{}, ""},
		{"target", []string{"--default-variant=target=0.8"}, fusion.Options{HPA: hpa.PolicyOptions{TargetCPUUtilization: 0.8}}, ""},
		{"limit target with hold", []string{"--default-variant=limit-target=0.7/hold=24h", "--prometheus-address=http://127.0.0.1:9090"},
			fusion.Options{HPA: hpa.PolicyOptions{TargetCPUUtilization: 0.7}, TargetOfLimit: true, PressureHold: 24 * time.Hour}, ""},
		{"limit target with burst gate", []string{"--default-variant=limit-target=0.7/burst=3", "--prometheus-address=http://127.0.0.1:9090"},
			fusion.Options{HPA: hpa.PolicyOptions{TargetCPUUtilization: 0.7}, TargetOfLimit: true, BurstRatio: 3}, ""},
		{"burst gate without a request rate source", []string{"--default-variant=limit-target=0.7/burst=3"}, fusion.Options{}, "gates on the request rate's bursts"},
		{"unknown setting", []string{"--default-variant=burst=2"}, fusion.Options{}, `--default-variant: fused variant "burst=2": unknown setting "burst"`},
		{"target out of range", []string{"--default-variant=limit-target=1.5"}, fusion.Options{}, "(0, 1]"},
		{"hold without limit", []string{"--default-variant=target=0.7/hold=1h"}, fusion.Options{}, "hold and burst apply only to limit-target"},
		{"hold without a pressure source", []string{"--default-variant=limit-target=0.7/hold=24h"}, fusion.Options{}, "set --prometheus-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("recommender", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got, err := o.defaultPolicy()
			if err != nil || got != tc.want {
				t.Fatalf("defaultPolicy() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	fs := pflag.NewFlagSet("recommender", pflag.ContinueOnError)
	NewOptions().AddFlags(fs)
	if f := fs.Lookup("default-variant"); f == nil || f.DefValue != "" || !strings.Contains(f.Usage, fusion.VariantHelp) {
		t.Errorf("--default-variant flag %+v, want an empty default and help naming the variants", f)
	}
}
