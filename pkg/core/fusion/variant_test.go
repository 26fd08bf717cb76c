package fusion

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/hpa"
)

func hpaTarget(t float64) hpa.PolicyOptions { return hpa.PolicyOptions{TargetCPUUtilization: t} }

func TestParseVariant(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    Options
		wantErr string
	}{
		{spec: "", want: Options{}},
		{spec: "target=0.8", want: Options{HPA: hpaTarget(0.8)}},
		{spec: "limit-target=0.7", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true}},
		{spec: "limit-target=0.7/hold=24h", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true, PressureHold: 24 * time.Hour}},
		{spec: "target=0", wantErr: "(0, 1]"},
		{spec: "target=1.5", wantErr: "(0, 1]"},
		{spec: "target=NaN", wantErr: "(0, 1]"},
		{spec: "target=high", wantErr: "(0, 1]"},
		{spec: "target=0.7/hold=1h", wantErr: "only to limit-target"},
		{spec: "limit-target=0.7/hold=0s", wantErr: "positive duration"},
		{spec: "limit-target=0.7/hold=soon", wantErr: "positive duration"},
		{spec: "limit-target=0.7/burst=3", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true, BurstRatio: 3}},
		{spec: "limit-target=0.7/hold=24h/burst=3", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true, PressureHold: 24 * time.Hour, BurstRatio: 3}},
		{spec: "limit-target=0.7/burst=2.5/hold=1h", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true, PressureHold: time.Hour, BurstRatio: 2.5}},
		{spec: "limit-target=0.7/wait=1h", wantErr: `unknown setting "wait"`},
		{spec: "limit-target=0.7/hold=1h/hold=2h", wantErr: "given twice"},
		{spec: "limit-target=0.7/burst=1", wantErr: "ratio > 1"},
		{spec: "limit-target=0.7/burst=NaN", wantErr: "ratio > 1"},
		{spec: "limit-target=0.7/burst=+Inf", wantErr: "ratio > 1"},
		{spec: "limit-target=0.7/burst", wantErr: "ratio > 1"},
		{spec: "limit-target=0.7/", wantErr: "unknown setting"},
		{spec: "target=0.7/burst=3", wantErr: "only to limit-target"},
		{spec: "burst=0.7", wantErr: `unknown setting "burst"`},
		{spec: "target=0.7/scale-up=400", want: Options{HPA: hpaTarget(0.7), ScaleUpPercent: 400}},
		{spec: "limit-target=0.7/scale-up=400/hold=24h/burst=3.5", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true, PressureHold: 24 * time.Hour, BurstRatio: 3.5, ScaleUpPercent: 400}},
		{spec: "target=0.7/scale-up=0", wantErr: "whole percent >= 1"},
		{spec: "target=0.7/scale-up=1.5", wantErr: "whole percent >= 1"},
		{spec: "target=0.7/scale-up=99999999999", wantErr: "whole percent >= 1"},
		{spec: "target=0.7/scale-up=400/scale-up=200", wantErr: "given twice"},
		{spec: "target=0.7/floor=usage", want: Options{HPA: hpaTarget(0.7), UsageFloor: true}},
		{spec: "limit-target=0.7/floor=usage/burst=3", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true, UsageFloor: true, BurstRatio: 3}},
		{spec: "target=0.7/floor=peak", wantErr: "floor must be usage"},
		{spec: "target=0.7/floor", wantErr: "floor must be usage"},
		{spec: "target=0.7/floor=usage/floor=usage", wantErr: "given twice"},
		{spec: "target=0.7/floor-band=both", want: Options{HPA: hpaTarget(0.7), FloorBandBoth: true}},
		{spec: "limit-target=0.7/floor-band=both/floor=usage", want: Options{HPA: hpaTarget(0.7), TargetOfLimit: true, FloorBandBoth: true, UsageFloor: true}},
		{spec: "target=0.7/floor-band=down", wantErr: "floor-band must be both"},
		{spec: "target=0.7/floor-band", wantErr: "floor-band must be both"},
		{spec: "target=0.7/floor-band=both/floor-band=both", wantErr: "given twice"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseVariant(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSameVariant(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want bool
	}{
		{"both the default", "", "", true},
		{"the default's target spelt out", "", "target=0.7", true},
		{"another target", "", "target=0.8", false},
		{"a target of the limit is not of the request", "target=0.7", "limit-target=0.7", false},
		{"trailing zero", "limit-target=0.70", "limit-target=0.7", true},
		{"hold in other units", "limit-target=0.7/hold=24h", "limit-target=0.7/hold=1440m", true},
		{"with and without hold", "limit-target=0.7/hold=24h", "limit-target=0.7", false},
		{"another hold", "limit-target=0.7/hold=24h", "limit-target=0.7/hold=1h", false},
		{"settings in another order", "limit-target=0.7/hold=24h/burst=3", "limit-target=0.7/burst=3.0/hold=1440m", true},
		{"with and without burst", "limit-target=0.7/hold=24h/burst=3", "limit-target=0.7/hold=24h", false},
		{"with and without scale-up", "target=0.7/scale-up=400", "target=0.7", false},
		{"with and without the floor's band both ways", "target=0.7/floor-band=both", "target=0.7", false},
		{"scale-up on the default's target spelt two ways", "target=0.70/scale-up=400", "target=0.7/scale-up=400", true},
		{"unparseable", "", "target=high", false},
		{"unparseable on the left", "bogus", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, back := SameVariant(tc.a, tc.b), SameVariant(tc.b, tc.a); got != tc.want || back != tc.want {
				t.Fatalf("SameVariant(%q, %q) = %v, reversed %v, want %v", tc.a, tc.b, got, back, tc.want)
			}
		})
	}
}
