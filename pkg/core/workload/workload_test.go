package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestObservationValidate(t *testing.T) {
	good := func() Observation {
		return Observation{
			Replicas: 2, ReadyReplicas: 2, RequestRate: 10, SLO: 0.2,
			Latency:    Latency{P50: 0.05, P95: 0.1, P99: 0.2},
			Containers: []ContainerObservation{{Name: "app", Requests: Resources{CPU: 0.5, Memory: 1 << 28}, Usage: Resources{CPU: 0.3, Memory: 1 << 27}}},
			Pods:       []PodSample{{Name: "p", Ready: true, HasMetrics: true, Usage: Resources{CPU: 0.3}}},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Observation)
		want   string
	}{
		{"valid", func(*Observation) {}, ""},
		{"NaN request rate", func(o *Observation) { o.RequestRate = math.NaN() }, "requestRate is NaN"},
		{"infinite latency", func(o *Observation) { o.Latency.P95 = math.Inf(1) }, "latency.p95 is infinite"},
		{"negative replicas", func(o *Observation) { o.Replicas = -1 }, "replicas must be >= 0"},
		{"negative start-up delay", func(o *Observation) { o.StartupDelay = -time.Second }, "startupDelay must be >= 0"},
		{"negative rate window", func(o *Observation) { o.RateWindow = -time.Second }, "rateWindow must be >= 0"},
		{"negative usage", func(o *Observation) { o.Containers[0].Usage.CPU = -0.1 }, `"app" usage: cpu is negative`},
		{"NaN memory request", func(o *Observation) { o.Containers[0].Requests.Memory = math.NaN() }, "memory is NaN"},
		{"unnamed container", func(o *Observation) { o.Containers[0].Name = "" }, "name is empty"},
		{"negative OOM count", func(o *Observation) { o.Containers[0].OOMKills = -1 }, "oomKills"},
		{"CPU pressure above 1", func(o *Observation) { o.Containers[0].CPUPressure = 1.5 }, "cpuPressure"},
		{"NaN CPU pressure", func(o *Observation) { o.Containers[0].CPUPressure = math.NaN() }, "cpuPressure"},
		{"NaN pod usage", func(o *Observation) { o.Pods[0].Usage.CPU = math.NaN() }, `pods[0] "p" usage`},
		{"valid goals", func(o *Observation) {
			o.Goals = []Goal{
				{Name: "q", Kind: GoalValue, Target: 10, Value: 30},
				{Name: "rps", Kind: GoalAverageValue, Target: 5, PerPod: map[string]float64{"p": 4}},
				{Name: "cpu", Kind: GoalUtilization, Resource: CPU, Target: 0.5},
			}
		}, ""},
		{"missing goal carries no reading to check", func(o *Observation) {
			o.Goals = []Goal{{Name: "q", Kind: GoalValue, Value: math.NaN(), Problem: "nan"}}
		}, ""},
		{"NaN goal value", func(o *Observation) { o.Goals = []Goal{{Name: "q", Kind: GoalValue, Target: 1, Value: math.NaN()}} }, `goals[0] "q": value is NaN`},
		{"negative per-pod goal value", func(o *Observation) {
			o.Goals = []Goal{{Name: "rps", Kind: GoalAverageValue, Target: 1, PerPod: map[string]float64{"p": -1}}}
		}, "pod p is negative"},
		{"zero goal target", func(o *Observation) { o.Goals = []Goal{{Name: "q", Kind: GoalTotalAverageValue}} }, "target must be positive"},
		{"unknown goal kind", func(o *Observation) { o.Goals = []Goal{{Name: "q", Kind: "Ratio", Target: 1}} }, `unknown kind "Ratio"`},
		{"utilization goal without resource", func(o *Observation) { o.Goals = []Goal{{Name: "u", Kind: GoalUtilization, Target: 1}} }, "needs a resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.mutate(&o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestConstraintsContainerPolicy(t *testing.T) {
	c := Constraints{Containers: []ContainerPolicy{
		{Name: "*", Mode: ContainerModeAuto, MaxAllowed: Resources{CPU: 2}},
		{Name: "sidecar", Mode: ContainerModeOff},
	}}
	for _, tc := range []struct {
		name, container string
		wantMode        ContainerMode
		wantMaxCPU      float64
	}{
		{"own entry wins over wildcard", "sidecar", ContainerModeOff, 0},
		{"wildcard applies, renamed", "app", ContainerModeAuto, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := c.ContainerPolicy(tc.container)
			if p.Name != tc.container || p.Mode != tc.wantMode || p.MaxAllowed.CPU != tc.wantMaxCPU {
				t.Fatalf("got %+v", p)
			}
		})
	}
	empty := Constraints{}
	if p := empty.ContainerPolicy("x"); p.Mode != ContainerModeAuto || !p.Controls(CPU) || !p.Controls(Memory) {
		t.Fatalf("no policy must mean Auto for both resources, got %+v", p)
	}
	cpuOnly := ContainerPolicy{ControlledResources: []Resource{CPU}}
	if !cpuOnly.Controls(CPU) || cpuOnly.Controls(Memory) {
		t.Fatal("controlledResources not honoured")
	}
}

func TestConstraintsValidateAndClamp(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Constraints
		want string
	}{
		{"valid", Constraints{MinReplicas: 1, MaxReplicas: 5}, ""},
		{"min above max", Constraints{MinReplicas: 6, MaxReplicas: 5}, "minReplicas 6 > maxReplicas 5"},
		{"minAllowed above maxAllowed", Constraints{Containers: []ContainerPolicy{{Name: "a", MinAllowed: Resources{Memory: 2}, MaxAllowed: Resources{Memory: 1}}}}, "minAllowed memory"},
		{"NaN bound", Constraints{Containers: []ContainerPolicy{{Name: "a", MaxAllowed: Resources{CPU: math.NaN()}}}}, "maxAllowed: cpu is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	c := Constraints{MinReplicas: 2, MaxReplicas: 4}
	for in, want := range map[int32]int32{0: 2, 3: 3, 9: 4} {
		if got := c.ClampReplicas(in); got != want {
			t.Errorf("ClampReplicas(%d) = %d, want %d", in, got, want)
		}
	}
	if got := (&Constraints{}).ClampReplicas(0); got != 1 {
		t.Errorf("unbounded ClampReplicas(0) = %d, want 1", got)
	}
}

func TestRecommendationValidate(t *testing.T) {
	r := Recommendation{Replicas: 2, Containers: []ContainerRecommendation{{Name: "a", Target: Resources{CPU: 1}}}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	r.Containers[0].UpperBound.Memory = math.Inf(1)
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "upperBound") {
		t.Fatalf("got %v", err)
	}
}

func TestMedianStartupDelay(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	pod := func(ready bool, startup time.Duration) PodSample {
		return PodSample{Ready: ready, Started: t0, ReadySince: t0.Add(startup)}
	}
	for _, tc := range []struct {
		name string
		pods []PodSample
		want time.Duration
		ok   bool
	}{
		{"no pods", nil, 0, false},
		{"the median of the ready pods", []PodSample{pod(true, 30*time.Second), pod(true, 10*time.Second), pod(true, 20*time.Second), pod(false, time.Hour)}, 20 * time.Second, true},
		{"the upper median of an even count", []PodSample{pod(true, 10*time.Second), pod(true, 20*time.Second)}, 20 * time.Second, true},
		{"ready at its start", []PodSample{pod(true, 0)}, 0, true},
		{"no times or out of order", []PodSample{{Ready: true}, {Ready: true, Started: t0, ReadySince: t0.Add(-time.Second)}, pod(false, time.Second)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MedianStartupDelay(tc.pods)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %v, %t; want %v, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestValidFastPath: Validate's fast check accepts exactly the
// observations its full check finds no problem with, over observations
// whose every number is drawn from valid and invalid values alike.
func TestValidFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	values := []float64{0, 0.5, 3, 1e300, math.MaxFloat64, -1e-9, -2, math.NaN(), math.Inf(1), math.Inf(-1)}
	num := func() float64 {
		if rng.IntN(4) > 0 { // mostly valid, so that both answers are common
			return rng.Float64() * 10
		}
		return values[rng.IntN(len(values))]
	}
	res := func() Resources { return Resources{CPU: num(), Memory: num()} }
	counts := [2]int{}
	for range 20000 {
		o := Observation{
			Replicas: int32(rng.IntN(5)) - int32(rng.IntN(2)), ReadyReplicas: int32(rng.IntN(3)),
			StartupDelay: time.Duration(rng.IntN(3)-rng.IntN(2)) * time.Second, RateWindow: time.Duration(rng.IntN(3)-rng.IntN(2)) * time.Minute,
			RequestRate: num(), ErrorRate: num(), SLO: num(), Latency: Latency{P50: num(), P95: num(), P99: num()},
		}
		for range rng.IntN(3) {
			name := "app"
			if rng.IntN(30) == 0 {
				name = ""
			}
			o.Containers = append(o.Containers, ContainerObservation{Name: name, Requests: res(), Limits: res(), Usage: res(), Peak: res(),
				OOMKills: rng.IntN(3) - rng.IntN(2), CPUPressure: []float64{0, 0.3, 1, 1.5, -0.1, math.NaN()}[rng.IntN(6)]})
		}
		for range rng.IntN(4) {
			o.Pods = append(o.Pods, PodSample{Name: "p", Usage: res(), Requests: res()})
		}
		if rng.IntN(10) == 0 {
			o.Goals = []Goal{{Name: "q", Kind: GoalValue, Target: num(), Value: num()}}
		}
		fast, full := o.valid(), o.problems() == nil
		if fast != full {
			t.Fatalf("fast check %v, full check %v (%v) for %+v", fast, full, o.problems(), o)
		}
		if fast {
			counts[1]++
		} else {
			counts[0]++
		}
		if err := o.Validate(); (err == nil) != full {
			t.Fatalf("Validate %v, full check %v", err, full)
		}
	}
	if counts[0] < 1000 || counts[1] < 1000 {
		t.Fatalf("%d refused and %d accepted: the draws do not exercise both", counts[0], counts[1])
	}
	for _, r := range []Resources{{}, {CPU: 1, Memory: 2}, {CPU: -1}, {Memory: math.NaN()}, {CPU: math.Inf(1)}} {
		if (r.Valid() == nil) != r.valid() || (r.problem() == nil) != r.valid() {
			t.Errorf("%+v: Valid %v, fast %v, full %v", r, r.Valid(), r.valid(), r.problem())
		}
	}
}
