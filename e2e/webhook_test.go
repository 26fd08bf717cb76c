//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/e2e/framework"
)

// TestWebhookFailOpen registers the admission controller's webhook exactly
// as --register-webhook builds it (failurePolicy Ignore), but pointing at a
// loopback port nothing listens on, as when every replica of the admission
// controller is down. Pods must still be created, unsized. The API server's
// fail-open counter for the webhook proves it was really called and failed,
// not merely skipped.
func TestWebhookFailOpen(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "failopen")
	ca, err := os.ReadFile(tb.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	dead := freeAddr(t) // closed again: connections are refused
	name := "aware-e2e-failopen-" + ns
	cfg := register.Build(&register.Config{
		Name:           name,
		URL:            "https://" + dead + "/mutate",
		CABundle:       ca,
		FailurePolicy:  admissionregistrationv1.Ignore,
		TimeoutSeconds: 5,
	})
	// Only this test's namespace: other tests' pods must not go through it.
	cfg.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	whc := tb.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := whc.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("register webhook: %v", err)
	}
	t.Cleanup(func() {
		if err := whc.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Logf("delete webhook configuration %s: %v", name, err)
		}
	})

	// Registration is eventually consistent: dry-run creates until the
	// API server reports that it called the webhook and failed open.
	before, err := failOpenCount(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	probe := podSpec("probe")
	framework.Eventually(t, 60*time.Second, "the API server to call the dead webhook and fail open", func(ctx context.Context) (bool, error) {
		if _, err := tb.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, fmt.Errorf("%w: dry-run pod create failed although the webhook fails open: %v", framework.ErrPermanent, err)
		}
		n, err := failOpenCount(ctx, name)
		if err != nil {
			return false, err
		}
		if n <= before {
			return false, fmt.Errorf("fail-open count %g", n)
		}
		return true, nil
	})

	// Now the real thing: a Deployment's pods are created and run.
	const app = "failopen"
	if _, err := tb.Client.AppsV1().Deployments(ns).Create(ctx, smokeDeployment(app, 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	pods, err := tb.WaitForRunningPods(ctx, ns, "app="+app, 2, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if got := p.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "100m" {
			t.Errorf("pod %s has cpu request %s, want the template's 100m (no webhook mutated it)", p.Name, got)
		}
	}
	after, err := failOpenCount(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if after < before+3 { // the probe and at least the two pods
		t.Errorf("fail-open count went from %g to %g: the pods did not go through the webhook", before, after)
	}
}

func podSpec(name string) *corev1.Pod {
	d := smokeDeployment(name, 1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: d.Spec.Template.Labels},
		Spec:       d.Spec.Template.Spec,
	}
}

// failOpenCount reads the API server's
// apiserver_admission_webhook_fail_open_count for the webhook of the
// configuration named config (0 when it has no series yet).
func failOpenCount(ctx context.Context, config string) (float64, error) {
	raw, err := tb.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("apiserver /metrics: %w", err)
	}
	var total float64
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{") {
			continue
		}
		labels, value, ok := strings.Cut(line[strings.Index(line, "{")+1:], "} ")
		if !ok || !strings.Contains(labels, `name="`+register.WebhookName+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, sc.Err()
}
