package simside

import (
	"math"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// TestReplayPodsReproducesTheRun: a simulated run whose pods are alike,
// replayed on its own pods, is the run again: the same replicas window
// by window, the same requests (to the millicore and MiB the replay
// rounds to), and for the HPA, whose pods keep their size, the same
// windows to the bit (the same arrivals on the same pods). (Pods of
// several sizes, as the VPA's admission makes them, are replayed as
// their mean.)
func TestReplayPodsReproducesTheRun(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	cal.Timing.NoVPAAdmission = true
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			run, err := Replay(cal, settings(), policy, 1)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ReplayPods(cal, settings(), run, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Windows) != len(run.Windows) {
				t.Fatalf("%d windows, want %d", len(again.Windows), len(run.Windows))
			}
			var changes int
			for i, w := range run.Windows {
				g := again.Windows[i]
				if g.Replicas != w.Replicas || g.Ready != w.Ready {
					t.Fatalf("window %d: %d replicas (%d Ready), want %d (%d)", i, g.Replicas, g.Ready, w.Replicas, w.Ready)
				}
				if math.Abs(g.CPURequested-w.CPURequested) > 0.001*float64(w.Replicas)+podsChangeBelow*w.CPURequested {
					t.Fatalf("window %d: %g cores requested, want %g", i, g.CPURequested, w.CPURequested)
				}
				if policy == "hpa" && g != w {
					t.Fatalf("window %d:\n got %+v\nwant %+v", i, g, w)
				}
				changes += w.ReplicaChanges + w.Resizes
			}
			if changes == 0 {
				t.Fatalf("the %s run changed no pod: the test shows nothing", policy)
			}
		})
	}
}

// TestReplayPodsFollowsTheRecord: the replay takes the pods a run
// recorded, not what the policy would do: a run whose record says 3 pods
// of 0.3 core from the second window on is replayed so, whatever its
// policy.
func TestReplayPodsFollowsTheRecord(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	run, err := Replay(cal, settings(), "hpa", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range run.Windows {
		w := &run.Windows[i]
		if i > 0 {
			w.Replicas, w.Ready, w.CPURequested, w.ReadyCPURequested, w.MemoryRequested = 3, 3, 0.9, 0.9, 3*128*sim.MiB
		}
	}
	got, err := ReplayPods(cal, settings(), run, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := got.Windows[len(got.Windows)-1]
	if last.Replicas != 3 || last.Ready != 3 || math.Abs(last.CPURequested-0.9) > 1e-9 || math.Abs(last.MemoryRequested-3*128*sim.MiB) > 1 {
		t.Fatalf("last window: %+v, want 3 pods of 0.3 core and 128 MiB", last)
	}
	if w := got.Windows[0]; w.Replicas != run.Windows[0].Replicas {
		t.Fatalf("first window: %d replicas, want the record's %d", w.Replicas, run.Windows[0].Replicas)
	}
}

func TestReplayPodsRejectsNoPods(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	for _, tc := range []struct {
		name    string
		windows []result.Window
		want    string
	}{
		{"no windows", nil, "no windows"},
		{"no replicas", []result.Window{{Replicas: 0, CPURequested: 0.2, MemoryRequested: 1}}, "window 0: 0 replicas"},
		{"no CPU", []result.Window{{Replicas: 1, MemoryRequested: 1}}, "no pods to replay"},
		{"NaN memory", []result.Window{{Replicas: 1, CPURequested: 0.2, MemoryRequested: math.NaN()}}, "no pods to replay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReplayPods(cal, settings(), result.Run{Policy: "hpa", Rep: 2, Windows: tc.windows}, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "hpa repetition 2") {
				t.Fatalf("error %v, want one with %q naming the run", err, tc.want)
			}
		})
	}
}

// TestWritePodsReplay: the two parts add up to the side-by-side table's
// difference, paired by repetition.
func TestWritePodsReplay(t *testing.T) {
	run := func(policy string, rep int, violating ...bool) result.Run {
		r := result.Run{Policy: policy, Rep: rep, SLO: 0.25, Window: 15}
		for i, v := range violating {
			w := result.Window{Index: i, Start: 15 * float64(i), End: 15 * float64(i+1), Expected: 150, Sent: 150, OK: 150,
				P95: 0.1, Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 * sim.MiB, ReadyCPURequested: 0.2}
			if v {
				w.P95 = 0.5
			}
			r.Windows = append(r.Windows, w)
		}
		return r
	}
	real := []result.Run{run("hpa", 0, false, false, false, false), run("hpa", 1, true, false, false, false)}
	onPods := []result.Run{run("hpa", 0, true, false, false, false), run("hpa", 1, true, true, false, false)}
	closed := []result.Run{run("hpa", 0, true, true, true, false), run("hpa", 1, true, true, true, false)}
	var b strings.Builder
	if err := WritePodsReplay(&b, real, onPods, closed); err != nil {
		t.Fatal(err)
	}
	// Real 12.5%, on the pods 37.5% (+25.0 both pairs), closed loop 75.0%
	// (+50.0 and +25.0).
	for _, want := range []string{"hpa", "12.5%", "37.5%", "75.0%", "+25.0", "+37.5 [", "1.000"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if err := WritePodsReplay(&b, real, onPods[:1], closed); err == nil || !strings.Contains(err.Error(), "no simulated twin") {
		t.Fatalf("a real run without its replay on the pods: error %v", err)
	}
}
