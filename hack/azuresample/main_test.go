package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"writes the three files", []string{"-functions", "3", "-minutes", "10"}, "app_memory_percentiles.anon.d01.csv"},
		{"no folder", nil, "-dir is required"},
		{"past the day", []string{"-first", "1400", "-minutes", "100"}, "minutes within 1..1440"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name != "no folder" {
				args = append([]string{"-dir", t.TempDir()}, args...)
			}
			var out bytes.Buffer
			err := run(&out, args)
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
