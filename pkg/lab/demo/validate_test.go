package demo

import (
	"strings"
	"testing"
)

func TestValidationOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     func(o *Options)
		wantErr string
	}{
		{name: "off by default", set: func(*Options) {}},
		{name: "on", set: func(o *Options) { o.Agent.Validation.Apps = 16 }},
		{name: "a variant as the baseline", set: func(o *Options) {
			o.Agent.Validation.Apps, o.Agent.Validation.Baseline = 16, "fused:limit-target=0.7/hold=24h/scale-up=400"
		}},
		{name: "unknown baseline", set: func(o *Options) { o.Agent.Validation.Apps, o.Agent.Validation.Baseline = 16, "magic" }, wantErr: `validation baseline: unknown policy "magic"`},
		{name: "negative apps", set: func(o *Options) { o.Agent.Validation.Apps = -1 }, wantErr: "validation apps must be >= 0"},
		{name: "share of worse runs", set: func(o *Options) { o.Agent.Validation.Apps, o.Agent.Validation.MaxWorse = 16, 1.5 }, wantErr: "must be in [0, 1], got 1.5"},
		{name: "no interval", set: func(o *Options) { o.Agent.Validation.Apps, o.Agent.Validation.Every = 16, 0 }, wantErr: "interval (0 updates) must be > 0"},
		{name: "the evaluated set's seed", set: func(o *Options) { o.Agent.Validation.Apps, o.Agent.Validation.Seed = 16, o.Seed }, wantErr: "is the evaluated set's or a training seed"},
		{name: "the third agent's training seed", set: func(o *Options) { o.Agent.Validation.Apps, o.Agent.Validation.Seed = 16, o.Seed+2 }, wantErr: "is the evaluated set's or a training seed (1 to 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.set(&o)
			err := o.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
