package framework

// The logs a failing e2e test shows: the tails of the testbed's control
// plane and of the components the test started, as processes or as pods.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// AddLogDir makes DumpLogs also show the *.log files in dir, e.g. a
// directory of logs that only the failing test's components write to.
func (tb *Testbed) AddLogDir(dir string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.extraLogDirs = append(tb.extraLogDirs, dir)
}

// AddLogFile registers path as the log of a component t started (a process
// the test runs itself, not one of the testbed's): when t, one of its
// subtests or the test it is a subtest of fails, DumpLogsOnFailure shows its
// tail. Unlike the logs of every test's components in one directory, a
// failure then shows only the components involved in it, each with more
// lines.
func (tb *Testbed) AddLogFile(t testing.TB, path string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, l := range tb.logFiles {
		if l.test == t.Name() && l.path == path {
			return
		}
	}
	tb.logFiles = append(tb.logFiles, registeredLog{test: t.Name(), path: path})
}

// registeredLog is a component's log and the test that started it.
type registeredLog struct{ test, path string }

// related reports whether a failure of test a involves the components
// test b started: the same test, a subtest of it, or the test it is a
// subtest of (a subtest uses what its parent started).
func related(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// LogDir is where the control-plane processes log.
func (tb *Testbed) LogDir() string { return filepath.Join(tb.Dir, "logs") }

// Lines of each log DumpLogsOnFailure shows: the control plane's own are
// mostly steady-state noise by the time a test fails; the components a
// test started are what it tested, and a few loops of theirs take a
// hundred lines or more.
const (
	ControlPlaneLogLines = 60
	ComponentLogLines    = 200
)

// DumpLogsOnFailure registers a cleanup that prints the tail of the
// testbed's logs, and of the logs of the components registered with
// AddLogFile by t, its subtests or its parent, if t has failed by the time
// it ends. Every e2e Test function and subtest calls it first
// (TestEveryTestDumpsLogs checks), so that no failure goes without the
// logs of what it involved, and the tails are those of the moment it
// failed rather than of its parent's end, minutes of other cases later; a
// parent whose failed subtests have shown them says so instead of showing
// them again.
func (tb *Testbed) DumpLogsOnFailure(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// A parent fails with its subtests; those that called this
		// have shown the logs already, at the time they failed.
		tb.mu.Lock()
		// Each is consumed by its parent, so a later run of the same
		// test (-count) starts afresh.
		var shown, kept []string
		for _, d := range tb.dumped {
			if strings.HasPrefix(d, t.Name()+"/") {
				shown = append(shown, d)
			} else {
				kept = append(kept, d)
			}
		}
		tb.dumped = append(kept, t.Name())
		tb.mu.Unlock()
		if len(shown) > 0 {
			t.Logf("the logs are shown above, with the failed %s", strings.Join(shown, ", "))
			return
		}
		tb.DumpLogs(t, ControlPlaneLogLines)
	})
}

// DumpLogs prints the last n lines of each *.log under the testbed's log
// directory and every directory given to AddLogDir, and the last
// ComponentLogLines (at least n) lines of each log registered with
// AddLogFile by t, its subtests or its parent.
func (tb *Testbed) DumpLogs(t testing.TB, n int) {
	t.Helper()
	tb.mu.Lock()
	dirs := append([]string{tb.LogDir()}, tb.extraLogDirs...)
	var files []string
	for _, l := range tb.logFiles {
		if related(t.Name(), l.test) && !slices.Contains(files, l.path) {
			files = append(files, l.path)
		}
	}
	tb.mu.Unlock()
	for _, dir := range dirs {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		if len(logs) == 0 {
			t.Logf("no logs in %s", dir)
		}
		for _, f := range logs {
			dumpTail(t, f, n)
		}
	}
	for _, f := range files {
		dumpTail(t, f, max(n, ComponentLogLines))
	}
}

func dumpTail(t testing.TB, path string, n int) {
	t.Helper()
	tail, err := TailFile(path, n)
	if err != nil {
		t.Logf("===== %s: %v", path, err)
		return
	}
	t.Logf("===== last %d lines of %s =====\n%s", n, path, tail)
}

// TailFile returns the last n lines of path.
func TailFile(path string, n int) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n"), nil
}

// timeoutMargin is how long before `go test -timeout` ends the run
// DumpLogsBeforeTimeout prints the logs: enough to print them, and short
// against any test's own deadlines (minutes), so a test still making
// progress is rarely the cause.
const timeoutMargin = 30 * time.Second

// DumpLogsBeforeTimeout prints to w, shortly before the test binary's
// -test.timeout, the last ControlPlaneLogLines lines of the testbed's logs
// and of the *.log files in dirs that were written in the last
// 10 minutes. A test that hangs until the timeout is ended by a panic that
// runs no cleanup, so DumpLogsOnFailure never shows its logs; this does,
// at the cost of not knowing which components were that test's. Call it
// from TestMain, after flag.Parse, and stop it when m.Run returns. Without
// a timeout (-timeout 0) it does nothing.
func (tb *Testbed) DumpLogsBeforeTimeout(w io.Writer, dirs ...string) (stop func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return func() {}
	}
	timeout, ok := g.Get().(time.Duration)
	if !ok || timeout <= 2*timeoutMargin {
		return func() {}
	}
	timer := time.AfterFunc(timeout-timeoutMargin, func() {
		tb.dumpRecentLogs(w, time.Now().Add(-10*time.Minute), dirs...)
	})
	return func() { timer.Stop() }
}

// dumpRecentLogs prints the tail of the testbed's logs and of the *.log
// files in dirs modified since since.
func (tb *Testbed) dumpRecentLogs(w io.Writer, since time.Time, dirs ...string) {
	fmt.Fprintf(w, "e2e: the run is about to reach its -timeout, which ends it without the failing test's logs; the logs written in the last 10 minutes:\n")
	for i, dir := range append([]string{tb.LogDir()}, dirs...) {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range logs {
			if st, err := os.Stat(f); err != nil || (i > 0 && st.ModTime().Before(since)) {
				continue
			}
			tail, err := TailFile(f, ControlPlaneLogLines)
			if err != nil {
				fmt.Fprintf(w, "===== %s: %v\n", f, err)
				continue
			}
			fmt.Fprintf(w, "===== last %d lines of %s =====\n%s\n", ControlPlaneLogLines, f, tail)
		}
	}
}
