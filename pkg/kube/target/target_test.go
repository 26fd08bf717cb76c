package target

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakedisco "k8s.io/client-go/discovery/fake"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	deployGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	cmGVK     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	crGVK     = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
)

func staticMapper(gvks ...schema.GroupVersionKind) *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range gvks {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}

func fakeDiscovery() *fakedisco.FakeDiscovery {
	return &fakedisco.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments"}, {Name: "deployments/scale"}}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps"}, {Name: "pods"}, {Name: "pods/eviction"}}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{{Name: "widgets"}, {Name: "widgets/scale"}}},
	}}}
}

// scaleStore backs the fake scale client with a small in-memory store so
// Get and Update behave like the API server (404, resourceVersion bump).
type scaleStore struct {
	mu      sync.Mutex
	objs    map[string]*autoscalingv1.Scale // resource/name
	gets    int
	updates int
	// conflicts makes the next n updates fail with 409.
	conflicts int
}

func newScaleClient(st *scaleStore) *fakescale.FakeScaleClient {
	c := &fakescale.FakeScaleClient{}
	c.AddReactor("get", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.gets++
		g := a.(clienttesting.GetAction)
		s, ok := st.objs[g.GetResource().Resource+"/"+g.GetName()]
		if !ok {
			return true, nil, apierrors.NewNotFound(g.GetResource().GroupResource(), g.GetName())
		}
		return true, s.DeepCopy(), nil
	})
	c.AddReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.updates++
		u := a.(clienttesting.UpdateAction)
		in := u.GetObject().(*autoscalingv1.Scale)
		if st.conflicts > 0 {
			st.conflicts--
			return true, nil, apierrors.NewConflict(u.GetResource().GroupResource(), in.Name, errors.New("stale"))
		}
		key := u.GetResource().Resource + "/" + in.Name
		if st.objs[key].ResourceVersion != in.ResourceVersion {
			return true, nil, apierrors.NewConflict(u.GetResource().GroupResource(), in.Name, errors.New("rv mismatch"))
		}
		out := in.DeepCopy()
		out.ResourceVersion += "1"
		st.objs[key] = out
		return true, out.DeepCopy(), nil
	})
	return c
}

func scaleObj(name string, replicas int32, selector string) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
		Status:     autoscalingv1.ScaleStatus{Replicas: replicas, Selector: selector},
	}
}

func ref(apiVersion, kind, name string) *autoscalingv1.CrossVersionObjectReference {
	return &autoscalingv1.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: name}
}

func TestGetScaleAndErrors(t *testing.T) {
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{
		"deployments/web": scaleObj("web", 3, "app=web"),
		"widgets/w":       scaleObj("w", 1, "app=w"),
	}}
	r := New(staticMapper(deployGVK, cmGVK, crGVK), newScaleClient(st), fakeDiscovery())
	ctx := context.Background()

	s, gr, err := r.GetScale(ctx, "ns", ref("apps/v1", "Deployment", "web"))
	if err != nil {
		t.Fatalf("GetScale: %v", err)
	}
	if s.Spec.Replicas != 3 || gr != (schema.GroupResource{Group: "apps", Resource: "deployments"}) {
		t.Errorf("got replicas %d gr %v", s.Spec.Replicas, gr)
	}
	if _, gr, err := r.GetScale(ctx, "ns", ref("example.com/v1", "Widget", "w")); err != nil || gr.Resource != "widgets" {
		t.Errorf("custom resource: gr %v err %v", gr, err)
	}

	cases := []struct {
		name        string
		ref         *autoscalingv1.CrossVersionObjectReference
		want        error
		unsupported bool
	}{
		{"missing object", ref("apps/v1", "Deployment", "nope"), ErrTargetNotFound, false},
		{"kind without scale", ref("v1", "ConfigMap", "cm"), ErrNoScaleSubresource, true},
		{"unknown kind", ref("apps/v1", "Rollout", "x"), ErrUnknownKind, true},
		{"unknown group", ref("argoproj.io/v1alpha1", "Rollout", "x"), ErrUnknownKind, true},
		{"nil ref", nil, ErrInvalidRef, true},
		{"no name", ref("apps/v1", "Deployment", ""), ErrInvalidRef, true},
		{"bad apiVersion", ref("a/b/c", "Deployment", "web"), ErrInvalidRef, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := r.GetScale(ctx, "ns", tc.ref)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if IsUnsupported(err) != tc.unsupported {
				t.Errorf("IsUnsupported(%v) = %v, want %v", err, !tc.unsupported, tc.unsupported)
			}
		})
	}
}

func TestTransientErrorIsNotClassified(t *testing.T) {
	c := &fakescale.FakeScaleClient{}
	c.AddReactor("get", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd down")
	})
	r := New(staticMapper(deployGVK), c, fakeDiscovery())
	_, _, err := r.GetScale(context.Background(), "ns", ref("apps/v1", "Deployment", "web"))
	if err == nil || !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("want wrapped 503, got %v", err)
	}
	if errors.Is(err, ErrTargetNotFound) || IsUnsupported(err) {
		t.Errorf("transient error classified as %v", err)
	}
}

func TestSelectorCacheTTL(t *testing.T) {
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{"deployments/web": scaleObj("web", 3, "app=web,tier in (a,b)")}}
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := New(staticMapper(deployGVK), newScaleClient(st), fakeDiscovery(), WithSelectorTTL(10*time.Second), WithClock(clock))
	ctx := context.Background()
	tr := ref("apps/v1", "Deployment", "web")

	sel, err := r.Selector(ctx, "ns", tr)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set{"app": "web", "tier": "a"}) || sel.Matches(labels.Set{"app": "web", "tier": "c"}) {
		t.Errorf("selector %v does not match as parsed", sel)
	}
	if _, err := r.Selector(ctx, "ns", tr); err != nil {
		t.Fatal(err)
	}
	if st.gets != 1 {
		t.Errorf("gets within TTL = %d, want 1 (cached)", st.gets)
	}
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	st.mu.Lock()
	st.objs["deployments/web"].Status.Selector = "app=web2"
	st.mu.Unlock()
	sel, err = r.Selector(ctx, "ns", tr)
	if err != nil {
		t.Fatal(err)
	}
	if st.gets != 2 || !sel.Matches(labels.Set{"app": "web2"}) {
		t.Errorf("after TTL: gets=%d selector=%v, want refetch of app=web2", st.gets, sel)
	}
	r.InvalidateSelector("ns", tr)
	if _, err := r.Selector(ctx, "ns", tr); err != nil || st.gets != 3 {
		t.Errorf("after invalidate: gets=%d err=%v", st.gets, err)
	}
}

// TestCachedSelector: answered from memory only once Selector has read the
// scale, never with a request, and with Selector's answer.
func TestCachedSelector(t *testing.T) {
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{"deployments/web": scaleObj("web", 3, "app=web")}}
	now := time.Unix(1000, 0)
	r := New(staticMapper(deployGVK), newScaleClient(st), fakeDiscovery(), WithSelectorTTL(10*time.Second), WithClock(func() time.Time { return now }))
	tr := ref("apps/v1", "Deployment", "web")
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T)
		ref     *autoscalingv1.CrossVersionObjectReference
		wantOK  bool
	}{
		{name: "nothing cached yet", prepare: func(*testing.T) {}, ref: tr},
		{name: "after Selector read it", prepare: func(t *testing.T) {
			if _, err := r.Selector(context.Background(), "ns", tr); err != nil {
				t.Fatal(err)
			}
		}, ref: tr, wantOK: true},
		{name: "an invalid reference", prepare: func(*testing.T) {}, ref: ref("apps/v1", "", "web")},
		{name: "past the TTL", prepare: func(*testing.T) { now = now.Add(11 * time.Second) }, ref: tr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare(t)
			gets := st.gets
			sel, ok := r.CachedSelector("ns", tc.ref)
			if ok != tc.wantOK || st.gets != gets {
				t.Fatalf("ok %v with %d requests, want %v with none", ok, st.gets-gets, tc.wantOK)
			}
			if ok && (!sel.Matches(labels.Set{"app": "web"}) || sel.Matches(labels.Set{"app": "db"})) {
				t.Errorf("selector %v, want app=web", sel)
			}
		})
	}
}

func TestSelectorEmptyIsError(t *testing.T) {
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{"widgets/w": scaleObj("w", 1, "")}}
	r := New(staticMapper(crGVK), newScaleClient(st), fakeDiscovery())
	_, err := r.Selector(context.Background(), "ns", ref("example.com/v1", "Widget", "w"))
	if !errors.Is(err, ErrNoSelector) || !IsUnsupported(err) {
		t.Fatalf("err = %v, want ErrNoSelector", err)
	}
}

func TestUpdateReplicas(t *testing.T) {
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{"deployments/web": scaleObj("web", 3, "app=web")}, conflicts: 2}
	r := New(staticMapper(deployGVK), newScaleClient(st), fakeDiscovery())
	ctx := context.Background()
	tr := ref("apps/v1", "Deployment", "web")

	if err := r.UpdateReplicas(ctx, "ns", tr, 5); err != nil {
		t.Fatalf("UpdateReplicas: %v", err)
	}
	if got := st.objs["deployments/web"].Spec.Replicas; got != 5 {
		t.Errorf("replicas = %d, want 5", got)
	}
	if st.updates != 3 {
		t.Errorf("updates = %d, want 3 (two conflicts retried)", st.updates)
	}
	// Same value: no write.
	if err := r.UpdateReplicas(ctx, "ns", tr, 5); err != nil || st.updates != 3 {
		t.Errorf("no-op update wrote: updates=%d err=%v", st.updates, err)
	}
	if err := r.UpdateReplicas(ctx, "ns", ref("apps/v1", "Deployment", "gone"), 2); !errors.Is(err, ErrTargetNotFound) {
		t.Errorf("missing target: %v", err)
	}
	if err := r.UpdateReplicas(ctx, "ns", tr, -1); err == nil {
		t.Error("negative replicas accepted")
	}
}

// resettable is a mapper that learns a kind only after Reset, like a
// discovery mapper after a CRD is installed.
type resettable struct {
	*meta.DefaultRESTMapper
	resets int
	learn  schema.GroupVersionKind
}

func (m *resettable) Reset() {
	m.resets++
	m.Add(m.learn, meta.RESTScopeNamespace)
}

func TestUnknownKindResetsMapperRateLimited(t *testing.T) {
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{"widgets/w": scaleObj("w", 1, "app=w")}}
	m := &resettable{DefaultRESTMapper: staticMapper(deployGVK), learn: crGVK}
	now := time.Unix(0, 0)
	r := New(m, newScaleClient(st), fakeDiscovery(), WithClock(func() time.Time { return now }))
	ctx := context.Background()
	if _, _, err := r.GetScale(ctx, "ns", ref("example.com/v1", "Widget", "w")); err != nil {
		t.Fatalf("newly installed kind not resolved after reset: %v", err)
	}
	if m.resets != 1 {
		t.Fatalf("resets = %d, want 1", m.resets)
	}
	// A kind that never appears: reset once more, then not again within the interval.
	m.learn = deployGVK
	for range 3 {
		if _, _, err := r.GetScale(ctx, "ns", ref("example.com/v1", "Gadget", "g")); !errors.Is(err, ErrUnknownKind) {
			t.Fatalf("err = %v", err)
		}
	}
	if m.resets != 1 {
		t.Errorf("resets = %d, want 1 (rate limited)", m.resets)
	}
	now = now.Add(mapperResetInterval + time.Second)
	_, _, _ = r.GetScale(ctx, "ns", ref("example.com/v1", "Gadget", "g"))
	if m.resets != 2 {
		t.Errorf("resets after interval = %d, want 2", m.resets)
	}
}
