//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

var vpaGVR = schema.GroupVersionResource{Group: "autoscaling.k8s.io", Version: "v1", Resource: "verticalpodautoscalers"}

// installVPACRD installs a schema-less VerticalPodAutoscaler CRD (no VPA
// runs: the object is what the recommender looks for) unless one exists,
// and removes it at the end if it installed it.
func installVPACRD(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ext, err := apiextensionsclient.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	name := vpaGVR.Resource + "." + vpaGVR.Group
	crd := &apiextensionsv1.CustomResourceDefinition{
		// *.k8s.io groups need this annotation; "unapproved, ..." is
		// accepted (and marks the API as not approved).
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"api-approved.kubernetes.io": "unapproved, a stand-in for the VPA CRD in the e2e"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: vpaGVR.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: vpaGVR.Resource, Singular: "verticalpodautoscaler", Kind: "VerticalPodAutoscaler", ListKind: "VerticalPodAutoscalerList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: vpaGVR.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := applyCRD(ctx, ext, crd); err != nil {
		t.Fatalf("VPA CRD: %v", err)
	}
	t.Cleanup(func() {
		if err := crds.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", name, err)
		}
	})
}

// replicaLog records every spec.replicas the Deployment takes.
type replicaLog struct {
	mu     sync.Mutex
	values []int32
}

func (l *replicaLog) see(o any) {
	d, ok := o.(*appsv1.Deployment)
	if !ok || d.Spec.Replicas == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.values); n == 0 || l.values[n-1] != *d.Spec.Replicas {
		l.values = append(l.values, *d.Spec.Replicas)
	}
}

func (l *replicaLog) get() []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.values)
}

func watchReplicas(t *testing.T, ns, name string) *replicaLog {
	t.Helper()
	l := &replicaLog{}
	lw := cache.NewListWatchFromClient(tb.Client.AppsV1().RESTClient(), "deployments", ns, fields.OneTermEqualSelector("metadata.name", name))
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &appsv1.Deployment{},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: l.see, UpdateFunc: func(_, o any) { l.see(o) }},
	})
	stop := make(chan struct{})
	go ctrl.Run(stop)
	t.Cleanup(func() { close(stop) })
	return l
}

// TestRivalAutoscalers puts an HPA (which the controller-manager runs for
// real) and a VPA on an autoscaler's target: the autoscaler reports them
// in ConfigUnsupported, leaves the replicas to the HPA and the pod
// resources to the VPA, and the replica count does not flap; once the HPA
// and the VPA are deleted, the autoscaler takes over.
func TestRivalAutoscalers(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "rivals")
	const app = "contested"
	installVPACRD(t)
	createLoopDeployment(t, ctx, ns, app)
	runEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": app}), baseRate)
	replicas := watchReplicas(t, ns, app)

	// The HPA pins the count at 3; this autoscaler's minReplicas is 4, so
	// an updater that did not stand aside would raise the count at once
	// (a count below minReplicas is brought to it), and a fight would show.
	hpas := tb.Client.AutoscalingV2().HorizontalPodAutoscalers(ns)
	if _, err := hpas.Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: app + "-hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
			MinReplicas:    ptr.To[int32](3), MaxReplicas: 3,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HPA: %v", err)
	}
	dyn, err := dynamic.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	vpas := dyn.Resource(vpaGVR).Namespace(ns)
	vpa := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
		"metadata": map[string]any{"name": app + "-vpa"},
		"spec": map[string]any{
			"targetRef":    map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
			"updatePolicy": map[string]any{"updateMode": "Auto"},
		},
	}}
	framework.Eventually(t, 30*time.Second, "the VPA CRD to serve", func(ctx context.Context) (bool, error) {
		_, err := vpas.Create(ctx, vpa, metav1.CreateOptions{})
		return err == nil, err
	})
	framework.Eventually(t, 60*time.Second, "the HPA to set 3 replicas", func(context.Context) (bool, error) {
		got := replicas.get()
		return len(got) > 0 && got[len(got)-1] == 3, fmt.Errorf("replicas %v", got)
	})

	getMPA := createMPA(t, ns, mpaManifest{name: app, mode: v1alpha1.UpdateModeAuto, maxCPU: "500m", maxMemory: "1Gi", minReplicas: 4, maxReplicas: 6})
	rec := startRecommender(t, ns, "--recommender-interval=5s")
	upd := startUpdater(t, ns, "aware-admission-controller-"+ns, "--update-interval=5s")

	if !t.Run("the rivals are reported and left their dimensions", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		framework.Eventually(t, 3*time.Minute, "ConfigUnsupported/ConflictingAutoscaler naming the HPA and the VPA", func(ctx context.Context) (bool, error) {
			rec.running(t)
			m, err := getMPA(ctx)
			if err != nil {
				return false, err
			}
			c := condition(m, v1alpha1.ConfigUnsupported)
			if c == nil || c.Status != corev1.ConditionTrue || c.Reason != mpa.ReasonConflictingAutoscaler {
				return false, fmt.Errorf("ConfigUnsupported %+v", c)
			}
			for _, want := range []string{"HorizontalPodAutoscaler " + app + "-hpa (replicas)", "VerticalPodAutoscaler " + app + "-vpa (pod resources)"} {
				if !strings.Contains(c.Message, want) {
					return false, fmt.Errorf("message %q lacks %q", c.Message, want)
				}
			}
			if m.Status.DesiredReplicas != 0 || m.Status.Recommendation != nil {
				return false, fmt.Errorf("contested parts written: desired %d, recommendation %+v", m.Status.DesiredReplicas, m.Status.Recommendation)
			}
			return m.Status.RecommendationTime != nil, fmt.Errorf("no recommendationTime")
		})
		events, err := tb.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + mpa.ReasonConflictingAutoscaler})
		if err != nil || len(events.Items) == 0 || events.Items[0].Type != corev1.EventTypeWarning {
			t.Errorf("no warning event %s: %v %v", mpa.ReasonConflictingAutoscaler, events, err)
		}
		// Nothing flaps: for several updater and recommender loops, the
		// count stays the HPA's.
		before := len(replicas.get())
		time.Sleep(30 * time.Second)
		upd.running(t)
		if got := replicas.get(); len(got) != before || got[len(got)-1] != 3 {
			t.Errorf("replicas %v: changed while the HPA owns them", got)
		}
		if n := mustMetric(t, upd, "aware_updater_skips_total", "reason=RivalAutoscaler"); n == 0 {
			t.Error("the updater never left the replicas to the rival")
		}
	}) {
		t.FailNow()
	}

	t.Run("after the rivals are deleted, the autoscaler takes over", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		if err := hpas.Delete(ctx, app+"-hpa", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := vpas.Delete(ctx, app+"-vpa", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var desired int32
		framework.Eventually(t, time.Minute, "ConfigUnsupported=False and a whole recommendation", func(ctx context.Context) (bool, error) {
			m, err := getMPA(ctx)
			if err != nil {
				return false, err
			}
			if c := condition(m, v1alpha1.ConfigUnsupported); c == nil || c.Status != corev1.ConditionFalse {
				return false, fmt.Errorf("ConfigUnsupported %+v", c)
			}
			if m.Status.DesiredReplicas == 0 || m.Status.Recommendation == nil {
				return false, fmt.Errorf("desired %d, recommendation %+v", m.Status.DesiredReplicas, m.Status.Recommendation)
			}
			desired = m.Status.DesiredReplicas
			return true, nil
		})
		if desired < 4 {
			t.Fatalf("desiredReplicas %d below the autoscaler's minReplicas 4", desired)
		}
		framework.Eventually(t, 2*time.Minute, fmt.Sprintf("the updater to scale to the autoscaler's %d", desired), func(context.Context) (bool, error) {
			upd.running(t)
			got := replicas.get()
			return got[len(got)-1] == desired, fmt.Errorf("replicas %v", got)
		})
	})
}
