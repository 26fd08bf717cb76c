package apiclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
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

// The built-in API groups are asked for protobuf, with JSON as a fallback;
// MultidimPodAutoscalers (a CRD, no protobuf encoding) stay JSON, and so
// does the shared Config other clients are built from.
func TestContentTypes(t *testing.T) {
	accept := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept <- r.Header.Get("Accept")
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + srv.URL + "\"}}]\n" +
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClients(Options{Kubeconfig: path, QPS: 100, Burst: 100}, "aware-test")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := metricsclient.NewForConfig(Protobuf(c.Config))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const protobufFirst = "application/vnd.kubernetes.protobuf,application/json"
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"pods through Kube", func() error {
			_, err := c.Kube.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			return err
		}, protobufFirst},
		{"deployments through Kube", func() error {
			_, err := c.Kube.AppsV1().Deployments("ns").List(ctx, metav1.ListOptions{})
			return err
		}, protobufFirst},
		{"pod metrics through a Protobuf config", func() error {
			_, err := metrics.MetricsV1beta1().PodMetricses("ns").List(ctx, metav1.ListOptions{})
			return err
		}, protobufFirst},
		{"autoscalers through MPA", func() error {
			_, err := c.MPA.AutoscalingV1alpha1().MultidimPodAutoscalers("ns").Get(ctx, "m", metav1.GetOptions{})
			return err
		}, "application/json, */*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err == nil {
				t.Fatal("the server answers 404; want an error")
			}
			if got := <-accept; got != tc.want {
				t.Fatalf("Accept %q, want %q", got, tc.want)
			}
		})
	}
	if c.Config.ContentType == "application/vnd.kubernetes.protobuf" {
		t.Fatal("the shared Config was switched to protobuf")
	}
}

func TestDropManagedFields(t *testing.T) {
	withFields := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{"a": "b"}, ResourceVersion: "7",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}}}
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: withFields()}
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"managed fields dropped, the rest kept", withFields(), func() *corev1.Pod { p := withFields(); p.ManagedFields = nil; return p }()},
		{"an object without them is unchanged", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"}}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"}}},
		{"a tombstone passes through", tomb, tomb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DropManagedFields(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}
