package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	schedhelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

// roomReader measures the nodes' room for each autoscaler's pods
// (--fit-to-nodes), from the node informer and the cluster-wide pod
// informer. The loop takes one snapshot per run; workload.Fit does the
// arithmetic.
type roomReader struct {
	nodes corelisters.NodeLister
	pods  corelisters.PodLister
}

// roomSnapshot is every node a pod could be placed on now (Ready, not
// cordoned) with its free resources: allocatable less the requests of the
// pods bound to it, as the scheduler counts them (the larger of what a pod
// asks and what it was allocated while a resize is pending).
type roomSnapshot struct {
	nodes []*corev1.Node
	free  []workload.Resources
	index map[string]int
}

// snapshot reads the nodes and pods from the caches.
func (r *roomReader) snapshot() (*roomSnapshot, error) {
	nodes, err := r.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	s := &roomSnapshot{index: make(map[string]int, len(nodes))}
	for _, n := range nodes {
		if n.Spec.Unschedulable || !nodeReady(n) {
			continue
		}
		s.index[n.Name] = len(s.nodes)
		s.nodes = append(s.nodes, n)
		s.free = append(s.free, mpa.Resources(n.Status.Allocatable))
	}
	pods, err := r.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if i, ok := s.index[p.Spec.NodeName]; ok && holdsRoom(p) {
			req := podRequests(p)
			s.free[i] = workload.Resources{CPU: s.free[i].CPU - req.CPU, Memory: s.free[i].Memory - req.Memory}
		}
	}
	return s, nil
}

// For is the room of the workload whose pods are own: on every node its
// pods may be placed on (their node selector, required node affinity and
// tolerations, read from the first of them), the free resources plus what
// its own pods there hold, never below 0.
func (s *roomSnapshot) For(own []*corev1.Pod) workload.Room {
	if s == nil || len(own) == 0 {
		return workload.Room{}
	}
	tmpl := own[0]
	affinity := nodeaffinity.GetRequiredNodeAffinity(tmpl)
	nodes := make([]workload.Resources, len(s.nodes))
	fits := make([]bool, len(s.nodes))
	for i, n := range s.nodes {
		match, err := affinity.Match(n)
		if err != nil || !match {
			continue
		}
		if _, untolerated := schedhelper.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, tmpl.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			continue
		}
		fits[i], nodes[i] = true, s.free[i]
	}
	for _, p := range own {
		if i, ok := s.index[p.Spec.NodeName]; ok && fits[i] && holdsRoom(p) {
			req := podRequests(p)
			nodes[i] = workload.Resources{CPU: nodes[i].CPU + req.CPU, Memory: nodes[i].Memory + req.Memory}
		}
	}
	out := workload.Room{}
	for i := range nodes {
		if fits[i] {
			out.Nodes = append(out.Nodes, workload.Resources{CPU: max(nodes[i].CPU, 0), Memory: max(nodes[i].Memory, 0)})
		}
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// holdsRoom: a pod holds its node's resources until it has finished
// (Succeeded, Failed) or is gone; a terminating pod still holds them.
func holdsRoom(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// podRequests is what the scheduler counts a pod for: its containers'
// requests (the larger of the spec's and the allocated while a resize is
// pending), its init containers', pod-level requests and overhead.
func podRequests(p *corev1.Pod) workload.Resources {
	return mpa.Resources(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true}))
}
