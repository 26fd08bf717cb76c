package simside

import (
	"os"
	"testing"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// TestReplayLoadStepInTheRateWindow replays the real run that found rule
// 8's lag (round seventeen's repetition 5 of the default, committed in
// docs/results): the load step came during the recommender's 2-minute
// wait, and the default, reading the p95 over that window, added one
// replica every 15 s up to 8 while three served the load. Calibrated from
// the file's own runs, the replay must not climb past the three the node
// could hold, nor change replicas more than twice.
func TestReplayLoadStepInTheRateWindow(t *testing.T) {
	run := replayCommitted(t, "round17/fused-hpa-vpa-reps567.json", "fused", 5)
	most, changes := 0, 0
	for i, w := range run.Windows {
		most = max(most, w.Replicas)
		if i > 0 && w.Replicas != run.Windows[i-1].Replicas {
			changes++
		}
	}
	if most > 3 || changes > 2 {
		t.Errorf("replayed default reached %d replicas in %d changes, want at most 3 in at most 2", most, changes)
	}
}

// TestReplayGrownPodsKeepOne replays the real run of round twenty-two
// (repetition 16 of the default, committed in docs/results) whose 2-minute
// p95 crossed the SLO before the rate's window filled: the default added a
// 200m replica, then the floor sized both pods at 645m and the scale-down
// window kept two of them to the end of the run. Replayed with the
// default's windows holding capacity, the two small pods become one grown
// pod within a window of the growth (replayed before, the second pod's
// resize waited for room and both were kept for four windows).
func TestReplayGrownPodsKeepOne(t *testing.T) {
	run := replayCommitted(t, "round22/hpavpa-fused-reps16-18.json", "fused", 16)
	grown, twoGrown, most := -1, 0, 0
	for i, w := range run.Windows {
		most = max(most, w.Replicas)
		// Grown: more CPU than the two 200m pods; a grown pod beside one
		// whose resize waits counts too.
		if w.CPURequested >= 0.5 {
			if grown < 0 {
				grown = i
			}
			if w.Replicas > 1 {
				twoGrown++
			}
		}
	}
	if most < 2 || grown < 0 {
		t.Fatalf("the replay peaked at %d replicas and grew the pods at window %d: it does not take the path", most, grown)
	}
	if twoGrown > 1 {
		t.Errorf("%d windows with more than one grown pod after the growth at window %d, want at most 1", twoGrown, grown)
	}
}

// readCommitted reads a round file committed under docs/results/real-node.
func readCommitted(t *testing.T, file string) result.File {
	t.Helper()
	fh, err := os.Open("../../../docs/results/real-node/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	f, err := ReadFile(fh)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// replayCommitted replays repetition rep of policy from a round file
// committed under docs/results/real-node, calibrated from the file's own
// runs.
func replayCommitted(t *testing.T, file, policy string, rep int) result.Run {
	t.Helper()
	f := readCommitted(t, file)
	cal, err := Calibrate(f.Runs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := Replay(cal, f.Settings, policy, rep)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestReplayHPAAtTheToleranceEdge replays the real HPA+VPA runs of rounds
// twenty-four to twenty-six (committed in docs/results), whose app used
// 72–78% of its 200m pod before the load step: the real HPA, reading
// metrics-server's rates, added the second pod at 60–120 s in all five,
// before the real VPA first acted (at about 150 s) and 45–165 s before the
// step. The simulator as it was (each window's usage the mean rate's, no
// idle CPU) scaled out only after the VPA's first resize lowered the
// request, at 165–180 s in every draw. Calibrated with the pods' idle CPU
// (Calibration.BaseCPU) and replayed with each window's usage its
// arrivals' work (SampledUsage), the HPA scales out before the VPA acts in
// 16 of 50 draws; observed, as the real HPA reads it, as a rate over 10 s
// (metrics-server's resolution, sim.Config.UsageResolution), in 32 of 50:
// closer to the real node, not yet the same.
func TestReplayHPAAtTheToleranceEdge(t *testing.T) {
	const draws = 10
	for _, tc := range []struct {
		name          string
		fitted, usage bool
		resolution    time.Duration
		// least and most bound the share of the draws that scale out
		// before the VPA's first action.
		least, most float64
	}{
		{"mean usage, no idle CPU", false, false, 0, 0, 0},
		{"each window's usage, idle CPU", true, true, 0, 0.2, 0.5},
		{"10-s rates of usage, idle CPU", true, true, DefaultUsageResolution, 0.5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			early, total := 0, 0
			for _, file := range []string{"round24/hpavpa-fused-reps20-21.json", "round25/hpavpa-fused-variant-reps22-23.json", "round26/hpavpa-fused-rep24.json"} {
				f := readCommitted(t, file)
				cal, err := Calibrate(f.Runs, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if !cal.CPUFitted {
					t.Fatalf("%s: the CPU fit was not taken: %s", file, cal.CPUFitReason)
				}
				cal.CPUFitted, cal.SampledUsage, cal.UsageResolution = tc.fitted, tc.usage, tc.resolution
				n, m := countDraws(t, cal, f, "hpa+vpa", draws, func(real result.Run) func(result.Run) bool {
					vpa := real.AutoscalerAfter + cal.VPAFirstAction.Value
					if first := firstScaleOut(real); first < 0 || first >= vpa {
						t.Fatalf("repetition %d: the real HPA scaled out at %.0f s, the VPA acted at %.0f s: not the case this test replays", real.Rep, first, vpa)
					}
					return func(run result.Run) bool {
						first := firstScaleOut(run)
						return first >= 0 && first < vpa
					}
				})
				early, total = early+n, total+m
			}
			share := float64(early) / float64(total)
			t.Logf("the HPA scaled out before the VPA's first action in %d of %d draws", early, total)
			if share < tc.least || share > tc.most {
				t.Errorf("the HPA scaled out before the VPA's first action in %d of %d draws, want a share within [%g, %g]", early, total, tc.least, tc.most)
			}
		})
	}
}

// firstScaleOut is the start of the first window with more than one
// replica, or −1.
func firstScaleOut(r result.Run) float64 {
	for _, w := range r.Windows {
		if w.Replicas > 1 {
			return w.Start
		}
	}
	return -1
}

// TestReplayHPAKilledInTheOverload replays round forty-three's real HPA
// runs (committed in docs/results), whose one 200m pod the load step
// overloaded: on the node it answered almost nothing for a window or two
// and was OOM-killed 15-45 s after the step in all three. Replayed with the
// app serving its requests past their timeout (Calibration.ServesTimedOut,
// each held request 0.36 MiB as hack/memlag.sh measured; the pods Ready
// within their window, as the replay's default), the pod is killed
// within three windows of the step in most draws (10 of 12; 11 with the
// pods Ready from the next window); replayed with the fluid backlog,
// which answers at capacity through the overload and holds a fraction of
// the requests, it never is.
func TestReplayHPAKilledInTheOverload(t *testing.T) {
	const draws = 4
	f := readCommitted(t, "round43/hpa-fused-whatif-reps71-73.json")
	for _, tc := range []struct {
		name        string
		serves      bool
		least, most float64 // the share of draws killed after the step
	}{
		{"fluid backlog", false, 0, 0},
		{"served past the timeout", true, 0.75, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cal, err := Calibrate(f.Runs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			cal.ServesTimedOut, cal.HeldMemoryPerRequest = tc.serves, 0.36*sim.MiB
			cal.ReadyWithinWindow = true // the replay's default
			killed, total := countDraws(t, cal, f, "hpa", draws, func(real result.Run) func(result.Run) bool {
				step := firstOverload(real)
				if step < 0 || !killedWithin(real, step, 3) {
					t.Fatalf("repetition %d: the real pod was not killed within three windows of the step (window %d): not the case this test replays", real.Rep, step)
				}
				return func(run result.Run) bool { return killedWithin(run, step, 3) }
			})
			share := float64(killed) / float64(total)
			t.Logf("killed within three windows of the step in %d of %d draws", killed, total)
			if share < tc.least || share > tc.most {
				t.Errorf("killed within three windows of the step in %d of %d draws, want a share within [%g, %g]", killed, total, tc.least, tc.most)
			}
		})
	}
}

// countDraws replays draws draws of each of f's runs of policy and counts
// those hit says yes to; hit(real), called once per real run, may refuse a
// run that is not the case its test replays.
func countDraws(t *testing.T, cal Calibration, f result.File, policy string, draws int, hit func(real result.Run) func(result.Run) bool) (yes, total int) {
	t.Helper()
	for _, real := range f.Runs {
		if real.Policy != policy {
			continue
		}
		ok := hit(real)
		for d := range draws {
			run, err := ReplayDraw(cal, f.Settings, policy, real.Rep, d)
			if err != nil {
				t.Fatal(err)
			}
			if ok(run) {
				yes++
			}
			total++
		}
	}
	return yes, total
}

// firstOverload is the index of the first window that lost requests, or −1.
func firstOverload(r result.Run) int {
	for i, w := range r.Windows {
		if w.Lost > 0 {
			return i
		}
	}
	return -1
}

// killedWithin says whether a window from step to step+n had an OOM kill.
func killedWithin(r result.Run, step, n int) bool {
	for i := step; i <= step+n && i < len(r.Windows); i++ {
		if r.Windows[i].OOMKills > 0 {
			return true
		}
	}
	return false
}
