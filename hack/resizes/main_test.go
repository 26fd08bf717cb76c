package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
		want []string
	}{
		{"default, one run", options{apps: 1, seed: 1, trace: "ramp", verbose: true},
			[]string{`variant "", 1 runs:`, "app-0004 ramp window    0:"}},
		{"variant, every trace", options{apps: 1, seed: 1, variant: "limit-target=0.7/hold=24h"},
			[]string{`variant "limit-target=0.7/hold=24h", 6 runs:`}},
		{"bad variant", options{apps: 1, seed: 1, variant: "target=2"}, []string{"(0, 1]"}},
		{"no such app", options{apps: 1, seed: 1, app: "app-0009"}, []string{`no held-out run matches app "app-0009"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(&out, tc.o)
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

func TestRelChange(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, next workload.Resources
		want      float64
	}{
		{"cpu up", workload.Resources{CPU: 1, Memory: 100}, workload.Resources{CPU: 1.5, Memory: 100}, 0.5},
		{"memory down wins", workload.Resources{CPU: 1, Memory: 100}, workload.Resources{CPU: 1.01, Memory: 80}, 0.2},
		{"unset resource", workload.Resources{CPU: 1}, workload.Resources{CPU: 1.001, Memory: 80}, 0.001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := relChange(tc.cur, tc.next); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("relChange = %g, want %g", got, tc.want)
			}
		})
	}
}

func TestTally(t *testing.T) {
	tl := tally{bySize: make([]int, len(sizeClasses)), byReason: map[string]int{}}
	for _, c := range []struct {
		change float64
		reason string
	}{{0.001, reasonTag("ScaleDownStabilized; SLOCPUFloor")}, {0.05, reasonTag("ScaleUp")}, {0.5, reasonTag("SLOViolated: ScaleUp; SLOVerticalGrow(gain 1.25)")}, {0.009, "-"}} {
		tl.add(c.change, c.reason)
	}
	if tl.resizes != 4 || tl.bySize[0] != 2 || tl.bySize[1] != 1 || tl.bySize[2] != 1 {
		t.Errorf("by size %v of %d, want [2 1 1] of 4", tl.bySize, tl.resizes)
	}
	if tl.byReason["SLOCPUFloor"] != 1 || tl.byReason["SLOVerticalGrow"] != 1 || tl.byReason["-"] != 2 {
		t.Errorf("by reason %v, want SLOCPUFloor 1, SLOVerticalGrow 1 and - 2", tl.byReason)
	}
}
