package nn

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current code")

// bcGolden is what behaviour cloning produced from a fixed seed and fixed
// demonstrations: the statistics of each call, the weights afterwards and a
// digest of the whole checkpoint (weights, Adam state, shuffle state).
type bcGolden struct {
	Stats      []BCStats            `json:"stats"`
	Weights    map[string][]float64 `json:"weights"`
	Checkpoint string               `json:"checkpointSHA256"`
}

// TestBehaviourCloneGolden pins what PPO.BehaviourClone and
// MetaPPO.BehaviourClone compute, so that a refactoring of the shared
// cloning loop that changes the order of rows, minibatches, optimiser steps
// or the parameters trained shows up as a failure rather than as a quietly
// different checkpoint. Two calls per learner cover the shuffle state
// carried between calls; 40 demonstrations in minibatches of 16 cover a
// partial last minibatch.
//
// The golden was written on amd64, where Go does not fuse multiply-adds,
// and there the checkpoint must be identical to the byte. Other
// architectures may fuse them and round differently in the last bits, so
// there the weights and statistics are compared to a relative 1e-9, far
// below what any change to the loop would move them.
//
// After an intended change of behaviour: go test ./pkg/rl/nn -run
// TestBehaviourCloneGolden -update.
func TestBehaviourCloneGolden(t *testing.T) {
	base := smallConfig(3, 4, 11)
	base.Hidden = []int{8}
	base.MinibatchSize = 16
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) bcGolden
	}{
		{"ppo", func(t *testing.T) bcGolden {
			p := mustPPO(t, base)
			rng := newRNG(21)
			demos := make([]Demonstration, 40)
			for i, tr := range randomBatch(rng, len(demos), base.StateDim, base.NumActions) {
				demos[i] = Demonstration{State: tr.State, Mask: tr.Mask, Action: tr.Action}
			}
			stats := cloneTwice(t, func() (BCStats, error) { return p.BehaviourClone(demos) })
			return bcGolden{Stats: stats, Weights: weightsOf(p.ps.all), Checkpoint: digest(mustMarshal(t, p))}
		}},
		{"meta-ppo", func(t *testing.T) bcGolden {
			cfg := MetaConfig{Config: base, Window: 3, EmbedDim: 2}
			m := mustMeta(t, cfg)
			rng := newRNG(22)
			demos := make([]MetaDemonstration, 40)
			for i, tr := range randomBatch(rng, len(demos), cfg.StateDim, cfg.NumActions) {
				demos[i] = MetaDemonstration{
					Demonstration: Demonstration{State: tr.State, Mask: tr.Mask, Action: tr.Action},
					Window:        randomWindow(rng, i%(cfg.Window+2), cfg.StateDim, cfg.NumActions),
				}
			}
			stats := cloneTwice(t, func() (BCStats, error) { return m.BehaviourClone(demos) })
			return bcGolden{Stats: stats, Weights: weightsOf(m.all), Checkpoint: digest(mustMarshalMeta(t, m))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.run(t)
			path := filepath.Join("testdata", "bc-"+tc.name+".golden.json")
			if *updateGolden {
				b, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden (write it with -update): %v", err)
			}
			var want bcGolden
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("decoding %s: %v", path, err)
			}
			if runtime.GOARCH == "amd64" && got.Checkpoint != want.Checkpoint {
				t.Errorf("checkpoint digest %s, want %s", got.Checkpoint, want.Checkpoint)
			}
			if len(got.Stats) != len(want.Stats) {
				t.Fatalf("%d calls, golden has %d", len(got.Stats), len(want.Stats))
			}
			for i, w := range want.Stats {
				g := got.Stats[i]
				if g.Steps != w.Steps || !near(g.Loss, w.Loss) || !near(g.GradNorm, w.GradNorm) || !near(g.Accuracy, w.Accuracy) {
					t.Errorf("call %d: stats %+v, want %+v", i, g, w)
				}
			}
			if len(got.Weights) != len(want.Weights) {
				t.Errorf("%d parameters, golden has %d", len(got.Weights), len(want.Weights))
			}
			for name, w := range want.Weights {
				g, ok := got.Weights[name]
				if !ok || len(g) != len(w) {
					t.Errorf("parameter %s: %d values, want %d", name, len(g), len(w))
					continue
				}
				for j := range w {
					if !near(g[j], w[j]) {
						t.Errorf("%s[%d] = %v, want %v", name, j, g[j], w[j])
						break
					}
				}
			}
		})
	}
}

// cloneTwice calls clone twice, so that the second call starts from the
// shuffle and Adam state the first left, and returns their statistics.
func cloneTwice(t *testing.T, clone func() (BCStats, error)) []BCStats {
	t.Helper()
	var stats []BCStats
	for range 2 {
		st, err := clone()
		if err != nil {
			t.Fatal(err)
		}
		stats = append(stats, st)
	}
	return stats
}

func weightsOf(ps []*param) map[string][]float64 {
	w := make(map[string][]float64, len(ps))
	for _, p := range ps {
		w[p.name] = append([]float64(nil), p.data...)
	}
	return w
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// near is equality on amd64 and a relative 1e-9 elsewhere (see
// TestBehaviourCloneGolden).
func near(got, want float64) bool {
	if runtime.GOARCH == "amd64" {
		return got == want
	}
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}
