package controller

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	mpafake "github.com/aware-k8s/aware/pkg/generated/clientset/versioned/fake"
	mpalisters "github.com/aware-k8s/aware/pkg/generated/listers/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/podindex"
	"github.com/aware-k8s/aware/updater/logic"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// fakeTarget is the scale target: a Deployment "web" with a replica count.
type fakeTarget struct {
	mu       sync.Mutex
	replicas int32
	updates  []int32
	err      error
}

var _ ScaleTarget = (*fakeTarget)(nil)

func (f *fakeTarget) Selector(context.Context, string, *autoscalingv1.CrossVersionObjectReference) (labels.Selector, error) {
	return labels.SelectorFromSet(labels.Set{"app": "web"}), nil
}

func (f *fakeTarget) GetScale(_ context.Context, ns string, ref *autoscalingv1.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: f.replicas}},
		schema.GroupResource{Group: "apps", Resource: "deployments"}, nil
}

func (f *fakeTarget) UpdateReplicas(_ context.Context, _ string, _ *autoscalingv1.CrossVersionObjectReference, n int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.updates = append(f.updates, n)
	f.replicas = n
	return nil
}

type fixture struct {
	t        *testing.T
	kube     *fake.Clientset
	mpas     *mpafake.Clientset
	target   *fakeTarget
	clock    *clocktesting.FakePassiveClock
	recorder *record.FakeRecorder
	reg      *prometheus.Registry
	ctrl     *Controller
	podIdx   cache.Indexer
	mpaIdx   cache.Indexer
}

func testConfig() Config {
	v := logic.DefaultVerticalConfig()
	return Config{
		UpdateInterval:          time.Minute,
		MaxRecommendationAge:    10 * time.Minute,
		Vertical:                v,
		AdmissionLeaseNamespace: "aware-system",
		AdmissionLeaseName:      "aware-admission-controller",
	}
}

func newMPA(mode v1alpha1.UpdateMode, desired int32, recAge time.Duration) *v1alpha1.MultidimPodAutoscaler {
	m := &v1alpha1.MultidimPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "mpa-uid", Generation: 1},
		Spec: v1alpha1.MultidimPodAutoscalerSpec{
			ScaleTargetRef: &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Policy:         &v1alpha1.PodUpdatePolicy{UpdateMode: &mode},
			Constraints: &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{
				MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](10),
			}},
		},
		Status: v1alpha1.MultidimPodAutoscalerStatus{
			DesiredReplicas: desired,
			Recommendation: &v1alpha1.RecommendedPodResources{ContainerRecommendations: []v1alpha1.RecommendedContainerResources{{
				ContainerName: "app",
				Target:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				LowerBound:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
				UpperBound:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
			}}},
		},
	}
	if recAge >= 0 {
		m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(-recAge)}
	}
	return m
}

// newPod is a running, ready pod of "web" with requests cpu/mem.
func newPod(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.Time{Time: t0.Add(-time.Hour)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func freshLease(renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "aware-admission-controller", Namespace: "aware-system"},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renew}, LeaseDurationSeconds: ptr.To[int32](30)},
	}
}

func newFixture(t *testing.T, cfg Config, replicas int32, m *v1alpha1.MultidimPodAutoscaler, lease *coordinationv1.Lease, pods ...*corev1.Pod) *fixture {
	t.Helper()
	objs := []runtime.Object{}
	for _, p := range pods {
		objs = append(objs, p)
	}
	if lease != nil {
		objs = append(objs, lease)
	}
	f := &fixture{
		t:        t,
		kube:     fake.NewClientset(objs...),
		mpas:     mpafake.NewSimpleClientset(m),
		target:   &fakeTarget{replicas: replicas},
		clock:    clocktesting.NewFakePassiveClock(t0),
		recorder: record.NewFakeRecorder(100),
		reg:      prometheus.NewPedanticRegistry(),
		podIdx:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podindex.Name: podindex.IndexFunc}),
		mpaIdx:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
	}
	// Evictions delete the pod, as the API server does when no PDB objects.
	f.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		return true, nil, f.kube.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ev.Namespace, ev.Name)
	})
	for _, p := range pods {
		if err := f.podIdx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.mpaIdx.Add(m); err != nil {
		t.Fatal(err)
	}
	metrics, err := NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	f.ctrl = New(cfg, f.kube, f.mpas, mpalisters.NewMultidimPodAutoscalerLister(f.mpaIdx), podindex.New(f.podIdx),
		f.target, f.recorder, metrics, f.clock)
	return f
}

// writes returns the mutating actions the controller sent to the kube API.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		name := ""
		if x, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if o, ok := x.GetObject().(metav1.Object); ok {
				name = o.GetName()
			}
		}
		out = append(out, a.GetVerb()+"/"+a.GetSubresource()+"/"+name)
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, substr string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, substr) })
}

func counter(t *testing.T, c *prometheus.CounterVec, labels ...string) float64 {
	t.Helper()
	return testutil.ToFloat64(c.WithLabelValues(labels...))
}

// renewLease renews the admission heartbeat directly in the tracker, so the
// renewal does not show up as an action of the controller.
func (f *fixture) renewLease(at time.Duration) {
	f.t.Helper()
	gvr := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	if err := f.kube.Tracker().Update(gvr, freshLease(t0.Add(at)), "aware-system"); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) run(at time.Duration) {
	f.clock.SetTime(t0.Add(at))
	f.ctrl.RunOnce(context.Background())
}
