//go:build benchreal

package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/hack/benchreal/result"
)

func TestMergeInput(t *testing.T) {
	for _, tc := range []struct {
		arg, path string
		keep      []string
		err       string
	}{
		{arg: "a/results.json", path: "a/results.json"},
		{arg: "a/results.json@hpa+vpa", path: "a/results.json", keep: []string{"hpa+vpa"}},
		{arg: "r@fused@agent", path: "r", keep: []string{"fused", "agent"}},
		{arg: "r@fused:target=0.7/floor=usage", path: "r", keep: []string{"fused:target=0.7/floor=usage"}},
		{arg: "r@", err: "empty policy"},
		{arg: "r@fused@@agent", err: "empty policy"},
		{arg: "@fused", err: "no file"},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			path, keep, err := mergeInput(tc.arg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || path != tc.path || !slices.Equal(keep, tc.keep) {
				t.Errorf("= %q, %q, %v; want %q, %q", path, keep, err, tc.path, tc.keep)
			}
		})
	}
}

func TestKeepPolicies(t *testing.T) {
	runs := []result.Run{{Policy: "fused", Rep: 0}, {Policy: "hpa+vpa", Rep: 0}, {Policy: "agent", Rep: 0}, {Policy: "hpa+vpa", Rep: 1}}
	for _, tc := range []struct {
		name string
		keep []string
		want []string
		err  string
	}{
		{"all", nil, []string{"fused", "hpa+vpa", "agent", "hpa+vpa"}, ""},
		{"one", []string{"hpa+vpa"}, []string{"hpa+vpa", "hpa+vpa"}, ""},
		{"two", []string{"agent", "fused"}, []string{"fused", "agent"}, ""},
		{"absent", []string{"hpa+vpa", "vpa"}, nil, `no run of policy "vpa"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := keepPolicies(runs, tc.keep)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			var names []string
			for _, r := range got {
				names = append(names, r.Policy)
			}
			if err != nil || !slices.Equal(names, tc.want) {
				t.Errorf("kept %q (%v), want %q", names, err, tc.want)
			}
		})
	}
}
