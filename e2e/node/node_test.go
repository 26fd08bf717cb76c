//go:build e2enode

// Package node runs the install in deploy/ as real pods: containerd, runc and
// a kubelet (hack/node/up.sh) joined to the loopback testbed, the images of
// `make images` imported into containerd. make e2e-node runs it; it is not
// part of make e2e, which has no container runtime.
package node

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var tb *framework.Testbed

func TestMain(m *testing.M) {
	flag.Parse() // for DumpLogsBeforeTimeout's -test.timeout
	var err error
	if tb, err = framework.Load(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e-node: %v\n", err)
		os.Exit(1)
	}
	// The real node's containerd and kubelet (hack/node/lib.sh's
	// NODE_LOGS), shown with the testbed's when a test fails.
	tb.AddLogDir(filepath.Join(tb.Dir, "node", "logs"))
	stopWatch := tb.DumpLogsBeforeTimeout(os.Stderr, filepath.Join(tb.Dir, "node", "logs"))
	code := m.Run()
	stopWatch()
	os.Exit(code)
}

// TestInstallRunsAsPods applies what `kubectl apply -k deploy/` applies, with
// the overrides this node needs (nodeinstall.Overrides: nothing else
// differs), and waits for each component's pod to run from its image on the
// real node and pass its readiness probe, which the kubelet sends to the
// component's /readyz: a component is ready once it has reached the
// apiserver with its own ServiceAccount's token and, where it leads, taken
// its Lease.
func TestInstallRunsAsPods(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	env, err := nodeinstall.EnvFrom(tb)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	in := &nodeinstall.Installer{TB: tb, Env: env, Repo: root, FieldManager: "aware-e2e-node"}
	ctx := context.Background()
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := in.Uninstall(c); err != nil {
			t.Errorf("uninstall: %v", err)
		}
	})
	// After the uninstall's cleanup, so that it runs before it: the logs
	// of the components running as pods, which no file here holds.
	tb.PodLogsOnFailure(t, nodeinstall.Namespace)
	if _, err := in.Install(ctx); err != nil {
		t.Fatal(err)
	}
	pods, err := tb.Client.CoreV1().Pods(nodeinstall.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pods: %s", nodeinstall.DescribePods(pods.Items))
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			// The kubelet ran the image imported from make images.
			if !strings.HasSuffix(cs.Image, ":"+env.Tag) || !strings.Contains(cs.ImageID, "sha256:") {
				t.Errorf("pod %s container %s runs image %q (%s), want the imported :%s", p.Name, cs.Name, cs.Image, cs.ImageID, env.Tag)
			}
		}
	}
	usageReachesRecommender(t, in)
	realWorkloadScales(t, in)
	oomAtStartRecovers(t, in)
}

// kubectl runs in's kubectl, failing t on error.
func kubectl(t *testing.T, in *nodeinstall.Installer, stdin io.Reader, args ...string) []byte {
	t.Helper()
	out, err := in.Kubectl(context.Background(), stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// usageReachesRecommender: the real node's pods are measured. The node has
// the InternalIP hack/node/up.sh publishes (the kubelet registers none for
// a loopback --node-ip), metrics-server scrapes its kubelet, and the
// recommender, running as a pod, reads a real pod's usage: an MPA over a
// one-pod Deployment (updateMode Off, so nothing acts on it) reports a
// current CPU metric and ScalingActive=True. Before the address was
// published, every real pod stayed at MetricsMissing while readiness alone
// stayed green.
func usageReachesRecommender(t *testing.T, in *nodeinstall.Installer) {
	env := in.Env
	t.Helper()
	ctx := context.Background()
	node, err := tb.Client.CoreV1().Nodes().Get(ctx, env.Node, metav1.GetOptions{})
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
		t.Fatalf("node %s has addresses %+v, want InternalIP 127.0.0.1", env.Node, node.Status.Addresses)
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
`, env.Node)
	kubectl(t, in, strings.NewReader(manifest), "apply", "-f", "-")
	t.Cleanup(func() {
		kubectl(t, in, strings.NewReader(manifest), "delete", "--ignore-not-found", "--wait=false", "-f", "-")
	})
	var last mpaStatus
	err = framework.WaitFor(ctx, 3*time.Minute, 5*time.Second, "the recommender reads the probe pod's usage", func(ctx context.Context) (bool, error) {
		if err := json.Unmarshal(kubectl(t, in, nil, "get", "mpa", "-n", "default", "usage-probe", "-o", "json"), &last); err != nil {
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
	t.Logf("usage reached the recommender: conditions %+v, %d current metrics", last.Status.Conditions, len(last.Status.CurrentMetrics))
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
