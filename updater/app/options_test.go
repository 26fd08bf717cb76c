package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOptionsDefaultsValid(t *testing.T) {
	o := NewOptions()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if err := o.ControllerConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestOptionsFlagsAndValidation(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("updater", pflag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{
		"--dry-run", "--min-replicas=0", "--small-workload-policy=Sometimes", "--update-interval=0s",
		"--max-recommendation-age=-1s", "--leader-elect-renew-deadline=1m", "--admission-lease-namespace=",
		"--in-place-resize-rate-limit=2.5", "--in-place-resize-rate-burst=0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !o.DryRun || !o.ControllerConfig().DryRun {
		t.Error("--dry-run not bound")
	}
	if c := o.ControllerConfig(); c.ResizeRate != 2.5 || c.ResizeBurst != 0 {
		t.Errorf("resize budget %g/%d not bound", c.ResizeRate, c.ResizeBurst)
	}
	err = o.Validate()
	if err == nil {
		t.Fatal("invalid options accepted")
	}
	for _, want := range []string{"min replicas", "small-workload policy", "update interval", "max recommendation age", "lease-duration", "admission lease namespace", "--in-place-resize-rate-burst"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestDefaultVariant(t *testing.T) {
	for _, tc := range []struct {
		variant string
		want    int32
		wantErr string
	}{
		{"", 0, ""},
		{"limit-target=0.7/hold=24h", 0, ""},
		{"limit-target=0.7/hold=24h/scale-up=400", 400, ""},
		{"target=0.7/scale-up=150", 150, ""},
		{"target=0.7/scale-up=fast", 0, "--default-variant"},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("updater", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse([]string{"--default-variant=" + tc.variant}); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.ControllerConfig().ScaleUpPercent; got != tc.want {
				t.Errorf("scale-up percent %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRunFailsCleanlyWithoutCluster(t *testing.T) {
	o := NewOptions()
	o.Kube.Kubeconfig = t.TempDir() + "/missing-kubeconfig"
	err := run(t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("err = %v, want a kubeconfig error", err)
	}
}
