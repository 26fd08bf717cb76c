package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned/fake"
	mpainformers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fakeTargets struct {
	mu  sync.Mutex
	err error
	sel labels.Selector
	// replicas is spec.replicas by target name. A target without an entry
	// has as many replicas as active pods in pods (a settled workload), or
	// fixed when pods is nil.
	replicas map[string]int32
	pods     corelisters.PodLister
	fixed    int32
}

var _ TargetResolver = (*fakeTargets)(nil)

func (f *fakeTargets) Target(_ context.Context, ns string, ref *autoscalingv1.CrossVersionObjectReference) (Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Target{}, f.err
	}
	t := Target{Selector: f.sel, Replicas: f.fixed}
	if t.Selector == nil {
		t.Selector = labels.SelectorFromSet(labels.Set{"app": ref.Name})
	}
	if n, ok := f.replicas[ref.Name]; ok {
		t.Replicas = n
	} else if f.pods != nil {
		all, err := f.pods.Pods(ns).List(t.Selector)
		if err != nil {
			return Target{}, err
		}
		t.Replicas = int32(len(activePods(all)))
	}
	return t, nil
}

type fakeUsage struct {
	mu    sync.Mutex
	err   error
	pods  []usage.PodUsage
	calls int
}

var _ usage.Source = (*fakeUsage)(nil)

func (f *fakeUsage) PodUsage(_ context.Context, ns string) ([]usage.PodUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return append([]usage.PodUsage(nil), f.pods...), nil
}

func (f *fakeUsage) set(pods ...usage.PodUsage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods, f.err = pods, nil
}

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	kube     *k8sfake.Clientset
	mpaInf   mpainformers.SharedInformerFactory
	kubeInf  kubeinformers.SharedInformerFactory
	targets  *fakeTargets
	usage    *fakeUsage
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder
	reg      *prometheus.Registry
	c        *Controller
	cfg      Config
	// deps, if set, adjusts the dependencies before New (e.g. to add the
	// Prometheus sources).
	deps func(*Deps)
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		targets:  &fakeTargets{},
		usage:    &fakeUsage{},
		clock:    testingclock.NewFakeClock(t0),
		recorder: record.NewFakeRecorder(100),
		reg:      prometheus.NewRegistry(),
		cfg: Config{Interval: time.Minute, StatusRefreshInterval: 5 * time.Minute, CheckpointInterval: 10 * time.Minute,
			Workers: 1, LowConfidenceDays: 1},
	}
	var mpaObjs, kubeObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Pod, *corev1.Node:
			kubeObjs = append(kubeObjs, o)
		default:
			mpaObjs = append(mpaObjs, o)
		}
	}
	f.client = fake.NewSimpleClientset(mpaObjs...)
	f.kube = k8sfake.NewClientset(kubeObjs...)
	return f
}

// start builds the controller and loads the caches from the fake
// clientsets (sample-controller style: indexers filled directly, no watch).
func (f *fixture) start() {
	f.t.Helper()
	f.mpaInf = mpainformers.NewSharedInformerFactory(f.client, 0)
	f.kubeInf = kubeinformers.NewSharedInformerFactory(f.kube, 0)
	d := Deps{
		Client:             f.client,
		MPAInformer:        f.mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers(),
		CheckpointInformer: f.mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalerCheckpoints(),
		PodInformer:        f.kubeInf.Core().V1().Pods(),
		Targets:            f.targets,
		Usage:              f.usage,
		NewPolicy:          fusion.NewPolicyFactory(fusion.Options{}),
		Recorder:           f.recorder,
		Clock:              f.clock,
		Registerer:         f.reg,
	}
	if f.deps != nil {
		f.deps(&d)
	}
	c, err := New(f.cfg, d)
	if err != nil {
		f.t.Fatal(err)
	}
	f.c = c
	f.targets.mu.Lock()
	f.targets.pods = f.kubeInf.Core().V1().Pods().Lister()
	f.targets.mu.Unlock()
	f.sync()
}

// sync copies the fake API's objects into the caches, as an informer would.
func (f *fixture) sync() {
	f.t.Helper()
	ctx := context.Background()
	mpas, err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers("").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	cps, err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalerCheckpoints("").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	pods, err := f.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	replace := func(store interface{ Replace([]any, string) error }, items []any) {
		if err := store.Replace(items, ""); err != nil {
			f.t.Fatal(err)
		}
	}
	var items []any
	for i := range mpas.Items {
		items = append(items, &mpas.Items[i])
	}
	replace(f.mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers().Informer().GetIndexer(), items)
	items = nil
	for i := range cps.Items {
		items = append(items, &cps.Items[i])
	}
	replace(f.mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalerCheckpoints().Informer().GetIndexer(), items)
	items = nil
	for i := range pods.Items {
		p, _ := TrimPod(&pods.Items[i])
		items = append(items, p)
	}
	replace(f.kubeInf.Core().V1().Pods().Informer().GetIndexer(), items)
	if f.c.caches.room != nil {
		nodes, err := f.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		items = nil
		for i := range nodes.Items {
			n, _ := TrimNode(&nodes.Items[i])
			items = append(items, n)
		}
		replace(f.kubeInf.Core().V1().Nodes().Informer().GetIndexer(), items)
	}
}

// tick runs one loop, writes every queued status, and refreshes the
// caches; it returns the actions the controller sent to the MPA API.
func (f *fixture) tick() []k8stesting.Action {
	f.t.Helper()
	f.client.ClearActions()
	ctx := context.Background()
	f.c.RunOnce(ctx)
	for f.c.writes.queue.Len() > 0 {
		f.c.processNext(ctx)
	}
	actions := f.client.Actions()
	f.sync()
	return actions
}

func (f *fixture) mpa(ns, name string) *v1alpha1.MultidimPodAutoscaler {
	f.t.Helper()
	m, err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func newMPA(ns, name string) *v1alpha1.MultidimPodAutoscaler {
	return &v1alpha1.MultidimPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: v1alpha1.MultidimPodAutoscalerSpec{
			ScaleTargetRef: &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
		},
	}
}

func newPod(ns, app, name string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
			}},
		}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			StartTime:  &metav1.Time{Time: t0.Add(-time.Hour)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}},
		},
	}
}

func podUsage(ns, name string, cpu, mem float64) usage.PodUsage {
	return usage.PodUsage{Namespace: ns, Name: name, Timestamp: t0, Window: 30 * time.Second,
		Containers: []usage.ContainerUsage{{Name: "app", CPU: cpu, Memory: mem}}}
}

func cond(t *testing.T, m *v1alpha1.MultidimPodAutoscaler, typ v1alpha1.MultidimPodAutoscalerConditionType) v1alpha1.MultidimPodAutoscalerCondition {
	t.Helper()
	c := condition(&m.Status, typ)
	if c == nil {
		t.Fatalf("condition %s missing; conditions %+v", typ, m.Status.Conditions)
	}
	return *c
}

func wantCond(t *testing.T, m *v1alpha1.MultidimPodAutoscaler, typ v1alpha1.MultidimPodAutoscalerConditionType, st corev1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(t, m, typ)
	if c.Status != st || c.Reason != reason {
		t.Fatalf("condition %s = %s/%s, want %s/%s (%s)", typ, c.Status, c.Reason, st, reason, c.Message)
	}
}

// statusUpdates returns the update actions, failing on any write that is
// not through the status subresource.
func statusUpdates(t *testing.T, actions []k8stesting.Action) []*v1alpha1.MultidimPodAutoscaler {
	t.Helper()
	var out []*v1alpha1.MultidimPodAutoscaler
	for _, a := range actions {
		if a.GetResource().Resource != "multidimpodautoscalers" {
			continue
		}
		switch a.GetVerb() {
		case "update", "patch":
			if a.GetSubresource() != "status" {
				t.Fatalf("write outside the status subresource: %#v", a)
			}
			if u, ok := a.(k8stesting.UpdateAction); ok {
				out = append(out, u.GetObject().(*v1alpha1.MultidimPodAutoscaler))
			}
		case "create", "delete":
			t.Fatalf("unexpected %s of an autoscaler", a.GetVerb())
		}
	}
	return out
}

func twoPodWorkload() []runtime.Object {
	return []runtime.Object{newMPA("ns", "web"), newPod("ns", "web", "web-1", true), newPod("ns", "web", "web-2", true)}
}

func wantEvent(t *testing.T, r *record.FakeRecorder, prefix string) {
	t.Helper()
	for {
		select {
		case e := <-r.Events:
			if strings.HasPrefix(e, prefix) {
				return
			}
		default:
			t.Fatalf("no event starting with %q", prefix)
		}
	}
}
