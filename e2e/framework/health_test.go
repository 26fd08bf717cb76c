package framework

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestUnhealthyNodes: a node counts as healthy only if it is Ready and has
// an InternalIP, the address metrics-server scrapes.
func TestUnhealthyNodes(t *testing.T) {
	node := func(name string, ready corev1.ConditionStatus, addrs ...corev1.NodeAddressType) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: a, Address: "127.0.0.1"})
		}
		return n
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want []string
	}{
		{"ready with both addresses", node("n", corev1.ConditionTrue, corev1.NodeInternalIP, corev1.NodeHostName), nil},
		{"ready with an InternalIP only", node("n", corev1.ConditionTrue, corev1.NodeInternalIP), nil},
		{"addresses deleted", node("n", corev1.ConditionTrue), []string{"n has no InternalIP"}},
		{"a Hostname only", node("n", corev1.ConditionTrue, corev1.NodeHostName), []string{"n has no InternalIP"}},
		{"status unknown", node("n", corev1.ConditionUnknown, corev1.NodeInternalIP), []string{"n is not Ready"}},
		{"both", node("n", corev1.ConditionFalse), []string{"n has no InternalIP", "n is not Ready"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := &Testbed{Client: fake.NewClientset(tc.node)}
			got, err := tb.unhealthyNodes(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("unhealthyNodes = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNodeIP: the nodes' address is the host of AWARE_KWOK_URL.
func TestNodeIP(t *testing.T) {
	for _, tc := range []struct {
		url, want string
		wantErr   bool
	}{
		{"https://127.0.0.1:18405", "127.0.0.1", false},
		{"https://localhost:18405", "", true},
		{"", "", true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			tb := &Testbed{Env: map[string]string{"AWARE_KWOK_URL": tc.url}}
			got, err := tb.nodeIP()
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("nodeIP() = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
