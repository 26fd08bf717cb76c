//go:build benchvpa

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

var (
	mpaGVR = schema.GroupVersionResource{Group: "autoscaling.aware.dev", Version: "v1alpha1", Resource: "multidimpodautoscalers"}
	vpaGVR = schema.GroupVersionResource{Group: "autoscaling.k8s.io", Version: "v1", Resource: "verticalpodautoscalers"}
)

// skippedKinds are not applied from the manifests: the components run as
// local processes, and a webhook configuration pointing at a Service that
// does not exist would fail every pod creation.
var skippedKinds = map[string]bool{"Deployment": true, "Service": true, "PodDisruptionBudget": true,
	"PersistentVolumeClaim": true, "MutatingWebhookConfiguration": true, "Kustomization": true}

// applyManifests server-side applies every object of the YAML files except
// skippedKinds, in order.
func applyManifests(ctx context.Context, dyn dynamic.Interface, disc discovery.DiscoveryInterface, files ...string) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 || skippedKinds[u.GetKind()] {
				continue
			}
			gvk := u.GroupVersionKind()
			var mapping *schema.GroupVersionResource
			// A CRD applied a moment ago may take a few seconds to be served.
			for i := 0; ; i++ {
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err == nil {
					mapping = &m.Resource
					break
				}
				if i == 30 {
					return fmt.Errorf("%s: %s: %w", f, gvk, err)
				}
				mapper.Reset()
				time.Sleep(time.Second)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(*mapping)
			if u.GetNamespace() != "" {
				ri = dyn.Resource(*mapping).Namespace(u.GetNamespace())
			}
			if _, err := ri.Apply(ctx, u.GetName(), &u, metav1.ApplyOptions{FieldManager: "bench-vpa", Force: true}); err != nil {
				return fmt.Errorf("%s: apply %s %s: %w", f, gvk.Kind, u.GetName(), err)
			}
		}
	}
	return nil
}

// waitServed waits until the API server serves gvr (a CRD just applied).
func waitServed(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) error {
	for i := 0; i < 60; i++ {
		if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("%s not served after 60s", gvr)
}

// A target is a pair of identical Deployments in one namespace, a-00000
// with an MPA and v-00000 with a VPA (both in Recreate mode, the same
// resource policy), each with replicas pods whose KWOK usage is fixed by
// annotations. Not one Deployment under both: our recommender reports a VPA
// on its target as a conflicting autoscaler and leaves it the pod
// resources, so it would skip the very work being compared.
const (
	benchNS       = "bench-vpa"
	containerName = "app"
)

// awareName and vpaName name the two Deployments (and their autoscalers)
// of target i.
func awareName(i int) string { return fmt.Sprintf("a-%05d", i) }
func vpaName(i int) string   { return fmt.Sprintf("v-%05d", i) }

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name, "bench": "vpa"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					"kwok.x-k8s.io/usage-cpu": "150m", "kwok.x-k8s.io/usage-memory": "120Mi",
				}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: containerName, Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi"),
						}},
					}},
					TerminationGracePeriodSeconds: ptr.To(int64(0)),
				},
			},
		},
	}
}

var containerPolicy = map[string]any{
	"containerName": "*",
	"minAllowed":    map[string]any{"cpu": "50m", "memory": "50Mi"},
	"maxAllowed":    map[string]any{"cpu": "2", "memory": "2Gi"},
}

func targetRef(name string) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
}

func mpaObject(name string, replicas int32) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.aware.dev/v1alpha1", "kind": "MultidimPodAutoscaler",
		"metadata": map[string]any{"name": name, "namespace": benchNS},
		"spec": map[string]any{
			"scaleTargetRef": targetRef(name),
			"policy":         map[string]any{"updateMode": "Recreate"},
			// Fixed replicas: the comparison is of the vertical work both
			// sides do; no horizontal scaling moves the pods under them.
			"constraints":    map[string]any{"global": map[string]any{"minReplicas": int64(replicas), "maxReplicas": int64(replicas)}},
			"resourcePolicy": map[string]any{"containerPolicies": []any{containerPolicy}},
		},
	}}
}

func vpaObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
		"metadata": map[string]any{"name": name, "namespace": benchNS},
		"spec": map[string]any{
			"targetRef":      targetRef(name),
			"updatePolicy":   map[string]any{"updateMode": "Recreate"},
			"resourcePolicy": map[string]any{"containerPolicies": []any{containerPolicy}},
		},
	}}
}

// ensureNamespace creates the bench namespace with a PodDisruptionBudget
// that refuses every eviction: both updaters do their whole loop and ask
// for evictions, but no pod is replaced under the measurement.
func ensureNamespace(ctx context.Context, kc kubernetes.Interface) error {
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for i := 0; ; i++ {
		if _, err = kc.CoreV1().ServiceAccounts(benchNS).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if i == 60 {
			return fmt.Errorf("default ServiceAccount of %s: %w", benchNS, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, err = kc.PolicyV1().PodDisruptionBudgets(benchNS).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "no-evictions"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "vpa"}},
			MinAvailable: ptr.To(intstr.FromString("100%")),
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// createTargets creates targets [from, to): the MPA's Deployment and MPA
// and, if vpa, the VPA's Deployment and VPA, with workers in parallel, and
// waits until wantPods pods of the namespace run.
func createTargets(ctx context.Context, kc kubernetes.Interface, dyn dynamic.Interface, from, to int, replicas int32, vpa bool, wantPods int, log func(string, ...any)) error {
	if from >= to {
		return nil
	}
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	create := func(what, name string, f func() error) bool {
		if err := createIgnoringExists(f); err != nil {
			errs <- fmt.Errorf("%s %s: %w", what, name, err)
			return false
		}
		return true
	}
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				a, v := awareName(i), vpaName(i)
				if !create("deployment", a, func() error {
					_, err := kc.AppsV1().Deployments(benchNS).Create(ctx, deployment(a, replicas), metav1.CreateOptions{})
					return err
				}) || !create("mpa", a, func() error {
					_, err := dyn.Resource(mpaGVR).Namespace(benchNS).Create(ctx, mpaObject(a, replicas), metav1.CreateOptions{})
					return err
				}) {
					return
				}
				if vpa && (!create("deployment", v, func() error {
					_, err := kc.AppsV1().Deployments(benchNS).Create(ctx, deployment(v, replicas), metav1.CreateOptions{})
					return err
				}) || !create("vpa", v, func() error {
					_, err := dyn.Resource(vpaGVR).Namespace(benchNS).Create(ctx, vpaObject(v), metav1.CreateOptions{})
					return err
				})) {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	log("created targets %d..%d in %s; waiting for %d running pods", from, to-1, time.Since(start).Round(time.Second), wantPods)
	return waitRunning(ctx, kc, wantPods, log)
}

func createIgnoringExists(create func() error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = create()
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err):
			time.Sleep(time.Duration(attempt+1) * time.Second)
		default:
			return err
		}
	}
	return err
}

// podsTimeout bounds each wait for pods to run (--pods-timeout).
var podsTimeout = 30 * time.Minute

// allowPending measures a scale whose pods are not all running by
// podsTimeout (--allow-pending); the scale point records how many ran.
var allowPending bool

// waitRunning waits until want pods of the bench namespace are Running.
func waitRunning(ctx context.Context, kc kubernetes.Interface, want int, log func(string, ...any)) error {
	deadline := time.Now().Add(podsTimeout)
	last := -1
	for {
		n, err := runningPods(ctx, kc)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && time.Now().After(deadline):
			return err
		case err != nil:
			// An API server loaded by thousands of pod creations drops a
			// list now and then (an HTTP/2 stream reset): try again.
			log("counting running pods: %v; retrying", err)
			time.Sleep(5 * time.Second)
			continue
		}
		if n >= want {
			return nil
		}
		if n != last {
			log("%d/%d pods running", n, want)
			last = n
		}
		if time.Now().After(deadline) {
			if allowPending {
				log("only %d of %d pods running after --pods-timeout; measuring anyway (--allow-pending)", n, want)
				return nil
			}
			return fmt.Errorf("only %d of %d pods running by the deadline", n, want)
		}
		time.Sleep(5 * time.Second)
	}
}

func runningPods(ctx context.Context, kc kubernetes.Interface) (int, error) {
	n := 0
	opts := metav1.ListOptions{Limit: 2000, ResourceVersion: "0"}
	opts.ResourceVersion = ""
	for {
		list, err := kc.CoreV1().Pods(benchNS).List(ctx, opts)
		if err != nil {
			return 0, err
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				n++
			}
		}
		if list.Continue == "" {
			return n, nil
		}
		opts.Continue = list.Continue
	}
}

// recommendation is what both webhooks are given for the webhook benchmark:
// the same numbers in the same place of each side's status.
func recommendation() map[string]any {
	r := map[string]any{"cpu": "250m", "memory": "256Mi"}
	return map[string]any{"containerRecommendations": []any{map[string]any{
		"containerName": containerName, "target": r, "lowerBound": r, "upperBound": r, "uncappedTarget": r,
	}}}
}

// writeStatuses gives the MPA and the VPA of target i the same
// recommendation.
func writeStatuses(ctx context.Context, dyn dynamic.Interface, i int, replicas int32) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := []any{map[string]any{"type": "RecommendationProvided", "status": "True", "lastTransitionTime": now, "reason": "Bench", "message": "written by bench-vpa"}}
	for _, x := range []struct {
		gvr    schema.GroupVersionResource
		name   string
		status map[string]any
	}{
		{mpaGVR, awareName(i), map[string]any{"recommendation": recommendation(), "conditions": cond, "recommendationTime": now,
			"currentReplicas": int64(replicas), "desiredReplicas": int64(replicas)}},
		{vpaGVR, vpaName(i), map[string]any{"recommendation": recommendation(), "conditions": cond}},
	} {
		ri := dyn.Resource(x.gvr).Namespace(benchNS)
		u, err := ri.Get(ctx, x.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.Object["status"] = x.status
		if _, err := ri.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("status of %s %s: %w", x.gvr.Resource, x.name, err)
		}
	}
	return nil
}

// podTemplateFor returns a real pod of target name as a new pod to admit:
// its owner references lead to the ReplicaSet and the Deployment, as the API
// server's would for a pod the ReplicaSet controller creates.
func podTemplateFor(ctx context.Context, kc kubernetes.Interface, name string) (*corev1.Pod, error) {
	list, err := kc.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no pod of %s", name)
	}
	src := list.Items[0]
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: src.GenerateName, Namespace: benchNS,
			Labels: src.Labels, Annotations: src.Annotations, OwnerReferences: src.OwnerReferences,
		},
		Spec: *src.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = ""
	return pod, nil
}

// podUID gives each admitted pod a distinct UID, as the API server does.
func podUID(i int) types.UID { return types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)) }

// vpaManifestFiles are VPA's CRD and RBAC in its module directory.
func vpaManifestFiles(dir string) []string {
	return []string{filepath.Join(dir, "deploy", "vpa-v1-crd-gen.yaml"), filepath.Join(dir, "deploy", "vpa-rbac.yaml")}
}

// awareManifestFiles are our CRDs and the components' RBAC.
func awareManifestFiles(repo string) ([]string, error) {
	crds, err := filepath.Glob(filepath.Join(repo, "deploy", "crd", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return nil, fmt.Errorf("no CRDs under %s/deploy/crd", repo)
	}
	files := append([]string{filepath.Join(repo, "deploy", "namespace.yaml")}, crds...)
	for _, c := range []string{"recommender", "updater", "admission-controller"} {
		files = append(files, filepath.Join(repo, "deploy", c, c+".yaml"))
	}
	return files, nil
}
