package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/fusion"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned/fake"
	mpainformers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions"
	"github.com/aware-k8s/aware/pkg/serve"
	"github.com/aware-k8s/aware/pkg/usage"
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
		if _, ok := o.(*corev1.Pod); ok {
			kubeObjs = append(kubeObjs, o)
		} else {
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
}

// tick runs one loop, writes every queued status, and refreshes the
// caches; it returns the actions the controller sent to the MPA API.
func (f *fixture) tick() []k8stesting.Action {
	f.t.Helper()
	f.client.ClearActions()
	ctx := context.Background()
	f.c.RunOnce(ctx)
	for f.c.queue.Len() > 0 {
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

func TestRecommendsAndWritesStatus(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	f.start()
	ups := statusUpdates(t, f.tick())
	if len(ups) != 1 {
		t.Fatalf("want 1 status update, got %d", len(ups))
	}
	m := f.mpa("ns", "web")
	s := m.Status
	if s.RecommendationTime == nil || !s.RecommendationTime.Time.Equal(t0) {
		t.Errorf("recommendationTime = %v, want %v", s.RecommendationTime, t0)
	}
	if s.CurrentReplicas != 2 || s.DesiredReplicas < 1 || s.ObservedGeneration != 1 {
		t.Errorf("replicas current %d desired %d observedGeneration %d", s.CurrentReplicas, s.DesiredReplicas, s.ObservedGeneration)
	}
	if s.Recommendation == nil || len(s.Recommendation.ContainerRecommendations) != 1 || s.Recommendation.ContainerRecommendations[0].ContainerName != "app" {
		t.Fatalf("recommendation %+v", s.Recommendation)
	}
	if cpu := s.Recommendation.ContainerRecommendations[0].Target.Cpu(); cpu.IsZero() {
		t.Errorf("cpu target is zero")
	}
	if s.RL == nil || s.RL.Source != v1alpha1.SourceDefault || s.RL.Reason != "RLOff" {
		t.Errorf("rl status %+v", s.RL)
	}
	if len(s.CurrentMetrics) != 2 || s.CurrentMetrics[0].Resource.Current.AverageValue.MilliValue() != 400 || *s.CurrentMetrics[0].Resource.Current.AverageUtilization != 80 {
		t.Errorf("currentMetrics %+v", s.CurrentMetrics)
	}
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
	wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported")
	wantCond(t, m, v1alpha1.NoPodsMatched, corev1.ConditionFalse, "PodsMatched")
	wantCond(t, m, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound")
	wantCond(t, m, v1alpha1.AbleToScale, corev1.ConditionTrue, "SucceededGetScale")
	wantCond(t, m, v1alpha1.ScalingLimited, corev1.ConditionFalse, "DesiredWithinRange")
	wantCond(t, m, v1alpha1.LowConfidence, corev1.ConditionTrue, "InsufficientHistory")
	wantCond(t, m, v1alpha1.FetchingHistory, corev1.ConditionFalse, "NoHistorySource")
	if got := testutil.ToFloat64(f.c.metrics.recommendations.WithLabelValues("Default")); got != 1 {
		t.Errorf("recommendations{source=Default} = %g", got)
	}
}

// An autoscaler without maxReplicas is bounded by mpa.DefaultMaxReplicas,
// and ScalingLimited says so, whether or not the bound binds.
func TestDefaultMaxReplicasInStatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		max         *int32
		cpu         float64 // per pod, of a 500m request
		wantStatus  corev1.ConditionStatus
		wantReason  string
		wantMessage string
		wantDesired int32
	}{
		{"within range, unset", nil, 0.4, corev1.ConditionFalse, "DesiredWithinRange", "default bound of 100 replicas", 0},
		{"bound binds, unset", nil, 40, corev1.ConditionTrue, "TooManyReplicas", "limited by the default maximum", 100},
		{"within range, set", ptr(int32(500)), 0.4, corev1.ConditionFalse, "DesiredWithinRange", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMPA("ns", "web")
			m.Spec.Constraints = &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MaxReplicas: tc.max}}
			f := newFixture(t, m, newPod("ns", "web", "web-1", true), newPod("ns", "web", "web-2", true))
			// 90 replicas: the default scale-up rate (100%) would reach 180.
			f.targets.replicas = map[string]int32{"web": 90}
			f.usage.set(podUsage("ns", "web-1", tc.cpu, 200<<20), podUsage("ns", "web-2", tc.cpu, 200<<20))
			f.start()
			f.tick()
			got := f.mpa("ns", "web")
			c := cond(t, got, v1alpha1.ScalingLimited)
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantMessage) {
				t.Fatalf("ScalingLimited = %s/%s %q, want %s/%s containing %q", c.Status, c.Reason, c.Message, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
			if tc.wantMessage == "" && c.Message != "" {
				t.Errorf("message %q for an explicit maxReplicas", c.Message)
			}
			if tc.wantDesired != 0 && got.Status.DesiredReplicas != tc.wantDesired {
				t.Errorf("desiredReplicas = %d, want %d", got.Status.DesiredReplicas, tc.wantDesired)
			}
		})
	}
}

func TestStatusWrittenOnlyWhenChangedOrDue(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	f.start()
	if n := len(statusUpdates(t, f.tick())); n != 1 {
		t.Fatalf("first loop: %d updates, want 1", n)
	}
	// Warm up: with little history VPA's confidence bounds move quickly
	// and are rightly rewritten; after a few hours they settle.
	for range 300 {
		f.clock.Step(time.Minute)
		f.tick()
	}
	// Wait for the periodic refresh, then expect exactly one write per
	// refresh interval while only currentMetrics moves.
	for i := 0; ; i++ {
		if i > 5 {
			t.Fatal("no write within the status refresh interval")
		}
		f.clock.Step(time.Minute)
		if len(statusUpdates(t, f.tick())) == 1 {
			break
		}
	}
	last := f.mpa("ns", "web").Status.RecommendationTime.Time
	for i := 1; i < 5; i++ {
		f.clock.Step(time.Minute)
		f.usage.set(podUsage("ns", "web-1", 0.4+float64(i)/1000, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
		if ups := statusUpdates(t, f.tick()); len(ups) != 0 {
			t.Fatalf("loop %d rewrote an unchanged status", i)
		}
	}
	f.clock.Step(time.Minute) // 5 minutes since the last write
	if n := len(statusUpdates(t, f.tick())); n != 1 {
		t.Fatalf("refresh: %d updates, want 1", n)
	}
	if got := f.mpa("ns", "web").Status.RecommendationTime.Time; !got.Equal(last.Add(5 * time.Minute)) {
		t.Fatalf("recommendationTime %v, want %v", got, last.Add(5*time.Minute))
	}
	// The transition time of a condition that kept its status is kept.
	if c := cond(t, f.mpa("ns", "web"), v1alpha1.RecommendationProvided); !c.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("RecommendationProvided lastTransitionTime moved to %v", c.LastTransitionTime)
	}
}

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

func TestTargetMissingOrWithoutScale(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("deployments.apps %q: %w", "web", ErrTargetNotFound), "TargetNotFound"},
		{fmt.Errorf("kind ConfigMap: %w", ErrTargetUnsupported), "TargetUnsupported"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			f := newFixture(t, twoPodWorkload()...)
			f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20))
			f.targets.err = tc.err
			f.start()
			f.tick()
			m := f.mpa("ns", "web")
			wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, tc.reason)
			wantCond(t, m, v1alpha1.AbleToScale, corev1.ConditionFalse, "FailedGetScale")
			if m.Status.RecommendationTime != nil {
				t.Fatal("no recommendation for an unusable target")
			}
			wantEvent(t, f.recorder, "Warning "+tc.reason)
			// Recovery flips the condition back.
			f.targets.mu.Lock()
			f.targets.err = nil
			f.targets.mu.Unlock()
			f.clock.Step(time.Minute)
			f.tick()
			m = f.mpa("ns", "web")
			wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported")
			if c := cond(t, m, v1alpha1.ConfigUnsupported); !c.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
				t.Errorf("transition time %v", c.LastTransitionTime)
			}
			wantEvent(t, f.recorder, "Normal ConfigSupported")
		})
	}
}

func TestTransientTargetErrorIsNotConfigUnsupported(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.targets.err = errors.New("connection refused")
	f.start()
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.AbleToScale, corev1.ConditionFalse, "FailedGetScale")
	if c := condition(&m.Status, v1alpha1.ConfigUnsupported); c != nil {
		t.Fatalf("a transient error must not claim the config is unsupported: %+v", c)
	}
}

func TestSelectorMatchingNoPods(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.targets.sel = labels.SelectorFromSet(labels.Set{"app": "nothing"})
	f.start()
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.NoPodsMatched, corev1.ConditionTrue, "NoPodsMatched")
	if f.usage.calls != 1 {
		t.Errorf("metrics read %d times per loop, want 1", f.usage.calls)
	}
	wantEvent(t, f.recorder, "Warning NoPodsMatched")
}

func TestTerminatingPodsDoNotCount(t *testing.T) {
	p := newPod("ns", "web", "web-1", true)
	p.DeletionTimestamp = &metav1.Time{Time: t0}
	p.Finalizers = []string{"x"}
	q := newPod("ns", "web", "web-2", true)
	q.Status.Phase = corev1.PodSucceeded
	f := newFixture(t, newMPA("ns", "web"), p, q)
	f.start()
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.NoPodsMatched, corev1.ConditionTrue, "NoPodsMatched")
}

func TestConflictOnStatusWrite(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	f.start()
	// Another component (the updater) writes lastScaleTime after our cache
	// was filled; our first write conflicts once.
	scaled := metav1.NewTime(t0.Add(-time.Minute))
	m := f.mpa("ns", "web")
	m.Status.LastScaleTime = &scaled
	if _, err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers("ns").UpdateStatus(context.Background(), m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicts := 0
	f.client.PrependReactor("update", "multidimpodautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "multidimpodautoscalers"}, "web", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	actions := f.tick()
	var verbs []string
	for _, a := range actions {
		verbs = append(verbs, a.GetVerb()+"/"+a.GetSubresource())
	}
	if got := strings.Join(verbs, " "); got != "update/status get/ update/status" {
		t.Fatalf("actions %q, want a conflicting update, a re-read from the API and a second update", got)
	}
	m = f.mpa("ns", "web")
	if m.Status.RecommendationTime == nil {
		t.Fatal("status not written after the conflict")
	}
	if m.Status.LastScaleTime == nil || !m.Status.LastScaleTime.Equal(&scaled) {
		t.Fatalf("lastScaleTime written by another component was lost: %v", m.Status.LastScaleTime)
	}
	if got := testutil.ToFloat64(f.c.metrics.statusWrites.WithLabelValues("conflict")); got != 1 {
		t.Errorf("conflict counter %g", got)
	}
}

func TestPersistentWriteErrorIsRetriedWithBackoff(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20))
	f.start()
	f.client.PrependReactor("update", "multidimpodautoscalers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd down")
	})
	f.c.RunOnce(context.Background())
	f.c.processNext(context.Background())
	if n := f.c.queue.NumRequeues("ns/web"); n != 1 {
		t.Fatalf("requeues %d, want 1 (rate-limited retry)", n)
	}
	if got := testutil.ToFloat64(f.c.metrics.statusWrites.WithLabelValues("error")); got != 1 {
		t.Errorf("error counter %g", got)
	}
	f.c.queue.ShutDown()
}

// TestStatusWriteRecovered: writes that fail while the API server (or
// etcd) is down are retried; the write that succeeds after them records a
// StatusWriteRecovered event saying for how long and why the status was
// stale, once, and a write without earlier failures records none.
//
// An API server that has just restarted may acknowledge the first write
// with an object that names nothing (seen in e2e); the event must still
// be recorded on the autoscaler, or the API server refuses it.
func TestStatusWriteRecovered(t *testing.T) {
	for _, emptyAck := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty acknowledgement %v", emptyAck), func(t *testing.T) { testStatusWriteRecovered(t, emptyAck) })
	}
}

// namingRecorder records the involved object of every event.
type namingRecorder struct {
	*record.FakeRecorder
	objects []string
}

func (r *namingRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	m, err := meta.Accessor(obj)
	name := "<no metadata>"
	if err == nil {
		name = m.GetNamespace() + "/" + m.GetName()
	}
	r.objects = append(r.objects, reason+" "+name)
	r.FakeRecorder.Eventf(obj, typ, reason, format, args...)
}

func testStatusWriteRecovered(t *testing.T, emptyAck bool) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20))
	named := &namingRecorder{FakeRecorder: f.recorder}
	f.deps = func(d *Deps) { d.Recorder = named }
	f.start()
	down := true
	f.client.PrependReactor("update", "multidimpodautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		if down {
			return true, nil, apierrors.NewServiceUnavailable("etcdserver: leader changed")
		}
		if emptyAck {
			// Store the write, answer with an object naming nothing.
			obj := a.(k8stesting.UpdateAction).GetObject()
			if err := f.client.Tracker().Update(a.GetResource(), obj, "ns"); err != nil {
				return true, nil, err
			}
			return true, &v1alpha1.MultidimPodAutoscaler{}, nil
		}
		return false, nil, nil
	})
	ctx := context.Background()
	f.c.RunOnce(ctx)
	for range 3 {
		f.c.processNext(ctx)
		f.clock.Step(10 * time.Second)
		// The rate limiter re-adds the key after its backoff; take it
		// back now rather than wait for it.
		f.c.queue.Forget("ns/web")
		f.c.queue.Add("ns/web")
	}
	drainEvents(f.recorder)
	if m := f.mpa("ns", "web"); m.Status.RecommendationTime != nil {
		t.Fatalf("status written while the API server was down: %+v", m.Status)
	}
	down = false
	f.c.processNext(ctx)
	if m := f.mpa("ns", "web"); m.Status.RecommendationTime == nil {
		t.Fatal("status not written after the API server came back")
	}
	want := "Normal StatusWriteRecovered the status is written again after 3 failed attempts over 30s; the last error: updating status of ns/web: etcdserver: leader changed"
	if got := drainEvents(f.recorder); !slices.Contains(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if got := testutil.ToFloat64(f.c.metrics.statusWriteOutages); got != 1 {
		t.Errorf("recoveries counted %g, want 1", got)
	}
	if want := ReasonStatusWriteRecovered + " ns/web"; !slices.Contains(named.objects, want) {
		t.Errorf("events on %q, want one %q", named.objects, want)
	}
	// The next write, with no failure before it, is not news.
	f.clock.Step(time.Hour)
	f.tick()
	for _, e := range drainEvents(f.recorder) {
		if strings.Contains(e, ReasonStatusWriteRecovered) {
			t.Errorf("a second recovery event: %q", e)
		}
	}
	f.c.queue.ShutDown()
}

func TestRecommenderNameAndNamespaces(t *testing.T) {
	named := func(ns, name, rec string) *v1alpha1.MultidimPodAutoscaler {
		m := newMPA(ns, name)
		if rec != "" {
			m.Spec.Recommenders = []v1alpha1.MultidimPodAutoscalerRecommenderSelector{{Name: rec}}
		}
		return m
	}
	objs := []runtime.Object{
		named("ns", "unnamed", ""), named("ns", "default", "default"), named("ns", "custom", "custom"),
		named("skip", "unnamed", ""),
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{DefaultRecommenderName, []string{"ns/unnamed", "ns/default"}},
		{"custom", []string{"ns/custom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, objs...)
			f.cfg.RecommenderName = tc.name
			f.cfg.IgnoredNamespaces = []string{"skip"}
			f.targets.sel = labels.Nothing()
			f.start()
			var got []string
			for _, u := range statusUpdates(t, f.tick()) {
				got = append(got, u.Namespace+"/"+u.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") && !sameSet(got, tc.want) {
				t.Fatalf("handled %v, want %v", got, tc.want)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

func TestInvalidConstraintsAreConfigUnsupported(t *testing.T) {
	m := newMPA("ns", "web")
	lo, hi := int32(5), int32(2)
	m.Spec.Constraints = &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MinReplicas: &lo, MaxReplicas: &hi}}
	f := newFixture(t, m, newPod("ns", "web", "web-1", true))
	f.start()
	f.tick()
	wantCond(t, f.mpa("ns", "web"), v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "InvalidConfiguration")
}

// TestQuantityBeyondInt64IsConfigUnsupported: a bound no int64 holds is
// refused by name, not read as 0 (no bound) or a wrapped value.
func TestQuantityBeyondInt64IsConfigUnsupported(t *testing.T) {
	m := newMPA("ns", "web")
	m.Spec.ResourcePolicy = &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{
		ContainerName: "*", MaxAllowed: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100E")},
	}}}
	f := newFixture(t, m, newPod("ns", "web", "web-1", true))
	f.start()
	f.tick()
	got := f.mpa("ns", "web")
	wantCond(t, got, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, "InvalidConfiguration")
	c := condition(&got.Status, v1alpha1.ConfigUnsupported)
	if !strings.Contains(c.Message, "spec.resourcePolicy.containerPolicies[0].maxAllowed: memory 100E") {
		t.Errorf("ConfigUnsupported message %q does not name the quantity", c.Message)
	}
	if got.Status.Recommendation != nil {
		t.Errorf("a recommendation was written under an unreadable bound: %+v", got.Status.Recommendation)
	}
}

func TestMetricsLint(t *testing.T) {
	f := newFixture(t)
	f.start()
	if err := serve.LintMetrics(f.reg, "recommender"); err != nil {
		t.Fatal(err)
	}
}

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
	if len(q.Status.ContainerStatuses) != 1 || q.Status.ContainerStatuses[0].LastTerminationState.Terminated.Reason != "OOMKilled" {
		t.Fatalf("OOM terminations must be kept, others dropped: %+v", q.Status.ContainerStatuses)
	}
	tomb := "not a pod"
	if o, _ := TrimPod(tomb); o != tomb {
		t.Fatal("non-pods must pass through")
	}
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

// Two autoscalers of one target: the older governs, the newer recommends
// nothing and says why; once the older is gone the newer takes over.
func TestAmbiguousTarget(t *testing.T) {
	older, newer := newMPA("ns", "web"), newMPA("ns", "web-b")
	newer.Spec.ScaleTargetRef.Name = "web"
	older.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	newer.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	f := newFixture(t, older, newer, newPod("ns", "web", "web-1", true), newPod("ns", "web", "web-2", true))
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	f.start()
	f.tick()
	if m := f.mpa("ns", "web"); m.Status.Recommendation == nil {
		t.Fatal("the older autoscaler has no recommendation")
	}
	m := f.mpa("ns", "web-b")
	if m.Status.Recommendation != nil || m.Status.DesiredReplicas != 0 || m.Status.RecommendationTime != nil {
		t.Errorf("the shadowed autoscaler recommends: %+v", m.Status)
	}
	wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionTrue, ReasonAmbiguousTarget)
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionFalse, ReasonAmbiguousTarget)
	if c := cond(t, m, v1alpha1.ConfigUnsupported); !strings.Contains(c.Message, "older MultidimPodAutoscaler web") {
		t.Errorf("message %q does not name the governing autoscaler", c.Message)
	}

	// Nothing changed: no second write for the shadowed autoscaler.
	f.clock.Step(time.Minute)
	for _, u := range statusUpdates(t, f.tick()) {
		if u.Name == "web-b" {
			t.Errorf("rewrote the unchanged status of web-b")
		}
	}

	if err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers("ns").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.clock.Step(time.Minute)
	f.tick()
	m = f.mpa("ns", "web-b")
	if m.Status.Recommendation == nil {
		t.Fatal("the remaining autoscaler does not take over")
	}
	wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported")
	wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
}
