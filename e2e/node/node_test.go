//go:build e2enode

// Package node runs the install in deploy/ as real pods: containerd, runc and
// a kubelet (hack/node/up.sh) joined to the loopback testbed, the images of
// `make images` imported into containerd. make e2e-node runs it; it is not
// part of make e2e, which has no container runtime.
package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var tb *framework.Testbed

func TestMain(m *testing.M) {
	var err error
	if tb, err = framework.Load(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e-node: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// nodeEnv is what hack/e2e-node.sh passes: the node's name and the tag of
// the images it imported.
type nodeEnv struct {
	node, tag, nodeDir string
	apiserverPort      string
	basePort           int
}

func loadNodeEnv(t *testing.T) nodeEnv {
	t.Helper()
	e := nodeEnv{
		node:          os.Getenv("AWARE_NODE_NAME"),
		tag:           os.Getenv("AWARE_IMAGES_TAG"),
		nodeDir:       filepath.Join(tb.Dir, "node"),
		apiserverPort: portOf(t, tb.Env["AWARE_APISERVER_URL"]),
	}
	if e.node == "" || e.tag == "" {
		t.Fatal("AWARE_NODE_NAME and AWARE_IMAGES_TAG must be set (hack/e2e-node.sh sets them)")
	}
	var err error
	if e.basePort, err = strconv.Atoi(tb.Env["AWARE_TESTBED_BASE_PORT"]); err != nil {
		t.Fatalf("AWARE_TESTBED_BASE_PORT: %v", err)
	}
	return e
}

func portOf(t *testing.T, url string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	if err != nil {
		t.Fatalf("apiserver URL %q: %v", url, err)
	}
	return port
}

// TestInstallRunsAsPods applies what `kubectl apply -k deploy/` applies, with
// the overrides this node needs (nodeOverrides: nothing else differs), and
// waits for each component's pod to run from its image on the real node and
// pass its readiness probe, which the kubelet sends to the component's
// /readyz: a component is ready once it has reached the apiserver with its
// own ServiceAccount's token and, where it leads, taken its Lease.
func TestInstallRunsAsPods(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	env := loadNodeEnv(t)
	ctx := context.Background()

	objs := render(t)
	var out bytes.Buffer
	var deployments []string
	for _, o := range objs {
		if err := nodeOverrides(o, env); err != nil {
			t.Fatal(err)
		}
		if o.GetKind() == "Deployment" {
			deployments = append(deployments, o.GetName())
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	if len(deployments) != 4 {
		t.Fatalf("the install has Deployments %v, want the four components", deployments)
	}
	stateDir := rlAgentStateVolume(t, env)
	out.WriteString("---\n")
	out.Write(stateDir)

	kubectl(t, &out, "apply", "--server-side", "--field-manager=aware-e2e-node", "-f", "-")
	t.Cleanup(func() {
		// Deleting the namespace stops the pods through the kubelet, so
		// that hack/node/down.sh finds no container left to kill.
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = tb.Client.CoreV1().Namespaces().Delete(c, "aware-system", metav1.DeleteOptions{})
		_ = tb.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(c, "aware-admission-controller", metav1.DeleteOptions{})
		_ = framework.WaitFor(c, 2*time.Minute, time.Second, "aware-system gone", func(ctx context.Context) (bool, error) {
			_, err := tb.Client.CoreV1().Namespaces().Get(ctx, "aware-system", metav1.GetOptions{})
			return err != nil, nil
		})
	})

	// One deadline for all four: they start side by side.
	var last string
	err := framework.WaitFor(ctx, 5*time.Minute, 2*time.Second, "the components ready on "+env.node, func(ctx context.Context) (bool, error) {
		pods, err := tb.Client.CoreV1().Pods("aware-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		last = describePods(pods.Items)
		for _, name := range deployments {
			if !readyOn(pods.Items, name, env.node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v; pods: %s", err, last)
	}
	t.Logf("pods: %s", last)
	pods, err := tb.Client.CoreV1().Pods("aware-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			// The kubelet ran the image imported from make images.
			if !strings.HasSuffix(cs.Image, ":"+env.tag) || !strings.Contains(cs.ImageID, "sha256:") {
				t.Errorf("pod %s container %s runs image %q (%s), want the imported :%s", p.Name, cs.Name, cs.Image, cs.ImageID, env.tag)
			}
		}
	}
	usageReachesRecommender(t, env)
}

// readyOn: a pod of Deployment name (by its app.kubernetes.io/name label)
// is Ready on node.
func readyOn(pods []corev1.Pod, name, node string) bool {
	for i := range pods {
		p := &pods[i]
		if p.Labels["app.kubernetes.io/name"] == name && p.Spec.NodeName == node && framework.PodReady(p) {
			return true
		}
	}
	return false
}

func describePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "[%s node=%q phase=%s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				fmt.Fprintf(&b, " %s waiting %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				fmt.Fprintf(&b, " %s terminated %s (exit %d): %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
			default:
				fmt.Fprintf(&b, " %s running ready=%v restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			}
		}
		b.WriteString("] ")
	}
	return b.String()
}

// render is `kubectl kustomize deploy/`, as unstructured objects.
func render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := kubectl(t, nil, "kustomize", filepath.Join(root, "deploy"))
	docs, err := framework.Documents(out)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			t.Fatal(err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
	return objs
}

func kubectl(t *testing.T, stdin io.Reader, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(tb.Env["AWARE_TESTBED_BIN"], "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+tb.KubeconfigPath)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// rlAgentStateVolume is the PersistentVolume the rl-agent's claim binds to:
// the testbed has no provisioner, so a hostPath directory on the node,
// owned by the image's user, stands in for a cloud disk.
func rlAgentStateVolume(t *testing.T, env nodeEnv) []byte {
	t.Helper()
	dir := filepath.Join(env.nodeDir, "pv", "aware-rl-agent-state")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "aware-e2e-node-rl-agent-state"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir},
			},
			ClaimRef: &corev1.ObjectReference{Namespace: "aware-system", Name: "aware-rl-agent-state"},
		},
	}
	// A volume left by an interrupted run still names that run's claim (by
	// uid) and would never bind again.
	del := func(ctx context.Context) error {
		err := tb.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return framework.WaitFor(ctx, time.Minute, time.Second, "volume "+pv.Name+" gone", func(ctx context.Context) (bool, error) {
			_, err := tb.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	if err := del(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = del(context.Background()) })
	b, err := yaml.Marshal(pv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The overrides of the real node, all of them. The node has no pod network
// and no kube-proxy (hack/node/up.sh), so every component runs in the host's
// network namespace: on loopback ports of its own instead of the manifests'
// shared :8080/:8081, one replica each (two would need the same ports), and
// with the apiserver's loopback address in place of the kubernetes Service's
// ClusterIP. The agent's Service name resolves to 127.0.0.1 through the pod's
// /etc/hosts, and the webhook's Service becomes an ExternalName for
// localhost, so its certificate names stay those of the manifests.
// The listener flags rewritten are those of framework.Overrides with a
// Listener, shared with the process-based e2e. Everything else
// (ServiceAccounts, RBAC, images, the remaining arguments, probes, security
// contexts) is what deploy/ says.
func nodeOverrides(o *unstructured.Unstructured, env nodeEnv) error {
	switch {
	case o.GetKind() == "Deployment":
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			return err
		}
		if err := deploymentOverrides(d, env); err != nil {
			return fmt.Errorf("deployment %s: %w", d.Name, err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
		if err != nil {
			return err
		}
		o.Object = m
	case o.GetKind() == "Service" && o.GetName() == "aware-admission-controller":
		ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
		for _, p := range ports {
			pm := p.(map[string]any)
			if pm["name"] == "webhook" {
				pm["port"] = int64(portFor(env, "admission-controller", "webhook"))
				pm["targetPort"] = pm["port"]
			}
		}
		spec := map[string]any{"type": "ExternalName", "externalName": "localhost", "ports": ports}
		o.Object["spec"] = spec
	case o.GetKind() == "MutatingWebhookConfiguration":
		// The admission controller registers the port it is told
		// (--webhook-service-port); the manifest must say the same or
		// the apply conflicts with the controller's own.
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			if err := unstructured.SetNestedField(h.(map[string]any), int64(portFor(env, "admission-controller", "webhook")),
				"clientConfig", "service", "port"); err != nil {
				return err
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return err
		}
	}
	return nil
}

// portFor gives each listener of each component its own loopback port,
// after the kubelet's two (base+8, base+9).
func portFor(env nodeEnv, component, listener string) int {
	components := []string{"recommender", "updater", "admission-controller", "rl-agent"}
	listeners := []string{"metrics", "health", "webhook", "grpc"}
	ci, li := 0, 0
	for i, c := range components {
		if c == component {
			ci = i
		}
	}
	for i, l := range listeners {
		if l == listener {
			li = i
		}
	}
	return env.basePort + 10 + ci*len(listeners) + li
}

func deploymentOverrides(d *appsv1.Deployment, env nodeEnv) error {
	component := strings.TrimPrefix(d.Name, "aware-")
	one := int32(1)
	d.Spec.Replicas = &one
	ps := &d.Spec.Template.Spec
	ps.HostNetwork = true
	ps.DNSPolicy = corev1.DNSDefault
	ps.NodeSelector = map[string]string{corev1.LabelHostname: env.node}
	ps.HostAliases = append(ps.HostAliases, corev1.HostAlias{IP: "127.0.0.1", Hostnames: []string{"aware-rl-agent.aware-system.svc"}})
	if len(ps.Containers) != 1 {
		return fmt.Errorf("%d containers, want 1", len(ps.Containers))
	}
	c := &ps.Containers[0]
	image, _, ok := strings.Cut(c.Image, ":")
	if !ok || image != "aware-"+component {
		return fmt.Errorf("image %q, want aware-%s:TAG", c.Image, component)
	}
	c.Image = image + ":" + env.tag
	c.ImagePullPolicy = corev1.PullNever
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: env.apiserverPort},
	)
	// The listener flags, rewritten as framework.Overrides says (the same
	// list the process-based e2e uses); nothing else.
	args, err := framework.NodeArgs(c.Name, c.Args, func(component, listener string) int { return portFor(env, component, listener) })
	if err != nil {
		return err
	}
	c.Args = args
	for i := range c.Ports {
		p := &c.Ports[i]
		p.ContainerPort = int32(portFor(env, component, p.Name))
		p.HostPort = p.ContainerPort
	}
	return nil
}

// usageReachesRecommender: the real node's pods are measured. The node has
// the InternalIP hack/node/up.sh publishes (the kubelet registers none for
// a loopback --node-ip), metrics-server scrapes its kubelet, and the
// recommender, running as a pod, reads a real pod's usage: an MPA over a
// one-pod Deployment (updateMode Off, so nothing acts on it) reports a
// current CPU metric and ScalingActive=True. Before the address was
// published, every real pod stayed at MetricsMissing while readiness alone
// stayed green.
func usageReachesRecommender(t *testing.T, env nodeEnv) {
	t.Helper()
	ctx := context.Background()
	node, err := tb.Client.CoreV1().Nodes().Get(ctx, env.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	internal := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = a.Address
		}
	}
	if internal != "127.0.0.1" {
		t.Fatalf("node %s has addresses %+v, want InternalIP 127.0.0.1", env.node, node.Status.Addresses)
	}
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: usage-probe, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: usage-probe}}
  template:
    metadata: {labels: {app: usage-probe}}
    spec:
      hostNetwork: true
      dnsPolicy: Default
      nodeSelector: {kubernetes.io/hostname: %s}
      containers:
      - name: app
        image: docker.io/library/aware-pause:node
        imagePullPolicy: Never
        resources: {requests: {cpu: 10m, memory: 16Mi}}
---
apiVersion: autoscaling.aware.dev/v1alpha1
kind: MultidimPodAutoscaler
metadata: {name: usage-probe, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: usage-probe}
  policy: {updateMode: "Off"}
  constraints: {global: {minReplicas: 1, maxReplicas: 2}}
`, env.node)
	kubectl(t, strings.NewReader(manifest), "apply", "-f", "-")
	t.Cleanup(func() {
		kubectl(t, strings.NewReader(manifest), "delete", "--ignore-not-found", "--wait=false", "-f", "-")
	})
	var last mpaStatus
	err = framework.WaitFor(ctx, 3*time.Minute, 5*time.Second, "the recommender reads the probe pod's usage", func(ctx context.Context) (bool, error) {
		if err := json.Unmarshal(kubectl(t, nil, "get", "mpa", "-n", "default", "usage-probe", "-o", "json"), &last); err != nil {
			return false, err
		}
		active := false
		for _, c := range last.Status.Conditions {
			active = active || (c.Type == "ScalingActive" && c.Status == "True")
		}
		return active && len(last.Status.CurrentMetrics) > 0, nil
	})
	if err != nil {
		cmd := exec.Command(filepath.Join(tb.Env["AWARE_TESTBED_BIN"], "kubectl"), "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+tb.KubeconfigPath)
		metrics, _ := cmd.CombinedOutput()
		t.Fatalf("%v; the MPA's status: %+v; metrics.k8s.io: %s", err, last.Status, metrics)
	}
	t.Logf("usage reached the recommender: %+v", last.Status)
}

// mpaStatus is the part of an MPA's status usageReachesRecommender reads.
type mpaStatus struct {
	Status struct {
		Conditions []struct {
			Type, Status, Reason, Message string
		} `json:"conditions"`
		CurrentMetrics []json.RawMessage `json:"currentMetrics"`
	} `json:"status"`
}
