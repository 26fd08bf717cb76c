package target

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var (
	stsGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	rsGVK  = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
)

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/web:1"}}},
	}
}

// informedResolver returns a resolver whose apps/v1 kinds are answered by
// synced watches over objs, and the /scale store behind it.
func informedResolver(t *testing.T, start bool, objs ...runtime.Object) (*Resolver, *scaleStore) {
	t.Helper()
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{
		"deployments/elsewhere":  scaleObj("elsewhere", 7, "app=elsewhere"),
		"widgets/w":              scaleObj("w", 2, "app=w"),
		"deployments/noselector": scaleObj("noselector", 2, ""),
	}}
	r := New(staticMapper(deployGVK, stsGVK, rsGVK, crGVK), newScaleClient(st), fakeDiscovery())
	f := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	if err := r.UseInformers(f); err != nil {
		t.Fatal(err)
	}
	if start {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(func() { cancel(); f.Shutdown() })
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				t.Fatalf("%v did not sync", typ)
			}
		}
	}
	return r, st
}

func TestInformedScale(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	objs := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "5"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: sel, Template: podTemplate()}, Status: appsv1.DeploymentStatus{Replicas: 4}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "defaulted", Namespace: "ns"},
			Spec: appsv1.DeploymentSpec{Selector: sel, Template: podTemplate()}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "noselector", Namespace: "ns"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{}, Template: podTemplate()}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](5), Selector: sel, Template: podTemplate()}, Status: appsv1.StatefulSetStatus{Replicas: 5}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "ns"},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: podTemplate()}},
	}
	const wantSel = "app=web,tier in (a,b)"
	for _, tc := range []struct {
		name         string
		ref          *autoscalingv1.CrossVersionObjectReference
		start        bool
		wantReplicas int32
		wantSelector string
		wantResource string
		wantGets     int
		wantErr      error
	}{
		{"deployment from the watch", ref("apps/v1", "Deployment", "web"), true, 3, wantSel, "deployments.apps", 0, nil},
		{"unset replicas are the API's default of 1", ref("apps/v1", "Deployment", "defaulted"), true, 1, wantSel, "deployments.apps", 0, nil},
		{"statefulset from the watch", ref("apps/v1", "StatefulSet", "db"), true, 5, wantSel, "statefulsets.apps", 0, nil},
		{"replicaset scaled to zero", ref("apps/v1", "ReplicaSet", "rs"), true, 0, wantSel, "replicasets.apps", 0, nil},
		{"not in the cache: /scale decides", ref("apps/v1", "Deployment", "elsewhere"), true, 7, "app=elsewhere", "deployments.apps", 1, nil},
		{"missing everywhere: /scale's NotFound", ref("apps/v1", "Deployment", "gone"), true, 0, "", "", 1, ErrTargetNotFound},
		{"other kinds always read /scale", ref("example.com/v1", "Widget", "w"), true, 2, "app=w", "widgets.example.com", 1, nil},
		{"a Deployment of another group is not apps'", ref("example.com/v1", "Deployment", "web"), true, 0, "", "", 0, ErrUnknownKind},
		{"watch not synced: /scale decides", ref("apps/v1", "Deployment", "elsewhere"), false, 7, "app=elsewhere", "deployments.apps", 1, nil},
		{"empty selector: /scale's answer, which Selector refuses", ref("apps/v1", "Deployment", "noselector"), true, 2, "", "deployments.apps", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, st := informedResolver(t, tc.start, objs...)
			s, gr, err := r.GetScale(context.Background(), "ns", tc.ref)
			if st.gets != tc.wantGets {
				t.Errorf("%d /scale reads, want %d", st.gets, tc.wantGets)
			}
			fromWatch := tc.wantGets == 0 && tc.wantErr == nil
			if w, sc := r.Reads(); w+sc != 1 || (w == 1) != fromWatch {
				t.Errorf("Reads() = %d from the watch, %d from /scale; want the watch: %v", w, sc, fromWatch)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Spec.Replicas != tc.wantReplicas || s.Status.Selector != tc.wantSelector || gr.String() != tc.wantResource {
				t.Errorf("got replicas %d selector %q resource %s, want %d %q %s", s.Spec.Replicas, s.Status.Selector, gr, tc.wantReplicas, tc.wantSelector, tc.wantResource)
			}
			sel, err := r.Selector(context.Background(), "ns", tc.ref)
			if tc.wantSelector == "" {
				if !errors.Is(err, ErrNoSelector) {
					t.Errorf("Selector() = %v, %v; want ErrNoSelector", sel, err)
				}
				return
			}
			if err != nil || sel.String() != tc.wantSelector {
				t.Errorf("Selector() = %v, %v; want %q", sel, err, tc.wantSelector)
			}
		})
	}
}

// The watch keeps answers current: a scale change and a selector change
// are seen without a /scale read and without waiting for a selector TTL.
func TestInformedScaleFollowsChanges(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: podTemplate()}}
	client := fake.NewClientset(d)
	st := &scaleStore{objs: map[string]*autoscalingv1.Scale{}}
	r := New(staticMapper(deployGVK), newScaleClient(st), fakeDiscovery())
	f := informers.NewSharedInformerFactory(client, 0)
	if err := r.UseInformers(f); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	// The selector is converted once per cached object: asked for before
	// the update, it must not outlive it.
	for range 2 {
		if sel, err := r.Selector(ctx, "ns", ref("apps/v1", "Deployment", "web")); err != nil || sel.String() != "app=web" {
			t.Fatalf("Selector() = %v, %v before the update", sel, err)
		}
	}

	d = d.DeepCopy()
	d.Spec.Replicas = ptr.To[int32](6)
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web2"}}
	if _, err := client.AppsV1().Deployments("ns").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, _, err := r.GetScale(ctx, "ns", ref("apps/v1", "Deployment", "web"))
		sel, serr := r.Selector(ctx, "ns", ref("apps/v1", "Deployment", "web"))
		if err == nil && serr == nil && s.Spec.Replicas == 6 && sel.String() == "app=web2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache did not follow the update: %v %v %v %v", s, err, sel, serr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.gets != 0 {
		t.Errorf("%d /scale reads, want 0", st.gets)
	}
	// Deleted: the converted selector goes with it.
	if err := client.AppsV1().Deployments("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, _, _, ok := r.cachedScale("ns", ref("apps/v1", "Deployment", "web")); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache did not follow the deletion")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	n := len(r.parsed)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d converted selectors kept after the deletion, want 0", n)
	}
}

// Writes never use the cache: UpdateReplicas reads /scale for its
// resourceVersion even when the watch holds the object.
func TestInformedUpdateReplicasReadsScale(t *testing.T) {
	r, st := informedResolver(t, true, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: podTemplate()}})
	if err := r.UpdateReplicas(context.Background(), "ns", ref("apps/v1", "Deployment", "elsewhere"), 9); err != nil {
		t.Fatal(err)
	}
	if st.gets != 1 || st.updates != 1 || st.objs["deployments/elsewhere"].Spec.Replicas != 9 {
		t.Errorf("gets %d updates %d replicas %d, want 1, 1, 9", st.gets, st.updates, st.objs["deployments/elsewhere"].Spec.Replicas)
	}
}

// The cache holds only what /scale reports; the pod template is dropped.
func TestTrimWorkload(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": "x"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: podTemplate()}}
	got, err := trimWorkload(d)
	if err != nil {
		t.Fatal(err)
	}
	td := got.(*appsv1.Deployment)
	if len(td.Spec.Template.Spec.Containers) != 0 || td.Annotations != nil || td.Labels != nil {
		t.Errorf("not trimmed: %+v", td)
	}
	if *td.Spec.Replicas != 3 || td.Spec.Selector.MatchLabels["app"] != "web" || td.Name != "web" || td.Namespace != "ns" {
		t.Errorf("lost what /scale reports: %+v", td)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: d}
	if got, _ := trimWorkload(tomb); got != tomb {
		t.Errorf("a tombstone changed: %v", got)
	}
}

func TestRegisterMetrics(t *testing.T) {
	r, _ := informedResolver(t, true, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: podTemplate()}})
	reg := prometheus.NewPedanticRegistry()
	if err := r.RegisterMetrics(reg, "recommender"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "web", "elsewhere"} {
		if _, _, err := r.GetScale(context.Background(), "ns", ref("apps/v1", "Deployment", name)); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP aware_recommender_scale_target_reads_total Scale target reads (replicas and selector), by source: a watch of the built-in workload kinds, or the API's /scale subresource.
# TYPE aware_recommender_scale_target_reads_total counter
aware_recommender_scale_target_reads_total{source="api"} 1
aware_recommender_scale_target_reads_total{source="watch"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	if err := r.RegisterMetrics(reg, "recommender"); err == nil {
		t.Error("registering twice succeeded")
	}
}
