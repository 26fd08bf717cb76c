package leader

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/aware-k8s/aware/pkg/kube/serve"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"defaults", func(*Options) {}, ""},
		{"disabled ignores the rest", func(o *Options) { o.Enabled = false; o.LeaseName = "" }, ""},
		{"no lease name", func(o *Options) { o.LeaseName = "" }, "--leader-elect-resource-name"},
		{"renew deadline beyond lease", func(o *Options) { o.RenewDeadline = time.Minute }, "lease-duration"},
		{"zero retry", func(o *Options) { o.RetryPeriod = 0 }, "retry-period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions("x")
			tc.mutate(&o)
			err := o.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func readyz(t *testing.T, e *serve.Endpoints) int {
	t.Helper()
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	return rec.Code
}

func TestRunDisabledLeadsAtOnce(t *testing.T) {
	e := serve.New(prometheus.NewRegistry())
	o := NewOptions("x")
	o.Enabled = false
	want := errors.New("done")
	err := Run(context.Background(), o, fake.NewClientset(), record.NewFakeRecorder(10), e,
		func() error { return errors.New("not synced") },
		func(context.Context) error { return want })
	if !errors.Is(err, want) {
		t.Fatalf("got %v", err)
	}
	if code := readyz(t, e); code != 503 {
		t.Fatalf("leader's readiness must be the component's: /readyz %d", code)
	}
}

func TestRunAcquiresLeaseAndStopsCleanly(t *testing.T) {
	kube := fake.NewClientset()
	e := serve.New(prometheus.NewRegistry())
	o := NewOptions("aware-test")
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 3*time.Second, 2*time.Second, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, o, kube, record.NewFakeRecorder(10), e, func() error { return nil }, func(ctx context.Context) error {
			close(leading)
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("never became leader")
	}
	lease, err := kube.CoordinationV1().Leases("aware-system").Get(ctx, "aware-test", metav1GetOptions())
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease not held: %+v, %v", lease, err)
	}
	if code := readyz(t, e); code != 200 {
		t.Fatalf("/readyz while leading and ready: %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("clean stop returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func metav1GetOptions() metav1.GetOptions { return metav1.GetOptions{} }
