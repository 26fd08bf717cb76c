package whatif

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// hpaHistory is a history whose replicas follow its rate, as an HPA's do:
// the rate moves between three phases and each step has ceil(rate/perPod)
// pods, so every pod serves about perPod requests a second. Per-pod CPU =
// idle + cpuSec·rate/replicas, with a little noise.
func hpaHistory(n int, idle, cpuSec, perPod float64, seed uint64) *Series {
	rng := rand.New(rand.NewPCG(seed, seed))
	s := &Series{Name: "ns/hpa", Container: "app", Step: step}
	phases := []float64{10, 25, 40}
	for i := range n {
		r := phases[(i/50)%len(phases)] * (1 + 0.04*rng.NormFloat64())
		reps := math.Ceil(r / perPod)
		s.Rate = append(s.Rate, r)
		s.Replicas = append(s.Replicas, reps)
		s.CPU = append(s.CPU, idle+cpuSec*r/reps+0.002*rng.NormFloat64())
		s.Memory = append(s.Memory, 60<<20)
		s.RequestCPU = append(s.RequestCPU, 0.2)
		s.RequestMemory = append(s.RequestMemory, 96<<20)
		s.LimitCPU = append(s.LimitCPU, 0.2)
		s.LimitMemory = append(s.LimitMemory, 256<<20)
	}
	return s
}

// TestFitIdleConfounded: where the replicas follow the rate, the CPU line
// cannot tell the pods' idle CPU from their requests': its slope is the
// CPU per request plus the idle CPU over the pods' load, and the fit line
// says so. Given the idle CPU (FitOptions.IdleCPU), the slope is the
// requests' own and the replay's pods use the idle CPU given.
func TestFitIdleConfounded(t *testing.T) {
	const idle, cpuSec, perPod = 0.03, 0.015, 6.0
	const warning = "the replicas followed the rate"
	tests := []struct {
		name    string
		s       *Series
		idleCPU float64
		// wantSlope is the CPU line's slope, within 3%; 0: the requests'
		// CPU plus the idle CPU times the replicas' slope on the rate.
		wantSlope float64
		wantMode  string
		wantBase  float64
		warned    bool
	}{
		{"an HPA's history: idle CPU in the slope, and said", hpaHistory(600, idle, cpuSec, perPod, 1), 0, 0, IdleOff, 0, true},
		{"an HPA's history with the idle CPU given", hpaHistory(600, idle, cpuSec, perPod, 1), idle, cpuSec, IdleGiven, idle, false},
		{"replicas that do not follow the rate: not said", idleHistory(600, idle, cpuSec, 3), 0, cpuSec, IdleOff, 0, false},
		{"the idle CPU given where the line could tell", idleHistory(600, idle, cpuSec, 3), idle, cpuSec, IdleGiven, idle, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := FitApp(tc.s, FitOptions{Idle: IdleOff, IdleCPU: tc.idleCPU, NodeCPU: 2, MinCPUR2: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.wantSlope
			if want == 0 {
				follow, _ := regress(tc.s.Rate, tc.s.Replicas)
				want = cpuSec + idle*follow.Slope
				// The test means something only if the idle CPU moves
				// the slope well beyond the tolerance.
				if want < 1.2*cpuSec {
					t.Fatalf("the idle CPU adds only %.1f%% to the slope", 100*(want/cpuSec-1))
				}
			}
			if e := f.App.CPUSeconds/want - 1; math.Abs(e) > 0.03 {
				t.Errorf("CPU per request %.5f, want %.5f (%+.1f%%)", f.App.CPUSeconds, want, 100*e)
			}
			if f.Idle.Mode != tc.wantMode || f.App.BaseCPU != tc.wantBase {
				t.Errorf("idle mode %q, app's idle CPU %g; want %q, %g", f.Idle.Mode, f.App.BaseCPU, tc.wantMode, tc.wantBase)
			}
			var b bytes.Buffer
			if err := (&Result{Fits: []Fit{f}}).WriteText(&b); err != nil {
				t.Fatal(err)
			}
			line := b.String()
			if strings.Contains(line, warning) != tc.warned {
				t.Errorf("fit line says %q: %v, want %v (correlation %.3f):\n%s", warning, !tc.warned, tc.warned, f.Idle.ReplicasRateCorr, line)
			}
			if tc.wantMode == IdleGiven && !strings.Contains(line, "given by --fit-idle-cpu, replayed") {
				t.Errorf("fit line does not say the idle CPU was given:\n%s", line)
			}
		})
	}
}
