package fusion

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// goalObservation is four ready pods at 70% of a 0.5-core request (the
// default CPU target: the CPU metric alone keeps 4 replicas) and 80% of a
// 1 GiB memory request.
func goalObservation(cpuPerPod float64, goals ...workload.Goal) workload.Observation {
	o := workload.Observation{
		Time: t0, Window: 15 * time.Second, Replicas: 4, ReadyReplicas: 4, Samples: 4,
		Containers: []workload.ContainerObservation{{
			Name: "app", Requests: workload.Resources{CPU: 0.5, Memory: 1 << 30},
			Limits: workload.Resources{CPU: 2, Memory: 2 << 30},
			Usage:  workload.Resources{CPU: cpuPerPod, Memory: 0.8 * (1 << 30)},
		}},
		Goals: goals,
	}
	for i := range 4 {
		o.Pods = append(o.Pods, workload.PodSample{
			Name: fmt.Sprintf("p%d", i), Ready: true, HasMetrics: true,
			Started: t0.Add(-time.Hour), ReadySince: t0.Add(-time.Hour),
			Usage:    o.Containers[0].Usage,
			Requests: o.Containers[0].Requests,
		})
	}
	return o
}

func perPod(vs ...float64) map[string]float64 {
	out := map[string]float64{}
	for i, v := range vs {
		out[fmt.Sprintf("p%d", i)] = v
	}
	return out
}

// TestGoalsDriveReplicas checks each goal kind with the HPA arithmetic:
// every metric proposes a count, the largest wins (with the fused CPU
// metric, which proposes the current 4), within the 10% tolerance, and a
// goal without a usable reading never scales down. The scale-down
// stabilization window is 0 so that a scale-down would show at once.
func TestGoalsDriveReplicas(t *testing.T) {
	zero := time.Duration(0)
	c := workload.Constraints{MinReplicas: 1, MaxReplicas: 20, Behavior: &workload.Behavior{
		ScaleDown: &workload.ScalingRules{StabilizationWindow: &zero},
	}}
	pods := func(name string, target float64, values map[string]float64) workload.Goal {
		return workload.Goal{Name: name, Kind: workload.GoalAverageValue, Target: target, PerPod: values}
	}
	value := func(name string, target, v float64) workload.Goal {
		return workload.Goal{Name: name, Kind: workload.GoalValue, Target: target, Value: v}
	}
	total := func(name string, target, v float64) workload.Goal {
		return workload.Goal{Name: name, Kind: workload.GoalTotalAverageValue, Target: target, Value: v}
	}
	missing := workload.Goal{Name: "queue", Kind: workload.GoalTotalAverageValue, Problem: "no data"}
	for _, tc := range []struct {
		name       string
		cpuPerPod  float64
		goals      []workload.Goal
		want       int32
		wantReason string
	}{
		{"no goals: the CPU metric keeps 4", 0.35, nil, 4, ""},
		// ceil(Σ 15 / 10) = 6.
		{"Pods AverageValue", 0.35, []workload.Goal{pods("rps", 10, perPod(15, 15, 15, 15))}, 6, ""},
		// Ratio 17.5/10 scales the 4 ready pods: ceil(7) = 7.
		{"Object Value", 0.35, []workload.Goal{value("ingress_rps", 10, 17.5)}, 7, ""},
		// ceil(50 / 10) = 5.
		{"Object AverageValue", 0.35, []workload.Goal{total("ingress_rps", 10, 50)}, 5, ""},
		// Ratio 1.5 × 4 = 6.
		{"External Value", 0.35, []workload.Goal{value("queue_lag", 1, 1.5)}, 6, ""},
		// ceil(70 / 10) = 7.
		{"External AverageValue", 0.35, []workload.Goal{total("queue_messages", 10, 70)}, 7, ""},
		// Memory 0.8 GiB of the (kept) 1 GiB request against a 50% target:
		// ratio 1.6, ceil(6.4) = 7.
		{"Resource memory Utilization", 0.35, []workload.Goal{{Name: "memory", Kind: workload.GoalUtilization, Resource: workload.Memory, Target: 0.5}}, 7, ""},
		// 0.35 cores per pod against 0.25 per pod: ceil(1.4/0.25) = 6.
		{"Resource cpu AverageValue", 0.35, []workload.Goal{{Name: "cpu", Kind: workload.GoalAverageValue, Resource: workload.CPU, Target: 0.25}}, 6, ""},
		{"multiple metrics: the largest proposal wins", 0.35, []workload.Goal{
			pods("rps", 10, perPod(15, 15, 15, 15)), total("ingress_rps", 10, 50), value("queue_lag", 1, 1.75),
		}, 7, ""},
		// 43/(10·4) = 1.075 is within the 10% tolerance; 46/40 is not.
		{"within tolerance: no change", 0.35, []workload.Goal{total("ingress_rps", 10, 43)}, 4, ""},
		{"just outside tolerance", 0.35, []workload.Goal{total("ingress_rps", 10, 46)}, 5, ""},
		// HPA missing-pod rule on a scale-up: the pod without a value counts
		// as 0, ratio 45/40, ceil(4.5) = 5.
		{"Pods goal with a pod missing", 0.35, []workload.Goal{pods("rps", 10, map[string]float64{"p0": 15, "p1": 15, "p2": 15})}, 5, ""},
		{"goals asking for fewer: CPU scales down alone", 0.1, []workload.Goal{total("ingress_rps", 10, 10)}, 2, ""},
		{"missing metric does not scale down", 0.1, []workload.Goal{total("ingress_rps", 10, 10), missing}, 4, "FailedGetGoalMetric"},
		{"missing metric does not prevent a scale-up", 0.35, []workload.Goal{missing, pods("rps", 10, perPod(15, 15, 15, 15))}, 6, ""},
		{"Pods goal without any value is missing too", 0.1, []workload.Goal{pods("rps", 10, nil)}, 4, "FailedGetGoalMetric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicyFactory(Options{})(c)
			if err != nil {
				t.Fatal(err)
			}
			// An hour at 0.35 cores per pod without goals: the request
			// stays 0.5 cores and the CPU metric proposes 4.
			for i := range 240 {
				o := goalObservation(0.35)
				o.Time = t0.Add(time.Duration(i-240) * 15 * time.Second)
				if rec, err := p.Recommend(context.Background(), o); err != nil || rec.Replicas != 4 {
					t.Fatalf("warm-up tick %d: %d replicas, %v", i, rec.Replicas, err)
				}
			}
			rec, err := p.Recommend(context.Background(), goalObservation(tc.cpuPerPod, tc.goals...))
			if err != nil {
				t.Fatal(err)
			}
			if rec.Replicas != tc.want {
				t.Errorf("replicas %d, want %d (%s)", rec.Replicas, tc.want, rec.Reason)
			}
			if tc.wantReason != "" && !strings.Contains(rec.Reason, tc.wantReason) {
				t.Errorf("reason %q, want it to contain %q", rec.Reason, tc.wantReason)
			}
			if tc.wantReason == "" && strings.Contains(rec.Reason, "Failed") {
				t.Errorf("unexpected failure reason %q", rec.Reason)
			}
		})
	}
}

// TestCPUUtilizationGoalSetsTheTarget: a Resource CPU goal with a
// Utilization target replaces the fused 70% in both loops, so the pods are
// sized for it instead of being scaled out against it forever. Until the
// histogram is confident enough to resize the 0.5-core pods (rule 5), the
// horizontal loop answers the goal as the HPA would; then the replicas come
// back and stay.
func TestCPUUtilizationGoalSetsTheTarget(t *testing.T) {
	run := func(goals ...workload.Goal) (workload.Recommendation, []int32) {
		p, _ := NewPolicyFactory(Options{})(workload.Constraints{MaxReplicas: 20})
		var rec workload.Recommendation
		var seen []int32
		req := 0.5
		for i := range 200 {
			o := goalObservation(0.35, goals...)
			o.Time = t0.Add(time.Duration(i) * 15 * time.Second)
			o.Containers[0].Requests.CPU = req
			for j := range o.Pods {
				o.Pods[j].Requests.CPU = req
			}
			var err error
			if rec, err = p.Recommend(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, rec.Replicas)
			if c, ok := rec.Container("app"); ok {
				req = c.Target.CPU // the updater applies the target
			}
		}
		return rec, seen
	}
	def, _ := run()
	half, seen := run(workload.Goal{Name: "cpu", Kind: workload.GoalUtilization, Resource: workload.CPU, Target: 0.35})
	dc, _ := def.Container("app")
	hc, _ := half.Container("app")
	// p90(0.35)/0.35 is about 1 core; with the default, about 0.5.
	if hc.Target.CPU < 0.95 || hc.Target.CPU > 1.15 || dc.Target.CPU > 0.6 {
		t.Errorf("cpu targets: with a 35%% goal %g (want ≈1), default %g (want ≈0.5)", hc.Target.CPU, dc.Target.CPU)
	}
	for i, n := range seen {
		if n > 8 || (i >= 100 && n != 4) {
			t.Fatalf("tick %d: replicas %d; the goal must resize pods, not scale out without end (%v)", i, n, seen)
		}
	}
	// A CPU goal without a usable reading leaves the default target.
	bad, _ := run(workload.Goal{Name: "cpu", Kind: workload.GoalUtilization, Resource: workload.CPU, Target: 0.35, Problem: "invalid target"})
	if bc, _ := bad.Container("app"); bc.Target.CPU != dc.Target.CPU {
		t.Errorf("an unusable CPU goal changed the target: %g vs %g", bc.Target.CPU, dc.Target.CPU)
	}
}
