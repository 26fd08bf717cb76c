package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/aware-k8s/aware/pkg/target"
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
		{"no name", func(o *Options) { o.RecommenderName = "" }, "--recommender-name"},
		{"lease timings", func(o *Options) { o.Leader.RenewDeadline = o.Leader.LeaseDuration }, "lease-duration"},
		{"lease timings ignored without election", func(o *Options) { o.Leader.Enabled, o.Leader.RenewDeadline = false, o.Leader.LeaseDuration }, ""},
		{"workers", func(o *Options) { o.Workers = 0 }, "--workers"},
		{"bad address", func(o *Options) { o.Endpoints.HealthBindAddress = "nope" }, "--health-bind-address"},
		{"prometheus address", func(o *Options) { o.PrometheusAddress = "prometheus:9090" }, "--prometheus-address"},
		{"prometheus ok", func(o *Options) { o.PrometheusAddress = "http://127.0.0.1:9090" }, ""},
		{"prometheus timeout", func(o *Options) { o.PrometheusAddress, o.PrometheusTimeout = "http://127.0.0.1:9090", 0 }, "--prometheus-timeout"},
		{"history too fine", func(o *Options) { o.PrometheusAddress, o.HistoryResolution = "http://127.0.0.1:9090", time.Minute }, "more than Prometheus serves"},
		{"history ignored without prometheus", func(o *Options) { o.HistoryResolution = 0 }, ""},
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
		_, err := targets{r: fakeResolver{err: tc.err}}.Selector(context.Background(), "ns", &autoscalingv1.CrossVersionObjectReference{})
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
	if err := wirePrometheus(o, &d); err != nil || d.SLO != nil || d.Goals != nil || d.History != nil {
		t.Fatalf("no address must leave the sources unset: %v %+v", err, d)
	}
	o.PrometheusAddress = "http://127.0.0.1:9090"
	if err := wirePrometheus(o, &d); err != nil || d.SLO == nil || d.Goals == nil || d.History == nil {
		t.Fatalf("an address must set every source: %v", err)
	}
	o.PrometheusQueries.Latency = "{{.NoSuchField}}"
	if err := wirePrometheus(o, &controller.Deps{}); err == nil || !strings.Contains(err.Error(), "latency query template") {
		t.Fatalf("a bad template must fail at start-up: %v", err)
	}
}
