package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBundleWatcher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ca.crt")
	caA, err := NewCA("a", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caB, err := NewCA("b", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := NewBundleWatcher(path, time.Second, clocktesting.NewFakeClock(t0)); err == nil {
		t.Fatal("a missing bundle must fail at start")
	}
	write([]byte("not a certificate"))
	if _, err := NewBundleWatcher(path, time.Second, clocktesting.NewFakeClock(t0)); err == nil {
		t.Fatal("a garbage bundle must fail at start")
	}

	write(caA.CertPEM)
	clk := clocktesting.NewFakeClock(t0)
	w, err := NewBundleWatcher(path, time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Check(); err != nil || changed || !drained(w.Changed()) {
		t.Fatalf("unchanged file: changed %v err %v", changed, err)
	}

	// A CA rotation by whoever writes the file: old and new.
	both := append(bytes.Clone(caB.CertPEM), caA.CertPEM...)
	write(both)
	if changed, err := w.Check(); err != nil || !changed || drained(w.Changed()) || !bytes.Equal(w.CABundle(), both) {
		t.Fatalf("changed file: changed %v err %v", changed, err)
	}

	// A half-written file keeps the last good bundle.
	write(both[:len(both)-40])
	if _, err := w.Check(); err == nil || !bytes.Equal(w.CABundle(), both) {
		t.Fatalf("broken file: err %v, bundle replaced", err)
	}

	// Run polls on its ticker.
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	write(caB.CertPEM)
	deadline := time.Now().Add(10 * time.Second)
	for drainedWait(w.Changed(), clk) {
		if time.Now().After(deadline) {
			t.Fatal("Run did not pick up the change")
		}
	}
	if !bytes.Equal(w.CABundle(), caB.CertPEM) {
		t.Fatal("Run announced a change but holds another bundle")
	}
}

// drainedWait steps the clock once Run waits on it and reports whether
// nothing was announced within a short real wait.
func drainedWait(ch <-chan struct{}, clk *clocktesting.FakeClock) bool {
	if clk.HasWaiters() {
		clk.Step(time.Second)
	}
	select {
	case <-ch:
		return false
	case <-time.After(5 * time.Millisecond):
		return true
	}
}
