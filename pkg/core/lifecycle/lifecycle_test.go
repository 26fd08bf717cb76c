package lifecycle

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// alternate returns n rewards alternating mean±d: mean `mean`, std `d`.
func alternate(mean, d float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean + d
		if i%2 == 1 {
			out[i] = mean - d
		}
	}
	return out
}

func TestTransitions(t *testing.T) {
	g := Gates{Window: 4, EpisodeSteps: 5, PromoteMinMean: 0.6, PromoteMaxStdDev: 0.1, RetrainBelowMean: 0.5, RetrainAboveStdDev: 0.2}
	for _, tc := range []struct {
		name    string
		from    Stage
		rewards []float64
		// want is the stage after the rewards; atEpisode the 1-based episode
		// of the transition (0: none).
		want      Stage
		atEpisode int
		reason    string
	}{
		{"bootstrap gate passes on a full window", Bootstrapping, repeat(0.7, 4), OnlineTraining, 4, "RewardGatePassed"},
		{"bootstrap waits for a full window", Bootstrapping, repeat(0.9, 3), Bootstrapping, 0, ""},
		{"bootstrap mean too low", Bootstrapping, repeat(0.59, 8), Bootstrapping, 0, ""},
		{"bootstrap mean exactly at gate", Bootstrapping, repeat(0.6, 4), OnlineTraining, 4, "RewardGatePassed"},
		{"bootstrap too noisy", Bootstrapping, alternate(0.8, 0.15, 8), Bootstrapping, 0, ""},
		{"bootstrap passes once old bad episodes leave the window", Bootstrapping, append(repeat(0.1, 3), repeat(0.8, 4)...), OnlineTraining, 7, "RewardGatePassed"},
		{"online training becomes serving when stable", OnlineTraining, repeat(0.65, 4), Serving, 4, "TrainingStable"},
		{"online training stays while unstable", OnlineTraining, alternate(0.7, 0.2, 6), OnlineTraining, 0, ""},
		{"online training is not demoted by low reward", OnlineTraining, repeat(-1, 6), OnlineTraining, 0, ""},
		{"serving stays while healthy", Serving, alternate(0.7, 0.1, 10), Serving, 0, ""},
		{"serving mean drops below retrain threshold", Serving, repeat(0.45, 4), Retraining, 4, "RewardDropped"},
		{"serving mean at retrain threshold does not fire", Serving, repeat(0.5, 6), Serving, 0, ""},
		{"serving std above retrain threshold", Serving, alternate(0.8, 0.25, 4), Retraining, 4, "RewardUnstable"},
		{"serving detector needs a full window", Serving, repeat(-1, 3), Serving, 0, ""},
		{"retraining back to online training", Retraining, repeat(0.62, 4), OnlineTraining, 4, "RewardGatePassed"},
		{"retraining stays below gate", Retraining, repeat(0.55, 8), Retraining, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Restore(g, State{Stage: tc.from, Since: t0})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for i, r := range tc.rewards {
				tr, ok, err := m.RecordEpisode(r, t0.Add(time.Duration(i+1)*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					continue
				}
				if got != 0 {
					t.Fatalf("second transition at episode %d: %+v", i+1, tr)
				}
				got = i + 1
				if tr.From != tc.from || tr.To != tc.want || tr.Reason != tc.reason || tr.Episode != int64(i+1) {
					t.Errorf("transition %+v, want %v→%v (%s) at episode %d", tr, tc.from, tc.want, tc.reason, i+1)
				}
				if !tr.Time.Equal(t0.Add(time.Duration(i+1) * time.Minute)) {
					t.Errorf("transition time %v is not the episode's", tr.Time)
				}
				// The window restarts with the new stage.
				if n := len(m.State().Window); n != 0 {
					t.Errorf("window holds %d rewards after a transition, want 0", n)
				}
				// Stop here: what follows belongs to the next stage's test.
				break
			}
			if got != tc.atEpisode {
				t.Errorf("transition at episode %d, want %d", got, tc.atEpisode)
			}
			if m.Stage() != tc.want {
				t.Errorf("stage %v, want %v", m.Stage(), tc.want)
			}
		})
	}
}

// TestFullCycle walks every stage in order with one machine, as a workload
// would: gate, stability, detector, recovery.
func TestFullCycle(t *testing.T) {
	g := DefaultGates()
	g.Window = 3
	m, err := New(g, t0)
	if err != nil {
		t.Fatal(err)
	}
	var path []Stage
	now := t0
	feed := func(rs ...float64) {
		for _, r := range rs {
			now = now.Add(time.Minute)
			tr, ok, err := m.RecordEpisode(r, now)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				path = append(path, tr.To)
				if !m.Since().Equal(now) {
					t.Errorf("entered %v at %v, Since says %v", tr.To, now, m.Since())
				}
			}
		}
	}
	if !m.Since().Equal(t0) {
		t.Errorf("Since %v before any transition, want the creation time %v", m.Since(), t0)
	}
	feed(0.2, 0.3, 0.7, 0.7, 0.7) // bootstrap: gate passes on the 5th
	feed(0.7, 0.7, 0.7)           // online: stable → serving
	feed(0.3, 0.3, 0.3)           // serving: detector fires
	feed(0.7, 0.7, 0.7)           // retraining: gate → online
	want := []Stage{OnlineTraining, Serving, Retraining, OnlineTraining}
	if len(path) != len(want) {
		t.Fatalf("path %v, want %v", path, want)
	}
	for i := range want {
		if path[i] != want[i] {
			t.Fatalf("path %v, want %v", path, want)
		}
	}
	if st := m.State(); st.Episodes != 14 || !st.Since.Equal(now) {
		t.Errorf("state %+v: want 14 episodes since %v", st, now)
	}
}

func TestRestoreResumes(t *testing.T) {
	g := DefaultGates()
	g.Window = 4
	m, _ := New(g, t0)
	for range 3 {
		if _, _, err := m.RecordEpisode(0.9, t0); err != nil {
			t.Fatal(err)
		}
	}
	m2, err := Restore(g, m.State())
	if err != nil {
		t.Fatal(err)
	}
	// One more episode completes the window restored from the state.
	if _, ok, _ := m2.RecordEpisode(0.9, t0); !ok || m2.Stage() != OnlineTraining {
		t.Fatalf("restored machine did not resume its window: stage %v", m2.Stage())
	}
}

func TestInvalidInputs(t *testing.T) {
	m, _ := New(DefaultGates(), t0)
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, _, err := m.RecordEpisode(r, t0); err == nil {
			t.Errorf("reward %v accepted", r)
		}
	}
	if m.State().Episodes != 0 {
		t.Error("a rejected reward was counted")
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Gates)
		want   string
	}{
		{"window too small", func(g *Gates) { g.Window = 1 }, "window"},
		{"no episode steps", func(g *Gates) { g.EpisodeSteps = -1 }, "episodeSteps"},
		{"NaN promote", func(g *Gates) { g.PromoteMinMean = math.NaN() }, "promoteMinMean"},
		{"retrain above promote", func(g *Gates) { g.RetrainBelowMean = 0.7 }, "must not exceed"},
		{"retrain std below promote std", func(g *Gates) { g.RetrainAboveStdDev = 0.05 }, "at least"},
		{"std out of range", func(g *Gates) { g.PromoteMaxStdDev = 3; g.RetrainAboveStdDev = 3 }, "promoteMaxStdDev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := DefaultGates()
			tc.mutate(&g)
			err := g.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := Restore(DefaultGates(), State{Stage: 9}); err == nil {
		t.Error("stage 9 restored")
	}
	if got := (Gates{Window: 5}).WithDefaults(); got.Window != 5 || got.EpisodeSteps != 30 || got.PromoteMinMean != 0.6 {
		t.Errorf("WithDefaults = %+v", got)
	}
}

func TestEndBootstrap(t *testing.T) {
	t1 := t0.Add(time.Hour)
	for _, tc := range []struct {
		name  string
		stage Stage
		moved bool
	}{
		{"bootstrapping is promoted", Bootstrapping, true},
		{"online training stays", OnlineTraining, false},
		{"serving stays", Serving, false},
		{"retraining stays", Retraining, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Restore(DefaultGates(), State{Stage: tc.stage, Window: []float64{0.2, 0.4}, Episodes: 2})
			if err != nil {
				t.Fatal(err)
			}
			tr, moved := m.EndBootstrap(t1)
			if moved != tc.moved {
				t.Fatalf("moved = %v, want %v", moved, tc.moved)
			}
			if !moved {
				if m.Stage() != tc.stage || len(m.State().Window) != 2 {
					t.Errorf("state changed: %+v", m.State())
				}
				return
			}
			want := Transition{From: Bootstrapping, To: OnlineTraining, Time: t1, Episode: 2, Mean: 0.3, StdDev: 0.1, Reason: "BootstrapCapReached"}
			if math.Abs(tr.Mean-want.Mean) > 1e-12 || math.Abs(tr.StdDev-want.StdDev) > 1e-12 {
				t.Errorf("stats %v/%v, want %v/%v", tr.Mean, tr.StdDev, want.Mean, want.StdDev)
			}
			tr.Mean, tr.StdDev, want.Mean, want.StdDev = 0, 0, 0, 0
			if tr != want || m.Stage() != OnlineTraining || len(m.State().Window) != 0 || !m.State().Since.Equal(t1) {
				t.Errorf("transition %+v, state %+v", tr, m.State())
			}
		})
	}
}

// TestEndRetraining: the retraining cap returns a Retraining workload to
// OnlineTraining, where the agent acts again, whatever its window says;
// in every other stage it changes nothing.
func TestEndRetraining(t *testing.T) {
	t1 := t0.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		stage  Stage
		window []float64
		moved  bool
	}{
		{"retraining below the gate returns to the agent", Retraining, []float64{0.2, 0.4}, true},
		{"retraining with an empty window returns too", Retraining, nil, true},
		{"bootstrapping stays", Bootstrapping, []float64{0.2, 0.4}, false},
		{"online training stays", OnlineTraining, []float64{0.2, 0.4}, false},
		{"serving stays", Serving, []float64{0.2, 0.4}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Restore(DefaultGates(), State{Stage: tc.stage, Window: tc.window, Episodes: 7})
			if err != nil {
				t.Fatal(err)
			}
			tr, moved := m.EndRetraining(t1)
			if moved != tc.moved {
				t.Fatalf("moved = %v, want %v", moved, tc.moved)
			}
			if !moved {
				if m.Stage() != tc.stage || len(m.State().Window) != len(tc.window) || tr != (Transition{}) {
					t.Errorf("state changed: %+v, transition %+v", m.State(), tr)
				}
				return
			}
			wantMean, wantStd := meanStd(tc.window)
			want := Transition{From: Retraining, To: OnlineTraining, Time: t1, Episode: 7, Mean: wantMean, StdDev: wantStd, Reason: "RetrainingCapReached"}
			if tr != want || m.Stage() != OnlineTraining || !m.Stage().AgentActs() || len(m.State().Window) != 0 || !m.State().Since.Equal(t1) {
				t.Errorf("transition %+v, want %+v; state %+v", tr, want, m.State())
			}
			// The machine goes on from OnlineTraining: the gate serves it.
			for i := range DefaultGates().Window {
				if _, _, err := m.RecordEpisode(0.9, t1.Add(time.Duration(i+1)*time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			if m.Stage() != Serving {
				t.Errorf("stage %v after a full window at 0.9, want Serving", m.Stage())
			}
		})
	}
}

// TestRetrainingBounds: Min holds the promotion gate back until the
// defaults have acted that many episodes of the stay in Retraining, Max
// returns the workload to the agent after that many whatever the gate
// says (even on a window not yet full); episodes served before the
// detector fired count for neither; zero bounds are the machine without
// them; the other stages ignore both.
func TestRetrainingBounds(t *testing.T) {
	g := Gates{Window: 4, EpisodeSteps: 5, PromoteMinMean: 0.6, PromoteMaxStdDev: 0.1, RetrainBelowMean: 0.5, RetrainAboveStdDev: 0.2}
	const R, O, S = Retraining, OnlineTraining, Serving
	for _, tc := range []struct {
		name    string
		from    Stage
		bounds  RetrainingBounds
		rewards []float64
		// wantStages is the stage after each reward.
		wantStages []Stage
		// at is the 1-based episode of the Retraining → OnlineTraining
		// transition (0: none), reason its reason.
		at     int
		reason string
	}{
		{"no bounds: below the gate for ever", R, RetrainingBounds{}, repeat(0.3, 6), []Stage{R, R, R, R, R, R}, 0, ""},
		{"no bounds: the gate on a full window", R, RetrainingBounds{}, repeat(0.7, 5), []Stage{R, R, R, O, O}, 4, "RewardGatePassed"},
		{"max returns below the gate", R, RetrainingBounds{Max: 6}, repeat(0.3, 7), []Stage{R, R, R, R, R, O, O}, 6, "RetrainingCapReached"},
		{"max below the window", R, RetrainingBounds{Max: 2}, repeat(0.3, 3), []Stage{R, O, O}, 2, "RetrainingCapReached"},
		{"the gate before max", R, RetrainingBounds{Max: 6}, repeat(0.7, 5), []Stage{R, R, R, O, O}, 4, "RewardGatePassed"},
		{"min holds the gate back", R, RetrainingBounds{Min: 6}, repeat(0.7, 7), []Stage{R, R, R, R, R, O, O}, 6, "RewardGatePassed"},
		{"min does not pass a failing gate", R, RetrainingBounds{Min: 2}, repeat(0.3, 6), []Stage{R, R, R, R, R, R}, 0, ""},
		{"min equal to max: a fixed stay", R, RetrainingBounds{Min: 5, Max: 5}, append(repeat(0.7, 4), 0.3, 0.3), []Stage{R, R, R, R, O, O}, 5, "RetrainingCapReached"},
		{"min equal to max, the gate passing", R, RetrainingBounds{Min: 5, Max: 5}, repeat(0.7, 6), []Stage{R, R, R, R, O, O}, 5, "RewardGatePassed"},
		{"served episodes do not count", S, RetrainingBounds{Max: 3}, append(repeat(0.8, 4), repeat(0.45, 6)...),
			[]Stage{S, S, S, S, S, S, S, R, R, R}, 0, ""},
		{"counts from the detection", S, RetrainingBounds{Max: 3}, append(repeat(0.1, 4), repeat(0.3, 4)...),
			[]Stage{S, S, S, R, R, R, O, O}, 7, "RetrainingCapReached"},
		{"bootstrapping ignores the bounds", Bootstrapping, RetrainingBounds{Min: 1, Max: 1}, repeat(0.7, 5),
			[]Stage{Bootstrapping, Bootstrapping, Bootstrapping, O, O}, 0, ""},
		{"online training ignores the bounds", O, RetrainingBounds{Max: 1}, repeat(0.3, 5), []Stage{O, O, O, O, O}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Restore(g, State{Stage: tc.from, Since: t0})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetRetrainingBounds(tc.bounds); err != nil {
				t.Fatal(err)
			}
			at := 0
			for i, r := range tc.rewards {
				tr, moved, err := m.RecordEpisode(r, t0.Add(time.Duration(i+1)*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				if moved && tr.From == Retraining {
					if at != 0 || tr.To != O || tr.Reason != tc.reason || tr.Episode != int64(i+1) {
						t.Errorf("episode %d: transition %+v, want → OnlineTraining (%s), once", i+1, tr, tc.reason)
					}
					at = i + 1
				}
				if got := m.Stage(); got != tc.wantStages[i] {
					t.Fatalf("after episode %d: stage %v, want %v", i+1, got, tc.wantStages[i])
				}
			}
			if at != tc.at {
				t.Errorf("returned to the agent at episode %d, want %d", at, tc.at)
			}
		})
	}
	for _, b := range []RetrainingBounds{{Min: -1}, {Max: -1}, {Min: 3, Max: 2}} {
		m, _ := New(g, t0)
		if err := m.SetRetrainingBounds(b); err == nil {
			t.Errorf("bounds %+v accepted", b)
		}
	}
}

// TestStageEpisodes: the count runs past the window, restarts at every
// transition, survives Restore, and a negative count is refused.
func TestStageEpisodes(t *testing.T) {
	g := Gates{Window: 2, EpisodeSteps: 5, PromoteMinMean: 0.6, PromoteMaxStdDev: 0.1, RetrainBelowMean: 0.5, RetrainAboveStdDev: 0.2}
	m, err := New(g, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []float64{0.1, 0.2, 0.3, 0.1, 0.2} {
		if _, moved, err := m.RecordEpisode(r, t0); err != nil || moved {
			t.Fatalf("episode %d: moved %v, %v", i+1, moved, err)
		}
	}
	if m.StageEpisodes() != 5 || len(m.State().Window) != 2 {
		t.Fatalf("%d stage episodes, window %v; want 5 and 2 rewards", m.StageEpisodes(), m.State().Window)
	}
	r, err := Restore(g, m.State())
	if err != nil || r.StageEpisodes() != 5 {
		t.Fatalf("restored %d stage episodes, %v", r.StageEpisodes(), err)
	}
	if _, ok := m.EndBootstrap(t0); !ok || m.StageEpisodes() != 0 {
		t.Errorf("after EndBootstrap: %d stage episodes, want 0", m.StageEpisodes())
	}
	for range 2 {
		if _, _, err := m.RecordEpisode(0.9, t0); err != nil {
			t.Fatal(err)
		}
	}
	if m.Stage() != Serving || m.StageEpisodes() != 0 || m.State().Episodes != 7 {
		t.Errorf("after the gate: %v with %d stage episodes of %d, want Serving, 0 of 7", m.Stage(), m.StageEpisodes(), m.State().Episodes)
	}
	if _, err := Restore(g, State{Stage: Serving, StageEpisodes: -1}); err == nil {
		t.Error("a negative stage episode count was accepted")
	}
}

// TestWhoActsAndLearns pins each stage's regime: the defaults act while
// Bootstrapping and again while Retraining (the detector said the policy
// no longer fits), the agent in OnlineTraining and Serving; every stage
// but Serving learns.
func TestWhoActsAndLearns(t *testing.T) {
	for _, tc := range []struct {
		stage             Stage
		agentActs, learns bool
		// trains in the paper's action space, in the residual one.
		trainsPaper, trainsResidual bool
	}{
		{Bootstrapping, false, true, true, false},
		{OnlineTraining, true, true, true, true},
		{Serving, true, false, false, false},
		{Retraining, false, true, true, false},
	} {
		t.Run(tc.stage.String(), func(t *testing.T) {
			if got := tc.stage.AgentActs(); got != tc.agentActs {
				t.Errorf("AgentActs = %v, want %v", got, tc.agentActs)
			}
			if got := tc.stage.Learns(); got != tc.learns {
				t.Errorf("Learns = %v, want %v", got, tc.learns)
			}
			if got := tc.stage.Trains(false); got != tc.trainsPaper {
				t.Errorf("Trains(paper) = %v, want %v", got, tc.trainsPaper)
			}
			if got := tc.stage.Trains(true); got != tc.trainsResidual {
				t.Errorf("Trains(residual) = %v, want %v", got, tc.trainsResidual)
			}
		})
	}
}
