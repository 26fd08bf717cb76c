package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"sane", Options{QPS: 20, Burst: 40}, true},
		{"zero qps", Options{QPS: 0, Burst: 40}, false},
		{"zero burst", Options{QPS: 5, Burst: 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.Validate(); (err == nil) != tc.ok {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestNewClients(t *testing.T) {
	if _, err := NewClients(Options{Kubeconfig: filepath.Join(t.TempDir(), "missing"), QPS: 1, Burst: 1}, "aware-test"); err == nil || !strings.Contains(err.Error(), "loading kubeconfig") {
		t.Fatalf("missing kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClients(Options{Kubeconfig: path, QPS: 7, Burst: 9}, "aware-test")
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.QPS != 7 || c.Config.Burst != 9 || !strings.HasSuffix(c.Config.UserAgent, "/aware-test") || c.Kube == nil || c.MPA == nil || c.Targets == nil {
		t.Fatalf("clients: qps %v burst %v agent %q", c.Config.QPS, c.Config.Burst, c.Config.UserAgent)
	}
}

// An event recorded after the component's context is cancelled (as leader
// election does when it releases the lease during shutdown) still reaches
// the API server; before, the broadcaster died with the context.
func TestRecorderOutlivesContext(t *testing.T) {
	client := fake.NewClientset()
	c := &Clients{Kube: client}
	ctx, cancel := context.WithCancel(context.Background())
	rec, stop, err := c.NewRecorder(ctx, "aware-test")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cancel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	rec.Event(pod, corev1.EventTypeNormal, "StoppedLeading", "released the lease")
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) == 1 && evs.Items[0].Reason == "StoppedLeading" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event after cancel never recorded: %d events", len(evs.Items))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
