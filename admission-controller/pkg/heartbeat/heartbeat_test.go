package heartbeat

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestRenewAndAlive(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	h := &Heartbeat{Client: client.CoordinationV1(), Namespace: "aware-system", Name: DefaultName, Identity: "pod-a", Interval: 10 * time.Second, Duration: 30 * time.Second, Clock: clk}
	get := func() *coordinationv1.Lease {
		l, err := client.CoordinationV1().Leases("aware-system").Get(ctx, DefaultName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if Alive(nil, clk.Now()) {
		t.Fatal("a missing Lease is alive")
	}
	if err := h.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	l := get()
	if *l.Spec.HolderIdentity != "pod-a" || *l.Spec.LeaseDurationSeconds != 30 || !Alive(l, clk.Now()) {
		t.Fatalf("created Lease %+v", l.Spec)
	}
	if Alive(l, clk.Now().Add(30*time.Second)) {
		t.Fatal("alive after its duration")
	}
	clk.Step(20 * time.Second)
	h2 := *h
	h2.Identity = "pod-b"
	if err := h2.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	l = get()
	if *l.Spec.HolderIdentity != "pod-b" || !l.Spec.RenewTime.Time.Equal(clk.Now()) || !l.Spec.AcquireTime.Time.Equal(clk.Now()) {
		t.Fatalf("renewed Lease %+v", l.Spec)
	}
	if !Alive(l, clk.Now().Add(29*time.Second)) {
		t.Fatal("renewal did not extend the Lease")
	}
}

func TestRenewErrors(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: DefaultName}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x")}})
	h := &Heartbeat{Client: client.CoordinationV1(), Namespace: "ns", Name: DefaultName, Identity: "me", Duration: 30 * time.Second, Clock: clocktesting.NewFakeClock(time.Unix(1e9, 0))}
	client.PrependReactor("update", "leases", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	if err := h.Renew(ctx); err == nil {
		t.Fatal("update failure not reported")
	}
}

func TestRunRenewsOnlyWhenReady(t *testing.T) {
	client := fake.NewClientset()
	ready := make(chan bool, 1)
	ready <- false
	var last bool
	h := &Heartbeat{Client: client.CoordinationV1(), Namespace: "ns", Name: DefaultName, Identity: "me", Interval: 5 * time.Millisecond, Duration: 30 * time.Second, Clock: clocktesting.NewFakeClock(time.Unix(1e9, 0)),
		Ready: func() bool {
			select {
			case last = <-ready:
			default:
			}
			return last
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	time.Sleep(30 * time.Millisecond)
	if _, err := client.CoordinationV1().Leases("ns").Get(ctx, DefaultName, metav1.GetOptions{}); err == nil {
		t.Fatal("renewed while not ready")
	}
	ready <- true
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := client.CoordinationV1().Leases("ns").Get(ctx, DefaultName, metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not renewed once ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}
