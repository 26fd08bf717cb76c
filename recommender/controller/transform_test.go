package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimPod(t *testing.T) {
	p := newPod("ns", "web", "web-1", true)
	p.Annotations = map[string]string{"big": strings.Repeat("x", 1000)}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
	p.Spec.Volumes = []corev1.Volume{{Name: "v"}}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "app", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", FinishedAt: metav1.NewTime(t0)}}},
		{Name: "side", LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
	}
	p.Spec.NodeName, p.Spec.NodeSelector = "n1", map[string]string{"disk": "ssd"}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}, NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}}}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
	out, err := TrimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	q := out.(*corev1.Pod)
	if q.Annotations != nil || q.ManagedFields != nil || q.Spec.Volumes != nil || q.Spec.Containers[0].Env != nil {
		t.Fatalf("unread fields kept: %+v", q)
	}
	if q.Labels["app"] != "web" || !q.Spec.Containers[0].Resources.Requests.Cpu().Equal(resource.MustParse("500m")) ||
		len(q.Status.Conditions) != 1 || q.Status.Conditions[0].Type != corev1.PodReady || q.Status.StartTime == nil {
		t.Fatalf("read fields lost: %+v", q)
	}
	// What the nodes' room is read by (--fit-to-nodes).
	if q.Spec.NodeName != "n1" || q.Spec.NodeSelector["disk"] != "ssd" || len(q.Spec.Tolerations) != 1 ||
		q.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil || q.Spec.Affinity.PodAntiAffinity != nil ||
		len(q.Spec.InitContainers) != 1 || q.Spec.InitContainers[0].Image != "" || !q.Spec.InitContainers[0].Resources.Requests.Cpu().Equal(resource.MustParse("2")) {
		t.Fatalf("placement fields: %+v", q.Spec)
	}
	if len(q.Status.ContainerStatuses) != 1 || q.Status.ContainerStatuses[0].LastTerminationState.Terminated.Reason != "OOMKilled" {
		t.Fatalf("OOM terminations must be kept, others dropped: %+v", q.Status.ContainerStatuses)
	}
	tomb := "not a pod"
	if o, _ := TrimPod(tomb); o != tomb {
		t.Fatal("non-pods must pass through")
	}
}
