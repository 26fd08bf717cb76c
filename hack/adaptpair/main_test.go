package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/train"
)

// writeStudy writes an adapt.json of two seeds and two apps whose arm
// "meta-ppo" has the given rewards per (seed, app), and a transfer arm at
// a constant 1.
func writeStudy(t *testing.T, rewards func(seed uint64, app int) []float64) string {
	t.Helper()
	st := train.AdaptStudy{Seeds: []uint64{1, 2}}
	for _, seed := range st.Seeds {
		r := &train.AdaptResult{}
		for app := range 2 {
			name := []string{"a", "b"}[app]
			rs := rewards(seed, app)
			r.Runs = append(r.Runs,
				train.AdaptRun{Arm: train.ArmMeta, App: name, Rewards: rs, ZeroShot: rs[0], Final: rs[len(rs)-1]},
				train.AdaptRun{Arm: train.ArmTransfer, App: name, Rewards: []float64{1, 1, 1, 1}, ZeroShot: 1, Final: 1},
				train.AdaptRun{Arm: train.ArmFused, App: name, Rewards: []float64{9, 9, 9, 9}, ZeroShot: 9, Final: 9})
		}
		st.PerSeed = append(st.PerSeed, r)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "adapt.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRun(t *testing.T) {
	// a starts at 1 at once; b starts at 0 and needs episodes to climb
	// (0, 1, 1, 1: its moving average reaches 0.9 at episode 4).
	a := writeStudy(t, func(uint64, int) []float64 { return []float64{1, 1, 1, 1} })
	b := writeStudy(t, func(uint64, int) []float64 { return []float64{0, 1, 1, 1} })
	for _, tc := range []struct {
		name, a, b string
		want       []string
		wantErr    string
	}{
		{"blind against seeing", a + ":meta-ppo", b + ":meta-ppo", []string{
			"over 4 (app, seed) pairs, seeds [1 2]",
			"zero-shot reward  1.000 vs 0.000: +1.000 [+1.000, +1.000]",
			"final reward      1.000 vs 1.000: +0.000",
			// The fused floor (9) is not the converged reward.
			"episodes to 90%   1.000 vs 4.000: -3.000",
			"speed-up to 90%   4.00x",
			"reached by 4 (-a) and 4 (-b) of 4",
		}, ""},
		{"missing arm", a + ":meta-ppo", b + ":scratch", nil, "has no scratch run on a"},
		{"no arm", a, b + ":meta-ppo", nil, "want FILE:ARM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := run(&out, tc.a, tc.b)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
