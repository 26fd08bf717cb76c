package fusion

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// TestGrownPodsCarryTheReplicas replays, in a closed loop, the path of the
// real node's round twenty (repetition 10): 0.25 cores of load reach one
// 200m pod 45 s before its autoscaler, whose 2-minute rate window is still
// filling; the violation adds a second 200m pod, and once s is known the
// floor grows the pods to about 0.65 core, one of which carries the load at
// 38%. The two 200m pods must then become one grown pod, not two for the
// scale-down window: the window's history of two 200m pods is one grown
// pod's capacity.
func TestGrownPodsCarryTheReplicas(t *testing.T) {
	const (
		rate   = 20.0   // requests/s
		s      = 0.0125 // CPU-seconds per request: 0.25 cores of load
		slo    = 0.25
		step   = 15 * time.Second
		window = 2 * time.Minute
	)
	for _, tc := range []struct {
		name string
		lag  time.Duration // how long the p95 reads a violation after the last saturated step
	}{
		{"the p95 over the rate's window", window},
		{"the p95 clears at once", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicyFactory(Options{})(workload.Constraints{MinReplicas: 1, MaxReplicas: 5})
			if err != nil {
				t.Fatal(err)
			}
			n, request := int32(1), 0.2
			var lastSaturated time.Duration
			grownAt, twoGrown, scaledOut := -1, 0, false
			for i := range 40 {
				e := time.Duration(i) * step
				o := served(t0.Add(e), n, rate, s, request)
				if rate*s/float64(n) >= request {
					lastSaturated = e
				}
				o.RequestRate, o.RateWindow, o.SLO, o.Latency.P95 = promRate(rate, 45*time.Second+e, window), window, slo, 0.1
				if e-lastSaturated <= tc.lag {
					o.Latency.P95 = 1
				}
				rec, err := p.Recommend(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				n, request = rec.Replicas, rec.Containers[0].Target.CPU
				scaledOut = scaledOut || n > 1
				if request >= 0.5 {
					if grownAt < 0 {
						grownAt = i
					}
					if n > 1 {
						twoGrown++
					}
				}
				t.Logf("%3.0fs: %d × %.3f (%s)", e.Seconds(), n, request, rec.Reason)
			}
			if !scaledOut || grownAt < 0 {
				t.Fatalf("scaled out %v, grown at step %d: the loop does not take the path", scaledOut, grownAt)
			}
			if twoGrown > 1 || n != 1 {
				t.Errorf("%d steps with more than one grown pod, %d × %.3f at the end; want one grown pod at most a step after the growth", twoGrown, n, request)
			}
		})
	}
}

// TestViolationHoldsCapacity: rule 4 holds the CPU the replicas run with,
// not their count. Two saturated 200m pods under 0.5 cores of load, the
// p95 violated, while the rate's window fills: each step asks a third pod
// (rule 11), which the test does not start; once the window is covered the
// saturated lower bound of s grows the pods to about 0.52 core, and two of
// them give the capacity of the three 200m pods asked for. Before, the
// history and the hold kept three pods of the grown size.
func TestViolationHoldsCapacity(t *testing.T) {
	p, _ := NewPolicyFactory(Options{})(workload.Constraints{MaxReplicas: 10})
	grown := false
	for i := range 12 {
		e := time.Duration(i) * 15 * time.Second
		o := served(t0.Add(e), 2, 40, 0.0125, 0.2)
		o.RequestRate, o.RateWindow, o.SLO, o.Latency.P95 = promRate(40, 45*time.Second+e, 2*time.Minute), 2*time.Minute, 0.25, 2
		rec, err := p.Recommend(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		cpu := rec.Containers[0].Target.CPU
		t.Logf("%3.0fs: %d × %.3f (%s)", e.Seconds(), rec.Replicas, cpu, rec.Reason)
		if !strings.Contains(rec.Reason, "SLOCPUFloor(saturated, at least ") {
			continue
		}
		grown = true
		if rec.Replicas != 2 || cpu < 0.45 || !strings.Contains(rec.Reason, "CapacityInGrownPods") {
			t.Errorf("at %s: %d × %.3f (%s), want 2 grown pods, noted CapacityInGrownPods", e, rec.Replicas, cpu, rec.Reason)
		}
	}
	if !grown {
		t.Fatal("the floor never grew the pods: the test does not take the path")
	}
}

// TestPodsFor: how many pods of the recommended size give the capacity the
// pods run with; it only ever lowers the count asked for.
func TestPodsFor(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cpu, podRequest float64
		k, want         int32
	}{
		{"two small pods are one grown", 0.4, 0.687, 2, 1},
		{"one more small pod is within a grown one", 0.6, 0.687, 3, 1},
		{"grown less than the one more", 0.6, 0.5, 3, 2},
		{"exact capacity is not rounded up", 0.6, 0.2, 3, 3},
		{"never more than asked", 1.2, 0.2, 3, 3},
		{"at least one", 0.01, 4, 2, 1},
		{"unknown request", 0.4, 0, 2, 2},
		{"unknown capacity", 0, 0.5, 2, 2},
		{"a single pod", 0.2, 0.687, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podsFor(tc.cpu, tc.podRequest, tc.k); got != tc.want {
				t.Errorf("podsFor(%g, %g, %d) = %d, want %d", tc.cpu, tc.podRequest, tc.k, got, tc.want)
			}
		})
	}
}

// TestRunningCPU: the pods' enacted requests when every pod reports one,
// else replicas times the per-pod request.
func TestRunningCPU(t *testing.T) {
	pod := func(cpu float64) workload.PodSample {
		return workload.PodSample{Requests: workload.Resources{CPU: cpu}}
	}
	for _, tc := range []struct {
		name string
		obs  workload.Observation
		want float64
	}{
		{"per-pod requests", workload.Observation{Replicas: 2, Pods: []workload.PodSample{pod(0.62), pod(0.2)}}, 0.82},
		{"a pod without one", workload.Observation{Replicas: 2, Pods: []workload.PodSample{pod(0.62), pod(0)}}, 0.4},
		{"fewer samples than replicas", workload.Observation{Replicas: 3, Pods: []workload.PodSample{pod(0.62), pod(0.2)}}, 0.6},
		{"no samples", workload.Observation{Replicas: 2}, 0.4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runningCPU(&tc.obs, 0.2); got < tc.want-1e-12 || got > tc.want+1e-12 {
				t.Errorf("runningCPU = %g, want %g", got, tc.want)
			}
		})
	}
}
