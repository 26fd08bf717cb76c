package controller

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakedisco "k8s.io/client-go/discovery/fake"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	mpafake "github.com/aware-k8s/aware/pkg/generated/clientset/versioned/fake"
	mpainformers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions"
	"github.com/aware-k8s/aware/pkg/kube/podindex"
	"github.com/aware-k8s/aware/pkg/kube/target"
)

// BenchmarkRunOnce is one updater loop over the shape `make bench-vpa`
// drives (docs/results/performance.md): one namespace holding N autoscaled
// one-pod Deployments and N more pods under no autoscaler (the VPA side),
// every recommendation fresh and every pod within its bounds, so the loop
// reads and decides for every autoscaler and writes nothing. Scale targets
// are resolved by the real pkg/kube/target resolver from a synced Deployment
// watch over a fake clientset; the MPA and pod caches (with the pod label index the
// updater adds) are filled directly.
//
//	go test ./updater/controller -run '^$' -bench RunOnce -benchmem
func BenchmarkRunOnce(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) { benchRunOnce(b, n) })
	}
}

func benchRunOnce(b *testing.B, n int) {
	klog.SetLogger(klog.Background().V(10)) // keep the benchmark output clean
	const ns = "bench"
	deploys := make([]runtime.Object, 0, n)
	for i := range n {
		name := fmt.Sprintf("a-%05d", i)
		deploys = append(deploys, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
			Status: appsv1.DeploymentStatus{Replicas: 1},
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	kube := fake.NewClientset(freshLease(t0))
	appsInf := kubeinformers.NewSharedInformerFactory(fake.NewClientset(deploys...), 0)
	resolver := target.New(benchMapper(), &fakescale.FakeScaleClient{}, &fakedisco.FakeDiscovery{Fake: &clienttesting.Fake{}})
	if err := resolver.UseInformers(appsInf); err != nil {
		b.Fatal(err)
	}
	appsInf.Apps().V1().Deployments().Informer() // the only kind the loop reads
	appsInf.Start(ctx.Done())
	defer func() { cancel(); appsInf.Shutdown() }()
	for typ, ok := range appsInf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			b.Fatalf("%v did not sync", typ)
		}
	}

	mpaInf := mpainformers.NewSharedInformerFactory(mpafake.NewSimpleClientset(), 0)
	podInf := kubeinformers.NewSharedInformerFactory(kube, 0).Core().V1().Pods()
	if err := podindex.Add(podInf.Informer()); err != nil {
		b.Fatal(err)
	}
	mpaIdx := mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers().Informer().GetIndexer()
	podIdx := podInf.Informer().GetIndexer()
	for i := range n {
		name := fmt.Sprintf("a-%05d", i)
		if err := mpaIdx.Add(benchMPA(ns, name, i)); err != nil {
			b.Fatal(err)
		}
		for _, pod := range []string{name, fmt.Sprintf("v-%05d", i)} {
			if err := podIdx.Add(benchPod(ns, pod)); err != nil {
				b.Fatal(err)
			}
		}
	}
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(t0)
	c := New(testConfig(), kube, mpafake.NewSimpleClientset(), mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers().Lister(),
		podindex.New(podIdx), resolver, record.NewFakeRecorder(1), metrics, clk)
	c.RunOnce(ctx) // creates the per-autoscaler state
	if got := len(c.workloads); got != n {
		b.Fatalf("%d autoscalers acted on, want %d", got, n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	for range b.N {
		c.RunOnce(ctx)
	}
	cpu := cpuTime() - before
	b.StopTimer()
	// Process CPU (GC included) is what the harness measures, and unlike
	// ns/op it does not grow with the machine's load.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/loop")
	if w := writes(kube); len(w) != 0 {
		b.Fatalf("the loop wrote %v", w)
	}
}

func benchMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	return m
}

// benchMPA is the harness's MPA after a recommendation: Recreate, replicas
// fixed at 1, a fresh recommendation whose bounds hold the pod's requests.
func benchMPA(ns, name string, i int) *v1alpha1.MultidimPodAutoscaler {
	mode := v1alpha1.UpdateModeRecreate
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	return &v1alpha1.MultidimPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("uid-%d", i)), Generation: 1,
			CreationTimestamp: metav1.Time{Time: t0.Add(-time.Hour)}},
		Spec: v1alpha1.MultidimPodAutoscalerSpec{
			ScaleTargetRef: &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			Policy:         &v1alpha1.PodUpdatePolicy{UpdateMode: &mode},
			Constraints: &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{
				MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1),
			}},
		},
		Status: v1alpha1.MultidimPodAutoscalerStatus{
			DesiredReplicas:    1,
			RecommendationTime: &metav1.Time{Time: t0.Add(-time.Minute)},
			Recommendation: &v1alpha1.RecommendedPodResources{ContainerRecommendations: []v1alpha1.RecommendedContainerResources{{
				ContainerName: "app",
				Target:        rl("150m", "120Mi"),
				LowerBound:    rl("50m", "50Mi"),
				UpperBound:    rl("500m", "500Mi"),
			}}},
		},
	}
}

// benchPod is a running, ready KWOK-like pod with the harness's labels and
// requests (100m / 100Mi).
func benchPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid"),
			Labels:            map[string]string{"app": name, "bench": "vpa", "pod-template-hash": "5d8f7c9b6"},
			CreationTimestamp: metav1.Time{Time: t0.Add(-time.Hour)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// writes returns the mutating actions sent to a fake clientset.
func writes(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		out = append(out, a.GetVerb()+"/"+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	return out
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
