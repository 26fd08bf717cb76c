package whatif

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// idleHistory is a history whose pods use idle cores each with no
// requests and cpuSec core-seconds per request: per-pod CPU =
// idle + cpuSec·rate/replicas, with a little noise. Its replicas (3 or
// 4) do not follow the rate, so the CPU line's intercept is
// idle·mean(replicas).
func idleHistory(n int, idle, cpuSec float64, seed uint64) *Series {
	rng := rand.New(rand.NewPCG(seed, seed))
	s := &Series{Name: "ns/idle", Container: "app", Step: step}
	for i := range n {
		r := 40 + 20*math.Sin(float64(i)/40)
		reps := float64(3 + (i/17)%2)
		s.Rate = append(s.Rate, r)
		s.Replicas = append(s.Replicas, reps)
		s.CPU = append(s.CPU, idle+cpuSec*r/reps+0.002*rng.NormFloat64())
		s.Memory = append(s.Memory, 200<<20)
		s.RequestCPU = append(s.RequestCPU, 1)
		s.RequestMemory = append(s.RequestMemory, 512<<20)
		s.LimitCPU = append(s.LimitCPU, 2)
		s.LimitMemory = append(s.LimitMemory, 1<<30)
	}
	return s
}

// TestFitIdle: the CPU line's intercept becomes each pod's idle CPU
// (intercept over the mean replicas), replayed as the mode says, and a
// negative or implausible one is not replayed, with the reason.
func TestFitIdle(t *testing.T) {
	const cpuSec = 0.01
	tests := []struct {
		name string
		// idle is the history's true idle CPU per pod (cores).
		idle     float64
		mode     string
		maxShare float64
		replayed bool
		reason   string
	}{
		{"auto replays a plausible idle CPU", 0.05, IdleAuto, 0, true, ""},
		{"on replays it", 0.05, IdleOn, 0, true, ""},
		{"off does not", 0.05, IdleOff, 0, false, "--fit-idle off"},
		{"a file written before the option is off", 0.05, "", 0, false, "--fit-idle off"},
		{"auto: negative intercept not replayed", -0.02, IdleAuto, 0, false, "intercept is negative"},
		{"on: negative intercept not replayed either", -0.02, IdleOn, 0, false, "intercept is negative"},
		{"auto: mostly idle pods not replayed", 0.5, IdleAuto, 0, false, "above the 50%"},
		{"auto: a lower bound of the user's", 0.05, IdleAuto, 0.1, false, "above the 10%"},
		{"on: mostly idle pods replayed", 0.5, IdleOn, 0, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := idleHistory(600, tc.idle, cpuSec, 3)
			// The replicas' idle CPU, which the rate does not explain,
			// is most of the variance of mostly idle pods: the bound on
			// R² is not what is tested here.
			f, err := FitApp(s, FitOptions{Idle: tc.mode, MaxIdleShare: tc.maxShare, MinCPUR2: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			if e := f.Idle.PerPod - tc.idle; math.Abs(e) > 0.003 {
				t.Errorf("idle CPU per pod %.4f, truth %.4f", f.Idle.PerPod, tc.idle)
			}
			if e := f.App.CPUSeconds/cpuSec - 1; math.Abs(e) > 0.03 {
				t.Errorf("CPU seconds per request %g, truth %g", f.App.CPUSeconds, cpuSec)
			}
			if f.Idle.Replayed != tc.replayed || !strings.Contains(f.Idle.Reason, tc.reason) {
				t.Errorf("replayed %v (%q), want %v (%q)", f.Idle.Replayed, f.Idle.Reason, tc.replayed, tc.reason)
			}
			want := 0.0
			if tc.replayed {
				want = f.Idle.PerPod
			}
			if f.App.BaseCPU != want {
				t.Errorf("app's idle CPU %g, want %g", f.App.BaseCPU, want)
			}
			// The fit line says what was replayed.
			var b bytes.Buffer
			if err := (&Result{Fits: []Fit{f}}).WriteText(&b); err != nil {
				t.Fatal(err)
			}
			line := b.String()
			if tc.replayed && !strings.Contains(line, "per pod") || !tc.replayed && !strings.Contains(line, "not replayed ("+f.Idle.Reason) ||
				tc.replayed == strings.Contains(line, "not replayed") {
				t.Errorf("fit line does not say whether the idle CPU was replayed (%v):\n%s", tc.replayed, line)
			}
		})
	}
}

// TestReplayIdle: the replay of what ran uses, in each pod, the idle CPU on
// top of its requests' work, so that its CPU follows the recorded CPU; a
// replay without it falls short by the idle's share.
func TestReplayIdle(t *testing.T) {
	const idle, cpuSec = 0.05, 0.01
	s := idleHistory(600, idle, cpuSec, 5)
	var recorded, recordedIdle float64
	for i := range s.CPU {
		recorded += s.CPU[i] * s.Replicas[i]
		recordedIdle += idle * s.Replicas[i]
	}
	share := recordedIdle / recorded
	for _, tc := range []struct {
		mode    string
		wantCPU float64 // CPU error of the replay of what ran
	}{
		{IdleAuto, 0},
		{IdleOff, -share},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f, err := FitApp(s, FitOptions{Idle: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			c, err := Check(s, f, sim.DefaultConfig(), sim.DefaultPrices(), 5)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(c.CPUError-tc.wantCPU) > 0.03 {
				t.Errorf("replay's CPU %+.1f%% of the recorded, want %+.1f%% (the idle CPU is %.0f%% of it)", 100*c.CPUError, 100*tc.wantCPU, 100*share)
			}
			// Each Ready pod's usage holds the idle CPU on top of its work.
			cfg := sim.DefaultConfig()
			cfg.Step = step
			sm, err := sim.New(cfg, f.App, &sim.Trace{Name: "flat", Step: step, Rates: []float64{60, 60, 60, 60}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			var m sim.StepMetrics
			for range 4 {
				m = sm.Step()
			}
			if m.Ready == 0 {
				t.Fatal("no Ready pod")
			}
			perPod := m.Used.CPU / float64(m.Ready)
			work := m.Arrivals / step.Seconds() * f.App.CPUSeconds / float64(m.Ready)
			if got := perPod - work; math.Abs(got-f.App.BaseCPU) > 0.002 {
				t.Errorf("a pod uses %.4f cores beyond its requests' work, the app's idle CPU is %.4f", got, f.App.BaseCPU)
			}
		})
	}
}
