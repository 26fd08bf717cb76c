package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakedisco "k8s.io/client-go/discovery/fake"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/aware-k8s/aware/pkg/kube/certs"
	"github.com/aware-k8s/aware/pkg/kube/target"
	"github.com/aware-k8s/aware/recommender/controller"
)

func TestValidate(t *testing.T) {
	if err := NewOptions().Validate(); err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"zero interval", func(o *Options) { o.Interval = 0 }, "--recommender-interval must be positive"},
		{"refresh shorter than interval", func(o *Options) { o.StatusRefreshInterval = time.Second }, "--status-refresh-interval"},
		{"negative rival scan interval", func(o *Options) { o.RivalScanInterval = -time.Second }, "--rival-scan-interval"},
		{"rivals every loop", func(o *Options) { o.RivalScanInterval = 0 }, ""},
		{"no name", func(o *Options) { o.RecommenderName = "" }, "--recommender-name"},
		{"lease timings", func(o *Options) { o.Leader.RenewDeadline = o.Leader.LeaseDuration }, "lease-duration"},
		{"lease timings ignored without election", func(o *Options) { o.Leader.Enabled, o.Leader.RenewDeadline = false, o.Leader.LeaseDuration }, ""},
		{"workers", func(o *Options) { o.Workers = 0 }, "--workers"},
		{"fit to nodes in one namespace", func(o *Options) { o.FitToNodes, o.Namespace = true, "team-a" }, "--fit-to-nodes needs every pod"},
		{"fit to nodes cluster-wide", func(o *Options) { o.FitToNodes = true }, ""},
		{"bad address", func(o *Options) { o.Endpoints.HealthBindAddress = "nope" }, "--health-bind-address"},
		{"prometheus address", func(o *Options) { o.PrometheusAddress = "prometheus:9090" }, "--prometheus-address"},
		{"prometheus ok", func(o *Options) { o.PrometheusAddress = "http://127.0.0.1:9090" }, ""},
		{"prometheus timeout", func(o *Options) { o.PrometheusAddress, o.PrometheusTimeout = "http://127.0.0.1:9090", 0 }, "--prometheus-timeout"},
		{"history too fine", func(o *Options) { o.PrometheusAddress, o.HistoryResolution = "http://127.0.0.1:9090", time.Minute }, "more than Prometheus serves"},
		{"history ignored without prometheus", func(o *Options) { o.HistoryResolution = 0 }, ""},
		{"agent without TLS chosen", func(o *Options) { o.RLAgentEndpoint = "agent:9090" }, "--rl-agent-tls-mode=plaintext"},
		{"agent over self-managed mutual TLS", func(o *Options) {
			o.RLAgentEndpoint, o.RLAgentTLS.Mode = "agent:9090", certs.LinkModeSelfManaged
		}, ""},
		{"agent in explicit plaintext", func(o *Options) {
			o.RLAgentEndpoint, o.RLAgentTLS.Mode = "agent:9090", certs.LinkModePlaintext
		}, ""},
		{"agent TLS files incomplete", func(o *Options) {
			o.RLAgentEndpoint, o.RLAgentTLS.CertFile = "agent:9090", "c.crt"
		}, "--rl-agent-tls-ca-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.mutate(o)
			err := o.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

type fakeResolver struct{ err error }

var _ target.Interface = fakeResolver{}

func (f fakeResolver) Selector(context.Context, string, *autoscalingv1.CrossVersionObjectReference) (labels.Selector, error) {
	return labels.Everything(), f.err
}

func (f fakeResolver) GetScale(context.Context, string, *autoscalingv1.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, error) {
	return nil, schema.GroupResource{}, f.err
}

func (f fakeResolver) UpdateReplicas(context.Context, string, *autoscalingv1.CrossVersionObjectReference, int32) error {
	return f.err
}

func TestTargetErrorsAreClassified(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("x: %w", target.ErrTargetNotFound), controller.ErrTargetNotFound},
		{fmt.Errorf("x: %w", target.ErrNoScaleSubresource), controller.ErrTargetUnsupported},
		{fmt.Errorf("x: %w", target.ErrNoSelector), controller.ErrTargetUnsupported},
		{errors.New("connection refused"), nil},
	} {
		_, err := targets{r: fakeResolver{err: tc.err}}.Target(context.Background(), "ns", &autoscalingv1.CrossVersionObjectReference{})
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: cause lost in %v", tc.err, err)
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%v: not classified as %v", tc.err, tc.want)
		}
		if tc.want == nil && (errors.Is(err, controller.ErrTargetNotFound) || errors.Is(err, controller.ErrTargetUnsupported)) {
			t.Errorf("transient %v classified as a configuration error", tc.err)
		}
	}
}

// TestTargetFromScale reads spec.replicas and the selector from a fake
// scale client: the scale says 3 replicas while (say) 2 pods run.
func TestTargetFromScale(t *testing.T) {
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deploy, meta.RESTScopeNamespace)
	disco := &fakedisco.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments"}, {Name: "deployments/scale"}}},
	}}}
	scales := map[string]*autoscalingv1.Scale{
		"web":  {ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}, Status: autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web"}},
		"bare": {ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns"}, Spec: autoscalingv1.ScaleSpec{Replicas: 1}},
	}
	client := &fakescale.FakeScaleClient{}
	client.AddReactor("get", "deployments", func(a clienttesting.Action) (bool, runtime.Object, error) {
		name := a.(clienttesting.GetAction).GetName()
		if s, ok := scales[name]; ok {
			return true, s.DeepCopy(), nil
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, name)
	})
	tr := targets{r: target.New(mapper, client, disco)}
	ctx := context.Background()
	ref := func(name string) *autoscalingv1.CrossVersionObjectReference {
		return &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
	}
	got, err := tr.Target(ctx, "ns", ref("web"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Replicas != 3 || got.Selector.String() != "app=web" {
		t.Errorf("target %+v (selector %s); want spec.replicas 3 and app=web", got, got.Selector)
	}
	if _, err := tr.Target(ctx, "ns", ref("bare")); !errors.Is(err, controller.ErrTargetUnsupported) || !errors.Is(err, target.ErrNoSelector) {
		t.Errorf("a scale without a selector: %v", err)
	}
	if _, err := tr.Target(ctx, "ns", ref("gone")); !errors.Is(err, controller.ErrTargetNotFound) {
		t.Errorf("a missing target: %v", err)
	}
}

func TestRunFailsWithoutCluster(t *testing.T) {
	o := NewOptions()
	o.Kube.Kubeconfig = "/nonexistent/kubeconfig"
	if err := run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("run() = %v, want a kubeconfig error", err)
	}
}

func TestWirePrometheus(t *testing.T) {
	o := NewOptions()
	var d controller.Deps
	if err := wirePrometheus(o, &d); err != nil || d.SLO != nil || d.Goals != nil || d.History != nil || d.Pressure != nil {
		t.Fatalf("no address must leave the sources unset: %v %+v", err, d)
	}
	o.PrometheusAddress = "http://127.0.0.1:9090"
	if err := wirePrometheus(o, &d); err != nil || d.SLO == nil || d.Goals == nil || d.History == nil || d.Pressure == nil {
		t.Fatalf("an address must set every source: %v", err)
	}
	o.PrometheusQueries.Latency = "{{.NoSuchField}}"
	if err := wirePrometheus(o, &controller.Deps{}); err == nil || !strings.Contains(err.Error(), "latency query template") {
		t.Fatalf("a bad template must fail at start-up: %v", err)
	}
	o.PrometheusQueries.Latency = ""
	o.PrometheusQueries.ErrorRate = `{{.Metric | nosuchfunc}}`
	if err := wirePrometheus(o, &controller.Deps{}); err == nil || !strings.Contains(err.Error(), "errorRate query template") {
		t.Fatalf("a bad error-rate template must fail at start-up: %v", err)
	}
	o.PrometheusQueries.ErrorRate = ""
	o.PrometheusQueries.CPUPressure = "{{.Pressure}}"
	if err := wirePrometheus(o, &controller.Deps{}); err == nil || !strings.Contains(err.Error(), "cpuPressure query template") {
		t.Fatalf("a bad CPU-pressure template must fail at start-up: %v", err)
	}
	// The flag sets the template.
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o = NewOptions()
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--prometheus-query-cpu-pressure=max by (namespace, pod, container) (psi{})"}); err != nil {
		t.Fatal(err)
	}
	if got := o.PrometheusQueries.CPUPressure; got != "max by (namespace, pod, container) (psi{})" {
		t.Fatalf("--prometheus-query-cpu-pressure set %q", got)
	}
}

func TestEndpointHost(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{"aware-rl-agent.aware-system.svc:9090", "aware-rl-agent.aware-system.svc"},
		{"dns:///aware-rl-agent.aware-system.svc:9090", "aware-rl-agent.aware-system.svc"},
		{"127.0.0.1:9090", "127.0.0.1"},
		{"[::1]:9090", "::1"},
		{"agent", "agent"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			if got := endpointHost(tc.target); got != tc.want {
				t.Fatalf("endpointHost(%q) = %q, want %q", tc.target, got, tc.want)
			}
		})
	}
}
