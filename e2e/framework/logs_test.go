package framework

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeT records what a test would print; the cleanups run when the test
// ends (end).
type fakeT struct {
	testing.TB // nil: a method not overridden here panics
	name       string
	failed     bool
	logs       []string
	cleanups   []func()
}

func (f *fakeT) Name() string            { return f.name }
func (f *fakeT) Helper()                 {}
func (f *fakeT) Failed() bool            { return f.failed }
func (f *fakeT) Cleanup(fn func())       { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Logf(s string, a ...any) { f.logs = append(f.logs, fmt.Sprintf(s, a...)) }
func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}
func (f *fakeT) output() string { return strings.Join(f.logs, "\n") }

// writeLog writes lines "<prefix> 1" to "<prefix> n" to path.
func writeLog(t *testing.T, path, prefix string, n int) {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s %d\n", prefix, i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A failing test shows the tail of the testbed's logs and of the logs its
// components (and its parent's) registered, and nothing of another test's
// components; a passing one shows nothing; a parent whose failed subtest
// has shown them does not show them again.
func TestDumpLogsOnFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeLog(t, filepath.Join(dir, "logs", "kube-apiserver.log"), "apiserver", ControlPlaneLogLines+10)
	comp := t.TempDir()
	rec, other := filepath.Join(comp, "TestFaults-recommender.log"), filepath.Join(comp, "TestOther-updater.log")
	writeLog(t, rec, "recommender", ComponentLogLines+50)
	writeLog(t, other, "updater", 10)

	tb := &Testbed{Dir: dir}
	parent := &fakeT{name: "TestFaults"}
	tb.DumpLogsOnFailure(parent)
	tb.AddLogFile(parent, rec)
	tb.AddLogFile(&fakeT{name: "TestOther"}, other)

	passing := &fakeT{name: "TestFaults/metrics-server_down"}
	tb.DumpLogsOnFailure(passing)
	passing.end()
	if len(passing.logs) != 0 {
		t.Errorf("a passing subtest printed:\n%s", passing.output())
	}

	sub := &fakeT{name: "TestFaults/kube-apiserver_restarted"}
	tb.DumpLogsOnFailure(sub)
	sub.failed = true
	sub.end()
	out := sub.output()
	for _, want := range []string{
		fmt.Sprintf("recommender %d\n", ComponentLogLines+50-ComponentLogLines+1), // the first line of the tail
		fmt.Sprintf("recommender %d", ComponentLogLines+50),
		fmt.Sprintf("apiserver %d", ControlPlaneLogLines+10),
		fmt.Sprintf("apiserver %d\n", 11),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the failed subtest's output lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"recommender 50\n", "apiserver 10\n", "updater"} {
		if strings.Contains(out, not) {
			t.Errorf("the failed subtest's output has %q (not its own, or beyond the tail)", not)
		}
	}

	parent.failed = true
	parent.end()
	if out := parent.output(); strings.Contains(out, "recommender") || !strings.Contains(out, sub.name) {
		t.Errorf("the parent showed the logs again, or did not say where they are:\n%s", out)
	}

	// A test that fails by itself shows them.
	alone := &fakeT{name: "TestOther"}
	tb.DumpLogsOnFailure(alone)
	alone.failed = true
	alone.end()
	if out := alone.output(); !strings.Contains(out, "updater 10") || strings.Contains(out, "recommender") {
		t.Errorf("TestOther's failure shows:\n%s", out)
	}
}

// TestEveryTestDumpsLogs: every Test function of the e2e suites, and every
// subtest, calls DumpLogsOnFailure first, so that none fails without the
// logs of the components it involved. A subtest whose body is one call of
// a helper given its t is taken to leave that to the helper.
func TestEveryTestDumpsLogs(t *testing.T) {
	var files []string
	for _, g := range []string{"../*_test.go", "../node/*_test.go"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d e2e test files: %v", len(files), files)
	}
	fset := token.NewFileSet()
	tests := 0
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tests++
			if !dumpsFirst(fn.Type, fn.Body) {
				t.Errorf("%s: %s does not call DumpLogsOnFailure(%s) first", fset.Position(fn.Pos()), fn.Name.Name, paramName(fn.Type))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Run" {
				return true
			}
			lit, ok := call.Args[1].(*ast.FuncLit)
			if !ok || paramName(lit.Type) == "" {
				return true
			}
			if !dumpsFirst(lit.Type, lit.Body) && !delegates(lit) {
				t.Errorf("%s: the subtest does not call DumpLogsOnFailure(%s) first", fset.Position(call.Pos()), paramName(lit.Type))
			}
			return true
		})
	}
	if tests < 15 {
		t.Errorf("found only %d Test functions", tests)
	}
}

// paramName is the name of the *testing.T parameter of a test or subtest
// function, "" if it has no such single parameter.
func paramName(ft *ast.FuncType) string {
	if ft.Params == nil || len(ft.Params.List) != 1 || len(ft.Params.List[0].Names) != 1 {
		return ""
	}
	star, ok := ft.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return ""
	}
	if sel, ok := star.X.(*ast.SelectorExpr); !ok || sel.Sel.Name != "T" {
		return ""
	}
	return ft.Params.List[0].Names[0].Name
}

// dumpsFirst: body's first statement is x.DumpLogsOnFailure(t) for the
// function's t.
func dumpsFirst(ft *ast.FuncType, body *ast.BlockStmt) bool {
	name := paramName(ft)
	if name == "" || body == nil || len(body.List) == 0 {
		return false
	}
	return isDumpCall(body.List[0], name)
}

func isDumpCall(s ast.Stmt, name string) bool {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	id, isIdent := call.Args[0].(*ast.Ident)
	return ok && sel.Sel.Name == "DumpLogsOnFailure" && isIdent && id.Name == name
}

// delegates: the subtest's body is one call that passes its t on.
func delegates(lit *ast.FuncLit) bool {
	if len(lit.Body.List) != 1 {
		return false
	}
	es, ok := lit.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	name := paramName(lit.Type)
	return slices.ContainsFunc(call.Args, func(a ast.Expr) bool {
		id, ok := a.(*ast.Ident)
		return ok && id.Name == name
	})
}

// A failing test that runs components as pods shows each container's log,
// and that of its run before a restart; a passing one shows nothing.
func TestPodLogsOnFailure(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "aware-system", Name: "aware-recommender-0"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "recommender", RestartCount: 1},
		}},
	}
	for _, failed := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed=%t", failed), func(t *testing.T) {
			tb := &Testbed{Client: fake.NewClientset(pod)}
			ft := &fakeT{name: "TestInstallRunsAsPods"}
			tb.PodLogsOnFailure(ft, "aware-system")
			ft.failed = failed
			ft.end()
			out := ft.output()
			if !failed {
				if out != "" {
					t.Errorf("a passing test printed:\n%s", out)
				}
				return
			}
			// The fake clientset answers every log request "fake logs".
			for _, want := range []string{
				"aware-system/aware-recommender-0 container recommender =====\nfake logs",
				"container recommender (its run before the last of 1 restarts) =====\nfake logs",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// Before the run's timeout, the testbed's logs are shown and, of the
// components' logs, those written lately: the hung test's, not those of
// tests long finished.
func TestDumpRecentLogs(t *testing.T) {
	dir, comp := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeLog(t, filepath.Join(dir, "logs", "etcd.log"), "etcd", 3)
	writeLog(t, filepath.Join(comp, "TestOld-recommender.log"), "old", 3)
	writeLog(t, filepath.Join(comp, "TestHung-updater.log"), "hung", 3)
	long := time.Now().Add(-time.Hour)
	for _, f := range []string{filepath.Join(dir, "logs", "etcd.log"), filepath.Join(comp, "TestOld-recommender.log")} {
		if err := os.Chtimes(f, long, long); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	(&Testbed{Dir: dir}).dumpRecentLogs(&out, time.Now().Add(-10*time.Minute), comp)
	for _, want := range []string{"etcd 3", "hung 3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "old 1") {
		t.Errorf("a log not written for an hour was shown:\n%s", out.String())
	}
}
