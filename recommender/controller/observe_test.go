package controller

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

func TestMetricsSourceDown(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	f.start()
	f.tick()
	before := f.mpa("ns", "web").Status
	f.usage.mu.Lock()
	f.usage.err = errors.New("metrics.k8s.io unavailable")
	f.usage.mu.Unlock()
	for i := 0; i < 6; i++ { // past the refresh interval: the stale recommendation must age
		f.clock.Step(time.Minute)
		f.tick()
	}
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric")
	if c := cond(t, m, v1alpha1.ScalingActive); !c.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("ScalingActive transition at %v, want %v", c.LastTransitionTime, t0.Add(time.Minute))
	}
	if !m.Status.RecommendationTime.Equal(before.RecommendationTime) {
		t.Errorf("recommendationTime advanced to %v while metrics were missing", m.Status.RecommendationTime)
	}
	if m.Status.DesiredReplicas != before.DesiredReplicas || m.Status.Recommendation == nil {
		t.Errorf("the last recommendation must be kept: %+v", m.Status)
	}
	wantEvent(t, f.recorder, "Warning FailedGetResourceMetric")
}

func TestPodsWithoutMetrics(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "other-pod", 0.4, 1<<20))
	f.start()
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionFalse, "MetricsMissing")
	if m.Status.RecommendationTime != nil || m.Status.Recommendation != nil {
		t.Fatalf("no recommendation may be made without metrics: %+v", m.Status)
	}
}

func TestInvalidSamplesDroppedAndCounted(t *testing.T) {
	objs := append(twoPodWorkload(), newPod("ns", "web", "web-3", true), newPod("ns", "web", "web-4", true))
	f := newFixture(t, objs...)
	f.usage.set(
		podUsage("ns", "web-1", math.NaN(), 256<<20),
		podUsage("ns", "web-2", 0.2, -1),
		podUsage("ns", "web-3", math.Inf(1), 256<<20),
		podUsage("ns", "web-4", 0.3, 100<<20),
	)
	f.start()
	f.tick()
	for reason, want := range map[string]float64{dropNaN: 1, dropNegative: 1, dropInfinite: 1} {
		if got := testutil.ToFloat64(f.c.metrics.invalidSamples.WithLabelValues(reason)); got != want {
			t.Errorf("invalid samples{%s} = %g, want %g", reason, got, want)
		}
	}
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
	// Only web-4 counts: mean CPU 300m.
	if v := m.Status.CurrentMetrics[0].Resource.Current.AverageValue.MilliValue(); v != 300 {
		t.Errorf("currentMetrics cpu %dm, want 300m from the one valid pod", v)
	}

	// Every sample invalid: defined as "metrics missing".
	f.usage.set(podUsage("ns", "web-1", -0.1, 1), podUsage("ns", "web-4", math.NaN(), 1))
	f.clock.Step(time.Minute)
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.ScalingActive, corev1.ConditionFalse, "MetricsMissing")
}

func TestOOMKillRaisesMemory(t *testing.T) {
	p := newPod("ns", "web", "web-1", true)
	f := newFixture(t, newMPA("ns", "web"), p)
	f.usage.set(podUsage("ns", "web-1", 0.4, 100<<20))
	f.start()
	f.tick()
	before := f.mpa("ns", "web").Status.Recommendation.ContainerRecommendations[0].Target.Memory().Value()
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", LastTerminationState: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", FinishedAt: metav1.NewTime(t0.Add(30 * time.Second))}}}}
	if _, err := f.kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.clock.Step(time.Minute)
	f.tick()
	after := f.mpa("ns", "web").Status.Recommendation.ContainerRecommendations[0].Target.Memory().Value()
	if after <= before || after < 512<<20 {
		t.Fatalf("memory target %d after an OOM kill at the 512Mi request, was %d", after, before)
	}
}

// TestStartupDelayInObservation: the observation carries the median over
// the Ready pods of the time from the pod's start to Ready; a pod not
// Ready does not count, and without any the delay is unknown (0).
func TestStartupDelayInObservation(t *testing.T) {
	pod := func(name string, ready bool, startup time.Duration) *corev1.Pod {
		p := newPod("ns", "web", name, ready)
		p.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Hour)}
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-time.Hour + startup))
		return p
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want time.Duration
	}{
		{"median of the ready pods", []*corev1.Pod{pod("web-1", true, 10*time.Second), pod("web-2", true, 30*time.Second), pod("web-3", true, 20*time.Second), pod("web-4", false, time.Hour)}, 20 * time.Second},
		{"none ready", []*corev1.Pod{pod("web-1", false, 10*time.Second)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observation(t0, 30*time.Second, t0.Add(-time.Minute), tc.pods, nil, nil, map[string]int{})
			if obs.StartupDelay != tc.want {
				t.Errorf("start-up delay %v, want %v", obs.StartupDelay, tc.want)
			}
			if err := obs.Validate(); err != nil {
				t.Errorf("invalid observation: %v", err)
			}
		})
	}
}

// TestOOMKillAtStartRaisesMemory: a container OOM-killed before it ever
// reports usage (CrashLoopBackOff at start) still gets more memory, as
// VPA gives it (the memory at the kill, bumped), instead of the last
// recommendation being kept forever; replicas are kept, since nothing
// measures the load.
func TestOOMKillAtStartRaisesMemory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit string // the memory limit the kill happened at; "" for none
		want  int64  // the least memory target after the kill
	}{
		{"at the limit", "768Mi", 768 << 20},
		{"no limit: at the request", "", 512 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("ns", "web", "web-1", false)
			if tc.limit != "" {
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(tc.limit)}
			}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 5, LastTerminationState: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", FinishedAt: metav1.NewTime(t0.Add(-10 * time.Second))}}}}
			f := newFixture(t, newMPA("ns", "web"), p)
			f.start()
			f.tick()
			m := f.mpa("ns", "web")
			if m.Status.Recommendation == nil || len(m.Status.Recommendation.ContainerRecommendations) != 1 {
				t.Fatalf("no recommendation after an OOM kill without usage: %+v", m.Status)
			}
			got := m.Status.Recommendation.ContainerRecommendations[0].Target.Memory().Value()
			if got <= tc.want {
				t.Fatalf("memory target %d after an OOM kill at %d, want more", got, tc.want)
			}
			wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
			wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionFalse, "MetricsMissing")
			if m.Status.DesiredReplicas != 1 {
				t.Errorf("desired replicas %d without any usage, want the current 1", m.Status.DesiredReplicas)
			}
		})
	}
}

// TestRequestsFromContainerStatus: while an in-place resize is pending or
// in progress, pod.spec already holds the new requests but the container
// still runs with the old ones (status.containerStatuses[].resources);
// utilisation and the current allocation are computed from what the
// container has (kubernetes/kubernetes#142155 for the HPA).
func TestRequestsFromContainerStatus(t *testing.T) {
	actual := func(cpu, mem string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	for _, tc := range []struct {
		name    string
		status  *corev1.ResourceRequirements
		wantCPU float64
	}{
		{"resize pending: the old request", actual("250m", "256Mi"), 0.25},
		{"no status resources: the spec", nil, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("ns", "web", "web-1", true) // spec: 500m, 512Mi
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Resources: tc.status}}
			kept, err := TrimPod(p)
			if err != nil {
				t.Fatal(err)
			}
			use := map[string]*usage.PodUsage{"web-1": ptr(podUsage("ns", "web-1", 0.2, 100<<20))}
			obs := observation(t0, 30*time.Second, t0.Add(-time.Minute), []*corev1.Pod{kept.(*corev1.Pod)}, use, nil, map[string]int{})
			if got := obs.Containers[0].Requests.CPU; got != tc.wantCPU {
				t.Errorf("container request %g cores, want %g", got, tc.wantCPU)
			}
			if got := obs.Pods[0].Requests.CPU; got != tc.wantCPU {
				t.Errorf("pod request %g cores, want %g", got, tc.wantCPU)
			}
		})
	}
}

// TestResizeDeferredObserved: a PodResizePending condition with reason
// Deferred survives the informer's transform and reaches the pod sample
// with its time; an infeasible resize, or none, leaves it zero.
func TestResizeDeferredObserved(t *testing.T) {
	since := metav1.NewTime(t0.Add(-90 * time.Second))
	for _, tc := range []struct {
		name string
		cond *corev1.PodCondition
		want time.Time
	}{
		{"deferred", &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, LastTransitionTime: since}, since.Time},
		{"infeasible", &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible, LastTransitionTime: since}, time.Time{}},
		{"none", nil, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("ns", "web", "web-1", true)
			if tc.cond != nil {
				p.Status.Conditions = append(p.Status.Conditions, *tc.cond)
			}
			kept, err := TrimPod(p)
			if err != nil {
				t.Fatal(err)
			}
			use := map[string]*usage.PodUsage{"web-1": ptr(podUsage("ns", "web-1", 0.2, 100<<20))}
			obs := observation(t0, 30*time.Second, t0.Add(-time.Minute), []*corev1.Pod{kept.(*corev1.Pod)}, use, nil, map[string]int{})
			if got := obs.Pods[0].ResizeDeferredSince; !got.Equal(tc.want) {
				t.Errorf("deferred since %v, want %v", got, tc.want)
			}
			if !obs.Pods[0].Ready {
				t.Error("the Ready condition was lost beside the resize condition")
			}
		})
	}
}
