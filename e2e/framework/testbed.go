// Package framework connects end-to-end tests to the loopback control plane
// that hack/testbed/up.sh starts, and holds the small helpers every such test
// needs: clients, waiting with a deadline, ServiceAccount credentials for
// components run as local processes, Prometheus queries, and the tail of every
// log when a test fails.
package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// DefaultDir is where up.sh keeps its state unless AWARE_TESTBED_DIR says
// otherwise.
const DefaultDir = "/tmp/aware-testbed"

// Testbed is a running testbed as described by its env file.
type Testbed struct {
	// Dir is the state directory: logs/, pids/, certs/, kubeconfig, env.
	Dir string
	// Env holds the variables of Dir/env (KUBECONFIG, PROMETHEUS_URL, ...).
	Env map[string]string

	KubeconfigPath string
	// Config authenticates as the testbed admin (group system:masters).
	Config  *rest.Config
	Client  kubernetes.Interface
	Metrics metricsclient.Interface

	PrometheusURL string
	// CAFile is the CA that signed every serving certificate of the testbed.
	CAFile string
	// Nodes are the names of the KWOK nodes up.sh created.
	Nodes []string

	mu           sync.Mutex
	extraLogDirs []string
	logFiles     []registeredLog
	// dumped are the tests whose failure DumpLogsOnFailure has shown.
	dumped []string
}

// Load reads the env file of the testbed in $AWARE_TESTBED_DIR (or
// DefaultDir) and builds admin clients for it. It fails, rather than skips,
// when no testbed is running: an e2e run without one has tested nothing.
func Load() (*Testbed, error) {
	dir := os.Getenv("AWARE_TESTBED_DIR")
	if dir == "" {
		dir = DefaultDir
	}
	envPath := filepath.Join(dir, "env")
	env, err := ReadEnvFile(envPath)
	if err != nil {
		return nil, fmt.Errorf("no running testbed (start it with hack/testbed/up.sh): %w", err)
	}
	tb := &Testbed{Dir: dir, Env: env}
	for _, k := range []string{"KUBECONFIG", "PROMETHEUS_URL", "AWARE_TESTBED_CA"} {
		if env[k] == "" {
			return nil, fmt.Errorf("%s does not set %s", envPath, k)
		}
	}
	tb.KubeconfigPath = env["KUBECONFIG"]
	tb.PrometheusURL = strings.TrimRight(env["PROMETHEUS_URL"], "/")
	tb.CAFile = env["AWARE_TESTBED_CA"]
	tb.Nodes = strings.Fields(env["AWARE_TESTBED_NODES"])

	tb.Config, err = clientcmd.BuildConfigFromFlags("", tb.KubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", tb.KubeconfigPath, err)
	}
	// The defaults (5 QPS) make a test that creates a few dozen objects wait
	// on the client, not on the server it is testing.
	tb.Config.QPS, tb.Config.Burst = 100, 200
	tb.Config.UserAgent = "aware-e2e"
	if tb.Client, err = kubernetes.NewForConfig(tb.Config); err != nil {
		return nil, err
	}
	if tb.Metrics, err = metricsclient.NewForConfig(tb.Config); err != nil {
		return nil, err
	}
	return tb, nil
}

// ReadEnvFile parses the `export KEY="value"` lines up.sh writes. It is not a
// shell: values are taken literally, without expansion.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[strings.TrimSpace(k)] = v
	}
	return env, sc.Err()
}

// ErrTimeout is wrapped by WaitFor's error when the condition never held.
var ErrTimeout = errors.New("timed out")

// WaitFor polls cond every interval until it returns true, returns an error,
// or timeout passes. The last non-nil "not yet" reason a condition gives via
// the error of a false result is kept for the timeout message, so a failure
// says what was still wrong, not only that time ran out.
func WaitFor(ctx context.Context, timeout, interval time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond(ctx)
		switch {
		case err != nil && errors.Is(err, ErrPermanent):
			return fmt.Errorf("%s: %w", what, err)
		case ok:
			return nil
		case err != nil && (last == nil || ctx.Err() == nil):
			// A poll cut short by the deadline fails only because of it;
			// the error before it says why the condition never held.
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: %w after %s; last: %v", what, ErrTimeout, timeout, last)
			}
			return fmt.Errorf("%s: %w after %s", what, ErrTimeout, timeout)
		case <-tick.C:
		}
	}
}

// ErrPermanent, wrapped into a condition's error, stops WaitFor at once.
var ErrPermanent = errors.New("permanent failure")

// defaultInterval is how often the helpers poll: short against the seconds a
// controller takes, long enough not to load the apiserver.
const defaultInterval = 500 * time.Millisecond

// Eventually is WaitFor for tests: it fails the test (fatally) on timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := WaitFor(context.Background(), timeout, defaultInterval, what, cond); err != nil {
		t.Fatal(err)
	}
}

// CreateNamespace creates a namespace with a generated name and waits for
// its default ServiceAccount: until the controller-manager has made it, pod
// creation there is refused. The namespace is deleted when the test ends.
func (tb *Testbed) CreateNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := tb.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{"aware.e2e/test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := tb.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Logf("delete namespace %s: %v", ns.Name, err)
		}
	})
	Eventually(t, 30*time.Second, "default ServiceAccount in "+ns.Name, func(ctx context.Context) (bool, error) {
		_, err := tb.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	return ns.Name
}
