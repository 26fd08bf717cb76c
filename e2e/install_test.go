//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/aware-k8s/aware/e2e/framework"
)

// TestInstallManifests renders deploy/ with the kustomize built into
// kubectl, as `kubectl apply -k deploy/` would, and checks what the unit
// tests of deploy/ cannot: the install parameter prometheus-address reaches
// the recommender through the generated ConfigMap under its hashed name,
// and the webhook registration is part of the install, so that
// `kubectl delete -k deploy/` removes it.
func TestInstallManifests(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	bin := tb.Env["AWARE_TESTBED_BIN"]
	if bin == "" {
		t.Fatal("the testbed env sets no AWARE_TESTBED_BIN")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "kustomize", filepath.Join(repoRoot, "deploy")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize deploy: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(scheme.Scheme).UniversalDeserializer()
	docs, err := framework.Documents(out)
	if err != nil {
		t.Fatal(err)
	}
	configMaps := map[string]*corev1.ConfigMap{}
	var recommender *appsv1.Deployment
	var webhooks []string
	for _, doc := range docs {
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			continue // CRDs and our own kinds: not what this test reads
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			configMaps[o.Name] = o
		case *appsv1.Deployment:
			if o.Name == "aware-recommender" {
				recommender = o
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			webhooks = append(webhooks, o.Name)
		}
	}
	if recommender == nil {
		t.Fatal("the install has no aware-recommender Deployment")
	}
	var ref *corev1.ConfigMapKeySelector
	for _, e := range recommender.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "PROMETHEUS_ADDRESS" && e.ValueFrom != nil {
			ref = e.ValueFrom.ConfigMapKeyRef
		}
	}
	if ref == nil {
		t.Fatal("the recommender takes no PROMETHEUS_ADDRESS from a ConfigMap")
	}
	cm := configMaps[ref.Name]
	if cm == nil || !strings.HasPrefix(ref.Name, "aware-config-") {
		t.Fatalf("the recommender reads ConfigMap %q, which the install does not create under that (hashed) name; it has %v", ref.Name, configMaps)
	}
	if _, ok := cm.Data[ref.Key]; !ok || cm.Namespace != "aware-system" {
		t.Errorf("ConfigMap %s/%s lacks key %s: %v", cm.Namespace, cm.Name, ref.Key, cm.Data)
	}
	if len(webhooks) != 1 || webhooks[0] != "aware-admission-controller" {
		t.Errorf("webhook registrations in the install %v, want [aware-admission-controller]", webhooks)
	}
}
