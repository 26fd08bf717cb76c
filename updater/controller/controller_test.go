package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/podindex"
	"github.com/aware-k8s/aware/pkg/kube/serve"
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

func TestHorizontalScalesWithinMaxAndRecordsEvents(t *testing.T) {
	m := newMPA(v1alpha1.UpdateModeRecreate, 20, time.Minute)
	f := newFixture(t, testConfig(), 4, m, freshLease(t0))
	f.run(0)
	// Default behavior: +max(100%, 4 pods) per 15 s → 8, then capped at max 10.
	if !slices.Equal(f.target.updates, []int32{8}) {
		t.Fatalf("updates = %v, want [8]", f.target.updates)
	}
	f.run(20 * time.Second)
	if !slices.Equal(f.target.updates, []int32{8, 10}) {
		t.Fatalf("updates = %v, want [8 10]", f.target.updates)
	}
	f.run(40 * time.Second)
	if len(f.target.updates) != 2 {
		t.Fatalf("scaled beyond max: %v", f.target.updates)
	}
	ev := f.events()
	if !hasEvent(ev, "Scaled Scaled Deployment/web from 4 to 8") {
		t.Errorf("events %v lack the scale event", ev)
	}
	if got := counter(t, f.ctrl.metrics.scaleOperations, "up", resultSuccess); got != 2 {
		t.Errorf("scale operations = %g, want 2", got)
	}
	// lastScaleTime recorded through the status subresource.
	var patched bool
	for _, a := range f.mpas.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" && strings.Contains(string(p.GetPatch()), "lastScaleTime") {
			patched = true
		}
	}
	if !patched {
		t.Error("lastScaleTime not patched")
	}
}

// The recommender's variant may let the count grow faster than the HPA's
// +100% per 15 s; the updater must not cut it back, but an autoscaler's own
// behavior.scaleUp still holds.
func TestScaleUpPercent(t *testing.T) {
	hundred := int32(100)
	period := int32(15)
	for _, tc := range []struct {
		name    string
		percent int32
		own     bool // the autoscaler sets behavior.scaleUp: +100% per 15 s
		want    int32
	}{
		{"HPA default: doubling", 0, false, 8},
		{"scale-up=400", 400, false, 20},
		{"scale-up=150", 150, false, 10},
		{"the autoscaler's own rules win", 400, true, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA(v1alpha1.UpdateModeRecreate, 20, time.Minute)
			m.Spec.Constraints.Global.MaxReplicas = ptr.To[int32](50)
			if tc.own {
				m.Spec.Constraints.Global.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: hundred, PeriodSeconds: period}}},
				}
			}
			cfg := testConfig()
			cfg.ScaleUpPercent = tc.percent
			f := newFixture(t, cfg, 4, m, freshLease(t0))
			f.run(0)
			if !slices.Equal(f.target.updates, []int32{tc.want}) {
				t.Fatalf("updates = %v, want [%d]", f.target.updates, tc.want)
			}
		})
	}
}

// An autoscaler whose target an older one governs is skipped, whatever it
// recommends; the older one acts.
func TestAmbiguousTargetSkipped(t *testing.T) {
	older := newMPA(v1alpha1.UpdateModeRecreate, 5, time.Minute)
	older.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	newer := newMPA(v1alpha1.UpdateModeRecreate, 9, time.Minute)
	newer.Name, newer.UID, newer.CreationTimestamp = "web-b", "mpa-b", metav1.NewTime(t0.Add(-time.Minute))
	for _, tc := range []struct {
		name string
		mpas []*v1alpha1.MultidimPodAutoscaler
		want []int32
	}{
		{"the newer alone acts", []*v1alpha1.MultidimPodAutoscaler{newer}, []int32{8}},
		{"the older governs", []*v1alpha1.MultidimPodAutoscaler{newer, older}, []int32{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(), 4, tc.mpas[0], freshLease(t0))
			for _, m := range tc.mpas[1:] {
				if err := f.mpaIdx.Add(m); err != nil {
					t.Fatal(err)
				}
			}
			f.run(0)
			if !slices.Equal(f.target.updates, tc.want) {
				t.Fatalf("updates = %v, want %v", f.target.updates, tc.want)
			}
			if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipAmbiguousTarget)); got != float64(len(tc.mpas)-1) {
				t.Errorf("ambiguous-target skips = %g, want %d", got, len(tc.mpas)-1)
			}
		})
	}
}

// TestReplicasLeftToARival: while another autoscaler owns the replica
// count (the recommender left desiredReplicas empty with
// ConfigUnsupported/ConflictingAutoscaler), the updater does not scale,
// not even a count above maxReplicas, which an HPA may have set; a
// desiredReplicas of 0 without that condition still brings the count
// within the bounds.
func TestReplicasLeftToARival(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rival      bool
		noVertical bool
		want       []int32
	}{
		{"rival owns the replicas", true, false, nil},
		{"rivals own both dimensions", true, true, nil},
		{"no recommendation yet", false, false, []int32{10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA(v1alpha1.UpdateModeAuto, 0, time.Minute)
			if tc.noVertical {
				m.Status.Recommendation = nil
			}
			if tc.rival {
				m.Status.Conditions = []v1alpha1.MultidimPodAutoscalerCondition{{
					Type: v1alpha1.ConfigUnsupported, Status: corev1.ConditionTrue, Reason: mpa.ReasonConflictingAutoscaler}}
			}
			f := newFixture(t, testConfig(), 14, m, freshLease(t0))
			f.run(0)
			if !slices.Equal(f.target.updates, tc.want) {
				t.Fatalf("updates = %v, want %v", f.target.updates, tc.want)
			}
			if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipRivalAutoscaler)); (got == 1) != tc.rival {
				t.Errorf("rival skips = %g", got)
			}
		})
	}
}

func TestHorizontalScaleDownWaitsForWindow(t *testing.T) {
	m := newMPA(v1alpha1.UpdateModeAuto, 2, 0)
	stab := int32(120)
	m.Spec.Constraints.Global.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &stab},
	}
	f := newFixture(t, testConfig(), 6, m, freshLease(t0))
	for _, at := range []time.Duration{0, 30 * time.Second, 60 * time.Second, 119 * time.Second} {
		m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at)}
		f.run(at)
	}
	if len(f.target.updates) != 0 {
		t.Fatalf("scaled down within the window: %v", f.target.updates)
	}
	m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(125 * time.Second)}
	f.run(125 * time.Second)
	if !slices.Equal(f.target.updates, []int32{2}) {
		t.Fatalf("after the window: %v, want [2]", f.target.updates)
	}
}

// An agent's scale-in that grows the pods to keep the capacity is not held
// for the scale-down window (the window holds capacity in the
// recommendation's per-pod CPU): on the real node the updater resized both
// of an agent's pods to 807m, the node deferred one, and the scale-in to
// the one grown pod came a loop later (docs/real-node-rounds.md, round
// twenty-seven). The same scale-in without the growth waits.
func TestHorizontalScaleInWithGrowthNotHeld(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grown string
		want  []int32
	}{
		{"grown to keep the capacity", "2500m", []int32{1}},
		{"the same size", "1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA(v1alpha1.UpdateModeAuto, 2, 0)
			m.Status.RL = &v1alpha1.RLStatus{Source: v1alpha1.SourceAgent}
			f := newFixture(t, testConfig(), 2, m, freshLease(t0))
			for _, at := range []time.Duration{0, 15 * time.Second, 30 * time.Second} {
				m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at)}
				f.run(at)
			}
			if len(f.target.updates) != 0 {
				t.Fatalf("scaled at a steady recommendation: %v", f.target.updates)
			}
			m.Status.DesiredReplicas = 1
			m.Status.Recommendation.ContainerRecommendations[0].Target[corev1.ResourceCPU] = resource.MustParse(tc.grown)
			m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(45 * time.Second)}
			f.run(45 * time.Second)
			if !slices.Equal(f.target.updates, tc.want) {
				t.Errorf("scale updates %v, want %v", f.target.updates, tc.want)
			}
		})
	}
}

func TestHorizontalModesThatDoNotScale(t *testing.T) {
	for _, mode := range []v1alpha1.UpdateMode{v1alpha1.UpdateModeOff, v1alpha1.UpdateModeInitial} {
		f := newFixture(t, testConfig(), 2, newMPA(mode, 8, 0), freshLease(t0), newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"), newPod("c", "100m", "128Mi"))
		f.run(0)
		if len(f.target.updates) != 0 || len(f.writes()) != 0 {
			t.Errorf("mode %s acted: scale %v writes %v", mode, f.target.updates, f.writes())
		}
	}
}

func TestStaleRecommendation(t *testing.T) {
	for name, age := range map[string]time.Duration{"old": time.Hour, "missing time": -1} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, testConfig(), 3, newMPA(v1alpha1.UpdateModeRecreate, 8, age), freshLease(t0),
				newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"), newPod("c", "100m", "128Mi"))
			f.run(0)
			if len(f.target.updates) != 0 || len(f.writes()) != 0 {
				t.Fatalf("acted on a stale recommendation: scale %v writes %v", f.target.updates, f.writes())
			}
			if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipStaleRecommendation)); got != 1 {
				t.Errorf("stale skips = %g", got)
			}
			if ev := f.events(); !hasEvent(ev, EventStaleRecommendation) {
				t.Errorf("events %v", ev)
			}
		})
	}
}

func TestEvictsOutsideBoundsRespectingMinReplicas(t *testing.T) {
	cfg := testConfig()
	f := newFixture(t, cfg, 3, newMPA(v1alpha1.UpdateModeRecreate, 3, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"), newPod("c", "1", "1Gi"))
	f.run(0)
	// a and b are outside bounds; evicting both would leave 1 < 2 alive.
	if w := f.writes(); len(w) != 1 || !strings.HasPrefix(w[0], "create/eviction/") {
		t.Fatalf("writes = %v, want one eviction", w)
	}
	if got := counter(t, f.ctrl.metrics.evictions, string(logic.ReasonOutsideBounds), resultSuccess); got != 1 {
		t.Errorf("evictions = %g", got)
	}
	if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipMinReplicas)); got != 1 {
		t.Errorf("min-replica skips = %g", got)
	}
	if ev := f.events(); !hasEvent(ev, EventEvicted) {
		t.Errorf("events %v", ev)
	}
	// The eviction carries a UID precondition.
	for _, a := range f.kube.Actions() {
		if ca, ok := a.(clienttesting.CreateAction); ok && a.GetSubresource() == "eviction" {
			ev := ca.GetObject().(*policyv1.Eviction)
			if ev.DeleteOptions == nil || ev.DeleteOptions.Preconditions == nil || *ev.DeleteOptions.Preconditions.UID != types.UID(ev.Name+"-uid") {
				t.Errorf("eviction without UID precondition: %+v", ev.DeleteOptions)
			}
		}
	}
}

func TestEvictionBlockedByPDB(t *testing.T) {
	cfg := testConfig()
	cfg.Vertical.MinReplicas = 1
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeRecreate, 2, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"))
	blocked := true
	f.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" && blocked {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return false, nil, nil
	})
	f.run(0)
	if got := counter(t, f.ctrl.metrics.evictions, string(logic.ReasonOutsideBounds), resultBlockedByPDB); got != 1 {
		t.Fatalf("blocked evictions = %g", got)
	}
	if ev := f.events(); !hasEvent(ev, EventEvictionBlocked) {
		t.Errorf("events %v", ev)
	}
	if _, err := f.kube.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("blocked pod was deleted: %v", err)
	}
	// Retried on the next loop; this time the budget allows it.
	blocked = false
	f.renewLease(time.Minute)
	f.run(time.Minute)
	if got := counter(t, f.ctrl.metrics.evictions, string(logic.ReasonOutsideBounds), resultSuccess); got != 1 {
		t.Fatalf("retry evictions = %g", got)
	}
}

func TestAdmissionHeartbeatGuard(t *testing.T) {
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"), newPod("c", "1", "1Gi")}
	}
	cases := []struct {
		name  string
		lease *coordinationv1.Lease
		evict bool
	}{
		{"fresh", freshLease(t0.Add(-10 * time.Second)), true},
		{"expired", freshLease(t0.Add(-31 * time.Second)), false},
		{"missing", nil, false},
		{"no renew time", func() *coordinationv1.Lease { l := freshLease(t0); l.Spec.RenewTime = nil; return l }(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(), 3, newMPA(v1alpha1.UpdateModeRecreate, 3, 0), tc.lease, pods()...)
			f.run(0)
			evicted := len(f.writes()) == 1
			if evicted != tc.evict {
				t.Fatalf("writes %v, want eviction=%v", f.writes(), tc.evict)
			}
			wantFresh := 0.0
			if tc.evict {
				wantFresh = 1
			}
			if got := testutil.ToFloat64(f.ctrl.metrics.admissionFresh); got != wantFresh {
				t.Errorf("admission fresh gauge = %g", got)
			}
			if !tc.evict && counter(t, f.ctrl.metrics.skips, string(logic.SkipAdmissionStale)) != 1 {
				t.Errorf("no AdmissionHeartbeatStale skip recorded")
			}
		})
	}
}

func TestEvictionRateLimits(t *testing.T) {
	cfg := testConfig()
	cfg.Vertical.MinReplicas = 1
	cfg.GlobalEvictionRate, cfg.GlobalEvictionBurst = 10, 10
	cfg.WorkloadEvictionRate, cfg.WorkloadEvictionBurst = 1.0/60, 1 // one per minute
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		pods = append(pods, newPod(n, "100m", "128Mi"))
	}
	f := newFixture(t, cfg, 5, newMPA(v1alpha1.UpdateModeRecreate, 5, 0), freshLease(t0), pods...)
	f.run(0)
	if n := len(f.writes()); n != 1 {
		t.Fatalf("evictions in first loop = %d, want 1", n)
	}
	if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipWorkloadRateLimit)); got != 4 {
		t.Errorf("rate-limit skips = %g, want 4", got)
	}
	// Ten seconds on (lease renewed) the workload bucket is still empty.
	f.renewLease(10 * time.Second)
	f.run(10 * time.Second)
	if n := len(f.writes()); n != 1 {
		t.Fatalf("writes after 10 s = %v", f.writes())
	}
	// A minute on, one more.
	f.renewLease(61 * time.Second)
	f.run(61 * time.Second)
	if n := len(f.writes()); n != 2 {
		t.Fatalf("writes after 61 s = %v", f.writes())
	}
}

func TestDryRunDoesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.DryRun = true
	cfg.Vertical.MinReplicas = 1
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 6, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"))
	f.run(0)
	if len(f.target.updates) != 0 || len(f.writes()) != 0 {
		t.Fatalf("dry run wrote: scale %v writes %v", f.target.updates, f.writes())
	}
	for _, a := range f.mpas.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("dry run wrote to the MPA: %v", a)
		}
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("dry run emitted events: %v", ev)
	}
	if counter(t, f.ctrl.metrics.scaleOperations, "up", resultDryRun) != 1 ||
		counter(t, f.ctrl.metrics.resizes, string(logic.ReasonOutsideBounds), resultDryRun) != 2 {
		t.Error("dry-run decisions not counted")
	}
}

func TestInPlaceResizeAndFallback(t *testing.T) {
	cfg := testConfig()
	cfg.Vertical.MinReplicas = 1
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 2, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"))
	f.run(0)
	var resized *corev1.Pod
	for _, a := range f.kube.Actions() {
		if ua, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "resize" {
			resized = ua.GetObject().(*corev1.Pod)
		}
	}
	if resized == nil || resized.Name != "a" {
		t.Fatalf("no resize of a: %v", f.writes())
	}
	res := resized.Spec.Containers[0].Resources
	if !res.Requests.Cpu().Equal(resource.MustParse("1")) || !res.Requests.Memory().Equal(resource.MustParse("1Gi")) ||
		!res.Limits.Memory().Equal(resource.MustParse("1Gi")) {
		t.Errorf("resized resources = %v", res)
	}
	if _, ok := res.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("a CPU limit appeared: %v", res.Limits)
	}
	if counter(t, f.ctrl.metrics.resizes, string(logic.ReasonOutsideBounds), resultSuccess) != 1 {
		t.Error("resize not counted")
	}

	// The API server refuses a resize (e.g. the feature is off): next loop
	// evicts instead.
	f2 := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 2, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "1", "1Gi"))
	f2.kube.PrependReactor("update", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "resize" {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil)
		}
		return false, nil, nil
	})
	f2.run(0)
	f2.run(time.Second)
	if w := f2.writes(); !slices.Equal(w, []string{"update/resize/a", "create/eviction/a"}) {
		t.Fatalf("writes = %v, want resize then eviction", w)
	}
	if counter(t, f2.ctrl.metrics.evictions, string(logic.ReasonResizeInfeasible), resultSuccess) != 1 {
		t.Error("fallback eviction not counted as ResizeInfeasible")
	}

	// The kubelet reports the resize infeasible: evict.
	inf := newPod("a", "1", "1Gi")
	inf.Status.Conditions = append(inf.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonInfeasible, LastTransitionTime: metav1.Time{Time: t0}})
	f3 := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 2, 0), freshLease(t0), inf, newPod("b", "1", "1Gi"))
	f3.run(0)
	if w := f3.writes(); !slices.Equal(w, []string{"create/eviction/a"}) {
		t.Fatalf("infeasible: writes = %v", w)
	}
}

func TestScaleFailureIsReported(t *testing.T) {
	f := newFixture(t, testConfig(), 2, newMPA(v1alpha1.UpdateModeAuto, 4, 0), freshLease(t0))
	f.target.err = errors.New("boom")
	f.run(0)
	if counter(t, f.ctrl.metrics.scaleOperations, "up", resultError) != 1 {
		t.Error("failed scale not counted")
	}
	if ev := f.events(); !hasEvent(ev, EventScaleFailed) {
		t.Errorf("events %v", ev)
	}
}

func TestPodModel(t *testing.T) {
	p := newPod("a", "250m", "256Mi")
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", LastTerminationState: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", FinishedAt: metav1.Time{Time: t0}}}}}
	p.Status.Conditions = append(p.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0}},
		corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, LastTransitionTime: metav1.Time{Time: t0.Add(time.Second)}})
	m, ok := podModel(p)
	if !ok || !m.Alive || m.Containers[0].Requests.CPU != 0.25 || !m.Containers[0].LastOOMKill.Equal(t0) {
		t.Errorf("model = %+v", m)
	}
	if m.Resize != logic.ResizeDeferred || !m.ResizeSince.Equal(t0.Add(time.Second)) {
		t.Errorf("resize = %q since %v; pending must win over in progress", m.Resize, m.ResizeSince)
	}
	p.DeletionTimestamp = &metav1.Time{Time: t0}
	if m, _ := podModel(p); m.Alive || !m.Terminating {
		t.Errorf("terminating pod: %+v", m)
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, ok := podModel(p); ok {
		t.Error("finished pod modelled")
	}
}

func TestPodModelUnschedulable(t *testing.T) {
	for _, tc := range []struct {
		name string
		node string
		cond *corev1.PodCondition
		want bool
	}{
		{"the scheduler found no node", "", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}, true},
		{"not yet tried", "", nil, false},
		{"waiting for another reason", "", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}, false},
		{"bound since", "node-1", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("a", "250m", "256Mi")
			p.Spec.NodeName, p.Status.Phase, p.Status.Conditions = tc.node, corev1.PodPending, nil
			if tc.cond != nil {
				p.Status.Conditions = []corev1.PodCondition{*tc.cond}
			}
			if m, _ := podModel(p); m.Unschedulable != tc.want || m.Alive {
				t.Errorf("unschedulable = %v, alive = %v; want %v, false", m.Unschedulable, m.Alive, tc.want)
			}
		})
	}
}

func TestMetricsLint(t *testing.T) {
	f := newFixture(t, testConfig(), 4, newMPA(v1alpha1.UpdateModeAuto, 8, 0), freshLease(t0), newPod("a", "100m", "128Mi"))
	f.run(0)
	if err := serve.LintMetrics(f.reg, "updater"); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := testConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := testConfig()
	bad.UpdateInterval, bad.MaxRecommendationAge, bad.AdmissionLeaseNamespace = 0, 0, ""
	if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
}

// TestStaleRecommendationEventOncePerTransition: the Warning event is
// posted when a recommendation becomes stale, not on every loop while it
// stays stale; a fresh recommendation in between, or a re-created
// autoscaler, makes the next staleness a new one. The gauge counts the
// autoscalers stale at the last loop; the skip counter counts every loop.
func TestStaleRecommendationEventOncePerTransition(t *testing.T) {
	type step struct {
		fresh     bool
		recreate  bool // same name, new UID
		wantEvent bool
	}
	stale := func(ev bool) step { return step{wantEvent: ev} }
	for _, tc := range []struct {
		name  string
		dry   bool
		steps []step
	}{
		{"stays stale", false, []step{stale(true), stale(false), stale(false), stale(false)}},
		{"fresh in between", false, []step{stale(true), stale(false), {fresh: true}, stale(true), stale(false)}},
		{"re-created while stale", false, []step{stale(true), {recreate: true, wantEvent: true}, stale(false)}},
		{"dry run posts nothing but counts", true, []step{stale(false), stale(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.DryRun = tc.dry
			m := newMPA(v1alpha1.UpdateModeRecreate, 3, time.Hour)
			f := newFixture(t, cfg, 3, m, nil, newPod("a", "1", "1Gi"), newPod("b", "1", "1Gi"), newPod("c", "1", "1Gi"))
			skips := 0
			for i, s := range tc.steps {
				at := time.Duration(i) * time.Minute
				m = m.DeepCopy()
				m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at - time.Hour)}
				if s.fresh {
					m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at)}
				}
				if s.recreate {
					m.UID = types.UID(string(m.UID) + "-new")
				}
				if err := f.mpaIdx.Update(m); err != nil {
					t.Fatal(err)
				}
				f.run(at)
				ev := f.events()
				if got := hasEvent(ev, EventStaleRecommendation); got != s.wantEvent || len(ev) > 1 {
					t.Errorf("loop %d: events %v, want a stale event: %v", i, ev, s.wantEvent)
				}
				wantGauge := 1.0
				if s.fresh {
					wantGauge = 0
				} else {
					skips++
				}
				if got := testutil.ToFloat64(f.ctrl.metrics.staleRecommendations); got != wantGauge {
					t.Errorf("loop %d: stale gauge = %g, want %g", i, got, wantGauge)
				}
				if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipStaleRecommendation)); got != float64(skips) {
					t.Errorf("loop %d: stale skips = %g, want %d", i, got, skips)
				}
			}
			// Deleted: no longer counted.
			if err := f.mpaIdx.Delete(m); err != nil {
				t.Fatal(err)
			}
			f.run(time.Hour)
			if got := testutil.ToFloat64(f.ctrl.metrics.staleRecommendations); got != 0 || len(f.ctrl.stale) != 0 {
				t.Errorf("after deletion: gauge %g, state %v", got, f.ctrl.stale)
			}
		})
	}
}
