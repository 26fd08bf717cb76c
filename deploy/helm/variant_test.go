//go:build chart

package helm

import (
	"slices"
	"strings"
	"testing"
)

// TestChartDefaultVariant checks recommender.defaultVariant: unset, the
// recommender computes the fused default (no flag, as kustomize renders
// it); set, its --default-variant carries the value, which the
// recommender's flags read back whole.
func TestChartDefaultVariant(t *testing.T) {
	const key = "Deployment/aware-system/aware-recommender"
	for _, tc := range []struct {
		name    string
		set     []string
		want    string
		wantArg bool
	}{
		{"unset", nil, "", false},
		{"empty", []string{"recommender.defaultVariant="}, "", false},
		{"limit target with hold", []string{"recommender.defaultVariant=limit-target=0.7/hold=24h"}, "limit-target=0.7/hold=24h", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := helmTemplate(t, tc.set...)
			if err != nil {
				t.Fatal(err)
			}
			a := args(parse(t, raw)[key])
			has := slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--default-variant") })
			if has != tc.wantArg {
				t.Fatalf("recommender args %v: --default-variant present %v, want %v", a, has, tc.wantArg)
			}
			cmd := commands["recommender"]()
			target, rest, err := cmd.Find(a)
			if err == nil {
				err = target.ParseFlags(rest)
			}
			if err != nil {
				t.Fatalf("args %v: %v", a, err)
			}
			if got := target.Flags().Lookup("default-variant").Value.String(); got != tc.want {
				t.Errorf("--default-variant parsed as %q, want %q", got, tc.want)
			}
		})
	}
}
