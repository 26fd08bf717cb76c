//go:build e2e

package e2e

import (
	"bufio"
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
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/aware-k8s/aware/e2e/framework"
)

// componentNames are the binaries TestMain builds, once per run.
var componentNames = []string{"recommender", "updater"}

var (
	// binDir holds the component binaries; logDir their logs (dumped by
	// DumpLogsOnFailure).
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
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
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

// rbacManifests are the component manifests whose non-workload objects the
// e2e applies: the components themselves run as local processes, so their
// Deployments, Services, PodDisruptionBudgets and PVCs are skipped.
var rbacManifests = []string{
	"deploy/namespace.yaml",
	"deploy/recommender/recommender.yaml",
	"deploy/updater/updater.yaml",
	"deploy/admission-controller/admission-controller.yaml",
	"deploy/rl-agent/rl-agent.yaml",
}

var skippedKinds = map[string]bool{"Deployment": true, "Service": true, "PodDisruptionBudget": true, "PersistentVolumeClaim": true}

func installAWARE() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	crds, _ := filepath.Glob(filepath.Join(repoRoot, "deploy/crd/*.yaml"))
	if len(crds) == 0 {
		return errors.New("no CRDs in deploy/crd")
	}
	ext, err := apiextensionsclient.NewForConfig(tb.Config)
	if err != nil {
		return err
	}
	for _, f := range crds {
		objs, err := decodeManifest(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				return fmt.Errorf("%s: %T is not a CRD", f, o)
			}
			if err := applyCRD(ctx, ext, crd); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	for _, f := range rbacManifests {
		objs, err := decodeManifest(filepath.Join(repoRoot, f))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := applyObject(ctx, o); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return nil
}

// decodeManifest decodes every document of a multi-document YAML file with
// the client-go scheme plus apiextensions.
func decodeManifest(path string) ([]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := scheme.Scheme
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	dec := serializer.NewCodecFactory(s).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if skippedKinds[gvk.Kind] {
			continue
		}
		out = append(out, obj)
	}
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

// component is a component binary running as a local process.
type component struct {
	name       string
	cmd        *exec.Cmd
	logPath    string
	healthAddr string
	done       chan struct{}
	exitErr    error
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

// startComponent runs binary name as ServiceAccount aware-system/sa (a
// kubeconfig with a fresh token), with metrics and health on free loopback
// ports, waits for its /readyz, and stops it (SIGTERM, then SIGKILL) when
// the test ends.
func startComponent(t *testing.T, name, sa string, args ...string) *component {
	t.Helper()
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := tb.WriteServiceAccountKubeconfig(ctx, "aware-system", sa, kubeconfig, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	c := &component{
		name:       name,
		logPath:    filepath.Join(logDir, fmt.Sprintf("%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), name)),
		healthAddr: freeAddr(t),
		done:       make(chan struct{}),
	}
	logf, err := os.Create(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=" + freeAddr(t),
		"--health-bind-address=" + c.healthAddr,
		"--v=2",
	}, args...)
	c.cmd = exec.Command(filepath.Join(binDir, name), args...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Only loopback: the components must not find an in-cluster config.
	c.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	t.Logf("starting %s %s", name, strings.Join(args, " "))
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.exitErr = c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	t.Cleanup(func() { c.stop(t) })
	framework.Eventually(t, 90*time.Second, name+" /readyz", func(ctx context.Context) (bool, error) {
		select {
		case <-c.done:
			return false, fmt.Errorf("%w: %s exited: %v", framework.ErrPermanent, name, c.exitErr)
		default:
		}
		return httpOK(ctx, "http://"+c.healthAddr+"/readyz")
	})
	return c
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

func (c *component) stop(t *testing.T) {
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
