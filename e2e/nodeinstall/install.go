// Package nodeinstall installs deploy/ as real pods on the real node that
// hack/node/up.sh joins to the loopback testbed: the four components from
// the images of `make images`, with the overrides the node needs (Overrides:
// nothing else differs). make e2e-node's tests (e2e/node) and make
// bench-real (hack/benchreal) share it, so both measure the install a user
// applies.
package nodeinstall

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// Namespace is where deploy/ installs the components.
const Namespace = "aware-system"

// Env is what hack/e2e-node.sh and hack/bench-real.sh pass: the node's name,
// the tag of the images they imported, and the testbed's ports.
type Env struct {
	Node, Tag, NodeDir string
	APIServerPort      string
	BasePort           int
}

// EnvFrom reads the node's name and the images' tag (AWARE_NODE_NAME,
// AWARE_IMAGES_TAG) and the testbed's ports from tb.
func EnvFrom(tb *framework.Testbed) (Env, error) {
	e := Env{
		Node:    os.Getenv("AWARE_NODE_NAME"),
		Tag:     os.Getenv("AWARE_IMAGES_TAG"),
		NodeDir: filepath.Join(tb.Dir, "node"),
	}
	if e.Node == "" || e.Tag == "" {
		return Env{}, fmt.Errorf("AWARE_NODE_NAME and AWARE_IMAGES_TAG must be set (hack/e2e-node.sh and hack/bench-real.sh set them)")
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(tb.Env["AWARE_APISERVER_URL"], "https://"))
	if err != nil {
		return Env{}, fmt.Errorf("apiserver URL %q: %w", tb.Env["AWARE_APISERVER_URL"], err)
	}
	e.APIServerPort = port
	if e.BasePort, err = strconv.Atoi(tb.Env["AWARE_TESTBED_BASE_PORT"]); err != nil {
		return Env{}, fmt.Errorf("AWARE_TESTBED_BASE_PORT: %w", err)
	}
	return e, nil
}

// Installer applies deploy/ on the real node and removes it again.
type Installer struct {
	TB   *framework.Testbed
	Env  Env
	Repo string // the repository's root, holding deploy/
	// Mutate, if set, edits each rendered object after Overrides: a
	// benchmark's own flags (for example a shorter recommender interval).
	Mutate func(*unstructured.Unstructured) error
	// FieldManager of the server-side apply.
	FieldManager string
}

// Install applies what `kubectl apply -k deploy/` applies, with Overrides,
// plus the agent's state volume, and waits until each component's pod runs
// from its image on the node and passes its readiness probe. It returns the
// Deployments' names.
func (in *Installer) Install(ctx context.Context) ([]string, error) {
	objs, err := in.Render(ctx)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	var deployments []string
	for _, o := range objs {
		if err := Overrides(o, in.Env); err != nil {
			return nil, err
		}
		if in.Mutate != nil {
			if err := in.Mutate(o); err != nil {
				return nil, err
			}
		}
		if o.GetKind() == "Deployment" {
			deployments = append(deployments, o.GetName())
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	if len(deployments) != 4 {
		return nil, fmt.Errorf("the install has Deployments %v, want the four components", deployments)
	}
	pv, err := in.stateVolume(ctx)
	if err != nil {
		return nil, err
	}
	out.WriteString("---\n")
	out.Write(pv)
	manager := in.FieldManager
	if manager == "" {
		manager = "aware-node-install"
	}
	if _, err := in.Kubectl(ctx, &out, "apply", "--server-side", "--field-manager="+manager, "-f", "-"); err != nil {
		return nil, err
	}
	// One deadline for all four: they start side by side.
	var last string
	err = framework.WaitFor(ctx, 5*time.Minute, 2*time.Second, "the components ready on "+in.Env.Node, func(ctx context.Context) (bool, error) {
		pods, err := in.TB.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		last = DescribePods(pods.Items)
		for _, name := range deployments {
			if !ReadyOn(pods.Items, name, in.Env.Node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w; pods: %s", err, last)
	}
	return deployments, nil
}

// Uninstall deletes the namespace and the webhook registration, and waits
// until the namespace is gone: deleting it stops the pods through the
// kubelet, so that hack/node/down.sh finds no container left to kill. The
// state volume is deleted too.
func (in *Installer) Uninstall(ctx context.Context) error {
	c := in.TB.Client
	if err := c.CoreV1().Namespaces().Delete(ctx, Namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "aware-admission-controller", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := framework.WaitFor(ctx, 2*time.Minute, time.Second, Namespace+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return err
	}
	return in.deleteStateVolume(ctx)
}

// ReadyOn: a pod of Deployment name (by its app.kubernetes.io/name label)
// is Ready on node.
func ReadyOn(pods []corev1.Pod, name, node string) bool {
	for i := range pods {
		p := &pods[i]
		if p.Labels["app.kubernetes.io/name"] == name && p.Spec.NodeName == node && framework.PodReady(p) {
			return true
		}
	}
	return false
}

// DescribePods is one line per pod: phase, the conditions not True, and
// each container's state.
func DescribePods(pods []corev1.Pod) string {
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

// Render is `kubectl kustomize deploy/`, as unstructured objects.
func (in *Installer) Render(ctx context.Context) ([]*unstructured.Unstructured, error) {
	out, err := in.Kubectl(ctx, nil, "kustomize", filepath.Join(in.Repo, "deploy"))
	if err != nil {
		return nil, err
	}
	docs, err := framework.Documents(out)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			return nil, err
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// Kubectl runs the testbed's kubectl as its admin, with stdin, and returns
// its output; an error carries its stderr.
func (in *Installer) Kubectl(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(in.TB.Env["AWARE_TESTBED_BIN"], "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+in.TB.KubeconfigPath)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

const stateVolumeName = "aware-node-rl-agent-state"

// stateVolume is the PersistentVolume the rl-agent's claim binds to: the
// testbed has no provisioner, so a hostPath directory on the node, owned by
// the image's user, stands in for a cloud disk.
func (in *Installer) stateVolume(ctx context.Context) ([]byte, error) {
	dir := filepath.Join(in.Env.NodeDir, "pv", "aware-rl-agent-state")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	if err := os.Chown(dir, 65532, 65532); err != nil {
		return nil, err
	}
	pv := &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: stateVolumeName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir},
			},
			ClaimRef: &corev1.ObjectReference{Namespace: Namespace, Name: "aware-rl-agent-state"},
		},
	}
	// A volume left by an interrupted run still names that run's claim (by
	// uid) and would never bind again.
	if err := in.deleteStateVolume(ctx); err != nil {
		return nil, err
	}
	return yaml.Marshal(pv)
}

func (in *Installer) deleteStateVolume(ctx context.Context) error {
	c := in.TB.Client.CoreV1().PersistentVolumes()
	if err := c.Delete(ctx, stateVolumeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return framework.WaitFor(ctx, time.Minute, time.Second, "volume "+stateVolumeName+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.Get(ctx, stateVolumeName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// Overrides are the real node's, all of them. The node has no pod network
// and no kube-proxy (hack/node/up.sh), so every component runs in the
// host's network namespace: on loopback ports of its own instead of the
// manifests' shared :8080/:8081, one replica each (two would need the same
// ports), and with the apiserver's loopback address in place of the
// kubernetes Service's ClusterIP. The agent's Service name resolves to
// 127.0.0.1 through the pod's /etc/hosts, and the webhook's Service becomes
// an ExternalName for localhost, so its certificate names stay those of the
// manifests. The listener flags rewritten are those of framework.Overrides
// with a Listener, shared with the process-based e2e. Everything else
// (ServiceAccounts, RBAC, images, the remaining arguments, probes, security
// contexts) is what deploy/ says.
func Overrides(o *unstructured.Unstructured, env Env) error {
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
				pm["port"] = int64(PortFor(env, "admission-controller", "webhook"))
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
			if err := unstructured.SetNestedField(h.(map[string]any), int64(PortFor(env, "admission-controller", "webhook")),
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

// Components are the four Deployments of deploy/, by their component name.
var Components = []string{"recommender", "updater", "admission-controller", "rl-agent"}

var listeners = []string{"metrics", "health", "webhook", "grpc"}

// PortFor gives each listener of each component its own loopback port,
// after the kubelet's two (base+8, base+9): base+10 to base+25.
func PortFor(env Env, component, listener string) int {
	ci, li := 0, 0
	for i, c := range Components {
		if c == component {
			ci = i
		}
	}
	for i, l := range listeners {
		if l == listener {
			li = i
		}
	}
	return env.BasePort + 10 + ci*len(listeners) + li
}

func deploymentOverrides(d *appsv1.Deployment, env Env) error {
	component := strings.TrimPrefix(d.Name, "aware-")
	one := int32(1)
	d.Spec.Replicas = &one
	ps := &d.Spec.Template.Spec
	ps.HostNetwork = true
	ps.DNSPolicy = corev1.DNSDefault
	ps.NodeSelector = map[string]string{corev1.LabelHostname: env.Node}
	ps.HostAliases = append(ps.HostAliases, corev1.HostAlias{IP: "127.0.0.1", Hostnames: []string{"aware-rl-agent.aware-system.svc"}})
	if len(ps.Containers) != 1 {
		return fmt.Errorf("%d containers, want 1", len(ps.Containers))
	}
	c := &ps.Containers[0]
	image, _, ok := strings.Cut(c.Image, ":")
	if !ok || image != "aware-"+component {
		return fmt.Errorf("image %q, want aware-%s:TAG", c.Image, component)
	}
	c.Image = image + ":" + env.Tag
	c.ImagePullPolicy = corev1.PullNever
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: env.APIServerPort},
	)
	// The listener flags, rewritten as framework.Overrides says (the same
	// list the process-based e2e uses); nothing else.
	args, err := framework.NodeArgs(c.Name, c.Args, func(component, listener string) int { return PortFor(env, component, listener) })
	if err != nil {
		return err
	}
	c.Args = args
	for i := range c.Ports {
		p := &c.Ports[i]
		p.ContainerPort = int32(PortFor(env, component, p.Name))
		p.HostPort = p.ContainerPort
	}
	return nil
}
