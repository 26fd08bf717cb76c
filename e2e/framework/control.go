package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Control-plane faults: a test stops one of the processes up.sh started
// (etcd, kube-apiserver, metrics-server, prometheus, ...) and starts it
// again as up.sh did: the same command line, environment, working
// directory and log file, in its own session, with its PID and start-time
// files rewritten so that down.sh still stops exactly it. The command line
// is read from /proc before the stop, so nothing here repeats up.sh's flags.

// stopGrace is how long a stopped component has to exit after SIGTERM
// before it gets SIGKILL, as in down.sh.
const stopGrace = 15 * time.Second

// StoppedComponent is a testbed process a test stopped; Start runs it again.
type StoppedComponent struct {
	tb      *Testbed
	name    string
	argv    []string
	env     []string
	dir     string
	started bool
}

// StopComponent stops the testbed process name (SIGTERM, SIGKILL after
// 15s) and returns what starts it again. If the test ends with it still
// stopped, a cleanup starts it, so that later tests find a whole testbed.
func (tb *Testbed) StopComponent(t testing.TB, name string) *StoppedComponent {
	t.Helper()
	pid, err := tb.componentPID(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tb.captureComponent(name, pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopping testbed component %s (pid %d)", name, pid)
	if err := stopPID(pid, stopGrace); err != nil {
		t.Fatalf("stop %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !s.started {
			if err := s.start(); err != nil {
				t.Errorf("restarting %s at the end of the test: %v", name, err)
			}
		}
	})
	return s
}

// captureComponent reads what starts the running process pid of component
// name again: its command line, environment and working directory.
func (tb *Testbed) captureComponent(name string, pid int) (*StoppedComponent, error) {
	s := &StoppedComponent{tb: tb, name: name}
	var err error
	if s.argv, err = procStrings(pid, "cmdline"); err != nil {
		return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
	}
	if s.env, err = procStrings(pid, "environ"); err != nil {
		return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
	}
	if s.dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return nil, fmt.Errorf("%s (pid %d): %w", name, pid, err)
	}
	if len(s.argv) == 0 || s.argv[0] == "" {
		return nil, fmt.Errorf("%s (pid %d): empty command line", name, pid)
	}
	return s, nil
}

// Start runs the component again; the caller waits for it to be ready
// (e.g. with WaitAPIServerReady).
func (s *StoppedComponent) Start(t testing.TB) {
	t.Helper()
	if s.started {
		t.Fatalf("%s was started again already", s.name)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("started testbed component %s again", s.name)
}

func (s *StoppedComponent) start() error {
	s.started = true
	pids := filepath.Join(s.tb.Dir, "pids")
	logf, err := os.OpenFile(filepath.Join(s.tb.LogDir(), s.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "===== e2e: starting %s again at %s\n", s.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env, cmd.Dir = s.env, s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session, as up.sh's setsid: a signal to the test's process
	// group does not reach it, and down.sh alone stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while the test runs; down.sh stops it otherwise.
	go func() { _ = cmd.Wait() }()
	if err := writeFileAtomic(filepath.Join(pids, s.name+".pid"), strconv.Itoa(pid)+"\n"); err != nil {
		return err
	}
	if err := waitExeced(pid, 5*time.Second); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	st, err := startTime(pid)
	if err != nil {
		return fmt.Errorf("%s exited at once: %w", s.name, err)
	}
	return writeFileAtomic(filepath.Join(pids, s.name+".start"), st+"\n")
}

// componentPID reads the PID file of name and checks that the process is
// the one up.sh (or StoppedComponent.Start) recorded.
func (tb *Testbed) componentPID(name string) (int, error) {
	pids := filepath.Join(tb.Dir, "pids")
	raw, err := os.ReadFile(filepath.Join(pids, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("testbed component %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("testbed component %s: PID file: %w", name, err)
	}
	want, err := os.ReadFile(filepath.Join(pids, name+".start"))
	if err != nil {
		return 0, fmt.Errorf("testbed component %s: %w", name, err)
	}
	got, err := startTime(pid)
	if err != nil {
		return 0, fmt.Errorf("testbed component %s (pid %d) is not running: %w", name, pid, err)
	}
	if got != strings.TrimSpace(string(want)) {
		return 0, fmt.Errorf("testbed component %s: pid %d is another process now", name, pid)
	}
	return pid, nil
}

// waitExeced waits until the kernel has finished exec for pid: cmd.Start
// returns once the close-on-exec pipe closes, which is before the new
// image's arguments are set up, so /proc/PID/cmdline and environ can read
// empty for a moment. A later StopComponent needs them whole.
func waitExeced(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return fmt.Errorf("pid %d exited at once: %w", pid, err)
		}
		if len(raw) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d has an empty command line after %v (a zombie?)", pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procStrings reads a NUL-separated /proc/PID file.
func procStrings(pid int, file string) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), nil
}

// startTime is field 22 of /proc/PID/stat (start time in clock ticks since
// boot), which tells a process from a later one with a recycled PID.
func startTime(pid int) (string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces; count from after it.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	if f[0] == "Z" {
		return "", fmt.Errorf("pid %d is a zombie", pid)
	}
	return f[19], nil
}

// stopPID sends SIGTERM, waits up to grace for the process to go, then
// sends SIGKILL.
func stopPID(pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if _, err := startTime(pid); err != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	for range 50 {
		if _, err := startTime(pid); err != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("pid %d survived SIGKILL", pid)
}

func writeFileAtomic(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WaitAPIServerReady waits until the API server answers /readyz with ok,
// which includes its etcd check.
func (tb *Testbed) WaitAPIServerReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		body, err := tb.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(string(body)) == "ok", fmt.Errorf("/readyz: %s", body)
	})
}

// WaitPrometheusReady waits until Prometheus answers /-/ready.
func (tb *Testbed) WaitPrometheusReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "prometheus /-/ready", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, tb.PrometheusURL+"/-/ready", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("HTTP %d", resp.StatusCode)
	})
}

// WaitMetricsAPIReady waits until metrics.k8s.io serves PodMetrics in ns
// again (the aggregated API answers through metrics-server).
func (tb *Testbed) WaitMetricsAPIReady(t testing.TB, ns string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "metrics.k8s.io PodMetrics in "+ns, func(ctx context.Context) (bool, error) {
		l, err := tb.Metrics.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(l.Items) > 0, fmt.Errorf("no PodMetrics yet")
	})
}
