package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The health of the testbed after a test that injected control-plane
// faults: the tests after it need an API server that reads and writes,
// and nodes that metrics-server can scrape.

// WaitNodesReady waits until every node is Ready and has an InternalIP
// address, the one metrics-server scrapes: without it metrics.k8s.io serves
// no PodMetrics at all.
func (tb *Testbed) WaitNodesReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "every node Ready with an InternalIP", func(ctx context.Context) (bool, error) {
		bad, err := tb.unhealthyNodes(ctx)
		if err != nil {
			return false, err
		}
		return len(bad) == 0, errors.New(strings.Join(bad, "; "))
	})
}

// unhealthyNodes names every node that is not Ready or has no InternalIP.
func (tb *Testbed) unhealthyNodes(ctx context.Context) ([]string, error) {
	nodes, err := tb.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, n := range nodes.Items {
		if !nodeHasAddress(&n, corev1.NodeInternalIP) {
			bad = append(bad, n.Name+" has no InternalIP")
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			bad = append(bad, n.Name+" is not Ready")
		}
	}
	return bad, nil
}

func nodeHasAddress(n *corev1.Node, typ corev1.NodeAddressType) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == typ && a.Address != "" {
			return true
		}
	}
	return false
}

// RestoreControlPlane is for the end of a test that stopped control-plane
// components: it checks that the testbed is whole for the tests after it,
// repairs what it can, and fails the test for each repair, so that a fault
// the test left behind shows in the test that left it rather than in the
// next ones. It checks and repairs:
//   - the API server's /readyz within 2 minutes, else kube-apiserver is
//     restarted (new connections to etcd) and waited for again;
//   - a write: a ConfigMap created and deleted in the default namespace;
//   - every node's InternalIP and Hostname, put back if missing (up.sh
//     creates the nodes with both; KWOK's node-initialize stage, replayed
//     when a node was marked NodeStatusUnknown, deleted them when the
//     Hostname was missing), then every node Ready within a minute.
func (tb *Testbed) RestoreControlPlane(t testing.TB) {
	t.Helper()
	if err := tb.waitReadyz(2 * time.Minute); err != nil {
		t.Errorf("after the faults the API server was not ready within 2m (%v): restarting kube-apiserver", err)
		if err := tb.restartComponent("kube-apiserver"); err != nil {
			t.Errorf("restart kube-apiserver: %v", err)
			return
		}
		if err := tb.waitReadyz(2 * time.Minute); err != nil {
			t.Errorf("the restarted kube-apiserver is not ready: %v", err)
			return
		}
	}
	if err := WaitFor(context.Background(), 2*time.Minute, defaultInterval, "a ConfigMap written and deleted", tb.writeRoundTrip); err != nil {
		t.Errorf("after the faults the API server does not write: %v", err)
	}
	ctx := context.Background()
	nodes, err := tb.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("list nodes: %v", err)
		return
	}
	ip, err := tb.nodeIP()
	if err != nil {
		t.Errorf("the nodes' address: %v", err)
		return
	}
	for _, n := range nodes.Items {
		if nodeHasAddress(&n, corev1.NodeInternalIP) && nodeHasAddress(&n, corev1.NodeHostName) {
			continue
		}
		t.Errorf("after the faults node %s has addresses %v: putting back InternalIP %s and Hostname", n.Name, n.Status.Addresses, ip)
		patch := fmt.Appendf(nil, `{"status":{"addresses":[{"type":"InternalIP","address":%q},{"type":"Hostname","address":%q}]}}`, ip, n.Name)
		if _, err := tb.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("restore the addresses of node %s: %v", n.Name, err)
		}
	}
	if err := WaitFor(ctx, time.Minute, defaultInterval, "every node Ready with an InternalIP", func(ctx context.Context) (bool, error) {
		bad, err := tb.unhealthyNodes(ctx)
		if err != nil {
			return false, err
		}
		return len(bad) == 0, errors.New(strings.Join(bad, "; "))
	}); err != nil {
		t.Errorf("after the faults: %v", err)
	}
}

func (tb *Testbed) waitReadyz(timeout time.Duration) error {
	return WaitFor(context.Background(), timeout, defaultInterval, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		body, err := tb.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(string(body)) == "ok", fmt.Errorf("/readyz: %s", body)
	})
}

// writeRoundTrip creates a ConfigMap in the default namespace and deletes
// it: /readyz can say ok while writes still time out.
func (tb *Testbed) writeRoundTrip(ctx context.Context) (bool, error) {
	cms := tb.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-health-"}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		return false, err
	}
	return true, nil
}

// nodeIP is the address KWOK serves the nodes' kubelet endpoints on, the
// host of AWARE_KWOK_URL (up.sh passes the same to KWOK's --node-ip).
func (tb *Testbed) nodeIP() (string, error) {
	u, err := url.Parse(tb.Env["AWARE_KWOK_URL"])
	if err != nil {
		return "", fmt.Errorf("AWARE_KWOK_URL: %w", err)
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		return ip.String(), nil
	}
	return "", fmt.Errorf("AWARE_KWOK_URL %q has no IP address", tb.Env["AWARE_KWOK_URL"])
}

// restartComponent stops the testbed process name and starts it again as
// StopComponent and Start do, outside a test's own bookkeeping.
func (tb *Testbed) restartComponent(name string) error {
	pid, err := tb.componentPID(name)
	if err != nil {
		return err
	}
	s, err := tb.captureComponent(name, pid)
	if err != nil {
		return err
	}
	if err := stopPID(pid, stopGrace); err != nil {
		return err
	}
	return s.start()
}
