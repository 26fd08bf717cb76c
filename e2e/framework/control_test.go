package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopAndStartComponent stops a process recorded the way up.sh
// records one and starts it again: same command line and environment, a
// new PID whose PID and start-time files down.sh would accept.
func TestStopAndStartComponent(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"pids", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tb := &Testbed{Dir: dir}
	cmd := exec.Command("sleep", "300")
	cmd.Env = []string{"AWARE_FAULT_TEST=kept"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	first := cmd.Process.Pid
	if err := waitExeced(first, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	st, err := startTime(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "pids", "fake.pid"), strconv.Itoa(first)+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "pids", "fake.start"), st+"\n"); err != nil {
		t.Fatal(err)
	}

	stopped := tb.StopComponent(t, "fake")
	if _, err := startTime(first); err == nil {
		t.Fatalf("pid %d still runs after StopComponent", first)
	}
	if _, err := tb.componentPID("fake"); err == nil {
		t.Fatal("componentPID accepts the stopped process")
	}
	stopped.Start(t)
	second, err := tb.componentPID("fake")
	if err != nil {
		t.Fatalf("after Start: %v", err)
	}
	t.Cleanup(func() { _ = stopPID(second, stopGrace) })
	if second == first {
		t.Fatalf("the same pid %d after a restart", second)
	}
	argv, err := procStrings(second, "cmdline")
	if err != nil || strings.Join(argv, " ") != "sleep 300" {
		t.Errorf("restarted command line %q (%v), want \"sleep 300\"", argv, err)
	}
	env, err := procStrings(second, "environ")
	if err != nil || strings.Join(env, " ") != "AWARE_FAULT_TEST=kept" {
		t.Errorf("restarted environment %q (%v)", env, err)
	}
	if log, err := os.ReadFile(filepath.Join(dir, "logs", "fake.log")); err != nil || !strings.Contains(string(log), "starting fake again") {
		t.Errorf("log %q (%v) does not mark the restart", log, err)
	}
}
