//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
)

// mpaManifest is the MPA every loop test creates: named like the Deployment
// it scales, sizing CPU and memory of all containers from minCPU and
// minMemory (10m and 32Mi when empty) up to maxCPU and maxMemory, with
// replicas between minReplicas and
// maxReplicas. What the tests add goes in global (more keys of
// spec.constraints.global, indented six spaces) and spec (more keys of
// spec, indented two spaces); both end in a newline when not empty.
type mpaManifest struct {
	name                     string
	mode                     v1alpha1.UpdateMode
	minCPU, minMemory        string
	maxCPU, maxMemory        string
	minReplicas, maxReplicas int32
	global, spec             string
}

// yaml renders the manifest. The update mode is quoted: unquoted, YAML
// reads Off and On as booleans.
func (m mpaManifest) yaml() []byte {
	return fmt.Appendf(nil, `
apiVersion: autoscaling.aware.dev/v1alpha1
kind: MultidimPodAutoscaler
metadata:
  name: %[1]s
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: %[1]s
  policy:
    updateMode: %[2]q
  resourcePolicy:
    containerPolicies:
    - containerName: '*'
      minAllowed: {cpu: %[9]s, memory: %[10]s}
      maxAllowed: {cpu: %[3]s, memory: %[4]s}
      controlledResources: ["cpu", "memory"]
  constraints:
    global:
      minReplicas: %[5]d
      maxReplicas: %[6]d
%[7]s%[8]s`, m.name, string(m.mode), m.maxCPU, m.maxMemory, m.minReplicas, m.maxReplicas, m.global, m.spec,
		cmp.Or(m.minCPU, "10m"), cmp.Or(m.minMemory, "32Mi"))
}

// createMPA creates the MPA m through the dynamic client (as a user's
// manifest would be, unknown fields and all) and returns a getter for it.
func createMPA(t *testing.T, ns string, m mpaManifest) func(context.Context) (*v1alpha1.MultidimPodAutoscaler, error) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(m.yaml(), &obj); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(mpaGVR).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MPA: %v", err)
	}
	mpaClient, err := versioned.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (*v1alpha1.MultidimPodAutoscaler, error) {
		return mpaClient.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Get(ctx, m.name, metav1.GetOptions{})
	}
}

// createLoopDeployment creates the Deployment name with two pods of
// smokeDeployment's container, given room to grow (limits of 1 CPU and
// 512Mi, 128Mi of memory requested), and waits for both pods to run.
func createLoopDeployment(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	dep := smokeDeployment(name, 2)
	c := &dep.Spec.Template.Spec.Containers[0]
	c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
	c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("512Mi")
	if _, err := tb.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	if _, err := tb.WaitForRunningPods(ctx, ns, "app="+name, 2, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}
