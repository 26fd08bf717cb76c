package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name, variant, trace string
		want                 string
	}{
		{"default", "", "bursty", `variant "", 1 runs: 5760 windows`},
		{"faster scale-up", "target=0.7/scale-up=400", "bursty", `variant "target=0.7/scale-up=400", 1 runs`},
		{"bad variant", "target=2", "bursty", "(0, 1]"},
		{"unknown trace", "", "calm", `no run under trace "calm"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(&out, 1, 1, tc.variant, tc.trace)
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

func TestTally(t *testing.T) {
	var tl tally
	if tl.share() != 0 {
		t.Errorf("empty share %g, want 0", tl.share())
	}
	for _, v := range []bool{true, false, false, true} {
		tl.add(v)
	}
	if tl.windows != 4 || tl.violating != 2 || tl.share() != 50 {
		t.Errorf("tally %+v share %g, want 4 windows, 2 violating, 50%%", tl, tl.share())
	}
}
