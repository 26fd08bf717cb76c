//go:build benchreal

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
)

// startVPA installs VPA's CRD and RBAC from its module and runs its three
// components as local processes with their own ServiceAccounts' tokens,
// with their defaults (1-min loops) except the webhook, which the harness
// registers at a loopback URL. It returns a function that stops them.
func (h *harness) startVPA(ctx context.Context) (func(), error) {
	in := &nodeinstall.Installer{TB: h.tb, Env: h.env}
	for _, f := range []string{"vpa-v1-crd-gen.yaml", "vpa-rbac.yaml"} {
		if _, err := in.Kubectl(ctx, nil, "apply", "--server-side", "--field-manager=aware-bench-real", "-f", filepath.Join(h.o.bin.vpaDir, "deploy", f)); err != nil {
			return nil, err
		}
	}
	if _, err := in.Kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/verticalpodautoscalers.autoscaling.k8s.io"); err != nil {
		return nil, err
	}
	cert, key, err := h.tb.ServingCert(h.o.out, "vpa-webhook")
	if err != nil {
		return nil, err
	}
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = p.Process.Kill()
				<-done
			}
		}
	}
	webhookPort, err := freePort()
	if err != nil {
		return nil, err
	}
	for _, c := range []string{"recommender", "updater", "admission-controller"} {
		sa := "vpa-" + c
		if err := h.tb.EnsureServiceAccount(ctx, "kube-system", sa); err != nil {
			stop()
			return nil, err
		}
		kc := filepath.Join(h.o.out, sa+".kubeconfig")
		if err := h.tb.WriteServiceAccountKubeconfig(ctx, "kube-system", sa, kc, 12*time.Hour); err != nil {
			stop()
			return nil, err
		}
		metricsPort, err := freePort()
		if err != nil {
			stop()
			return nil, err
		}
		args := []string{"--kubeconfig=" + kc, fmt.Sprintf("--address=127.0.0.1:%d", metricsPort), "--v=2"}
		if c == "admission-controller" {
			args = append(args, fmt.Sprintf("--port=%d", webhookPort), "--client-ca-file="+h.tb.CAFile,
				"--tls-cert-file="+cert, "--tls-private-key="+key, "--register-webhook=false")
		}
		cmd := exec.Command(filepath.Join(h.o.bin.vpa, c), args...)
		logFile, err := os.Create(filepath.Join(h.logDir, sa+".log"))
		if err != nil {
			stop()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		// Only loopback: no in-cluster config may be found.
		cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
		if err := cmd.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start %s: %w", sa, err)
		}
		procs = append(procs, cmd)
		h.vpaPIDs = append(h.vpaPIDs, cmd.Process.Pid)
		if err := waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w (log %s)", sa, err, logFile.Name())
		}
	}
	ca, err := os.ReadFile(h.tb.CAFile)
	if err != nil {
		stop()
		return nil, err
	}
	webhook := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: vpa-webhook-config}
webhooks:
- name: vpa.k8s.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  timeoutSeconds: 10
  clientConfig:
    url: https://127.0.0.1:%d/
    caBundle: %s
  namespaceSelector:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, aware-system]}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  - {apiGroups: [autoscaling.k8s.io], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [verticalpodautoscalers]}
`, webhookPort, base64.StdEncoding.EncodeToString(ca))
	if _, err := in.Kubectl(ctx, strings.NewReader(webhook), "apply", "-f", "-"); err != nil {
		stop()
		return nil, err
	}
	logf("VPA running (webhook on 127.0.0.1:%d)", webhookPort)
	return func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := in.Kubectl(c, nil, "delete", "--ignore-not-found", "mutatingwebhookconfiguration", "vpa-webhook-config"); err != nil {
			logf("deleting VPA's webhook: %v", err)
		}
		stop()
	}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitHTTP(ctx context.Context, url string) error {
	return framework.WaitFor(ctx, 90*time.Second, 500*time.Millisecond, url, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
