// Package deploy holds the manifests; this test keeps them honest.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	admissionapp "github.com/aware-k8s/aware/admission-controller/app"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	recommenderapp "github.com/aware-k8s/aware/recommender/app"
	rlagentapp "github.com/aware-k8s/aware/rl-agent/app"
	updaterapp "github.com/aware-k8s/aware/updater/app"
)

// commands maps a container name in the manifests to the command whose
// flags its args must parse against.
var commands = map[string]func() *cobra.Command{
	"recommender":          recommenderapp.NewCommand,
	"updater":              updaterapp.NewCommand,
	"admission-controller": admissionapp.NewCommand,
	"rl-agent":             rlagentapp.NewCommand,
}

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// manifests returns every file a kustomization under dir includes,
// following nested kustomizations, and fails on a missing entry.
func manifests(t *testing.T, dir string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	var files []string
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s/kustomization.yaml lists %s: %v", dir, r, err)
		}
		if st.IsDir() {
			files = append(files, manifests(t, p)...)
		} else {
			files = append(files, p)
		}
	}
	return files
}

func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}

func objects(t *testing.T, file string) []runtime.Object {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := decoder(t)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(string(doc)) == "---" {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, obj)
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	files := manifests(t, ".")
	if len(files) == 0 {
		t.Fatal("kustomization installs nothing")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			if len(objects(t, f)) == 0 {
				t.Fatalf("%s holds no object", f)
			}
		})
	}
	for _, f := range []string{"examples/upstream-mpa.yaml", "examples/hamster-mpa.yaml", "examples/rl-mpa.yaml"} {
		t.Run(f, func(t *testing.T) { objects(t, f) })
	}
}

// TestDeploymentArgsParse parses each container's args with the flags of
// the binary it runs, so a renamed or removed flag fails here and not in a
// rollout. It also checks the production basics: probes and requests.
func TestDeploymentArgsParse(t *testing.T) {
	var seen []string
	for _, f := range manifests(t, ".") {
		for _, obj := range objects(t, f) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				t.Run(d.Name+"/"+c.Name, func(t *testing.T) {
					newCmd, ok := commands[c.Name]
					if !ok {
						t.Fatalf("container %q runs no known component", c.Name)
					}
					seen = append(seen, c.Name)
					cmd := newCmd()
					target, rest, err := cmd.Find(c.Args)
					if err != nil {
						t.Fatalf("args %v: %v", c.Args, err)
					}
					if err := target.ParseFlags(rest); err != nil {
						t.Fatalf("args %v: %v", c.Args, err)
					}
					if c.LivenessProbe == nil || c.ReadinessProbe == nil {
						t.Error("container needs liveness and readiness probes")
					}
					if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
						t.Error("container needs CPU and memory requests")
					}
				})
			}
		}
	}
	if !slices.Contains(seen, "updater") {
		t.Errorf("no Deployment runs the updater; saw %v", seen)
	}
}

// TestAgentLinkIsAuthenticated keeps the shipped agent link on mutual TLS:
// the agent's server and every recommender that calls an agent must choose
// a TLS mode, and no manifest may fall back to plaintext.
func TestAgentLinkIsAuthenticated(t *testing.T) {
	checked := map[string]bool{}
	for _, f := range manifests(t, ".") {
		for _, obj := range objects(t, f) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				var mode, certFile string
				switch c.Name {
				case "rl-agent":
					mode, certFile = "tls-mode", "tls-cert-file"
				case "recommender":
					mode, certFile = "rl-agent-tls-mode", "rl-agent-tls-cert-file"
				default:
					continue
				}
				cmd := commands[c.Name]()
				target, rest, err := cmd.Find(c.Args)
				if err != nil {
					t.Fatal(err)
				}
				if err := target.ParseFlags(rest); err != nil {
					t.Fatal(err)
				}
				fs := target.Flags()
				if c.Name == "recommender" && fs.Lookup("rl-agent-endpoint").Value.String() == "" {
					continue
				}
				m, cert := fs.Lookup(mode).Value.String(), fs.Lookup(certFile).Value.String()
				if m == "plaintext" || (m == "" && cert == "") {
					t.Errorf("%s/%s: the agent link is not on mutual TLS (--%s=%q, --%s=%q)", d.Name, c.Name, mode, m, certFile, cert)
				}
				checked[c.Name] = true
			}
		}
	}
	if !checked["rl-agent"] || !checked["recommender"] {
		t.Fatalf("checked %v, want both sides of the agent link", checked)
	}
}
