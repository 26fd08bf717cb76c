//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/aware-k8s/aware/e2e/framework"
)

// componentNames are the binaries TestMain builds, once per run.
var componentNames = []string{"recommender", "updater", "admission-controller", "rl-agent"}

var (
	// binDir holds the component binaries; logDir their logs (each
	// registered with tb.AddLogFile by the test that starts it, and dumped
	// by DumpLogsOnFailure when that test fails).
	binDir, logDir string
	repoRoot       string
)

// buildComponents builds every component into a temporary directory.
func buildComponents() (cleanup func(), err error) {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(file))
	dir, err := os.MkdirTemp("", "aware-e2e-")
	if err != nil {
		return nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	binDir, logDir = filepath.Join(dir, "bin"), filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return cleanup, err
	}
	// The tags make build uses (the Makefile's GOTAGS).
	args := []string{"build", "-tags", "grpcnotrace", "-o", binDir + string(filepath.Separator)}
	for _, c := range componentNames {
		args = append(args, "./"+c)
	}
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return cleanup, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: built %v in %s\n", componentNames, time.Since(start).Round(time.Millisecond))
	return cleanup, nil
}

// installOnce applies the CRDs and the RBAC of deploy/ the first time a test
// needs them.
var installOnce = sync.OnceValue(installAWARE)

// requireAWARE fails the test if deploy/ could not be installed.
func requireAWARE(t *testing.T) {
	t.Helper()
	if err := installOnce(); err != nil {
		t.Fatalf("installing deploy/: %v", err)
	}
}

// rendered is deploy/ as `kubectl apply -k deploy/` renders it (the
// kustomize built into kubectl), once per run: the e2e installs its RBAC
// and runs its components from it.
var rendered = sync.OnceValues(func() ([]byte, error) {
	bin := tb.Env["AWARE_TESTBED_BIN"]
	if bin == "" {
		return nil, errors.New("the testbed env sets no AWARE_TESTBED_BIN")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return runCommand(ctx, nil, filepath.Join(bin, "kubectl"), "kustomize", filepath.Join(repoRoot, "deploy"))
})

// workloads are the components' containers in the rendered install: the
// ServiceAccount, arguments and environment each process runs with.
var workloads = sync.OnceValues(func() (map[string]framework.Workload, error) {
	raw, err := rendered()
	if err != nil {
		return nil, err
	}
	return framework.Workloads(raw)
})

// skippedKinds are not installed by the e2e: the workloads run as local
// processes (from the Deployments' args, see startProcess), the
// ConfigMap's one value reaches them through their environment, the
// NetworkPolicies have no pod to apply to, and the shipped
// MutatingWebhookConfiguration points at a Service that does not exist
// here (each test that runs the admission controller creates its own, see
// startAdmissionController).
var skippedKinds = map[string]bool{"Deployment": true, "Service": true, "PodDisruptionBudget": true, "PersistentVolumeClaim": true,
	"MutatingWebhookConfiguration": true, "ConfigMap": true, "NetworkPolicy": true}

// installObjects are the objects of the rendered install the e2e applies:
// CRDs, the namespace, ServiceAccounts and RBAC.
func installObjects() ([]any, error) {
	raw, err := rendered()
	if err != nil {
		return nil, err
	}
	return decodeObjects(raw)
}

func installAWARE() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ext, err := apiextensionsclient.NewForConfig(tb.Config)
	if err != nil {
		return err
	}
	objs, err := installObjects()
	if err != nil {
		return err
	}
	crds := 0
	for _, o := range objs {
		if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
			if err := applyCRD(ctx, ext, crd); err != nil {
				return err
			}
			crds++
		}
	}
	if crds == 0 {
		return errors.New("the install has no CRD")
	}
	for _, o := range objs {
		if _, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
			continue
		}
		if err := applyObject(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// decodeObjects decodes every document of a multi-document YAML stream
// with the client-go scheme plus apiextensions, leaving out skippedKinds.
func decodeObjects(raw []byte) ([]any, error) {
	s := scheme.Scheme
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	dec := serializer.NewCodecFactory(s).UniversalDeserializer()
	docs, err := framework.Documents(raw)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, doc := range docs {
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		if skippedKinds[gvk.Kind] {
			continue
		}
		out = append(out, obj)
	}
	return out, nil
}

func stripComments(doc []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}

func applyCRD(ctx context.Context, ext apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	c := ext.ApiextensionsV1().CustomResourceDefinitions()
	_, err := c.Create(ctx, crd, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := c.Get(ctx, crd.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		crd.ResourceVersion = cur.ResourceVersion
		_, err = c.Update(ctx, crd, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	return framework.WaitFor(ctx, time.Minute, time.Second/2, "CRD "+crd.Name+" Established", func(ctx context.Context) (bool, error) {
		cur, err := c.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range cur.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", cur.Status.Conditions)
	})
}

// applyObject creates o, or replaces it if it exists (the testbed may have
// run the suite before).
func applyObject(ctx context.Context, o any) error {
	var err error
	switch o := o.(type) {
	case *corev1.Namespace:
		_, err = tb.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case *corev1.ServiceAccount:
		_, err = tb.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case *rbacv1.ClusterRole:
		c := tb.Client.RbacV1().ClusterRoles()
		if _, err = c.Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		}
	case *rbacv1.ClusterRoleBinding:
		c := tb.Client.RbacV1().ClusterRoleBindings()
		if _, err = c.Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		}
	case *rbacv1.Role:
		c := tb.Client.RbacV1().Roles(o.Namespace)
		if _, err = c.Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		}
	case *rbacv1.RoleBinding:
		c := tb.Client.RbacV1().RoleBindings(o.Namespace)
		if _, err = c.Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		}
	default:
		return fmt.Errorf("the e2e does not know how to apply %T", o)
	}
	return err
}

// component is a component binary running as a local process. It can be
// stopped (SIGTERM), killed (SIGKILL) and started again with the same
// arguments, addresses and log file, as a restarted pod would be.
type component struct {
	name        string
	binary      string
	args        []string
	env         []string
	logPath     string
	healthAddr  string
	metricsAddr string

	// cmd, done and exitErr describe the current run; only the test's
	// goroutine starts runs, and exitErr is read after done is closed.
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// tokenTTL is the lifetime of the ServiceAccount token each component
// process is started with: written into its kubeconfig, it is not
// refreshed, and a restarted process reads the same file. Longer than any
// e2e test; the soak (soak_test.go), which runs alone and for hours,
// raises it before it starts its components.
var tokenTTL = 2 * time.Hour

// processSpec describes a component process.
type processSpec struct {
	// Binary is one of componentNames, the name of its container in
	// deploy/.
	Binary string
	// Name tells several processes of one binary apart in log file names
	// and messages; Binary when empty.
	Name string
	// Args are the test's departures from the container's args in deploy/
	// (--flag=value), each one listed in framework.Overrides.
	Args []string
}

// startComponent runs binary name as deploy/ runs it, with the test's args
// args, waits for its /readyz, and stops it (SIGTERM, then SIGKILL) when
// the test ends.
func startComponent(t *testing.T, name string, args ...string) *component {
	t.Helper()
	return startProcess(t, processSpec{Binary: name, Args: args})
}

// startProcess runs spec as a local process as the install runs its
// container: the ServiceAccount (through a token in a kubeconfig),
// arguments and environment of its Deployment in deploy/, with the
// departures of framework.Overrides: loopback listeners on free ports, a
// state directory of the test's, no agent unless the test names one, and
// the test's spec.Args. It waits for the process's /readyz, and stops it
// (SIGTERM, then SIGKILL) when the test ends.
func startProcess(t *testing.T, spec processSpec) *component {
	t.Helper()
	if spec.Name == "" {
		spec.Name = spec.Binary
	}
	ws, err := workloads()
	if err != nil {
		t.Fatalf("the install's workloads: %v", err)
	}
	w, ok := ws[spec.Binary]
	if !ok {
		t.Fatalf("no Deployment in deploy/ runs a %s container", spec.Binary)
	}
	kubeconfig := filepath.Join(t.TempDir(), w.ServiceAccount+".kubeconfig")
	if err := tb.WriteServiceAccountKubeconfig(context.Background(), w.Namespace, w.ServiceAccount, kubeconfig, tokenTTL); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	args, err := framework.ProcessArgs(w, &framework.Loopback{
		Kubeconfig: kubeconfig,
		Addr: func(listener string) string {
			if _, ok := addrs[listener]; !ok {
				addrs[listener] = freeAddr(t)
			}
			return addrs[listener]
		},
		TempDir: t.TempDir,
	}, spec.Args)
	if err != nil {
		t.Fatal(err)
	}
	c := &component{
		name:        spec.Name,
		binary:      filepath.Join(binDir, spec.Binary),
		args:        args,
		env:         w.Env,
		logPath:     filepath.Join(logDir, fmt.Sprintf("%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), spec.Name)),
		healthAddr:  flagValue(args, "health-bind-address"),
		metricsAddr: flagValue(args, "metrics-bind-address"),
	}
	// Its log is shown when t (or its parent or a subtest) fails, a
	// start that never gets ready included.
	tb.AddLogFile(t, c.logPath)
	t.Cleanup(func() { c.stop(t) })
	c.start(t)
	return c
}

// flagValue returns the value of the last --name=value in args.
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if after, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = after
		}
	}
	return v
}

// start runs the process (again) and waits for its /readyz. The log file is
// appended to, so a restarted process's log follows the previous run's.
func (c *component) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "===== e2e: starting %s at %s\n", c.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.binary, c.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The container's environment from deploy/; only loopback: the
	// components must not find an in-cluster config.
	cmd.Env = append(append(os.Environ(), c.env...), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	t.Logf("starting %s: %s %s %s", c.name, strings.Join(c.env, " "), filepath.Base(c.binary), strings.Join(c.args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", c.name, err)
	}
	done := make(chan struct{})
	c.cmd, c.done, c.exitErr = cmd, done, nil
	go func() {
		err := cmd.Wait()
		logf.Close()
		c.exitErr = err
		close(done)
	}()
	framework.Eventually(t, 90*time.Second, c.name+" /readyz", func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("%w: %s exited: %v", framework.ErrPermanent, c.name, c.exitErr)
		default:
		}
		return httpOK(ctx, "http://"+c.healthAddr+"/readyz")
	})
}

// restart starts the process again, with the same arguments and addresses,
// after it has exited (kill or terminate).
func (c *component) restart(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	default:
		t.Fatalf("restart %s: it is still running", c.name)
	}
	c.start(t)
}

// running fails the test if the process has exited.
func (c *component) running(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
		t.Fatalf("%s exited: %v", c.name, c.exitErr)
	default:
	}
}

// kill sends SIGKILL, as a crash or an OOM kill would, and waits for the
// process to be gone.
func (c *component) kill(t *testing.T) {
	t.Helper()
	c.running(t)
	t.Logf("killing %s (pid %d)", c.name, c.cmd.Process.Pid)
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill %s: %v", c.name, err)
	}
	<-c.done
}

// terminate sends SIGTERM, as the kubelet does at pod deletion, and returns
// the process's exit error (nil for a clean exit) once it is gone. It fails
// the test if the process does not exit within 30s.
func (c *component) terminate(t *testing.T) error {
	t.Helper()
	c.running(t)
	t.Logf("terminating %s (pid %d)", c.name, c.cmd.Process.Pid)
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal %s: %v", c.name, err)
	}
	select {
	case <-c.done:
		return c.exitErr
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("%s did not exit within 30s of SIGTERM", c.name)
		return nil
	}
}

func (c *component) stop(t *testing.T) {
	if c.cmd == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Logf("%s did not stop within 20s of SIGTERM; killing it", c.name)
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// logLinesOnFailure prints, if t fails, the last n lines of the process's
// log that contain any of substrs: what the dump of every log's tail
// (DumpLogsOnFailure) no longer reaches after minutes of loops.
func (c *component) logLinesOnFailure(t *testing.T, n int, substrs ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		data, err := os.ReadFile(c.logPath)
		if err != nil {
			t.Logf("%s's log: %v", c.name, err)
			return
		}
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			for _, s := range substrs {
				if strings.Contains(l, s) {
					lines = append(lines, l)
					break
				}
			}
		}
		lines = lines[max(0, len(lines)-n):]
		t.Logf("===== the last %d lines of %s's log with %q =====\n%s", len(lines), c.name, substrs, strings.Join(lines, "\n"))
	})
}

// metric returns the sum of the samples of the metric family name on the
// process's /metrics whose labels include every name="value" pair of
// labels, and whether there was any.
func (c *component) metric(ctx context.Context, name string, labels ...string) (float64, bool, error) {
	body, err := c.get(ctx, "/metrics")
	if err != nil {
		return 0, false, err
	}
	return sumSamples(string(body), name, labels...)
}

// get reads path from the component's metrics address: /metrics, or a
// profile under /debug/pprof/ when it runs with --profiling.
func (c *component) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.metricsAddr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.name, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: HTTP %d", c.name, path, resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// sumSamples reads the Prometheus text format: the sum of the samples of
// series name (exactly; histograms are read as name_count etc.) that carry
// every label pair given as "key=value".
func sumSamples(text, name string, labels ...string) (float64, bool, error) {
	var sum float64
	found := false
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var lbls string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.Index(rest, "}")
			if end < 0 {
				return 0, false, fmt.Errorf("malformed sample %q", line)
			}
			lbls, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name with this prefix
		}
		ok := true
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			if !strings.Contains(","+lbls+",", fmt.Sprintf(",%s=%q,", k, v)) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false, fmt.Errorf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("sample %q: %w", line, err)
		}
		sum += v
		found = true
	}
	return sum, found, nil
}

func httpOK(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return true, nil
}
