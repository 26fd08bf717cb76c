package rival

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

func obj(k *Kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(k.Resource.GroupVersion().String())
	u.SetKind(k.Kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func ref(apiVersion, kind, name string) map[string]any {
	m := map[string]any{"name": name}
	if apiVersion != "" {
		m["apiVersion"] = apiVersion
	}
	if kind != "" {
		m["kind"] = kind
	}
	return m
}

func kind(k string) *Kind {
	for i := range Kinds {
		if Kinds[i].Kind == k {
			return &Kinds[i]
		}
	}
	panic(k)
}

func newClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	lists := map[schema.GroupVersionResource]string{}
	for _, k := range Kinds {
		lists[k.Resource] = k.ListKind
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)
}

func TestScan(t *testing.T) {
	hpa, vpa, keda, kn := kind("HorizontalPodAutoscaler"), kind("VerticalPodAutoscaler"), kind("ScaledObject"), kind("PodAutoscaler")
	web := mpa.Target{Namespace: "shop", Group: "apps", Kind: "Deployment", Name: "web"}
	db := mpa.Target{Namespace: "shop", Group: "apps", Kind: "StatefulSet", Name: "db"}
	client := newClient(
		obj(hpa, "shop", "web-hpa", map[string]any{"scaleTargetRef": ref("apps/v1", "Deployment", "web")}),
		obj(vpa, "shop", "web-vpa", map[string]any{"targetRef": ref("apps/v1", "Deployment", "web"), "updatePolicy": map[string]any{"updateMode": "Auto"}}),
		// A VPA in mode Off changes nothing.
		obj(vpa, "shop", "web-vpa-off", map[string]any{"targetRef": ref("apps/v1", "Deployment", "web"), "updatePolicy": map[string]any{"updateMode": "Off"}}),
		// KEDA's defaults: Deployment in apps/v1.
		obj(keda, "shop", "web-keda", map[string]any{"scaleTargetRef": ref("", "", "web")}),
		obj(kn, "shop", "db-kpa", map[string]any{"scaleTargetRef": ref("apps/v1", "StatefulSet", "db")}),
		// Same name, other namespace or kind: not a rival of web.
		obj(hpa, "other", "web-hpa", map[string]any{"scaleTargetRef": ref("apps/v1", "Deployment", "web")}),
		obj(hpa, "shop", "web-rs", map[string]any{"scaleTargetRef": ref("apps/v1", "ReplicaSet", "web")}),
		// No target.
		obj(hpa, "shop", "broken", map[string]any{}),
	)
	got, err := NewScanner(client, nil).Scan(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target mpa.Target
		want   string
	}{
		{web, "[HorizontalPodAutoscaler web-hpa ScaledObject web-keda VerticalPodAutoscaler web-vpa]"},
		{db, "[PodAutoscaler db-kpa]"},
		{mpa.Target{Namespace: "other", Group: "apps", Kind: "Deployment", Name: "web"}, "[HorizontalPodAutoscaler web-hpa]"},
		{mpa.Target{Namespace: "shop", Group: "apps", Kind: "Deployment", Name: "api"}, "[]"},
	} {
		if s := fmt.Sprint(got[tc.target]); s != tc.want {
			t.Errorf("%v: %s, want %s", tc.target, s, tc.want)
		}
	}
	h, v := Contested(got[web])
	if !h || !v {
		t.Errorf("web contested horizontal %v vertical %v, want both", h, v)
	}
	if h, v := Contested(got[db]); !h || v {
		t.Errorf("db contested horizontal %v vertical %v, want horizontal only", h, v)
	}

	// Scoped to a namespace.
	got, err = NewScanner(client, nil).Scan(context.Background(), "other")
	if err != nil || len(got) != 1 {
		t.Errorf("namespace scan: %v %v", got, err)
	}
}

// TestScanErrors: a kind whose API is not served has no rivals and no
// error; any other failure is reported, with the kinds that could be read.
func TestScanErrors(t *testing.T) {
	hpa := kind("HorizontalPodAutoscaler")
	client := newClient(obj(hpa, "shop", "web-hpa", map[string]any{"scaleTargetRef": ref("apps/v1", "Deployment", "web")}))
	client.PrependReactor("list", "scaledobjects", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "keda.sh", Resource: "scaledobjects"}, "")
	})
	client.PrependReactor("list", "verticalpodautoscalers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "autoscaling.k8s.io", Resource: "verticalpodautoscalers"}, "", errors.New("RBAC"))
	})
	got, err := NewScanner(client, nil).Scan(context.Background(), "")
	if !apierrors.IsForbidden(err) {
		t.Errorf("error %v, want the forbidden VPA list", err)
	}
	if len(got[mpa.Target{Namespace: "shop", Group: "apps", Kind: "Deployment", Name: "web"}]) != 1 {
		t.Errorf("the HPA was not reported beside the failure: %v", got)
	}
}
