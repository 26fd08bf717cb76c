// Package deploy holds the manifests; this test keeps them honest.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	admissionapp "github.com/aware-k8s/aware/admission-controller/app"
	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/rival"
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
	APIVersion         string      `json:"apiVersion"`
	Kind               string      `json:"kind"`
	Resources          []string    `json:"resources"`
	ConfigMapGenerator []generator `json:"configMapGenerator,omitempty"`
}

type generator struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	Literals  []string `json:"literals,omitempty"`
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

// TestPrometheusAddressIsOneParameter: the install takes the Prometheus
// address as one parameter, the prometheus-address literal of the
// aware-config generator in deploy/kustomization.yaml, which reaches the
// recommender's --prometheus-address through its environment. The
// recommender accepts the shipped (empty) value and a set one.
func TestPrometheusAddressIsOneParameter(t *testing.T) {
	raw, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatal(err)
	}
	var params map[string]string
	for _, g := range k.ConfigMapGenerator {
		if g.Name == "aware-config" && g.Namespace == "aware-system" {
			params = map[string]string{}
			for _, l := range g.Literals {
				key, value, _ := strings.Cut(l, "=")
				params[key] = value
			}
		}
	}
	if _, ok := params["prometheus-address"]; !ok {
		t.Fatalf("no aware-config generator in aware-system with a prometheus-address literal: %+v", k.ConfigMapGenerator)
	}
	var rec *corev1.Container
	for _, obj := range objects(t, "recommender/recommender.yaml") {
		if d, ok := obj.(*appsv1.Deployment); ok {
			rec = &d.Spec.Template.Spec.Containers[0]
		}
	}
	if rec == nil {
		t.Fatal("no recommender Deployment")
	}
	env := map[string]string{}
	for _, e := range rec.Env {
		ref := e.ValueFrom.ConfigMapKeyRef
		if ref == nil || ref.Name != "aware-config" {
			t.Fatalf("env %s does not come from aware-config", e.Name)
		}
		v, ok := params[ref.Key]
		if !ok {
			t.Fatalf("env %s reads key %q, which aware-config lacks", e.Name, ref.Key)
		}
		env[e.Name] = v
	}
	for _, value := range []string{params["prometheus-address"], "http://prometheus-operated.monitoring.svc:9090"} {
		t.Run("prometheus-address="+value, func(t *testing.T) {
			env["PROMETHEUS_ADDRESS"] = value
			// $(VAR) in args is expanded by the kubelet from the env.
			var args []string
			for _, a := range rec.Args {
				for name, v := range env {
					a = strings.ReplaceAll(a, "$("+name+")", v)
				}
				args = append(args, a)
			}
			o := recommenderapp.NewOptions()
			fs := pflag.NewFlagSet("recommender", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if o.PrometheusAddress != value {
				t.Fatalf("--prometheus-address = %q, want %q (args %v)", o.PrometheusAddress, value, args)
			}
			if err := o.Validate(); err != nil {
				t.Fatalf("the recommender rejects the install's args %v: %v", args, err)
			}
		})
	}
}

// TestShippedWebhookRegistration: the MutatingWebhookConfiguration the
// admission controller keeps ships with the install (so that
// `kubectl delete -k deploy/` removes it) exactly as --register-webhook
// builds it from the Deployment's flags, and the admission controller may
// only get and patch that one name.
func TestShippedWebhookRegistration(t *testing.T) {
	var args []string
	shipped := map[string]*admissionregistrationv1.MutatingWebhookConfiguration{}
	var rules []rbacv1.PolicyRule
	for _, f := range manifests(t, ".") {
		for _, obj := range objects(t, f) {
			switch o := obj.(type) {
			case *appsv1.Deployment:
				if o.Name == "aware-admission-controller" {
					args = o.Spec.Template.Spec.Containers[0].Args
				}
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				shipped[o.Name] = o
			case *rbacv1.ClusterRole:
				if o.Name == "aware:admission-controller" {
					rules = o.Rules
				}
			}
		}
	}
	o := admissionapp.NewOptions()
	fs := pflag.NewFlagSet("admission-controller", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if !o.RegisterWebhook {
		t.Fatal("the admission controller does not keep its registration (--register-webhook)")
	}
	rc, err := o.Registration()
	if err != nil {
		t.Fatal(err)
	}
	want := register.Build(&rc)
	got := shipped[rc.Name]
	if got == nil {
		t.Fatalf("the install lacks the MutatingWebhookConfiguration %s the admission controller patches; it has %v", rc.Name, slices.Collect(maps.Keys(shipped)))
	}
	if !register.WebhooksEqual(got.Webhooks, want.Webhooks) {
		gotY, _ := yaml.Marshal(got.Webhooks)
		wantY, _ := yaml.Marshal(want.Webhooks)
		t.Errorf("shipped webhooks differ from what --register-webhook builds:\n%s\nwant:\n%s", gotY, wantY)
	}
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			t.Errorf("shipped label %s=%q, want %q", k, got.Labels[k], v)
		}
	}
	var named []string
	for _, r := range rules {
		if !slices.Contains(r.Resources, "mutatingwebhookconfigurations") {
			continue
		}
		if !slices.Equal(r.ResourceNames, []string{rc.Name}) {
			t.Errorf("rule %+v is not limited to %s", r, rc.Name)
		}
		named = append(named, r.Verbs...)
	}
	slices.Sort(named)
	if !slices.Equal(named, []string{"get", "patch"}) {
		t.Errorf("verbs on mutatingwebhookconfigurations %v, want only get and patch", named)
	}
}

// TestRecommenderMayListRivals: the recommender's ClusterRole lets it list
// every kind of autoscaler pkg/kube/rival looks for, and nothing more on them.
func TestRecommenderMayListRivals(t *testing.T) {
	var rules []rbacv1.PolicyRule
	for _, obj := range objects(t, "recommender/recommender.yaml") {
		if cr, ok := obj.(*rbacv1.ClusterRole); ok && cr.Name == "aware:recommender" {
			rules = cr.Rules
		}
	}
	for _, k := range rival.Kinds {
		var verbs []string
		for _, r := range rules {
			if slices.Contains(r.APIGroups, k.Resource.Group) && slices.Contains(r.Resources, k.Resource.Resource) {
				verbs = append(verbs, r.Verbs...)
			}
		}
		if !slices.Equal(verbs, []string{"list"}) {
			t.Errorf("%s: verbs %v, want [list]", k.Resource.GroupResource(), verbs)
		}
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
