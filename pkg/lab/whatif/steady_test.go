package whatif

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestSteadySteps(t *testing.T) {
	// Per-pod CPU against a 200m limit (0.9 of it is 0.18); NaN is a gap.
	nan := math.NaN()
	tests := []struct {
		name     string
		cpu      []float64
		replicas []float64
		limit    []float64
		maxLoad  float64
		want     []int
	}{
		{"all steady but the first", []float64{0.1, 0.1, 0.1, 0.1}, []float64{1, 1, 1, 1}, []float64{0.2, 0.2, 0.2, 0.2}, 0.9, []int{1, 2, 3}},
		{"at the limit, and the step after", []float64{0.1, 0.2, 0.1, 0.1}, []float64{1, 1, 1, 1}, []float64{0.2, 0.2, 0.2, 0.2}, 0.9, []int{3}},
		{"just under the bound", []float64{0.1, 0.179, 0.1, 0.1}, []float64{1, 1, 1, 1}, []float64{0.2, 0.2, 0.2, 0.2}, 0.9, []int{1, 2, 3}},
		{"a lower bound takes more out", []float64{0.1, 0.179, 0.1, 0.1}, []float64{1, 1, 1, 1}, []float64{0.2, 0.2, 0.2, 0.2}, 0.8, []int{3}},
		{"the replicas changed", []float64{0.1, 0.1, 0.1, 0.1}, []float64{1, 2, 2, 1}, []float64{0.2, 0.2, 0.2, 0.2}, 0.9, []int{2}},
		{"after a gap, no step before", []float64{0.1, nan, 0.1, 0.1}, []float64{1, 1, 1, 1}, []float64{0.2, 0.2, 0.2, 0.2}, 0.9, []int{3}},
		{"no limit: the node's", []float64{1, 1, 15, 1}, []float64{1, 1, 1, 1}, []float64{nan, nan, nan, nan}, 0.9, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Series{CPU: tc.cpu, Replicas: tc.replicas, LimitCPU: tc.limit, Rate: make([]float64, len(tc.cpu))}
			// The usable steps: those with a CPU reading (the gap's is not).
			var idx []int
			for i, c := range tc.cpu {
				if ok(c) {
					idx = append(idx, i)
				}
			}
			var got []int
			for _, k := range steadySteps(s, idx, FitOptions{CPUFitMaxLoad: tc.maxLoad, NodeCPU: 16}) {
				got = append(got, idx[k])
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("steady steps %v, want %v", got, tc.want)
			}
		})
	}
}

// overloaded is a 200m pod's history at cpuPerReq CPU seconds a request
// around 10 requests a second (load 0.6), with every 40 steps an overload
// (3 steps at 25 a second, the pod's CPU capped at its limit; then a step
// at the base rate in which it works off the queue at its limit) and a
// second pod for five steps (the first with the new pod's start-up CPU).
func overloaded(n int, cpuPerReq float64, seed uint64) *Series {
	rng := rand.New(rand.NewPCG(seed, seed))
	s := &Series{Name: "ns/capped", Container: "app", Step: step}
	for i := range n {
		rate, pods, extra := 10+3*math.Sin(float64(i)/7)+rng.NormFloat64()*0.3, 1.0, 0.0
		switch j := i % 40; {
		case j >= 20 && j <= 22:
			rate = 25
		case j >= 30 && j <= 34:
			pods = 2
			if j == 30 {
				extra = 0.05
			}
		}
		cpu := cpuPerReq*rate/pods + extra + rng.NormFloat64()*0.002
		if j := i % 40; j >= 20 && j <= 23 {
			cpu = 0.2
		}
		s.Rate = append(s.Rate, rate)
		s.Replicas = append(s.Replicas, pods)
		s.CPU = append(s.CPU, math.Min(cpu, 0.2))
		s.Memory = append(s.Memory, 60<<20)
		s.RequestCPU = append(s.RequestCPU, 0.2)
		s.RequestMemory = append(s.RequestMemory, 256<<20)
		s.LimitCPU = append(s.LimitCPU, 0.2)
		s.LimitMemory = append(s.LimitMemory, 256<<20)
	}
	return s
}

// TestFitCPUSteady: CPU per request is fitted on the steady steps, where a
// pod's CPU is its requests' work, and on every step where there are too
// few of them or FitOptions.CPUFitMaxLoad says so.
func TestFitCPUSteady(t *testing.T) {
	const truth = 0.012
	s := overloaded(200, truth, 3)
	tests := []struct {
		name      string
		opts      func(*FitOptions)
		wantSteps string
		// wantErr bounds the slope's error against the truth; the line on
		// every step is biased by the capped steps (checked below).
		wantErr float64
	}{
		{"steady steps, the default", func(*FitOptions) {}, CPUStepsSteady, 0.02},
		{"every step", func(o *FitOptions) { o.CPUFitMaxLoad = 1 }, CPUStepsAll, math.Inf(1)},
		{"a result written before the bound", func(o *FitOptions) { o.CPUFitMaxLoad = 0 }, CPUStepsAll, math.Inf(1)},
		{"too few steady steps", func(o *FitOptions) { o.MinPoints = 180 }, CPUStepsAll, math.Inf(1)},
	}
	all, _ := regress(s.Rate, func() []float64 {
		tot := make([]float64, len(s.CPU))
		for i := range tot {
			tot[i] = s.CPU[i] * s.Replicas[i]
		}
		return tot
	}())
	// The test means something only if the capped steps bias the line
	// on every step.
	if e := math.Abs(all.Slope/truth - 1); e < 0.10 {
		t.Fatalf("the line on every step is off by %.1f%% only", 100*e)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultFitOptions()
			o.MinPoints, o.NodeCPU = 60, 2
			tc.opts(&o)
			f, err := FitApp(s, o)
			if err != nil {
				t.Fatal(err)
			}
			if f.CPUSteps != tc.wantSteps {
				t.Fatalf("fitted on %q steps, want %q", f.CPUSteps, tc.wantSteps)
			}
			if e := math.Abs(f.App.CPUSeconds/truth - 1); e > tc.wantErr {
				t.Errorf("CPU per request %.5f, truth %.3f (%.1f%% off)", f.App.CPUSeconds, truth, 100*e)
			}
			switch tc.wantSteps {
			case CPUStepsAll:
				if f.CPU.Points != len(s.Rate) || f.CPU.Slope != all.Slope {
					t.Errorf("line %+v, want every step's %+v", f.CPU, all)
				}
			case CPUStepsSteady:
				// Out: the first step; of each 40, the four at the limit
				// and the one after them, and the two replica changes.
				if want := len(s.Rate) - 1 - 5*5 - 5*2; f.CPU.Points != want {
					t.Errorf("fitted on %d steps, want %d", f.CPU.Points, want)
				}
				if f.CPU.R2 < 0.9 {
					t.Errorf("steady line's R² %.2f", f.CPU.R2)
				}
			}
		})
	}
}
