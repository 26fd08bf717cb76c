package fusion

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/hpa"
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
		{spec: "limit-target=0.7/wait=1h", wantErr: "positive duration"},
		{spec: "burst=0.7", wantErr: `unknown setting "burst"`},
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
