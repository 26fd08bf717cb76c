package train

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// A learner trained without some state features records it in its
// checkpoint, and an agent serving the checkpoint reads those features as 0
// whatever its caller asks.
func TestFeaturesTravelWithTheCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  learn.Features
		want string
	}{
		{"all", 0, ""},
		{"no trend", learn.FeaturesTrend, "peak"},
		{"none", learn.AllFeatures, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := residualOptions()
			o.FeaturesOff = tc.off
			l, err := NewLearner(o)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseLearner(marshal(t, l))
			if err != nil {
				t.Fatal(err)
			}
			if got := back.PolicyConfig().StateFeatures; got != tc.want {
				t.Fatalf("checkpoint records features %q, want %q", got, tc.want)
			}
			rec := &recordingLearner{Learner: back}
			apps, err := sim.GenerateApps(3, 1)
			if err != nil {
				t.Fatal(err)
			}
			a, err := NewAgent(rec, apps[0].Constraints, AgentOptions{Greedy: true})
			if err != nil {
				t.Fatal(err)
			}
			for i, rate := range []float64{10, 20, 40, 80, 160} {
				obs := observation(apps[0], i)
				obs.RequestRate = rate
				if _, err := a.decide(context.Background(), obs, true); err != nil {
					t.Fatal(err)
				}
			}
			last := rec.states[len(rec.states)-1]
			if got := last[learn.FeatRateTrend4] != 0; got != (tc.off&learn.FeaturesTrend == 0) {
				t.Errorf("trend feature %v with features off %v", last[learn.FeatRateTrend4], tc.off)
			}
			if got := last[learn.FeatRatePeakToMean] != 0; got != (tc.off&learn.FeaturesPeak == 0) {
				t.Errorf("peak feature %v with features off %v", last[learn.FeatRatePeakToMean], tc.off)
			}
		})
	}
}

// observation is a plausible observation of app at window i.
func observation(app sim.App, i int) workload.Observation {
	s, err := sim.New(sim.DefaultConfig(), app, &sim.Trace{Name: "steady", Step: 15 * time.Second, Rates: []float64{app.BaseRate}}, uint64(i))
	if err != nil {
		panic(err)
	}
	s.Step()
	return s.Observation()
}

// An episode cut from a longer trace is a contiguous piece of it, at an
// offset that depends on the episode's seed only.
func TestEpisodeTraceSlices(t *testing.T) {
	o := DefaultOptions()
	o.EpisodeSteps, o.TraceSteps = 40, 400
	app := sim.App{Name: "a", BaseRate: 50}
	offsets := map[int]bool{}
	for seed := range uint64(20) {
		full, err := sim.GenerateTrace(sim.Ramp, sim.TraceOptions{Mean: 50, Steps: 400, Step: o.Step, Period: 24 * time.Hour, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		sp := spec{kind: sim.Ramp, app: app, seed: seed}
		tr, err := episodeTrace(&sp, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Rates) != o.EpisodeSteps+1 {
			t.Fatalf("episode trace of %d windows, want %d", len(tr.Rates), o.EpisodeSteps+1)
		}
		off := slices.Index(full.Rates, tr.Rates[0])
		if off < 0 || !slices.Equal(full.Rates[off:off+len(tr.Rates)], tr.Rates) {
			t.Fatalf("seed %d: not a piece of the full trace", seed)
		}
		again, _ := episodeTrace(&sp, o)
		if !slices.Equal(again.Rates, tr.Rates) {
			t.Fatalf("seed %d: the cut is not reproducible", seed)
		}
		offsets[off] = true
	}
	if len(offsets) < 10 {
		t.Errorf("20 seeds cut at only %d offsets", len(offsets))
	}
	o.TraceSteps = 0
	sp := spec{kind: sim.Ramp, app: app, seed: 1}
	tr, err := episodeTrace(&sp, o)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Rates[0] != 50*0.2 || len(tr.Rates) != 41 {
		t.Errorf("without TraceSteps the ramp starts at %v over %d windows, want 10 over 41", tr.Rates[0], len(tr.Rates))
	}
}
