package hpa

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

var t0 = time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)

// pods builds ready pods, started long ago, with the given CPU usage and a
// request of 1 core.
func pods(usage ...float64) []PodMetric {
	out := make([]PodMetric, len(usage))
	for i, u := range usage {
		out[i] = PodMetric{Ready: true, Started: t0.Add(-time.Hour), ReadySince: t0.Add(-time.Hour), HasValue: true, Value: u, Request: 1}
	}
	return out
}

func TestResourceUtilizationReplicas(t *testing.T) {
	missing := PodMetric{Ready: true, Started: t0.Add(-time.Hour), ReadySince: t0.Add(-time.Hour), Request: 1}
	unready := PodMetric{Ready: false, Started: t0.Add(-time.Minute), ReadySince: t0.Add(-time.Minute), HasValue: true, Value: 0.9, Request: 1}
	young := PodMetric{Ready: true, Started: t0.Add(-time.Minute), ReadySince: t0.Add(-10 * time.Second), HasValue: true, Value: 0.9, Request: 1}
	pending := PodMetric{Request: 1}
	for _, tc := range []struct {
		name    string
		current int32
		pods    []PodMetric
		target  float64
		want    int32
	}{
		{"at target", 3, pods(0.5, 0.5, 0.5), 0.5, 3},
		{"scale up ceil", 3, pods(0.9, 0.9, 0.9), 0.5, 6},                     // 3*1.8=5.4
		{"scale down ceil", 4, pods(0.2, 0.2, 0.2, 0.2), 0.5, 2},              // 4*0.4=1.6
		{"within tolerance above", 10, pods(0.54, 0.54, 0.54, 0.54), 0.5, 10}, // ratio 1.08
		{"within tolerance edge", 10, pods(0.55, 0.55), 0.5, 10},              // ratio 1.1 inclusive
		{"just outside tolerance", 2, pods(0.56, 0.56), 0.5, 3},               // ratio 1.12
		{"within tolerance below", 10, pods(0.46, 0.46), 0.5, 10},
		{"target above 100%", 2, pods(3, 3), 1.5, 4},
		// Missing pods: 0 on scale-up.
		{"missing on scale-up", 3, append(pods(1, 1), missing), 0.5, 4}, // (2/3)/0.5=1.33 → ceil(4)
		// Missing pods: 100% of request on scale-down, which can cancel it.
		{"missing on scale-down", 3, append(pods(0.1, 0.1), missing), 0.5, 3},                // (1.2/3)/0.5=0.8 → ceil(2.4)=3
		{"missing on scale-down still scales", 5, append(pods(0, 0, 0, 0), missing), 0.5, 2}, // 1/5/0.5=0.4 → 2
		{"missing flips direction", 3, append(pods(0.3, 0.3), missing), 0.5, 3},              // 0.6→(1.6/3)/0.5=1.07
		// Unready pods: 0 on scale-up, ignored on scale-down.
		{"unready on scale-up", 3, append(pods(1, 1), unready), 0.5, 4},
		{"unready ignored on scale-down", 3, append(pods(0.1, 0.1), unready), 0.5, 1},
		{"unready cancels small scale-up", 3, append(pods(0.6, 0.6), unready), 0.5, 3}, // 1.2 → 0.8: flips
		{"pending pod counts as unready", 3, append(pods(1, 1), pending), 0.5, 4},
		{"young pod in cpu initialisation", 3, append(pods(1, 1), young), 0.5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultCalculator()
			r, err := c.ResourceUtilizationReplicas(t0, tc.current, tc.pods, tc.target, true, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if r.Replicas != tc.want {
				t.Errorf("replicas = %d, want %d (ratio %.3f)", r.Replicas, tc.want, r.UsageRatio)
			}
		})
	}
}

func TestCPURuleOnlyForCPU(t *testing.T) {
	young := PodMetric{Ready: true, Started: t0.Add(-time.Minute), ReadySince: t0.Add(-10 * time.Second), HasValue: true, Value: 1, Request: 1}
	c := DefaultCalculator()
	ps := append(pods(1, 1), young)
	cpu, _ := c.ResourceUtilizationReplicas(t0, 3, ps, 0.5, true, time.Minute)
	mem, _ := c.ResourceUtilizationReplicas(t0, 3, ps, 0.5, false, time.Minute)
	if cpu.ReadyPods != 2 || mem.ReadyPods != 3 {
		t.Errorf("ready pods: cpu %d (want 2), memory %d (want 3)", cpu.ReadyPods, mem.ReadyPods)
	}
}

func TestValueForms(t *testing.T) {
	c := DefaultCalculator()
	for _, tc := range []struct {
		name string
		f    func() (Result, error)
		want int32
	}{
		{"average value up", func() (Result, error) { return c.AverageValueReplicas(t0, 2, pods(30, 50), 20, false, 0) }, 4},
		{"average value within tolerance", func() (Result, error) { return c.AverageValueReplicas(t0, 2, pods(21, 21), 20, false, 0) }, 2},
		{"average value missing on scale-down uses target", func() (Result, error) {
			return c.AverageValueReplicas(t0, 3, append(pods(5, 5), PodMetric{Ready: true, Request: 1}), 20, false, 0)
		}, 2}, // (10+20)/3/20=0.5 → ceil(1.5)
		{"object value", func() (Result, error) { return c.ObjectValueReplicas(4, 4, 300, 100) }, 12},
		{"object value within tolerance", func() (Result, error) { return c.ObjectValueReplicas(4, 4, 105, 100) }, 4},
		{"object value from zero", func() (Result, error) { return c.ObjectValueReplicas(0, 0, 250, 100) }, 3},
		{"object average value", func() (Result, error) { return c.ObjectAverageValueReplicas(2, 500, 100) }, 5},
		{"object average value within tolerance", func() (Result, error) { return c.ObjectAverageValueReplicas(5, 520, 100) }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.f()
			if err != nil {
				t.Fatal(err)
			}
			if r.Replicas != tc.want {
				t.Errorf("replicas = %d, want %d", r.Replicas, tc.want)
			}
		})
	}
}

func TestCalculatorErrors(t *testing.T) {
	c := DefaultCalculator()
	if _, err := c.ResourceUtilizationReplicas(t0, 2, []PodMetric{{Ready: true}}, 0.5, true, 0); !errors.Is(err, ErrNoMetrics) {
		t.Errorf("no metrics: err = %v, want ErrNoMetrics", err)
	}
	for _, target := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := c.ResourceUtilizationReplicas(t0, 2, pods(1), target, true, 0); err == nil {
			t.Errorf("target %g: want error", target)
		}
	}
	zeroReq := pods(1)
	zeroReq[0].Request = 0
	if _, err := c.ResourceUtilizationReplicas(t0, 1, zeroReq, 0.5, true, 0); err == nil {
		t.Error("zero request: want error")
	}
	if _, err := c.ObjectValueReplicas(1, 1, math.NaN(), 1); err == nil {
		t.Error("NaN value: want error")
	}
}

func ptr[T any](v T) *T { return &v }

// step drives a decider with one utilisation metric whose proposal is want
// replicas (usage chosen so ceil(current·ratio) = want with 2 pods reporting).
func decide(t *testing.T, d *Decider, at time.Time, current, proposed int32) int32 {
	t.Helper()
	// ObjectAverageValue gives the proposal directly: ceil(value/1).
	dec, err := d.Decide(at, current, []Metric{{Name: "m", Kind: ObjectAverageValue, Target: 1, Value: float64(proposed)}})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return dec.Replicas
}

func TestStabilizationWindows(t *testing.T) {
	type step struct {
		after    time.Duration
		current  int32
		proposed int32
		want     int32
	}
	for _, tc := range []struct {
		name     string
		behavior *workload.Behavior
		steps    []step
	}{
		{"scale-down waits 300s by default", nil, []step{
			{0, 10, 10, 10}, {60 * time.Second, 10, 4, 10}, {299 * time.Second, 10, 4, 10}, {301 * time.Second, 10, 4, 4},
		}},
		{"fresh decider does not scale down at once", nil, []step{
			{0, 10, 2, 10},
		}},
		{"scale-down takes max over window", nil, []step{
			{0, 10, 8, 10}, {100 * time.Second, 10, 6, 10}, {200 * time.Second, 10, 4, 10},
			{310 * time.Second, 10, 4, 6}, // 8@0 fell out; max(6,4,4)=6
		}},
		{"scale-up immediate by default", nil, []step{{0, 2, 5, 5}}},
		{"scale-up window takes min", &workload.Behavior{ScaleUp: &workload.ScalingRules{StabilizationWindow: ptr(60 * time.Second)}}, []step{
			{0, 2, 2, 2}, {10 * time.Second, 2, 6, 2}, {30 * time.Second, 2, 6, 2}, {61 * time.Second, 2, 6, 6},
		}},
		{"zero scale-down window", &workload.Behavior{ScaleDown: &workload.ScalingRules{StabilizationWindow: ptr(time.Duration(0))}}, []step{
			{0, 10, 3, 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDecider(workload.Constraints{MinReplicas: 1, MaxReplicas: 100, Behavior: tc.behavior}, DefaultCalculator())
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				if got := decide(t, d, t0.Add(s.after), s.current, s.proposed); got != s.want {
					t.Errorf("step %d (t+%s, %d→%d): got %d, want %d", i, s.after, s.current, s.proposed, got, s.want)
				}
			}
		})
	}
}

// TestDecideShedding: a proposal below current skips the scale-down
// window and the floor, but not the rate limits or min; one at or above
// current is DecideAtLeast's.
func TestDecideShedding(t *testing.T) {
	onePodPerMinute := &workload.ScalingRules{Policies: []workload.ScalingPolicy{{Type: workload.PodsScalingPolicy, Value: 1, Period: time.Minute}}}
	type step struct {
		after                    time.Duration
		shed                     bool
		current, proposed, floor int32
		want                     int32
		reason                   string
	}
	for _, tc := range []struct {
		name  string
		down  *workload.ScalingRules
		min   int32
		steps []step
	}{
		{"a scale-in at once, despite the window and the floor", nil, 1, []step{
			{0, false, 2, 2, 2, 2, ""}, {60 * time.Second, false, 2, 1, 2, 2, "ScaleWithinStabilization"},
			{75 * time.Second, true, 2, 1, 2, 1, "ScaleDownShedding"},
		}},
		{"without shedding the window holds", nil, 1, []step{
			{0, false, 2, 2, 2, 2, ""}, {75 * time.Second, false, 2, 1, 0, 2, "ScaleDownStabilized"},
		}},
		{"at or above current the floor applies", nil, 1, []step{
			{0, true, 2, 2, 3, 3, ""},
		}},
		{"the rate limit applies", onePodPerMinute, 1, []step{
			{0, false, 4, 4, 4, 4, ""}, {15 * time.Second, true, 4, 1, 4, 3, "ScaleDownLimit"},
			{30 * time.Second, true, 3, 1, 3, 3, "ScaleDownLimit"},
		}},
		{"min applies", nil, 2, []step{
			{0, false, 3, 3, 3, 3, ""}, {15 * time.Second, true, 3, 1, 3, 2, "TooFewReplicas"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDecider(workload.Constraints{MinReplicas: tc.min, MaxReplicas: 10, Behavior: &workload.Behavior{ScaleDown: tc.down}}, DefaultCalculator())
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				m := []Metric{{Name: "m", Kind: ObjectAverageValue, Target: 1, Value: float64(s.proposed)}}
				decide := d.DecideAtLeast
				if s.shed {
					decide = d.DecideShedding
				}
				dec, err := decide(t0.Add(s.after), s.current, m, s.floor)
				if err != nil {
					t.Fatal(err)
				}
				if dec.Replicas != s.want || (s.reason != "" && dec.Reason != s.reason) {
					t.Errorf("step %d: %d (%s), want %d (%s)", i, dec.Replicas, dec.Reason, s.want, s.reason)
				}
			}
		})
	}
}

// TestStabilizationInUnits: with SetUnit the scale-down window holds
// capacity: a count recorded for pods of another size counts as the pods of
// the current size giving the same CPU; within unitBand, and without a
// unit, counts are counts.
func TestStabilizationInUnits(t *testing.T) {
	type step struct {
		after             time.Duration
		unit              float64
		current, proposed int32
		want              int32
		reason            string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"pods grown 3.4×: two small ones are one grown", []step{
			{0, 0.2, 2, 2, 2, ""}, {15 * time.Second, 0.687, 2, 1, 1, "ScaleWithinStabilization"},
		}},
		{"no unit: the window holds the count", []step{
			{0, 0, 2, 2, 2, ""}, {15 * time.Second, 0, 2, 1, 2, "ScaleDownStabilized"},
		}},
		{"a unit after plain counts: the old counts stay counts", []step{
			{0, 0, 2, 2, 2, ""}, {15 * time.Second, 0.687, 2, 1, 2, "ScaleDownStabilized"},
		}},
		{"a drift within the band converts nothing", []step{
			{0, 0.679, 1, 1, 1, ""}, {15 * time.Second, 0.64, 2, 1, 1, "ScaleWithinStabilization"},
		}},
		{"grown by half: three pods are two", []step{
			{0, 0.5, 3, 3, 3, ""}, {15 * time.Second, 0.75, 3, 2, 2, "ScaleWithinStabilization"},
		}},
		{"grown, but not enough for fewer", []step{
			{0, 0.5, 3, 3, 3, ""}, {15 * time.Second, 0.6, 3, 2, 3, "ScaleDownStabilized"},
		}},
		{"pods shrunk: the window keeps the capacity of the large ones", []step{
			{0, 0.6, 1, 1, 1, ""}, {15 * time.Second, 0.3, 2, 1, 2, "ScaleDownStabilized"},
		}},
		{"the window still expires", []step{
			{0, 0.2, 4, 4, 4, ""}, {15 * time.Second, 0.25, 4, 4, 4, ""},
			{316 * time.Second, 0.25, 4, 1, 1, "ScaleWithinStabilization"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDecider(workload.Constraints{MinReplicas: 1, MaxReplicas: 10}, DefaultCalculator())
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				d.SetUnit(s.unit)
				m := []Metric{{Name: "m", Kind: ObjectAverageValue, Target: 1, Value: float64(s.proposed)}}
				dec, err := d.Decide(t0.Add(s.after), s.current, m)
				if err != nil {
					t.Fatal(err)
				}
				if dec.Replicas != s.want || (s.reason != "" && dec.Reason != s.reason) {
					t.Errorf("step %d: %d (%s), want %d (%s)", i, dec.Replicas, dec.Reason, s.want, s.reason)
				}
			}
		})
	}
	t.Run("a unit that is not a size is none", func(t *testing.T) {
		for _, u := range []float64{math.NaN(), math.Inf(1), -1} {
			d, _ := NewDecider(workload.Constraints{MaxReplicas: 10}, DefaultCalculator())
			d.SetUnit(u)
			if d.unit != 0 {
				t.Errorf("SetUnit(%g): unit %g, want 0", u, d.unit)
			}
		}
	})
}

func TestBehaviorPolicies(t *testing.T) {
	noWindow := ptr(time.Duration(0))
	type step struct {
		after             time.Duration
		current, proposed int32
		want              int32
	}
	for _, tc := range []struct {
		name  string
		up    *workload.ScalingRules
		down  *workload.ScalingRules
		min   int32
		max   int32
		steps []step
	}{
		{"default up: max(100%, 4 pods) per 15s", nil, nil, 1, 1000, []step{
			{0, 1, 50, 5}, // max(2, 1+4)
			{20 * time.Second, 10, 50, 20},
		}},
		{"default up counts events in period", nil, nil, 1, 1000, []step{
			{0, 10, 50, 20}, {5 * time.Second, 20, 50, 20}, // period start 10: limit 20
			{16 * time.Second, 20, 50, 40},
		}},
		{"select min", &workload.ScalingRules{Select: workload.SelectMin, Policies: []workload.ScalingPolicy{
			{Type: workload.PodsScalingPolicy, Value: 2, Period: time.Minute},
			{Type: workload.PercentScalingPolicy, Value: 50, Period: time.Minute},
		}}, nil, 1, 1000, []step{{0, 10, 50, 12}}},
		{"select max", &workload.ScalingRules{Select: workload.SelectMax, Policies: []workload.ScalingPolicy{
			{Type: workload.PodsScalingPolicy, Value: 2, Period: time.Minute},
			{Type: workload.PercentScalingPolicy, Value: 50, Period: time.Minute},
		}}, nil, 1, 1000, []step{{0, 10, 50, 15}}},
		{"percent rounds up", &workload.ScalingRules{Policies: []workload.ScalingPolicy{
			{Type: workload.PercentScalingPolicy, Value: 10, Period: time.Minute},
		}}, nil, 1, 1000, []step{{0, 3, 10, 4}}},
		{"scale-up disabled", &workload.ScalingRules{Select: workload.SelectDisabled}, nil, 1, 1000, []step{{0, 3, 10, 3}}},
		{"scale-down pods per period", nil, &workload.ScalingRules{StabilizationWindow: noWindow, Policies: []workload.ScalingPolicy{
			{Type: workload.PodsScalingPolicy, Value: 3, Period: time.Minute},
		}}, 1, 1000, []step{{0, 10, 1, 7}, {30 * time.Second, 7, 1, 7}, {61 * time.Second, 7, 1, 4}}},
		{"scale-down percent truncates", nil, &workload.ScalingRules{StabilizationWindow: noWindow, Policies: []workload.ScalingPolicy{
			{Type: workload.PercentScalingPolicy, Value: 50, Period: time.Minute},
		}}, 1, 1000, []step{{0, 9, 1, 4}}}, // int(9·0.5) = 4, as upstream
		{"scale-down disabled", nil, &workload.ScalingRules{StabilizationWindow: noWindow, Select: workload.SelectDisabled}, 1, 1000, []step{{0, 10, 1, 10}}},
		{"clamped to max", nil, nil, 1, 6, []step{{0, 4, 50, 6}}},
		{"clamped to min", nil, &workload.ScalingRules{StabilizationWindow: noWindow}, 3, 10, []step{{0, 5, 1, 3}}},
		{"above max brought down without metrics", nil, nil, 1, 6, []step{{0, 9, 9, 6}}},
		{"below min brought up", nil, nil, 4, 10, []step{{0, 2, 2, 4}}},
		{"zero replicas disables scaling", nil, nil, 1, 10, []step{{0, 0, 5, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDecider(workload.Constraints{MinReplicas: tc.min, MaxReplicas: tc.max, Behavior: &workload.Behavior{ScaleUp: tc.up, ScaleDown: tc.down}}, DefaultCalculator())
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				if got := decide(t, d, t0.Add(s.after), s.current, s.proposed); got != s.want {
					t.Errorf("step %d (t+%s, %d→%d): got %d, want %d", i, s.after, s.current, s.proposed, got, s.want)
				}
			}
		})
	}
}

func TestPerDirectionTolerance(t *testing.T) {
	c := workload.Constraints{MinReplicas: 1, MaxReplicas: 100, Behavior: &workload.Behavior{
		ScaleUp: &workload.ScalingRules{Tolerance: ptr(0.0)},
	}}
	d, err := NewDecider(c, DefaultCalculator())
	if err != nil {
		t.Fatal(err)
	}
	dec, err := d.Decide(t0, 10, []Metric{{Kind: ResourceUtilization, Target: 0.5, Pods: pods(0.52, 0.52, 0.52, 0.52, 0.52, 0.52, 0.52, 0.52, 0.52, 0.52), CPU: true}})
	if err != nil {
		t.Fatal(err)
	}
	if dec.Replicas != 11 {
		t.Errorf("with zero scale-up tolerance a 4%% excess should scale 10→11, got %d", dec.Replicas)
	}
}

func TestMultipleMetricsMax(t *testing.T) {
	d, _ := NewDecider(workload.Constraints{MaxReplicas: 100}, DefaultCalculator())
	dec, err := d.Decide(t0, 4, []Metric{
		{Name: "a", Kind: ObjectAverageValue, Target: 1, Value: 6},
		{Name: "b", Kind: ObjectAverageValue, Target: 1, Value: 9},
	})
	if err != nil || dec.Replicas != 8 { // 9 limited by the 4-pod/100% policy to 8
		t.Errorf("got %d, %v; want 8", dec.Replicas, err)
	}
	// An invalid metric blocks a scale-down.
	_, err = d.Decide(t0.Add(time.Hour), 8, []Metric{
		{Name: "a", Kind: ObjectAverageValue, Target: 1, Value: 2},
		{Name: "bad", Kind: ResourceUtilization, Target: 0.5},
	})
	if err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("want error naming the invalid metric, got %v", err)
	}
}

func TestNewDeciderRejectsBadBehavior(t *testing.T) {
	for name, b := range map[string]*workload.Behavior{
		"negative window": {ScaleDown: &workload.ScalingRules{StabilizationWindow: ptr(-time.Second)}},
		"zero value":      {ScaleUp: &workload.ScalingRules{Policies: []workload.ScalingPolicy{{Type: workload.PodsScalingPolicy, Period: time.Second}}}},
		"zero period":     {ScaleUp: &workload.ScalingRules{Policies: []workload.ScalingPolicy{{Type: workload.PodsScalingPolicy, Value: 1}}}},
		"bad type":        {ScaleUp: &workload.ScalingRules{Policies: []workload.ScalingPolicy{{Type: "X", Value: 1, Period: time.Second}}}},
		"bad select":      {ScaleUp: &workload.ScalingRules{Select: "Most"}},
		"NaN tolerance":   {ScaleUp: &workload.ScalingRules{Tolerance: ptr(math.NaN())}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewDecider(workload.Constraints{Behavior: b}, DefaultCalculator()); err == nil {
				t.Error("want error")
			}
		})
	}
}

func obs(replicas, ready int32, usage, request float64) workload.Observation {
	return workload.Observation{
		Time: t0, Window: time.Minute, Replicas: replicas, ReadyReplicas: ready, Samples: 1,
		Containers: []workload.ContainerObservation{{Name: "app", Requests: workload.Resources{CPU: request, Memory: 1 << 30}, Usage: workload.Resources{CPU: usage, Memory: 1 << 29}}},
	}
}

func TestPolicy(t *testing.T) {
	p, err := NewPolicyFactory(PolicyOptions{})(workload.Constraints{MinReplicas: 1, MaxReplicas: 20})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "hpa" {
		t.Errorf("name %q", p.Name())
	}
	rec, err := p.Recommend(context.Background(), obs(4, 4, 0.9, 0.5)) // util 1.8 / 0.7
	if err != nil {
		t.Fatal(err)
	}
	if rec.Replicas != 8 { // ceil(4·2.57)=11, limited to 8 by the default policies
		t.Errorf("replicas %d, want 8", rec.Replicas)
	}
	if c, _ := rec.Container("app"); c.Target.CPU != 0.5 {
		t.Errorf("hpa changed the request to %g", c.Target.CPU)
	}
	// Unready replicas count as idle on scale-up.
	p2, _ := NewPolicyFactory(PolicyOptions{})(workload.Constraints{MaxReplicas: 20})
	rec, _ = p2.Recommend(context.Background(), obs(4, 2, 0.9, 0.5))
	// Ready pods: 1.8/0.7 = 2.57; with the 2 unready at 0: 0.9/0.7 = 1.29 → ceil(5.14) = 6.
	if rec.Replicas != 6 {
		t.Errorf("replicas with unready %d, want 6", rec.Replicas)
	}
	bad := obs(4, 4, math.NaN(), 0.5)
	if _, err := p.Recommend(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN usage: err = %v", err)
	}
	noMetrics := obs(4, 4, 0, 0.5)
	noMetrics.Samples = 0
	rec, err = p.Recommend(context.Background(), noMetrics)
	if err != nil || rec.Replicas != 4 || !strings.Contains(rec.Reason, "Failed") {
		t.Errorf("without metrics want current replicas and a reason, got %d %q %v", rec.Replicas, rec.Reason, err)
	}
}

func TestPolicyOptionsValidate(t *testing.T) {
	for _, o := range []PolicyOptions{{TargetCPUUtilization: -1}, {TargetCPUUtilization: math.NaN()}, {Tolerance: -0.1}, {CPUInitializationPeriod: -time.Second}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: want error", o)
		}
		if _, err := NewPolicyFactory(o)(workload.Constraints{}); err == nil {
			t.Errorf("%+v: factory accepted invalid options", o)
		}
	}
	if err := (PolicyOptions{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}

func BenchmarkPolicyRecommend(b *testing.B) {
	p, _ := NewPolicyFactory(PolicyOptions{})(workload.Constraints{MaxReplicas: 100})
	o := obs(10, 10, 0.35, 0.5)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o.Time = t0.Add(time.Duration(i) * 15 * time.Second)
		if _, err := p.Recommend(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCalculatorDoesNotAllocate: the simulator's replays compute replicas
// every window, so grouping a workload of up to 16 pods per group must not
// allocate; beyond, the groups grow on the heap and stay correct.
func TestCalculatorDoesNotAllocate(t *testing.T) {
	c := DefaultCalculator()
	for _, tc := range []struct {
		name   string
		pods   []PodMetric
		allocs bool
	}{
		{"10 pods", pods(0.5, 0.6, 0.7, 0.8, 0.9, 0.5, 0.6, 0.7, 0.8, 0.9), false},
		{"40 pods", pods(make([]float64, 40)...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			var err error
			n := testing.AllocsPerRun(100, func() {
				r, err = c.ResourceUtilizationReplicas(t0, int32(len(tc.pods)), tc.pods, 0.5, true, time.Minute)
			})
			if err != nil || r.ReadyPods != len(tc.pods) {
				t.Fatalf("result %+v, %v: want all %d pods ready", r, err, len(tc.pods))
			}
			if tc.allocs != (n > 0) {
				t.Errorf("%g allocations per call", n)
			}
			if _, err := c.AverageValueReplicas(t0, int32(len(tc.pods)), tc.pods, 0.5, true, time.Minute); err != nil {
				t.Fatal(err)
			}
		})
	}
}
