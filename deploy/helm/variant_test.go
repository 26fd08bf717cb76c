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
// recommender's flags read back whole, and so does the updater's, which
// must hold the replica count to the variant's scale-up rate.
func TestChartDefaultVariant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     []string
		want    string
		wantArg bool
	}{
		{"unset", nil, "", false},
		{"empty", []string{"recommender.defaultVariant="}, "", false},
		{"limit target with hold", []string{"recommender.defaultVariant=limit-target=0.7/hold=24h"}, "limit-target=0.7/hold=24h", true},
		{"with a faster scale-up", []string{"recommender.defaultVariant=limit-target=0.7/hold=24h/scale-up=400"}, "limit-target=0.7/hold=24h/scale-up=400", true},
	} {
		for _, component := range []string{"recommender", "updater"} {
			t.Run(tc.name+"/"+component, func(t *testing.T) {
				testVariantArg(t, component, tc.set, tc.want, tc.wantArg)
			})
		}
	}
}

func testVariantArg(t *testing.T, component string, set []string, want string, wantArg bool) {
	t.Helper()
	raw, err := helmTemplate(t, set...)
	if err != nil {
		t.Fatal(err)
	}
	a := args(parse(t, raw)["Deployment/aware-system/aware-"+component])
	has := slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--default-variant") })
	if has != wantArg {
		t.Fatalf("%s args %v: --default-variant present %v, want %v", component, a, has, wantArg)
	}
	cmd := commands[component]()
	target, rest, err := cmd.Find(a)
	if err == nil {
		err = target.ParseFlags(rest)
	}
	if err != nil {
		t.Fatalf("args %v: %v", a, err)
	}
	if got := target.Flags().Lookup("default-variant").Value.String(); got != want {
		t.Errorf("%s --default-variant parsed as %q, want %q", component, got, want)
	}
}
