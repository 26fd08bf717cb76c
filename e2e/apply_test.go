//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/e2e/framework"
)

// installKinds are the kinds the install path is made of; the test fails
// if a rendering lacks one, so that "every object accepted" cannot pass on
// an empty or partial rendering.
var installKinds = []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole",
	"ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Service", "Deployment", "PodDisruptionBudget",
	"PersistentVolumeClaim", "NetworkPolicy", "MutatingWebhookConfiguration"}

// transientKinds are removed again after each apply: the workloads and
// their wiring. CRDs, the Namespace, ServiceAccounts and RBAC stay: they
// are the ones the other tests install from the same manifests.
var transientKinds = map[string]bool{"ConfigMap": true, "Service": true, "Deployment": true,
	"PodDisruptionBudget": true, "PersistentVolumeClaim": true, "NetworkPolicy": true, "MutatingWebhookConfiguration": true}

// TestInstallServerSideApply applies the two install paths a user takes,
// `kustomize build deploy/` and the rendered Helm chart (each also with the
// rl-agent serving an ensemble), to the API server
// with server-side apply, as `kubectl apply --server-side` would: every
// object must be accepted (schema, defaulting and admission included) and
// then be readable as applied. Each install's workloads are removed before
// the next, so that both are applied against the same starting point.
func TestInstallServerSideApply(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	bin := tb.Env["AWARE_TESTBED_BIN"]
	kubeconfig := tb.Env["KUBECONFIG"]
	helm := os.Getenv("AWARE_HELM")
	if bin == "" || kubeconfig == "" || helm == "" {
		t.Fatalf("AWARE_TESTBED_BIN %q, KUBECONFIG %q and AWARE_HELM %q must be set: run hack/e2e.sh", bin, kubeconfig, helm)
	}
	kubectl := filepath.Join(bin, "kubectl")
	for _, tc := range []struct {
		name   string
		render []string
	}{
		{"kustomize", []string{kubectl, "kustomize", filepath.Join(repoRoot, "deploy")}},
		{"helm", []string{helm, "template", "aware", filepath.Join(repoRoot, "deploy/helm/aware"), "--include-crds"}},
		// The rl-agent as a frozen ensemble: a user's overlay with
		// components/rl-agent-ensemble, and the chart's values for it.
		{"kustomize-ensemble", []string{kubectl, "kustomize", ensembleOverlay(t)}},
		{"helm-ensemble", []string{helm, "template", "aware", filepath.Join(repoRoot, "deploy/helm/aware"), "--include-crds",
			"--set", "rlAgent.ensemble.checkpoints={seed1.ckpt,seed2.ckpt,seed3.ckpt}", "--set", "rlAgent.ensemble.quorum=2",
			"--set", "rlAgent.ensemble.volume.configMap.name=aware-rl-agent-ensemble"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb.DumpLogsOnFailure(t)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			rendered, err := runCommand(ctx, nil, tc.render...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeUnstructured(rendered)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.GetKind()] = true
			}
			for _, k := range installKinds {
				if !kinds[k] {
					t.Errorf("the %s rendering has no %s", tc.name, k)
				}
			}
			out, err := runCommand(ctx, rendered, kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side",
				"--field-manager", "aware-install-"+tc.name, "-f", "-")
			if err != nil {
				t.Fatal(err)
			}
			applied := strings.Count(string(out), "serverside-applied")
			if applied != len(objs) {
				t.Errorf("%d of %d objects server-side applied:\n%s", applied, len(objs), out)
			}
			var transient []byte
			for _, o := range objs {
				if err := checkApplied(ctx, kubectl, kubeconfig, o); err != nil {
					t.Error(err)
				}
				if transientKinds[o.GetKind()] {
					raw, err := yaml.Marshal(o.Object)
					if err != nil {
						t.Fatal(err)
					}
					transient = append(append(transient, "---\n"...), raw...)
				}
			}
			if _, err := runCommand(ctx, transient, kubectl, "--kubeconfig", kubeconfig, "delete", "--wait", "--timeout=2m",
				"--ignore-not-found", "-f", "-"); err != nil {
				t.Fatalf("removing the %s install's workloads: %v", tc.name, err)
			}
		})
	}
}

// ensembleOverlay writes the overlay docs/install.md ("Optional: serve a
// frozen ensemble") has a user write, outside deploy/ (kustomize refuses an
// overlay inside its base, and absolute paths), and returns its directory.
func ensembleOverlay(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(repoRoot, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("resources:\n- %s\ncomponents:\n- %s\n", rel, filepath.Join(rel, "components/rl-agent-ensemble"))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkApplied reads o back and compares the fields a user sets that the
// API server must keep as given: for Deployments the image and args of each
// container, for everything the labels.
func checkApplied(ctx context.Context, kubectl, kubeconfig string, o *unstructured.Unstructured) error {
	args := []string{"--kubeconfig", kubeconfig, "get", "-o", "yaml", strings.ToLower(o.GetKind()) + "." + groupOf(o), o.GetName()}
	if ns := o.GetNamespace(); ns != "" {
		args = append(args, "-n", ns)
	}
	raw, err := runCommand(ctx, nil, append([]string{kubectl}, args...)...)
	if err != nil {
		return fmt.Errorf("%s %s not readable after apply: %w", o.GetKind(), o.GetName(), err)
	}
	var got unstructured.Unstructured
	if err := yaml.Unmarshal(raw, &got.Object); err != nil {
		return err
	}
	for k, v := range o.GetLabels() {
		if got.GetLabels()[k] != v {
			return fmt.Errorf("%s %s: label %s=%q after apply, want %q", o.GetKind(), o.GetName(), k, got.GetLabels()[k], v)
		}
	}
	if o.GetKind() == "Deployment" {
		want, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		have, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers")
		if len(want) != len(have) {
			return fmt.Errorf("Deployment %s: %d containers after apply, want %d", o.GetName(), len(have), len(want))
		}
		for i := range want {
			w, h := want[i].(map[string]any), have[i].(map[string]any)
			if fmt.Sprint(w["image"], w["args"]) != fmt.Sprint(h["image"], h["args"]) {
				return fmt.Errorf("Deployment %s: container %v %v after apply, want %v %v", o.GetName(), h["image"], h["args"], w["image"], w["args"])
			}
		}
	}
	return nil
}

// groupOf returns the API group of o's apiVersion; "" is the core group,
// which kubectl names without a suffix.
func groupOf(o *unstructured.Unstructured) string {
	g, _, found := strings.Cut(o.GetAPIVersion(), "/")
	if !found {
		return ""
	}
	return g
}

// decodeUnstructured returns the objects of a multi-document YAML stream,
// sorted by kind and name for stable messages.
func decodeUnstructured(raw []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	docs, err := framework.Documents(raw)
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	sort.Slice(objs, func(i, j int) bool {
		return objs[i].GetKind()+"/"+objs[i].GetName() < objs[j].GetKind()+"/"+objs[j].GetName()
	})
	return objs, nil
}

// runCommand runs a command with stdin and returns its stdout, or an error with
// its stderr.
func runCommand(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return out, nil
}
