package simside

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/hack/benchreal/slo"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func TestReplay(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	set := settings()
	r, err := Replay(cal, set, "fused", 2)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Replay(cal, set, "fused", 2)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := result.WriteRuns(&a, set, []result.Run{r}); err != nil {
		t.Fatal(err)
	}
	if err := result.WriteRuns(&b, set, []result.Run{again}); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Error("two replays of the same run differ")
	}
	// The load generator's trace: same generator, seed + rep, 40 steps.
	tr, err := sim.GenerateTrace(sim.StepChange, sim.TraceOptions{Mean: 16, Steps: 40, Step: 15e9, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Windows) != 40 {
		t.Fatalf("%d windows, want 40", len(r.Windows))
	}
	var changes, resizes, startups int
	for i, w := range r.Windows {
		within(t, "expected", w.Expected, tr.Rates[i]*15, 1e-9)
		if w.Start != float64(15*i) || w.End != float64(15*(i+1)) || w.Index != i {
			t.Errorf("window %d: %+v", i, w)
		}
		if i > 0 && w.Replicas != r.Windows[i-1].Replicas {
			changes++
		}
		if w.ReplicaChanges > 0 {
			startups++
		}
		resizes += w.Resizes
		if w.ReadyCPURequested > w.CPURequested+1e-9 {
			t.Errorf("window %d: Ready pods request %g of %g", i, w.ReadyCPURequested, w.CPURequested)
		}
	}
	if got := startups; got != changes {
		t.Errorf("%d windows with a replica change, %d changes of the replicas", got, changes)
	}
	if changes == 0 || resizes == 0 {
		t.Errorf("the fused default on a step made %d replica changes and %d resizes, want both", changes, resizes)
	}
	if len(r.StartupSeconds) == 0 || r.StartupSeconds[0] != 20 {
		t.Errorf("start-ups %v, want the app's 20 s", r.StartupSeconds)
	}
	within(t, "CPU per request", r.CPUSecondsPerRequest, 0.02, 0.001)
	if r.SLO != 0.25 || r.Window != 15 || r.Policy != "fused" || r.Rep != 2 {
		t.Errorf("run header %+v", r)
	}
	if err := result.WriteTable(io.Discard, replayAll(t, cal, set, 2), "fused"); err != nil {
		t.Errorf("WriteTable on simulated runs: %v", err)
	}

	for _, tc := range []struct {
		name   string
		set    func(map[string]string)
		policy string
		want   string
	}{
		{"unknown policy", func(map[string]string) {}, "agent", `policy "agent"`},
		{"merged settings", func(s map[string]string) { clear(s); s["merged"] = "a.json" }, "fused", `no "trace"`},
		{"bad duration", func(s map[string]string) { s["duration"] = "ten" }, "fused", "duration"},
		{"bad mean", func(s map[string]string) { s["mean"] = "0" }, "fused", "mean"},
		{"unknown trace", func(s map[string]string) { s["trace"] = "square" }, "fused", "square"},
		{"bad sloMetrics", func(s map[string]string) { s["sloMetrics"] = "yes please" }, "fused", "sloMetrics"},
		{"bad autoscalerAfter", func(s map[string]string) { s["autoscalerAfter"] = "-15s" }, "fused", "autoscalerAfter"},
		{"bad prometheusWindow", func(s map[string]string) { s["prometheusWindow"] = "0s" }, "fused", "prometheusWindow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings()
			tc.set(s)
			if _, err := Replay(cal, s, tc.policy, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Replay: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestReplayAutoscalerAfter: a run whose autoscaler was created 45 s into
// the load (bench-real --autoscaler-after) is replayed with a policy that
// first decides after the first window to end past it; the windows before
// keep the harness's deployment, which the same policy without the delay
// changes at once.
func TestReplayAutoscalerAfter(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	replay := func(after string) []result.Window {
		t.Helper()
		set := settings()
		if after != "" {
			set["autoscalerAfter"] = after
		}
		r, err := Replay(cal, set, "fused", 0)
		if err != nil {
			t.Fatal(err)
		}
		return r.Windows
	}
	now := replay("")
	if !slices.Equal(now, replay("0s")) {
		t.Error(`"autoscalerAfter": "0s" replays differently from no setting`)
	}
	// 16 requests/s of 20 ms saturate the initial 100m pod: without the
	// delay the default changes it after the first window.
	if got := firstChange(now); got != 1 {
		t.Fatalf("without a delay the deployment first changed in window %d, want 1", got)
	}
	late := replay("45s")
	// Windows 0-2 end at or before 45 s; the decision after window 3 (its
	// end at 60 s) is applied from window 4.
	if got := firstChange(late); got != 4 {
		t.Errorf("with the autoscaler created at 45 s the deployment first changed in window %d, want 4", got)
	}
}

// firstChange is the first window whose replicas or CPU request differ
// from the first window's, -1 if none does.
func firstChange(ws []result.Window) int {
	for i := range ws {
		if ws[i].Replicas != ws[0].Replicas || ws[i].CPURequested != ws[0].CPURequested {
			return i
		}
	}
	return -1
}

// replayWith replays policy's repetition 1 of a known app with the test
// settings, changed by set (an empty value leaves the key out, as a file
// written before it).
func replayWith(t *testing.T, policy string, set map[string]string) []result.Window {
	t.Helper()
	s := settings()
	for k, v := range set {
		if v != "" {
			s[k] = v
		}
	}
	r, err := Replay(known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005), s, policy, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r.Windows
}

// TestReplayAppMetrics: a run whose recommender read no app metrics is
// replayed with a fused default that sees none either; the HPA reads none
// in both.
func TestReplayAppMetrics(t *testing.T) {
	replay := func(policy, metrics string) []result.Window {
		return replayWith(t, policy, map[string]string{"sloMetrics": metrics})
	}
	for _, tc := range []struct {
		policy   string
		wantSame bool
	}{{"fused", false}, {"hpa", true}} {
		t.Run(tc.policy, func(t *testing.T) {
			without, with := replay(tc.policy, "false"), replay(tc.policy, "true")
			if same := slices.Equal(without, with); same != tc.wantSame {
				t.Errorf("replays with and without the app's metrics equal: %v, want %v", same, tc.wantSame)
			}
			if !slices.Equal(without, replay(tc.policy, "")) {
				t.Error("a file without sloMetrics is not replayed as one without app metrics")
			}
		})
	}
}

// TestReplayRateWindow: with the app's metrics, the replayed policies see
// the rate and p95 over the real recommender's --prometheus-window (its
// default when the file does not say), so the fused default's replay
// changes with the window; the HPA, which reads neither, does not.
func TestReplayRateWindow(t *testing.T) {
	replay := func(policy, window string) []result.Window {
		return replayWith(t, policy, map[string]string{"sloMetrics": "true", "prometheusWindow": window})
	}
	for _, tc := range []struct {
		policy   string
		wantSame bool
	}{{"fused", false}, {"hpa", true}} {
		t.Run(tc.policy, func(t *testing.T) {
			if same := slices.Equal(replay(tc.policy, "15s"), replay(tc.policy, "2m")); same != tc.wantSame {
				t.Errorf("replays with a 15-s and a 2-min window equal: %v, want %v", same, tc.wantSame)
			}
			if !slices.Equal(replay(tc.policy, ""), replay(tc.policy, slo.DefaultWindow)) {
				t.Error("a file without prometheusWindow is not replayed with the recommender's default")
			}
		})
	}
}

// TestVariantCounterpart: a run of a variant of the fused default is
// replayed with that variant, and a variant the recommender would refuse
// has no counterpart.
func TestVariantCounterpart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wantErr string
	}{
		{"fused:target=0.7/floor=usage", ""},
		{"fused:limit-target=0.7/hold=24h", ""},
		{"fused:target=7", "(0, 1]"},
		{"agent", "no simulated counterpart"},
		{"fused+fit", ""},
		{"fused:target=0.7/floor=usage+fit", ""},
		{"agent+fit", "no simulated counterpart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := policy(tc.name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f(workload.Constraints{MaxReplicas: 8}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReplayDraws: draw 0 is Replay's run; other draws replay the same
// trace with other randomness (the same windows, other outcomes); and the
// side-by-side counts a repetition's draws as their mean.
func TestReplayDraws(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 5, 0.005)
	cal.SampledLatency = true
	set := settings()
	zero, err := Replay(cal, set, "fused", 1)
	if err != nil {
		t.Fatal(err)
	}
	var draws []result.Run
	for d := range 3 {
		r, err := ReplayDraw(cal, set, "fused", 1, d)
		if err != nil {
			t.Fatal(err)
		}
		draws = append(draws, r)
	}
	if !reflect.DeepEqual(zero, draws[0]) {
		t.Error("draw 0 differs from Replay's run")
	}
	if len(draws[1].Windows) != len(zero.Windows) || reflect.DeepEqual(draws[1].Windows, zero.Windows) {
		t.Errorf("draw 1 has %d windows, draw 0 %d, or the same outcome", len(draws[1].Windows), len(zero.Windows))
	}
	if _, err := ReplayDraw(cal, set, "fused", 1, -1); err == nil {
		t.Error("a negative draw was accepted")
	}
	rows, err := Compare([]result.Run{zero}, draws)
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	for _, d := range draws {
		s, err := result.Summarise(d)
		if err != nil {
			t.Fatal(err)
		}
		want += s.Cost / 3
	}
	if got := rows[0].Simulated.Cost; math.Abs(got-want) > 1e-12 || rows[0].Pairs != 1 {
		t.Errorf("simulated cost %g over %d pairs, want the draws' mean %g over 1", got, rows[0].Pairs, want)
	}
}

// TestVPACadence: the replayed VPA's vertical part reaches the pods first
// at its calibrated delay after the autoscaler's creation, then at most
// once an updater loop; the horizontal part is never held.
func TestVPACadence(t *testing.T) {
	rec := func(replicas int32, cpu float64) workload.Recommendation {
		return workload.Recommendation{Replicas: replicas, Containers: []workload.ContainerRecommendation{{Name: "app", Target: workload.Resources{CPU: cpu}}}}
	}
	c := &vpaCadence{next: 45 + 107, every: VPAUpdaterInterval}
	for _, s := range []struct {
		at      float64
		in      workload.Recommendation
		wantCPU float64 // 0: no vertical part
		wantDue bool
	}{
		{60, rec(2, 0.15), 0, false},
		{150, rec(3, 0.15), 0, false},
		{165, rec(3, 0.16), 0.16, true}, // the first loop at 152 s
		{180, rec(3, 0.3), 0.16, false},
		{225, rec(4, 0.3), 0.3, true}, // the next at 212 s
		{240, rec(4, 0.1), 0.3, false},
	} {
		got, due := c.gate(s.at, s.in)
		if due != s.wantDue {
			t.Errorf("at %g s: due %v, want %v", s.at, due, s.wantDue)
		}
		if got.Replicas != s.in.Replicas {
			t.Errorf("at %g s: replicas %d, want %d (never held)", s.at, got.Replicas, s.in.Replicas)
		}
		var cpu float64
		if len(got.Containers) > 0 {
			cpu = got.Containers[0].Target.CPU
		}
		if cpu != s.wantCPU {
			t.Errorf("at %g s: CPU %g let through, want %g", s.at, cpu, s.wantCPU)
		}
	}
}

// TestReplayTiming: the replayed default's decisions reach the pods when
// Calibration.Timing says: the zero value at the end of the window they
// were made at, a look within the window from that step on, an updater's
// delay at the first step boundary after it, a lag whole windows later.
// 16 requests/s of 20 ms saturate the initial 100m pod, so the default
// changes it at its first look (TestReplayAutoscalerAfter).
func TestReplayTiming(t *testing.T) {
	const s5 = 5 * time.Second
	for _, tc := range []struct {
		name   string
		timing Timing
		want   time.Duration // when the requests first change
	}{
		{"the simulator's own", Timing{}, 15 * time.Second},
		{"finer steps alone", Timing{Step: s5}, 15 * time.Second},
		{"a look 10 s in", Timing{Step: s5, Look: 10 * time.Second}, 10 * time.Second},
		{"the node's: 10 s in, the updater 14 s later", Timing{Step: s5, Look: 10 * time.Second, Act: 14 * time.Second}, 25 * time.Second},
		{"an updater a whole step later", Timing{Step: s5, Look: 10 * time.Second, Act: s5}, 15 * time.Second},
		{"one window held", Timing{Lag: 1}, 30 * time.Second},
		{"two windows held", Timing{Lag: 2}, 45 * time.Second},
		{"one window held, finer steps", Timing{Step: s5, Lag: 1}, 30 * time.Second},
		{"a delay over a window's steps", Timing{Step: 7500 * time.Millisecond, Act: 8 * time.Second}, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
			cal.Timing = tc.timing
			r, steps, err := replay(cal, settings(), "fused", 0, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			step := tc.timing.Step
			if step == 0 {
				step = 15 * time.Second
			}
			if got := time.Duration(firstChange(steps)) * step; got != tc.want {
				t.Errorf("the deployment first changed at %s, want %s", got, tc.want)
			}
			if len(r.Windows) != 40 || len(steps) != 40*int(15*time.Second/step) {
				t.Fatalf("%d windows of %d steps, want 40 of the 10-min trace's", len(r.Windows), len(steps))
			}
		})
	}
}

// TestReplayHPAPhases: with Timing.HPAPhases the real HPA's replay
// decides one step later into the window with each draw in turn; the
// fused default keeps its own look. 16 requests/s of 20 ms put the
// initial 100m pod far over the HPA's target from the first step, but the
// HPA counts its CPU only from a metric window (15 s) after it turned
// Ready (at 0 s: its CPU initialization rule), so at 5-s steps it first
// scales out at 15 s (draw 0, at the windows' ends), 20 s (draw 1, looks
// at 5 s, 20 s, …), 25 s (draw 2), then 15 s again (draw 3).
func TestReplayHPAPhases(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	cal.Timing = Timing{Step: 5 * time.Second, HPAPhases: true}
	for _, tc := range []struct {
		policy string
		draw   int
		want   time.Duration
	}{
		{"hpa", 0, 15 * time.Second},
		{"hpa", 1, 20 * time.Second},
		{"hpa", 2, 25 * time.Second},
		{"hpa", 3, 15 * time.Second},
		{"fused", 1, 15 * time.Second},
	} {
		t.Run(fmt.Sprintf("%s draw %d", tc.policy, tc.draw), func(t *testing.T) {
			_, steps, err := replay(cal, settings(), tc.policy, 0, tc.draw, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(firstChange(steps)) * cal.Timing.Step; got != tc.want {
				t.Errorf("the deployment first changed at %s, want %s", got, tc.want)
			}
		})
	}
}

// TestReplayFinerSteps: a window pooled from finer steps is the harness's
// window: on the 15-s grid, its counts the steps' sums, its requests and
// usage their means, its p95 within the steps' range, its replica change
// counted once.
func TestReplayFinerSteps(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	cal.Timing = Timing{Step: 5 * time.Second}
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r, steps, err := replay(cal, settings(), policy, 1, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range r.Windows {
				part := steps[3*i : 3*i+3]
				if w.Index != i || w.Start != 15*float64(i) || w.End != 15*float64(i+1) {
					t.Fatalf("window %d: index %d, %g–%g s", i, w.Index, w.Start, w.End)
				}
				var sent, lost int
				var cpu float64
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, p := range part {
					sent, lost, cpu = sent+p.Sent, lost+p.Lost, cpu+p.CPURequested/3
					if p.Sent > 0 {
						lo, hi = min(lo, p.P95), max(hi, p.P95)
					}
				}
				if w.Sent != sent || w.Lost != lost || math.Abs(w.CPURequested-cpu) > 1e-12 || w.Replicas != part[2].Replicas {
					t.Fatalf("window %d: %+v, from %+v", i, w, part)
				}
				if lost == 0 && sent > 0 && (w.P95 < lo-1e-9 || w.P95 > hi+1e-9) {
					t.Fatalf("window %d: p95 %g outside the steps' [%g, %g]", i, w.P95, lo, hi)
				}
				if w.ReplicaChanges > 1 {
					t.Fatalf("window %d: %d replica changes", i, w.ReplicaChanges)
				}
			}
		})
	}
}

func TestTimingSteps(t *testing.T) {
	const window = 15 * time.Second
	for _, tc := range []struct {
		name    string
		timing  Timing
		want    int
		wantErr string
	}{
		{"the simulator's own", Timing{}, 1, ""},
		{"5-s steps", Timing{Step: 5 * time.Second, Look: 10 * time.Second, Act: 14 * time.Second}, 3, ""},
		{"the window", Timing{Step: window}, 1, ""},
		{"a lag alone", Timing{Lag: 8}, 1, ""},
		{"a step longer than the window", Timing{Step: 30 * time.Second}, 0, "simulator step"},
		{"a step not dividing the window", Timing{Step: 4 * time.Second}, 0, "not a whole number"},
		{"a look off the steps", Timing{Step: 5 * time.Second, Look: 7 * time.Second}, 0, "decision look"},
		{"a look of a window", Timing{Look: window}, 0, "decision look"},
		{"a negative act", Timing{Act: -time.Second}, 0, "decision act"},
		{"an act past two minutes", Timing{Act: 3 * time.Minute}, 0, "decision act"},
		{"a lag past two minutes", Timing{Lag: 9}, 0, "decision lag"},
		{"the HPA's phases at the window's step", Timing{HPAPhases: true}, 0, "HPA's phases"},
		{"the HPA's phases at 5-s steps", Timing{Step: 5 * time.Second, HPAPhases: true}, 3, ""},
		{"a negative lag", Timing{Lag: -1}, 0, "decision lag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.timing.steps(window)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%d steps (%v), want %d", got, err, tc.want)
			}
		})
	}
}

func TestUpdaterQueue(t *testing.T) {
	rec := func(n int32) workload.Recommendation { return workload.Recommendation{Replicas: n} }
	var q updaterQueue
	q.hold(rec(2), 20*time.Second)
	q.hold(rec(3), 25*time.Second)
	q.hold(rec(4), 25*time.Second)
	replicas := func(rs []workload.Recommendation) []int32 {
		var out []int32
		for _, r := range rs {
			out = append(out, r.Replicas)
		}
		return out
	}
	for _, s := range []struct {
		now  time.Duration
		want []int32
	}{
		{15 * time.Second, nil},
		{20 * time.Second, []int32{2}},
		{24 * time.Second, nil},
		{25 * time.Second, []int32{3, 4}},
		{40 * time.Second, nil},
	} {
		if got := replicas(q.take(s.now)); !slices.Equal(got, s.want) {
			t.Errorf("at %s: %v, want %v", s.now, got, s.want)
		}
	}
}

// TestReplayTimingMPAOnly: the timing is the project's recommender and
// updater's; the real HPA's and VPA's replays keep theirs.
func TestReplayTimingMPAOnly(t *testing.T) {
	for _, tc := range []struct {
		policy      string
		wantChanged bool
	}{{"fused", true}, {"fused:target=0.7", true}, {"fused" + FitSuffix, true}, {"hpa", false}, {"hpa+vpa", false}, {"vpa", false}} {
		t.Run(tc.policy, func(t *testing.T) {
			cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
			now, err := Replay(cal, settings(), tc.policy, 0)
			if err != nil {
				t.Fatal(err)
			}
			cal.Timing = Timing{Lag: 1}
			late, err := Replay(cal, settings(), tc.policy, 0)
			if err != nil {
				t.Fatal(err)
			}
			if changed := !slices.Equal(now.Windows, late.Windows); changed != tc.wantChanged {
				t.Errorf("a lag of one window changed the replay: %v, want %v", changed, tc.wantChanged)
			}
		})
	}
}

// TestReplayVPAAdmission: the replayed VPA's admission (the default)
// gives the pods created between its loops its last loop's target, so
// its pods come to differ from those of the replay without it; the
// policies without a real VPA replay the same either way.
func TestReplayVPAAdmission(t *testing.T) {
	cal := known(0.02, 48*sim.MiB, sim.MiB, 20, 0.005)
	without := cal
	without.Timing.NoVPAAdmission = true
	for _, tc := range []struct {
		policy   string
		wantSame bool
	}{
		{"hpa", true},
		{"fused", true},
		{"hpa+vpa", false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			var cpu [2][]float64
			for i, c := range []Calibration{cal, without} {
				r, err := Replay(c, settings(), tc.policy, 1)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range r.Windows {
					cpu[i] = append(cpu[i], w.CPURequested)
				}
			}
			if same := slices.Equal(cpu[0], cpu[1]); same != tc.wantSame {
				t.Fatalf("the same requests with and without the admission: %v, want %v\nwith    %v\nwithout %v", same, tc.wantSame, cpu[0], cpu[1])
			}
		})
	}
}
