package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// TestCurrentReplicasFromScale: spec.replicas of the scale subresource is
// the current count (a third pod is still being created), while per-pod
// values average the two running pods.
func TestCurrentReplicasFromScale(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.targets.replicas = map[string]int32{"web": 3}
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	f.start()
	f.tick()
	s := f.mpa("ns", "web").Status
	if s.CurrentReplicas != 3 {
		t.Errorf("currentReplicas %d, want the scale's 3", s.CurrentReplicas)
	}
	if len(s.CurrentMetrics) < 1 || s.CurrentMetrics[0].Resource.Current.AverageValue.MilliValue() != 400 {
		t.Errorf("currentMetrics %+v; want the cpu mean of the 2 running pods (400m)", s.CurrentMetrics)
	}
}

func goalSpec(metrics ...autoscalingv2.MetricSpec) *v1alpha1.Goals {
	return &v1alpha1.Goals{Metrics: metrics}
}

func externalGoal(name string, average int64) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(average, resource.DecimalSI)}}}
}

// goalFixture is two pods at 60% of their 500m CPU request (the fused
// default alone keeps 2 replicas) with the given goals.
func goalFixture(t *testing.T, prom *promServer, goals *v1alpha1.Goals) *fixture {
	t.Helper()
	objs := twoPodWorkload()
	objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.Goals = goals
	f := newFixture(t, objs...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
	if prom != nil {
		f.deps = func(d *Deps) { d.Goals = prom.source(t, nil) }
	}
	f.start()
	return f
}

func TestGoalsDriveDesiredReplicas(t *testing.T) {
	prom := newPromServer(t)
	prom.answer(`sum(queue_messages{namespace="ns"})`, "90")
	f := goalFixture(t, prom, goalSpec(externalGoal("queue_messages", 30)))
	f.tick()
	m := f.mpa("ns", "web")
	// ceil(90/30) = 3, more than the CPU metric's 2.
	if m.Status.DesiredReplicas != 3 || m.Status.CurrentReplicas != 2 {
		t.Errorf("desired %d current %d; want 3 from the external goal, 2", m.Status.DesiredReplicas, m.Status.CurrentReplicas)
	}
	c := cond(t, m, v1alpha1.ScalingActive)
	if c.Status != corev1.ConditionTrue || c.Reason != "ValidMetricFound" || !strings.Contains(c.Message, "goals.metrics") {
		t.Errorf("ScalingActive %+v", c)
	}
	if len(m.Status.CurrentMetrics) != 3 {
		t.Errorf("currentMetrics %+v; want cpu, memory and the goal", m.Status.CurrentMetrics)
	}
}

// TestMissingGoalIsIgnoredAndBlocksScaleDown: a goal with no data (and
// one with a NaN value) is logged, left out of currentMetrics and named in
// ScalingActive; it does not scale up, and when the other metrics would
// scale down it keeps the count (as the HPA does).
func TestMissingGoalIsIgnoredAndBlocksScaleDown(t *testing.T) {
	prom := newPromServer(t)
	prom.answer(`sum(queue_messages{namespace="ns"})`, "NaN")
	// workload scales down without a stabilization window, so that a
	// scale-down would show at once.
	workload := func(goals *v1alpha1.Goals) *fixture {
		objs := twoPodWorkload()
		mpa := objs[0].(*v1alpha1.MultidimPodAutoscaler)
		mpa.Spec.Goals = goals
		window := int32(0)
		mpa.Spec.Constraints = &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window}},
		}}
		f := newFixture(t, objs...)
		f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
		f.deps = func(d *Deps) { d.Goals = prom.source(t, nil) }
		f.start()
		return f
	}
	f := workload(goalSpec(externalGoal("queue_messages", 30), externalGoal("absent", 30)))
	f.tick()
	m := f.mpa("ns", "web")
	if m.Status.DesiredReplicas != 2 {
		t.Errorf("desired %d, want 2", m.Status.DesiredReplicas)
	}
	if len(m.Status.CurrentMetrics) != 2 {
		t.Errorf("currentMetrics %+v; the unusable goals must be left out", m.Status.CurrentMetrics)
	}
	c := cond(t, m, v1alpha1.ScalingActive)
	if c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, `goals.metrics[0] External "queue_messages": every value was nan`) ||
		!strings.Contains(c.Message, `goals.metrics[1] External "absent": Prometheus returned no data`) {
		t.Errorf("ScalingActive %+v", c)
	}
	if n := testutil.ToFloat64(f.c.metrics.invalidSamples.WithLabelValues(dropNaN)); n != 1 {
		t.Errorf("nan drops %g, want 1", n)
	}

	// An hour of usage at 0.3 cores, then the load drops: CPU alone would
	// scale in, the missing goals keep 2 replicas.
	for range 60 {
		f.clock.Step(time.Minute)
		f.tick()
	}
	f.usage.set(podUsage("ns", "web-1", 0.05, 200<<20), podUsage("ns", "web-2", 0.05, 200<<20))
	f.clock.Step(time.Minute)
	f.tick()
	m = f.mpa("ns", "web")
	if m.Status.DesiredReplicas != 2 {
		t.Errorf("desired %d, want 2: a missing goal blocks the scale-down", m.Status.DesiredReplicas)
	}
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetGoalMetric")

	// The same drop without the goals scales in: the goals were what held.
	f2 := workload(nil)
	for range 61 {
		f2.tick()
		f2.clock.Step(time.Minute)
	}
	f2.usage.set(podUsage("ns", "web-1", 0.05, 200<<20), podUsage("ns", "web-2", 0.05, 200<<20))
	f2.tick()
	if d := f2.mpa("ns", "web").Status.DesiredReplicas; d != 1 {
		t.Errorf("without goals desired %d, want 1", d)
	}
}

// TestGoalsWithoutPrometheus: Pods/Object/External goals and an SLO cannot
// be read without --prometheus-address; ConfigUnsupported says which fields
// need it and what to set (with a warning event), and ScalingActive names
// the goal. Resource goals need no Prometheus, and a configured source
// clears the condition.
func TestGoalsWithoutPrometheus(t *testing.T) {
	cpu := int32(50)
	resourceGoal := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &cpu}}}
	for _, tc := range []struct {
		name       string
		goals      *v1alpha1.Goals
		slo        bool
		prom       bool
		wantStatus corev1.ConditionStatus
		wantParts  []string
	}{
		{"external goal", goalSpec(externalGoal("queue_messages", 30)), false, false, corev1.ConditionTrue,
			[]string{`goals.metrics[0] (External "queue_messages")`, "prometheus-address in deploy/kustomization.yaml", "block scale-downs"}},
		{"goal and SLO", goalSpec(resourceGoal, externalGoal("lag", 5)), true, false, corev1.ConditionTrue,
			[]string{`goals.metrics[1] (External "lag") and spec.rl.slo`, "latency is not measured"}},
		{"SLO only", nil, true, false, corev1.ConditionTrue, []string{"spec.rl.slo need Prometheus", "latency is not measured"}},
		{"resource goal only", goalSpec(resourceGoal), false, false, corev1.ConditionFalse, nil},
		{"prometheus configured", goalSpec(externalGoal("queue_messages", 30)), false, true, corev1.ConditionFalse, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := twoPodWorkload()
			m := objs[0].(*v1alpha1.MultidimPodAutoscaler)
			m.Spec.Goals = tc.goals
			if tc.slo {
				m.Spec.RL = &v1alpha1.RLSpec{Mode: v1alpha1.RLModeOff, SLO: &v1alpha1.SLOSpec{
					Metric: autoscalingv2.MetricIdentifier{Name: "http_request_duration_seconds"}, Target: metav1.Duration{Duration: 250 * time.Millisecond}}}
			}
			f := newFixture(t, objs...)
			f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
			if tc.prom {
				prom := newPromServer(t)
				prom.answer(`sum(queue_messages{namespace="ns"})`, "60")
				f.deps = func(d *Deps) { d.Goals = prom.source(t, nil) }
			}
			f.start()
			f.tick()
			got := f.mpa("ns", "web")
			c := cond(t, got, v1alpha1.ConfigUnsupported)
			if c.Status != tc.wantStatus {
				t.Fatalf("ConfigUnsupported %s/%s %q, want %s", c.Status, c.Reason, c.Message, tc.wantStatus)
			}
			if tc.wantStatus == corev1.ConditionFalse {
				return
			}
			if c.Reason != ReasonMetricSourceNotConfigured {
				t.Errorf("reason %s, want %s", c.Reason, ReasonMetricSourceNotConfigured)
			}
			for _, part := range tc.wantParts {
				if !strings.Contains(c.Message, part) {
					t.Errorf("message %q lacks %q", c.Message, part)
				}
			}
			wantEvent(t, f.recorder, "Warning "+ReasonMetricSourceNotConfigured)
			if tc.goals != nil && len(tc.goals.Metrics) > 0 && tc.goals.Metrics[len(tc.goals.Metrics)-1].Type == autoscalingv2.ExternalMetricSourceType {
				if sa := cond(t, got, v1alpha1.ScalingActive); !strings.Contains(sa.Message, "no --prometheus-address is configured") {
					t.Errorf("ScalingActive %+v", sa)
				}
			}
		})
	}
}

// TestCPUUtilizationGoalSetsTheFusedTarget: a Resource cpu goal changes the
// target the pods are sized for (30% here, against 70% by default).
func TestCPUUtilizationGoalSetsTheFusedTarget(t *testing.T) {
	pct := int32(30)
	f := goalFixture(t, nil, goalSpec(autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &pct}}}))
	def := newFixture(t, twoPodWorkload()...)
	def.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
	def.start()
	for range 3 {
		f.tick()
		def.tick()
		f.clock.Step(time.Minute)
		def.clock.Step(time.Minute)
	}
	got := f.mpa("ns", "web").Status.Recommendation.ContainerRecommendations[0].UncappedTarget.Cpu().MilliValue()
	base := def.mpa("ns", "web").Status.Recommendation.ContainerRecommendations[0].UncappedTarget.Cpu().MilliValue()
	// p90(0.3)/0.3 ≈ 1 core against p90(0.3)/0.7 ≈ 0.45.
	if got < 2*base {
		t.Errorf("uncapped cpu target %dm with a 30%% goal, %dm without; want about 7/3 times", got, base)
	}
	wantCond(t, f.mpa("ns", "web"), v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound")
}
