package match

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// fakeOwners maps an object to its controller.
type fakeOwners struct {
	up  map[Ref]Ref
	err error
}

var (
	_ Owners       = (*fakeOwners)(nil)
	_ CachedOwners = (*fakeOwners)(nil)
)

func (f *fakeOwners) Controller(_ context.Context, _ string, obj Ref) (*Ref, error) {
	if f.err != nil {
		return nil, f.err
	}
	if r, ok := f.up[obj]; ok {
		return &r, nil
	}
	return nil, nil
}

// CachedController answers as Controller, and not at all where it fails.
func (f *fakeOwners) CachedController(ns string, obj Ref) (*Ref, bool) {
	r, err := f.Controller(context.Background(), ns, obj)
	return r, err == nil
}

// fakeSelectors maps a target to a selector string.
type fakeSelectors map[Ref]string

var (
	_ Selectors       = fakeSelectors(nil)
	_ CachedSelectors = fakeSelectors(nil)
)

// CachedSelector answers as Selector, and not at all where it fails.
func (f fakeSelectors) CachedSelector(ns string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, bool) {
	s, err := f.Selector(context.Background(), ns, ref)
	return s, err == nil
}

func (f fakeSelectors) Selector(_ context.Context, _ string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, error) {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	t := Ref{Group: gv.Group, Kind: ref.Kind, Name: ref.Name}
	s, ok := f[t]
	if !ok {
		return nil, fmt.Errorf("no scale for %s", t)
	}
	return labels.Parse(s)
}

func newMPA(ns, name, apiVersion, kind, target string, age time.Duration) *v1alpha1.MultidimPodAutoscaler {
	return &v1alpha1.MultidimPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
		Spec:       v1alpha1.MultidimPodAutoscalerSpec{ScaleTargetRef: &autoscalingv1.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: target}},
	}
}

func index(t testing.TB, ms ...*v1alpha1.MultidimPodAutoscaler) *InformerIndex {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{TargetIndex: TargetIndexFunc, cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, m := range ms {
		if err := idx.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	return &InformerIndex{Indexer: idx}
}

func podOwnedBy(ns string, lbls map[string]string, apiVersion, kind, name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: lbls}}
	if kind != "" {
		p.OwnerReferences = []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "not-the-controller"},
			{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(true)},
		}
	}
	return p
}

var (
	rsWeb  = Ref{Group: "apps", Kind: "ReplicaSet", Name: "web-5d8"}
	depWeb = Ref{Group: "apps", Kind: "Deployment", Name: "web"}
	stsWeb = Ref{Group: "apps", Kind: "StatefulSet", Name: "web"}
)

func TestMatch(t *testing.T) {
	web := map[string]string{"app": "web"}
	owners := &fakeOwners{up: map[Ref]Ref{rsWeb: depWeb}}
	sels := fakeSelectors{depWeb: "app=web", rsWeb: "app=web,hash=5d8", stsWeb: "app=web"}
	for _, tc := range []struct {
		name    string
		mpas    []*v1alpha1.MultidimPodAutoscaler
		pod     *corev1.Pod
		owners  Owners
		want    string
		wantErr string
	}{
		{name: "pod → ReplicaSet → Deployment", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1", "Deployment", "web", 0)},
			pod: podOwnedBy("ns", web, "apps/v1", "ReplicaSet", "web-5d8"), want: "m"},
		{name: "version of the target does not matter", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1beta2", "Deployment", "web", 0)},
			pod: podOwnedBy("ns", web, "apps/v1", "ReplicaSet", "web-5d8"), want: "m"},
		{name: "MPA on the StatefulSet", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1", "StatefulSet", "web", 0)},
			pod: podOwnedBy("ns", web, "apps/v1", "StatefulSet", "web"), want: "m"},
		{name: "same name, other kind: no match", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1", "StatefulSet", "web", 0)},
			pod: podOwnedBy("ns", web, "apps/v1", "ReplicaSet", "web-5d8")},
		{name: "other namespace: no match", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("other", "m", "apps/v1", "Deployment", "web", 0)},
			pod: podOwnedBy("ns", web, "apps/v1", "ReplicaSet", "web-5d8")},
		{name: "selector does not match the pod's labels", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1", "Deployment", "web", 0)},
			pod: podOwnedBy("ns", map[string]string{"app": "api"}, "apps/v1", "ReplicaSet", "web-5d8")},
		{name: "MPA on the ReplicaSet itself", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1", "ReplicaSet", "web-5d8", 0)},
			pod: podOwnedBy("ns", map[string]string{"app": "web", "hash": "5d8"}, "apps/v1", "ReplicaSet", "web-5d8"), want: "m"},
		{name: "top-most controller wins", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "on-rs", "apps/v1", "ReplicaSet", "web-5d8", time.Hour), newMPA("ns", "on-dep", "apps/v1", "Deployment", "web", 0)},
			pod: podOwnedBy("ns", map[string]string{"app": "web", "hash": "5d8"}, "apps/v1", "ReplicaSet", "web-5d8"), want: "on-dep"},
		{name: "two MPAs on one target: the oldest", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "young", "apps/v1", "Deployment", "web", 0), newMPA("ns", "old", "apps/v1", "Deployment", "web", time.Hour)},
			pod: podOwnedBy("ns", web, "apps/v1", "ReplicaSet", "web-5d8"), want: "old"},
		{name: "bare pod: no match", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1", "Deployment", "web", 0)},
			pod: podOwnedBy("ns", web, "", "", "")},
		{name: "owner lookup fails: error, so the caller fails open", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "apps/v1", "Deployment", "web", 0)},
			pod: podOwnedBy("ns", web, "apps/v1", "ReplicaSet", "web-5d8"), owners: &fakeOwners{err: errors.New("boom")}, wantErr: "boom"},
		{name: "selector lookup fails: error", mpas: []*v1alpha1.MultidimPodAutoscaler{newMPA("ns", "m", "example.com/v1", "Thing", "x", 0)},
			pod: podOwnedBy("ns", web, "example.com/v1", "Thing", "x"), wantErr: "no scale for Thing.example.com/x"},
		{name: "owner cycle ends", mpas: nil,
			pod: podOwnedBy("ns", web, "apps/v1", "ReplicaSet", "a"), owners: &fakeOwners{up: map[Ref]Ref{{Group: "apps", Kind: "ReplicaSet", Name: "a"}: {Group: "apps", Kind: "ReplicaSet", Name: "b"}, {Group: "apps", Kind: "ReplicaSet", Name: "b"}: {Group: "apps", Kind: "ReplicaSet", Name: "a"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.owners
			if o == nil {
				o = owners
			}
			m := &Matcher{MPAs: index(t, tc.mpas...), Owners: o, Selectors: sels}
			got, err := m.Match(context.Background(), tc.pod)
			// From memory: the same answer, or none where a lookup fails.
			cached, ok := m.MatchCached(context.Background(), tc.pod)
			if ok != (tc.wantErr == "") || cached != got {
				t.Errorf("MatchCached: %v, answered %v; want Match's %v, answered %v", cached, ok, got, tc.wantErr == "")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Fatalf("matched %q, want %q", name, tc.want)
			}
		})
	}
}

func TestTargetIndexSkipsUnusable(t *testing.T) {
	m := newMPA("ns", "m", "apps/v1", "Deployment", "web", 0)
	m.Spec.ScaleTargetRef = nil
	if keys, err := TargetIndexFunc(m); err != nil || len(keys) != 0 {
		t.Fatalf("MPA without target indexed as %v, %v", keys, err)
	}
	if keys, _ := TargetIndexFunc("not an MPA"); len(keys) != 0 {
		t.Fatalf("foreign object indexed as %v", keys)
	}
}

func TestMetadataOwners(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rsGVR := FollowedKinds[schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}]
	cached := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-5d8", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}},
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, cached)
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	infs := map[schema.GroupKind]informers.GenericInformer{}
	for gk, gvr := range FollowedKinds {
		infs[gk] = factory.ForResource(gvr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	for gvr, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v not synced", gvr)
		}
	}
	// Created after the informer listed, and never delivered to it: the
	// live GET must find it.
	fresh := cached.DeepCopy()
	fresh.Name = "web-new"
	if _, err := client.Resource(rsGVR).Namespace("ns").(metadatafake.MetadataClient).CreateFake(fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	infs[schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}].Informer().GetStore().Delete(fresh)

	o := NewMetadataOwners(infs, client)
	noClient := NewMetadataOwners(infs, nil)
	for _, tc := range []struct {
		name string
		obj  Ref
		want *Ref
		// wantCached: CachedController answers (with want) with a client
		// for misses, and without one. racy: the fake client's watch may
		// still deliver the object to the informer after the test deleted
		// it from the store, so CachedController may answer or not; if it
		// does, with want.
		wantCached, wantCachedNoClient, racy bool
	}{
		{"cached ReplicaSet", rsWeb, &depWeb, true, true, false},
		{"fresh ReplicaSet from a live GET", Ref{Group: "apps", Kind: "ReplicaSet", Name: "web-new"}, &depWeb, false, true, true},
		{"gone ReplicaSet", Ref{Group: "apps", Kind: "ReplicaSet", Name: "gone"}, nil, false, true, false},
		{"kind not followed", depWeb, nil, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := o.Controller(ctx, "ns", tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if c, ok := o.CachedController("ns", tc.obj); (ok != tc.wantCached && !tc.racy) || (ok && !sameRef(c, tc.want)) {
				t.Errorf("CachedController: %v, answered %v; want %v, answered %v", c, ok, tc.want, tc.wantCached)
			}
			// Without a client the miss is final: Controller would answer
			// nil too.
			if c, ok := noClient.CachedController("ns", tc.obj); ok != tc.wantCachedNoClient || (ok && c != nil && !sameRef(c, tc.want)) {
				t.Errorf("CachedController without a client: %v, answered %v", c, ok)
			}
		})
	}
}

func sameRef(a, b *Ref) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestMatchCachedNeedsAllThree: a lookup without an in-memory form makes
// MatchCached decline, whatever the others could answer.
func TestMatchCachedNeedsAllThree(t *testing.T) {
	owners := &fakeOwners{up: map[Ref]Ref{rsWeb: depWeb}}
	sels := fakeSelectors{depWeb: "app=web"}
	idx := index(t, newMPA("ns", "m", "apps/v1", "Deployment", "web", 0))
	pod := podOwnedBy("ns", map[string]string{"app": "web"}, "apps/v1", "ReplicaSet", "web-5d8")
	for _, tc := range []struct {
		name   string
		m      *Matcher
		wantOK bool
	}{
		{name: "all three", m: &Matcher{MPAs: idx, Owners: owners, Selectors: sels}, wantOK: true},
		{name: "owners without", m: &Matcher{MPAs: idx, Owners: struct{ Owners }{owners}, Selectors: sels}},
		{name: "selectors without", m: &Matcher{MPAs: idx, Owners: owners, Selectors: struct{ Selectors }{sels}}},
		{name: "MPAs without", m: &Matcher{MPAs: struct{ MPAIndex }{idx}, Owners: owners, Selectors: sels}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.m.MatchCached(context.Background(), pod)
			if ok != tc.wantOK || (ok && (got == nil || got.Name != "m")) {
				t.Errorf("MatchCached: %v, answered %v; want m, answered %v", got, ok, tc.wantOK)
			}
		})
	}
}

// BenchmarkMatch1000 measures a match with 1,000 MPAs cached in one
// namespace: the index makes it independent of the number of MPAs.
func BenchmarkMatch1000(b *testing.B) {
	var ms []*v1alpha1.MultidimPodAutoscaler
	sels := fakeSelectors{}
	up := map[Ref]Ref{}
	for i := range 1000 {
		name := fmt.Sprintf("web-%d", i)
		ms = append(ms, newMPA("ns", name, "apps/v1", "Deployment", name, 0))
		sels[Ref{Group: "apps", Kind: "Deployment", Name: name}] = "app=" + name
		up[Ref{Group: "apps", Kind: "ReplicaSet", Name: name + "-rs"}] = Ref{Group: "apps", Kind: "Deployment", Name: name}
	}
	m := &Matcher{MPAs: index(b, ms...), Owners: &fakeOwners{up: up}, Selectors: sels}
	pod := podOwnedBy("ns", map[string]string{"app": "web-999"}, "apps/v1", "ReplicaSet", "web-999-rs")
	b.ResetTimer()
	for b.Loop() {
		got, err := m.Match(context.Background(), pod)
		if err != nil || got == nil || got.Name != "web-999" {
			b.Fatalf("got %v, %v", got, err)
		}
	}
}
