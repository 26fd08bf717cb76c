package controller

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func newNode(name, cpu, mem string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:      []corev1.ContainerImage{{Names: []string{"big"}}},
		},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

// onNode is newPod bound to node with a request of cpu.
func onNode(ns, app, name, node, cpu string) *corev1.Pod {
	p := newPod(ns, app, name, true)
	p.Spec.NodeName = node
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	return p
}

func TestRoomSnapshot(t *testing.T) {
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	// A pod whose resize to 1 core is pending on n1 holds the larger of
	// the two, as the scheduler counts it.
	resizing := onNode("ns", "web", "web-2", "n1", "1")
	resizing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
		Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}}}
	finished := onNode("other", "job", "job-1", "n1", "4")
	finished.Status.Phase = corev1.PodSucceeded
	objs := []runtime.Object{
		newNode("n1", "2", "8Gi"), newNode("n2", "4", "8Gi", tainted), newNode("n3", "4", "8Gi", cordoned), newNode("n4", "4", "8Gi", notReady),
		newNode("n5", "1", "8Gi"),
		onNode("ns", "web", "web-1", "n1", "200m"), resizing,
		onNode("kube-system", "dns", "dns-1", "n1", "500m"), finished,
		onNode("other", "batch", "batch-1", "n5", "250m"),
	}
	idx := func() (cache.Indexer, cache.Indexer) {
		nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			switch v := o.(type) {
			case *corev1.Node:
				n, _ := TrimNode(v)
				if len(n.(*corev1.Node).Status.Images) != 0 {
					t.Fatal("TrimNode kept the image list")
				}
				_ = nodes.Add(n)
			case *corev1.Pod:
				p, _ := TrimPod(v)
				_ = pods.Add(p)
			}
		}
		return nodes, pods
	}
	nodes, pods := idx()
	r := &roomReader{nodes: corelisters.NewNodeLister(nodes), pods: corelisters.NewPodLister(pods)}
	snap, err := r.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	own := func(names ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range names {
			o, ok, _ := pods.GetByKey("ns/" + n)
			if !ok {
				t.Fatalf("no pod %s", n)
			}
			out = append(out, o.(*corev1.Pod))
		}
		return out
	}
	cpus := func(room workload.Room) []float64 {
		var out []float64
		for _, n := range room.Nodes {
			out = append(out, math.Round(n.CPU*1000)/1000)
		}
		slices.Sort(out) // the order of the nodes carries nothing
		return out
	}
	for _, tc := range []struct {
		name string
		own  []*corev1.Pod
		pin  func(*corev1.Pod)
		want []float64
	}{
		// n1: 2 − 0.2 − 1 − 0.5 (the finished job holds nothing) + the
		// web pods' own 1.2 = 1.5; n5: 1 − 0.25. n2 is tainted, n3
		// cordoned, n4 not ready.
		{"every node the pods may use", own("web-1", "web-2"), nil, []float64{0.75, 1.5}},
		{"pinned by a node selector", own("web-1", "web-2"), func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "n1"} }, []float64{1.5}},
		{"a toleration opens the tainted node", own("web-1", "web-2"), func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}, []float64{0.75, 1.5, 4}},
		{"no pods: unknown", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := tc.own
			if tc.pin != nil {
				pods = []*corev1.Pod{}
				for _, p := range tc.own {
					q := p.DeepCopy()
					tc.pin(q)
					pods = append(pods, q)
				}
			}
			if got := cpus(snap.For(pods)); !equalFloats(got, tc.want) {
				t.Errorf("room %v, want %v", got, tc.want)
			}
		})
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// TestFitToNodes: with --fit-to-nodes, a recommendation the node cannot
// hold is fitted to it and says so; without, the same load asks for more
// than the node has (so the test can fail).
func TestFitToNodes(t *testing.T) {
	for _, fit := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[fit], func(t *testing.T) {
			f := newFixture(t, newMPA("ns", "web"), onNode("ns", "web", "web-1", "n1", "500m"), onNode("ns", "web", "web-2", "n1", "500m"),
				onNode("ns2", "other", "other-1", "n1", "1"), newNode("n1", "3", "8Gi"))
			if fit {
				f.deps = func(d *Deps) { d.Nodes = f.kubeInf.Core().V1().Nodes() }
			}
			f.usage.set(podUsage("ns", "web-1", 0.5, 256<<20), podUsage("ns", "web-2", 0.5, 256<<20))
			f.start()
			f.tick()
			// Four times the usage: more than the 2 cores the node has for
			// web (3 less the other pod's 1).
			f.usage.set(podUsage("ns", "web-1", 2, 256<<20), podUsage("ns", "web-2", 2, 256<<20))
			drainEvents(f.recorder)
			f.tick()
			m := f.mpa("ns", "web")
			cpu := m.Status.Recommendation.ContainerRecommendations[0].Target.Cpu().AsApproximateFloat64()
			total := float64(m.Status.DesiredReplicas) * cpu
			fitted := false
			for _, e := range drainEvents(f.recorder) {
				fitted = fitted || strings.Contains(e, "FittedToNodes")
			}
			if fit && (total > 2+1e-3 || !fitted) {
				t.Errorf("fitted: %d replicas × %g cores = %g on a node with 2 for web; event says fitted: %v", m.Status.DesiredReplicas, cpu, total, fitted)
			}
			if !fit && (total <= 2 || fitted) {
				t.Errorf("without the fit the load asks %d × %g = %g cores (fitted: %v); the case no longer tests the fit", m.Status.DesiredReplicas, cpu, total, fitted)
			}
			if got := testutil.ToFloat64(f.c.metrics.fits); (got > 0) != fit {
				t.Errorf("aware_recommender_node_fits_total = %g", got)
			}
		})
	}
}
