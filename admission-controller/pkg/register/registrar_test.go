package register

import (
	"context"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

type fakeSource struct {
	mu      sync.Mutex
	bundle  []byte
	changed chan struct{}
}

func newFakeSource(b string) *fakeSource {
	return &fakeSource{bundle: []byte(b), changed: make(chan struct{}, 1)}
}

func (s *fakeSource) CABundle() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.bundle...)
}

func (s *fakeSource) Changed() <-chan struct{} { return s.changed }

func (s *fakeSource) set(b string) {
	s.mu.Lock()
	s.bundle = []byte(b)
	s.mu.Unlock()
	s.changed <- struct{}{}
}

func mwcWrites(client *fake.Clientset) (creates, updates int) {
	for _, a := range client.Actions() {
		switch a.GetVerb() {
		case "create":
			creates++
		case "update", "patch":
			updates++
		}
	}
	return creates, updates
}

func registeredCA(ctx context.Context, t *testing.T, client *fake.Clientset) string {
	t.Helper()
	got, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, DefaultConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(got.Webhooks[0].ClientConfig.CABundle)
}

func TestRegistrarFollowsBundle(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset()
	src := newFakeSource("ca-1")
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	r := &Registrar{
		Client: client.AdmissionregistrationV1().MutatingWebhookConfigurations(),
		Config: *serviceConfig(), Source: src, Clock: clk,
		Resync: 10 * time.Minute, RetryInterval: 5 * time.Second,
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := registeredCA(ctx, t, client); got != "ca-1" {
		t.Fatalf("registered CA %q", got)
	}

	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// Unchanged bundle, resync: read, no write.
	waitFor("Run to wait", clk.HasWaiters)
	client.ClearActions()
	clk.Step(10 * time.Minute)
	waitFor("the resync", func() bool { return len(client.Actions()) > 0 })
	if c, u := mwcWrites(client); c != 0 || u != 0 {
		t.Fatalf("an unchanged registration was written: creates %d updates %d", c, u)
	}

	// A new bundle is registered at once.
	src.set("ca-1\nca-2")
	waitFor("the new caBundle", func() bool { return registeredCA(ctx, t, client) == "ca-1\nca-2" })
	if _, u := mwcWrites(client); u != 1 {
		t.Fatalf("%d updates, want 1", u)
	}

	// Someone else resets the caBundle: the resync restores ours.
	mwc := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	cur, err := mwc.Get(ctx, DefaultConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Webhooks[0].ClientConfig.CABundle = []byte("stale")
	if _, err := mwc.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("Run to wait", clk.HasWaiters)
	clk.Step(10 * time.Minute)
	waitFor("the restored caBundle", func() bool { return registeredCA(ctx, t, client) == "ca-1\nca-2" })
}

func TestRegistrarRetries(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	gr := schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}
	// One conflict (another replica's write) is retried within Sync.
	conflicts := 1
	client.PrependReactor("patch", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(gr, DefaultConfigName, nil)
		}
		return false, nil, nil
	})
	src := newFakeSource("ca-1")
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	r := &Registrar{Client: client.AdmissionregistrationV1().MutatingWebhookConfigurations(), Config: *serviceConfig(), Source: src, Clock: clk, Resync: time.Hour, RetryInterval: 5 * time.Second}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	src.set("ca-2")
	<-src.Changed()
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := registeredCA(ctx, t, client); got != "ca-2" {
		t.Fatalf("registered CA %q after a conflict", got)
	}

	// Other failures are retried by Run after RetryInterval.
	ctx, cancel := context.WithCancel(ctx)
	fails := 1
	client.PrependReactor("patch", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails > 0 {
			fails--
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		return false, nil, nil
	})
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	src.set("ca-3")
	deadline := time.Now().Add(10 * time.Second)
	for registeredCA(ctx, t, client) != "ca-3" {
		if time.Now().After(deadline) {
			t.Fatal("the failed registration was not retried")
		}
		if clk.Waiters() == 2 { // resync ticker and retry timer
			clk.Step(5 * time.Second)
		}
		time.Sleep(time.Millisecond)
	}
}
