package testapp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadyFile: a file left by an earlier run of the container is
// removed at start; mark writes it, unmark removes it, and a mark after
// unmark (a start-up delay that ends during the shutdown) writes nothing.
func TestReadyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready")
	exists := func() bool { _, err := os.Stat(path); return err == nil }
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rf, err := newReadyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatal("a stale ready file survived the start")
	}
	for _, step := range []struct {
		name string
		do   func() error
		want bool
	}{
		{"mark", rf.mark, true},
		{"unmark", rf.unmark, false},
		{"mark after unmark", rf.mark, false},
		{"unmark again", rf.unmark, false},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := exists(); got != step.want {
			t.Fatalf("after %s the file exists %v, want %v", step.name, got, step.want)
		}
	}
}

// TestProbeCommand: `testapp probe` succeeds exactly while the file
// exists, and refuses to run without one.
func TestProbeCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready")
	run := func(args ...string) error {
		cmd := NewCommand()
		cmd.SetArgs(append([]string{"probe"}, args...))
		cmd.SetOut(new(nopWriter))
		cmd.SetErr(new(nopWriter))
		return cmd.Execute()
	}
	if err := run("--ready-file=" + path); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("probe without the file: %v, want not ready", err)
	}
	if err := os.WriteFile(path, []byte("ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("--ready-file=" + path); err != nil {
		t.Errorf("probe failed with the file: %v", err)
	}
	if err := run(); err == nil || !strings.Contains(err.Error(), "--ready-file is required") {
		t.Errorf("probe without --ready-file: %v", err)
	}
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// TestListenWhenReady runs the app with --listen-when-ready and
// --ready-file: during its start-up delay nothing listens on its address
// and the file is absent; after it, work is served and the file exists;
// at shutdown the file goes.
func TestListenWhenReady(t *testing.T) {
	addr := freeAddr(t)
	path := filepath.Join(t.TempDir(), "ready")
	o := NewOptions()
	o.Address, o.ReusePort, o.CPU, o.BaseMemory = addr, true, time.Millisecond, "1Mi"
	o.StartupDelay, o.ReadyFile, o.ListenWhenReady = 400*time.Millisecond, path, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	exists := func() bool { _, err := os.Stat(path); return err == nil }

	time.Sleep(100 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("a replica in its start-up delay accepted a connection")
	}
	if exists() {
		t.Fatal("the ready file exists during the start-up delay")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !exists() {
		if time.Now().After(deadline) {
			t.Fatal("no ready file 10 s after a 400-ms start-up delay")
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("work once ready: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("work once ready: %s", resp.Status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no shutdown 30 s after the cancel")
	}
	done <- nil // for the deferred wait
	if exists() {
		t.Error("the ready file survived the shutdown")
	}
}
