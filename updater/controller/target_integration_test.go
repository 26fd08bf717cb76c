package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakedisco "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	mpafake "github.com/aware-k8s/aware/pkg/generated/clientset/versioned/fake"
	mpalisters "github.com/aware-k8s/aware/pkg/generated/listers/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/podindex"
	"github.com/aware-k8s/aware/pkg/kube/target"
)

// TestWithTargetResolver wires the controller to the real pkg/kube/target
// resolver over client-go's fake scale client: the replica change reaches
// the Deployment's /scale.
func TestWithTargetResolver(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	disco := &fakedisco.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments"}, {Name: "deployments/scale"}}},
	}}}
	scales := &fakescale.FakeScaleClient{}
	current := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "1"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 3}, Status: autoscalingv1.ScaleStatus{Replicas: 3, Selector: "app=web"}}
	var written []int32
	scales.AddReactor("get", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, current.DeepCopy(), nil
	})
	scales.AddReactor("update", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s := a.(clienttesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		written = append(written, s.Spec.Replicas)
		current = s.DeepCopy()
		return true, s, nil
	})
	resolver := target.New(mapper, scales, disco)

	m := newMPA(v1alpha1.UpdateModeAuto, 5, 0)
	mpaIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := mpaIdx.Add(m); err != nil {
		t.Fatal(err)
	}
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podindex.Name: podindex.IndexFunc})
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := New(testConfig(), fake.NewClientset(freshLease(t0)), mpafake.NewSimpleClientset(m),
		mpalisters.NewMultidimPodAutoscalerLister(mpaIdx), podindex.New(podIdx),
		resolver, record.NewFakeRecorder(10), metrics, clocktesting.NewFakePassiveClock(t0.Add(time.Second)))
	c.RunOnce(context.Background())
	if len(written) != 1 || written[0] != 5 {
		t.Fatalf("scale writes = %v, want [5]", written)
	}
}
