package observe

import (
	"math"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)

func deployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &replicas}}
}

// pod is a Ready pod on a node, created at created, whose container runs
// with cpu and memory (status) and asks for the same (spec).
func pod(uid, cpu, memory string, created time.Time) corev1.Pod {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: rl.DeepCopy()}}}},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(7 * time.Second))}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Resources: &corev1.ResourceRequirements{Requests: rl.DeepCopy()}}},
		},
	}
}

func TestLook(t *testing.T) {
	before := t0.Add(-time.Minute)
	type look struct {
		replicas int32
		pods     func() []corev1.Pod
		usage    []Usage
		want     Sample
	}
	oomed := func(p corev1.Pod, restarts int32) corev1.Pod {
		p.Status.ContainerStatuses[0].RestartCount = restarts
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled"}
		return p
	}
	terminating := func(p corev1.Pod) corev1.Pod {
		now := metav1.NewTime(t0)
		p.DeletionTimestamp = &now
		return p
	}
	resizePending := func(p corev1.Pod) corev1.Pod {
		// The spec asks for more; the container still runs with the old.
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("900m")
		return p
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{
			name: "scale out is a replica change, not an eviction",
			looks: []look{
				{1, func() []corev1.Pod { return []corev1.Pod{pod("a", "200m", "96Mi", before)} }, []Usage{{0.1, 50 << 20}},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2, CPUUsed: 0.1, MemoryUsed: 50 << 20}},
				{3, func() []corev1.Pod {
					p := pod("c", "200m", "96Mi", t0.Add(time.Second))
					p.Spec.NodeName = "" // Pending: not counted
					return []corev1.Pod{pod("a", "200m", "96Mi", before), pod("b", "200m", "96Mi", t0.Add(time.Second)), p}
				}, []Usage{{0.1, 50 << 20}},
					Sample{Replicas: 3, Ready: 2, CPURequested: 0.4, MemoryRequested: 192 << 20, ReadyCPURequested: 0.4, CPUUsed: 0.1, MemoryUsed: 50 << 20, ReplicaChanges: 1}},
			},
		},
		{
			name: "scale in removes pods without evictions",
			looks: []look{
				{2, func() []corev1.Pod {
					return []corev1.Pod{pod("a", "200m", "96Mi", before), pod("b", "200m", "96Mi", before)}
				}, nil,
					Sample{Replicas: 2, Ready: 2, CPURequested: 0.4, MemoryRequested: 192 << 20, ReadyCPURequested: 0.4, UsageMissing: true}},
				{1, func() []corev1.Pod {
					return []corev1.Pod{pod("a", "200m", "96Mi", before), terminating(pod("b", "200m", "96Mi", before))}
				}, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2, ReplicaChanges: 1}},
			},
		},
		{
			name: "a pod replaced at the same count is an eviction, counted once",
			looks: []look{
				{1, func() []corev1.Pod { return []corev1.Pod{pod("a", "200m", "96Mi", before)} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2}},
				{1, func() []corev1.Pod {
					return []corev1.Pod{terminating(pod("a", "200m", "96Mi", before)), pod("b", "400m", "128Mi", t0.Add(time.Second))}
				}, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.4, MemoryRequested: 128 << 20, ReadyCPURequested: 0.4, Evictions: 1}},
				{1, func() []corev1.Pod { return []corev1.Pod{pod("b", "400m", "128Mi", t0.Add(time.Second))} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.4, MemoryRequested: 128 << 20, ReadyCPURequested: 0.4}},
			},
		},
		{
			name: "an in-place resize counts once applied, not while pending",
			looks: []look{
				{1, func() []corev1.Pod { return []corev1.Pod{pod("a", "200m", "96Mi", before)} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2}},
				{1, func() []corev1.Pod { return []corev1.Pod{resizePending(pod("a", "200m", "96Mi", before))} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2}},
				{1, func() []corev1.Pod { return []corev1.Pod{pod("a", "900m", "96Mi", before)} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.9, MemoryRequested: 96 << 20, ReadyCPURequested: 0.9, Resizes: 1}},
			},
		},
		{
			name: "OOM kills are the restarts whose last termination was OOMKilled",
			looks: []look{
				{1, func() []corev1.Pod { return []corev1.Pod{pod("a", "200m", "96Mi", before)} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2}},
				{1, func() []corev1.Pod { return []corev1.Pod{oomed(pod("a", "200m", "96Mi", before), 2)} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2, OOMKills: 2}},
				{1, func() []corev1.Pod { return []corev1.Pod{oomed(pod("a", "200m", "96Mi", before), 2)} }, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2}},
				{1, func() []corev1.Pod {
					p := pod("a", "200m", "96Mi", before)
					p.Status.ContainerStatuses[0].RestartCount = 3
					p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error"}
					return []corev1.Pod{p}
				}, []Usage{},
					Sample{Replicas: 1, Ready: 1, CPURequested: 0.2, MemoryRequested: 96 << 20, ReadyCPURequested: 0.2}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := New(t0)
			for i, l := range tc.looks {
				now := t0.Add(time.Duration(i*5) * time.Second)
				got := o.Look(now, deployment(l.replicas), l.pods(), l.usage)
				l.want.T = float64(i * 5)
				if !near(got, l.want) {
					t.Fatalf("look %d: got %+v, want %+v", i, got, l.want)
				}
			}
		})
	}
}

func near(a, b Sample) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9*math.Max(1, math.Abs(y)) }
	return eq(a.T, b.T) && a.Replicas == b.Replicas && a.Ready == b.Ready &&
		eq(a.CPURequested, b.CPURequested) && eq(a.MemoryRequested, b.MemoryRequested) && eq(a.ReadyCPURequested, b.ReadyCPURequested) &&
		eq(a.CPUUsed, b.CPUUsed) && eq(a.MemoryUsed, b.MemoryUsed) && a.UsageMissing == b.UsageMissing &&
		a.OOMKills == b.OOMKills && a.ReplicaChanges == b.ReplicaChanges && a.Resizes == b.Resizes && a.Evictions == b.Evictions
}

func TestStartups(t *testing.T) {
	o := New(t0)
	old := pod("a", "200m", "96Mi", t0.Add(-time.Minute))
	fresh := pod("b", "200m", "96Mi", t0.Add(10*time.Second))
	unready := pod("c", "200m", "96Mi", t0.Add(10*time.Second))
	unready.Status.Conditions[0].Status = corev1.ConditionFalse
	o.Look(t0.Add(20*time.Second), deployment(3), []corev1.Pod{old, fresh, unready}, nil)
	got := o.Startups()
	// Only the pod created during the run and Ready counts: 7 s.
	if len(got) != 1 || got[0] != 7 {
		t.Fatalf("startups %v, want [7]", got)
	}
}
