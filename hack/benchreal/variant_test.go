//go:build benchreal

package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/hack/benchreal/simside"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestPolicyNames(t *testing.T) {
	for _, tc := range []struct {
		policy, slug, variant string
		fused, mpa            bool
		wantErr               string
	}{
		{policy: "hpa", slug: "hpa"},
		{policy: "hpa+vpa", slug: "hpa-vpa"},
		{policy: "fused", slug: "fused", fused: true, mpa: true},
		{policy: "agent", slug: "agent", mpa: true},
		{policy: "fused:target=0.7/floor=usage", slug: "fused-target-0-7-floor-usage", variant: "target=0.7/floor=usage", fused: true, mpa: true},
		{policy: "fused:target=2", slug: "fused-target-2", variant: "target=2", fused: true, mpa: true, wantErr: "(0, 1]"},
		{policy: "fused:", slug: "fused", fused: true, mpa: true, wantErr: "unknown policy"},
		{policy: "hpa:target=0.5", slug: "hpa-target-0-5", wantErr: "unknown policy"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			if got := policySlug(tc.policy); got != tc.slug {
				t.Errorf("policySlug = %q, want %q", got, tc.slug)
			}
			if got := variantOf(tc.policy); got != tc.variant {
				t.Errorf("variantOf = %q, want %q", got, tc.variant)
			}
			if got := simside.IsFused(tc.policy); got != tc.fused {
				t.Errorf("IsFused = %v, want %v", got, tc.fused)
			}
			if got := hasMPA(tc.policy); got != tc.mpa {
				t.Errorf("hasMPA = %v, want %v", got, tc.mpa)
			}
			err := validPolicy(tc.policy)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validPolicy = %v, want an error containing %q", err, tc.wantErr)
			}
			if ns := namespace(tc.policy, 12); len(ns) > 63 || strings.Trim(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
				t.Errorf("namespace %q is not a DNS label", ns)
			}
		})
	}
}

func TestWithVariant(t *testing.T) {
	base := []string{"--v=2", "--default-variant=target=0.8", "--prometheus-address=http://x", "--default-variant", "stale"}
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"the default", "", []string{"--v=2", "--prometheus-address=http://x"}},
		{"a variant", "target=0.7/floor=usage", []string{"--v=2", "--prometheus-address=http://x", "--default-variant=target=0.7/floor=usage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(base)
			if got := withVariant(in, tc.spec); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if !slices.Equal(in, base) {
				t.Errorf("the input changed to %q", in)
			}
		})
	}
}

func TestFitMutate(t *testing.T) {
	deploy := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"kind": "Deployment", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "c", "args": []any{"--v=2"}},
			}}}},
		}}
	}
	args := func(u *unstructured.Unstructured) []string {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		return a
	}
	m := fitMutate(sloMutate("http://127.0.0.1:9090", "30s"))
	rec, upd := deploy("aware-recommender"), deploy("aware-updater")
	for _, u := range []*unstructured.Unstructured{rec, upd} {
		if err := m(u); err != nil {
			t.Fatal(err)
		}
	}
	if got := args(rec); !slices.Contains(got, "--fit-to-nodes") || !slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--prometheus-window") }) {
		t.Errorf("recommender args %v: want --fit-to-nodes beside the SLO's window", got)
	}
	if got := args(upd); !slices.Equal(got, []string{"--v=2"}) {
		t.Errorf("updater args %v: want them unchanged", got)
	}
}
