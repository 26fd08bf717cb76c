package hpa

import (
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func dur(d time.Duration) *time.Duration { return &d }

func horizontal(t *testing.T, c workload.Constraints) *Horizontal {
	t.Helper()
	h, err := NewHorizontal(c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHorizontalBounds(t *testing.T) {
	h := horizontal(t, workload.Constraints{MinReplicas: 2, MaxReplicas: 10})
	if d := h.Decide(t0, 4, 50, false); d.Replicas != 8 || d.Reason != "ScaleUpLimit" {
		// default scale-up policy: max(+100%, +4) per 15 s = 8.
		t.Errorf("scale up to 50 from 4: %+v", d)
	}
	if d := h.Decide(t0.Add(time.Minute), 8, 50, false); d.Replicas != 10 {
		t.Errorf("capped at max: %+v", d)
	}
	// Current outside the bounds is corrected at once, without a window.
	h = horizontal(t, workload.Constraints{MinReplicas: 2, MaxReplicas: 10})
	if d := h.Decide(t0, 15, 12, false); d.Replicas != 10 || d.Reason != "TooManyReplicas" {
		t.Errorf("current above max: %+v", d)
	}
	if d := h.Decide(t0, 1, 1, false); d.Replicas != 2 || d.Reason != "TooFewReplicas" {
		t.Errorf("current below min: %+v", d)
	}
	// Scaled to zero by the user: disabled.
	if d := h.Decide(t0, 0, 5, false); d.Changed() || d.Reason != ReasonScalingDisabled {
		t.Errorf("current 0: %+v", d)
	}
	// No desired count.
	if d := h.Decide(t0, 3, 0, false); d.Changed() {
		t.Errorf("desired 0: %+v", d)
	}
}

func TestHorizontalBehaviorWindows(t *testing.T) {
	c := workload.Constraints{MinReplicas: 1, MaxReplicas: 20, Behavior: &workload.Behavior{
		ScaleDown: &workload.ScalingRules{StabilizationWindow: dur(60 * time.Second), Select: workload.SelectMax,
			Policies: []workload.ScalingPolicy{{Type: workload.PodsScalingPolicy, Value: 1, Period: 30 * time.Second}}},
		ScaleUp: &workload.ScalingRules{StabilizationWindow: dur(0), Select: workload.SelectMax,
			Policies: []workload.ScalingPolicy{{Type: workload.PodsScalingPolicy, Value: 2, Period: 60 * time.Second}}},
	}}
	h := horizontal(t, c)
	cur := int32(10)
	step := func(at time.Duration, desired int32) HorizontalDecision {
		d := h.Decide(t0.Add(at), cur, desired, false)
		cur = d.Replicas
		return d
	}
	// Scale-down is held for the 60 s window...
	if d := step(0, 5); d.Replicas != 10 {
		t.Fatalf("t=0: %+v", d)
	}
	if d := step(30*time.Second, 5); d.Replicas != 10 {
		t.Fatalf("t=30s: %+v", d)
	}
	// ...then limited to 1 pod per 30 s.
	if d := step(61*time.Second, 5); d.Replicas != 9 || d.Reason != "ScaleDownLimit" {
		t.Fatalf("t=61s: %+v", d)
	}
	if d := step(75*time.Second, 5); d.Replicas != 9 {
		t.Fatalf("t=75s (within the 30 s period): %+v", d)
	}
	if d := step(92*time.Second, 5); d.Replicas != 8 {
		t.Fatalf("t=92s: %+v", d)
	}
	// Scale-up: at most 2 pods per 60 s, counted from the start of the
	// period: 8 now, +1 scale-down at 92 s still within the 30 s scale-down
	// history (the one at 61 s is pruned, as upstream) → 9 + 2 = 11.
	if d := step(100*time.Second, 15); d.Replicas != 11 || d.Reason != "ScaleUpLimit" {
		t.Fatalf("t=100s up: %+v", d)
	}
	if d := step(110*time.Second, 15); d.Replicas != 11 {
		t.Fatalf("t=110s up within period: %+v", d)
	}
}

func TestHorizontalNoFlapping(t *testing.T) {
	// Default behavior: a recommendation oscillating between 4 and 8 every
	// 30 s scales up once and never back down within the 300 s window.
	h := horizontal(t, workload.Constraints{MinReplicas: 1, MaxReplicas: 20})
	cur := int32(4)
	changes := 0
	for i := range 20 {
		desired := int32(4)
		if i%2 == 0 {
			desired = 8
		}
		d := h.Decide(t0.Add(time.Duration(i)*30*time.Second), cur, desired, false)
		if d.Changed() {
			changes++
		}
		cur = d.Replicas
	}
	if changes != 1 || cur != 8 {
		t.Errorf("changes = %d, final %d; want one change to 8", changes, cur)
	}
}

// A count the recommender already stabilized is not held for the window a
// second time, but still obeys the rate limits; an unstabilized count
// after it is judged against the history it left.
func TestHorizontalStabilizedUpstream(t *testing.T) {
	c := workload.Constraints{MinReplicas: 1, MaxReplicas: 20, Behavior: &workload.Behavior{
		ScaleDown: &workload.ScalingRules{StabilizationWindow: dur(60 * time.Second), Select: workload.SelectMax,
			Policies: []workload.ScalingPolicy{{Type: workload.PodsScalingPolicy, Value: 2, Period: 30 * time.Second}}},
	}}
	for _, tc := range []struct {
		name       string
		stabilized bool
		want       int32
		reason     string
	}{
		{"stabilized upstream: only the rate limit", true, 8, "ScaleDownLimit"},
		{"unstabilized: held for the window", false, 10, "ScaleDownStabilized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := horizontal(t, c)
			if d := h.Decide(t0, 10, 5, tc.stabilized); d.Replicas != tc.want || d.Reason != tc.reason {
				t.Fatalf("got %+v, want %d (%s)", d, tc.want, tc.reason)
			}
		})
	}
	t.Run("an agent's count after default ones sees their history", func(t *testing.T) {
		h := horizontal(t, c)
		// The default asked for 10 at t=0 and 50 s, then the agent asks
		// for 4 at 70 s: the start-up seed has left the 60 s window, but
		// the default's 10 at 50 s still holds it.
		h.Decide(t0, 10, 10, true)
		h.Decide(t0.Add(50*time.Second), 10, 10, true)
		if d := h.Decide(t0.Add(70*time.Second), 10, 4, false); d.Replicas != 10 {
			t.Fatalf("agent's scale-down inside the window: %+v", d)
		}
	})
}

// The windows hold capacity in the recommendation's per-pod CPU
// (SetUnit): an agent's scale-in from two 200m pods to one 807m pod keeps
// the capacity and is applied at once, as on the real node it should have
// been (docs/real-node-rounds.md, round twenty-seven); the same scale-in at
// the same size is held for the window, and so is one whose growth does
// not make up the pods it sheds.
func TestHorizontalHoldsCapacity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before float64 // per-pod CPU of the counts recorded so far
		now    float64 // per-pod CPU of the scale-in
		want   int32
	}{
		{"grown pods keep the capacity", 0.2, 0.807, 1},
		{"the same size", 0.2, 0.2, 2},
		{"grown, not enough", 0.2, 0.3, 2},
		{"no unit", 0, 0.807, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := horizontal(t, workload.Constraints{MinReplicas: 1, MaxReplicas: 8})
			h.SetUnit(tc.before)
			for i := range 4 {
				if d := h.Decide(t0.Add(time.Duration(i)*15*time.Second), 2, 2, false); d.Changed() {
					t.Fatalf("steady at 2: %+v", d)
				}
			}
			h.SetUnit(tc.now)
			if d := h.Decide(t0.Add(time.Minute), 2, 1, false); d.Replicas != tc.want {
				t.Errorf("scale-in from 2 to 1 at %g cores per pod after %g: %+v, want %d replicas", tc.now, tc.before, d, tc.want)
			}
		})
	}
}
