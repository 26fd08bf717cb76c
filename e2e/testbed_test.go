//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var tb *framework.Testbed

func TestMain(m *testing.M) {
	flag.Parse() // for DumpLogsBeforeTimeout's -test.timeout
	var err error
	tb, err = framework.Load()
	if err != nil {
		// Not a skip: an e2e run without a testbed has verified nothing.
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	cleanup, err := buildComponents()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building the components: %v\n", err)
		if cleanup != nil {
			cleanup()
		}
		os.Exit(1)
	}
	// Not tb.AddLogDir(logDir): that would show the logs of every test's
	// components on any failure; each test registers its own
	// (startProcess).
	// A test that hangs until -timeout runs no cleanup, so none shows
	// its logs: these are shown before the timeout's panic.
	stopWatch := tb.DumpLogsBeforeTimeout(os.Stderr, logDir)
	code := m.Run()
	stopWatch()
	if code != 0 {
		// Keep the component logs of a failed run for a closer look.
		fmt.Fprintf(os.Stderr, "e2e: component logs kept in %s\n", logDir)
	} else {
		cleanup()
	}
	os.Exit(code)
}

const (
	usageCPUAnnotation    = "kwok.x-k8s.io/usage-cpu"
	usageMemoryAnnotation = "kwok.x-k8s.io/usage-memory"
)

// TestTestbedSmoke checks that each piece of the loopback control plane the
// other e2e tests build on really works: scheduling onto KWOK nodes, the
// metrics pipeline from pod annotations to metrics.k8s.io and Prometheus,
// eviction, in-place resize, and ServiceAccount tokens under RBAC.
func TestTestbedSmoke(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	ctx := context.Background()

	t.Run("nodes ready", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		if len(tb.Nodes) == 0 {
			t.Fatal("the testbed env names no nodes")
		}
		for _, name := range tb.Nodes {
			n, err := tb.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("node %s: %v", name, err)
			}
			if n.Annotations["kwok.x-k8s.io/node"] != "fake" {
				t.Errorf("node %s is not a KWOK node: annotations %v", name, n.Annotations)
			}
			ready := false
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					ready = c.Status == corev1.ConditionTrue
				}
			}
			if !ready {
				t.Errorf("node %s not Ready: %+v", name, n.Status.Conditions)
			}
			if n.Status.Allocatable.Cpu().IsZero() || n.Status.Allocatable.Memory().IsZero() {
				t.Errorf("node %s has no allocatable CPU/memory: %v", name, n.Status.Allocatable)
			}
		}
	})

	ns := tb.CreateNamespace(t, "smoke")
	const app = "smoke"
	selector := "app=" + app
	if _, err := tb.Client.AppsV1().Deployments(ns).Create(ctx, smokeDeployment(app, 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	pods, err := tb.WaitForRunningPods(ctx, ns, selector, 2, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if !slices.Contains(tb.Nodes, p.Spec.NodeName) {
			t.Fatalf("pod %s runs on %q, not on a KWOK node %v", p.Name, p.Spec.NodeName, tb.Nodes)
		}
	}
	target, victim := pods[0].Name, pods[1].Name

	t.Run("pod metrics follow usage annotations", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"250m",%q:"100Mi"}}}`, usageCPUAnnotation, usageMemoryAnnotation)
		if _, err := tb.Client.CoreV1().Pods(ns).Patch(ctx, target, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("annotate pod: %v", err)
		}
		wantCPU, wantMem := resource.MustParse("250m"), resource.MustParse("100Mi")
		framework.Eventually(t, 2*time.Minute, "PodMetrics of "+target+" to show 250m / 100Mi", func(ctx context.Context) (bool, error) {
			pm, err := tb.Metrics.MetricsV1beta1().PodMetricses(ns).Get(ctx, target, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if len(pm.Containers) != 1 {
				return false, fmt.Errorf("%d containers in PodMetrics", len(pm.Containers))
			}
			cpu, mem := pm.Containers[0].Usage.Cpu(), pm.Containers[0].Usage.Memory()
			// CPU is a rate metrics-server derives from a cumulative counter
			// sampled at two instants, so it is only close to the annotation.
			if math.Abs(float64(cpu.MilliValue()-wantCPU.MilliValue())) > 0.1*float64(wantCPU.MilliValue()) || mem.Cmp(wantMem) != 0 {
				return false, fmt.Errorf("usage cpu=%s memory=%s", cpu, mem)
			}
			return true, nil
		})
	})

	t.Run("prometheus scrapes kubelet resource metrics", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		q := fmt.Sprintf(`container_cpu_usage_seconds_total{namespace=%q,pod=%q}`, ns, target)
		framework.Eventually(t, 90*time.Second, "Prometheus series "+q, func(ctx context.Context) (bool, error) {
			s, err := tb.PromQuery(ctx, q)
			if err != nil {
				return false, err
			}
			if len(s) == 0 {
				return false, fmt.Errorf("no series yet")
			}
			if s[0].Metric["job"] != "kubelet" || s[0].Metric["container"] != app {
				return false, fmt.Errorf("%w: unexpected labels %v", framework.ErrPermanent, s[0].Metric)
			}
			return true, nil
		})
		up, err := tb.PromQuery(ctx, `up{job="kubelet"}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(up) != len(tb.Nodes) {
			t.Errorf("kubelet job has %d targets, want one per node (%d)", len(up), len(tb.Nodes))
		}
	})

	t.Run("eviction API evicts and the pod is replaced", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		err := tb.Client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: victim, Namespace: ns},
		})
		if err != nil {
			t.Fatalf("evict %s: %v", victim, err)
		}
		framework.Eventually(t, 60*time.Second, "evicted pod gone and replaced", func(ctx context.Context) (bool, error) {
			_, err := tb.Client.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
			if err == nil {
				return false, fmt.Errorf("%s still exists", victim)
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
			running, err := tb.RunningPods(ctx, ns, selector)
			if err != nil {
				return false, err
			}
			if len(running) != 2 {
				return false, fmt.Errorf("%d running pods", len(running))
			}
			return true, nil
		})
	})

	t.Run("in-place resize is accepted and acknowledged", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"requests":{"cpu":"200m"},"limits":{"cpu":"800m"}}}]}}`, app)
		p, err := tb.Client.CoreV1().Pods(ns).Patch(ctx, target, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
		if err != nil {
			t.Fatalf("resize %s: %v", target, err)
		}
		if got := p.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "200m" {
			t.Fatalf("after resize the spec requests cpu=%s, want 200m", got)
		}
		framework.Eventually(t, 30*time.Second, "container status of "+target+" to report the new resources", func(ctx context.Context) (bool, error) {
			p, err := tb.Client.CoreV1().Pods(ns).Get(ctx, target, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Status.ObservedGeneration != p.Generation {
				return false, fmt.Errorf("observedGeneration %d, generation %d", p.Status.ObservedGeneration, p.Generation)
			}
			cs := p.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].Resources == nil {
				return false, fmt.Errorf("container statuses %+v", cs)
			}
			req, lim := cs[0].Resources.Requests.Cpu().String(), cs[0].Resources.Limits.Cpu().String()
			if req != "200m" || lim != "800m" || cs[0].AllocatedResources.Cpu().String() != "200m" {
				return false, fmt.Errorf("status resources requests=%s limits=%s allocated=%v", req, lim, cs[0].AllocatedResources)
			}
			return true, nil
		})
	})

	t.Run("serviceaccount token is authenticated and bound by RBAC", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		const sa = "smoke-reader"
		if err := tb.EnsureServiceAccount(ctx, ns, sa); err != nil {
			t.Fatal(err)
		}
		kubeconfig := filepath.Join(t.TempDir(), "sa.kubeconfig")
		if err := tb.WriteServiceAccountKubeconfig(ctx, ns, sa, kubeconfig, time.Hour); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("listing pods without a RoleBinding: got %v, want Forbidden", err)
		}
		if _, err := tb.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// RBAC objects reach the authorizer through an informer.
		framework.Eventually(t, 15*time.Second, "serviceaccount allowed to list pods", func(ctx context.Context) (bool, error) {
			_, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil, err
		})
		if err := c.CoreV1().Pods(ns).Delete(ctx, target, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("deleting a pod with list-only rights: got %v, want Forbidden", err)
		}
	})
}

func smokeDeployment(app string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": app}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// KWOK never pulls it; it only has to be a valid reference.
					Containers: []corev1.Container{{
						Name:  app,
						Image: "registry.invalid/aware/smoke:1",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						ResizePolicy: []corev1.ContainerResizePolicy{
							{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
							{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired},
						},
					}},
				},
			},
		},
	}
}
