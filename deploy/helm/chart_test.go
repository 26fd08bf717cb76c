//go:build chart

// Package helm holds the tests of the Helm chart in aware/: run by
// `make chart`, which builds the pinned helm and kustomize and passes them
// in AWARE_HELM and AWARE_KUSTOMIZE.
package helm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	admissionapp "github.com/aware-k8s/aware/admission-controller/app"
	recommenderapp "github.com/aware-k8s/aware/recommender/app"
	rlagentapp "github.com/aware-k8s/aware/rl-agent/app"
	updaterapp "github.com/aware-k8s/aware/updater/app"
)

// commands maps a container name to the command whose flags its args must
// parse against.
var commands = map[string]func() *cobra.Command{
	"recommender":          recommenderapp.NewCommand,
	"updater":              updaterapp.NewCommand,
	"admission-controller": admissionapp.NewCommand,
	"rl-agent":             rlagentapp.NewCommand,
}

// configName matches the generated ConfigMap's name: kustomize and the
// chart hash its content differently.
var configName = regexp.MustCompile(`aware-config-[a-z0-9]+`)

type object = map[string]any

func tool(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: run make chart", env)
	}
	return p
}

func render(t *testing.T, bin string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %v: %w\n%s", bin, args, err, stderr.String())
	}
	return out, nil
}

func helmTemplate(t *testing.T, set ...string) ([]byte, error) {
	args := []string{"template", "aware", "aware", "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return render(t, tool(t, "AWARE_HELM"), args...)
}

// parse returns the objects of a multi-document YAML stream by
// kind/namespace/name, the generated ConfigMap's hash replaced by HASH.
func parse(t *testing.T, raw []byte) map[string]object {
	t.Helper()
	raw = configName.ReplaceAll(raw, []byte("aware-config-HASH"))
	objs := map[string]object{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if o == nil {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		key := fmt.Sprintf("%v/%v/%v", o["kind"], md["namespace"], md["name"])
		if _, dup := objs[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		objs[key] = o
	}
}

func keys(m map[string]object) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ensembleValues are the chart's values that say what
// components/rl-agent-ensemble does.
var ensembleValues = []string{
	"rlAgent.ensemble.checkpoints={seed1.ckpt,seed2.ckpt,seed3.ckpt}",
	"rlAgent.ensemble.quorum=0",
	"rlAgent.ensemble.volume.configMap.name=aware-rl-agent-ensemble",
}

// monitoringValues are the chart's values that say what
// components/monitoring does.
var monitoringValues = []string{
	"monitoring.podMonitor.enabled=true",
	"monitoring.prometheusRule.enabled=true",
	"monitoring.dashboard.enabled=true",
}

// overlay writes a kustomization of deploy/ with components, as a user's
// overlay outside deploy/ would be (kustomize refuses an overlay inside the
// base it builds on, and absolute paths), and returns its directory.
func overlay(t *testing.T, components ...string) string {
	t.Helper()
	dir := t.TempDir()
	deploy, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, deploy)
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n- " + rel + "\ncomponents:\n"
	for _, c := range components {
		k += "- " + filepath.Join(rel, c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestChartMatchesKustomize: with its default values the chart installs
// exactly what `kustomize build deploy/` does, with the ensemble's values
// what an overlay with components/rl-agent-ensemble does, and with the
// monitoring values what one with components/monitoring does.
func TestChartMatchesKustomize(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
		set  []string
	}{
		{"defaults", func(*testing.T) string { return "../" }, nil},
		{"rl-agent ensemble", func(t *testing.T) string { return overlay(t, "components/rl-agent-ensemble") }, ensembleValues},
		{"monitoring", func(t *testing.T) string { return overlay(t, "components/monitoring") }, monitoringValues},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := render(t, tool(t, "AWARE_KUSTOMIZE"), "build", tc.dir(t))
			if err != nil {
				t.Fatal(err)
			}
			h, err := helmTemplate(t, tc.set...)
			if err != nil {
				t.Fatal(err)
			}
			want, got := parse(t, k), parse(t, h)
			if !slices.Equal(keys(got), keys(want)) {
				t.Fatalf("the chart renders\n  %v\nkustomize builds\n  %v", keys(got), keys(want))
			}
			for _, key := range keys(want) {
				if !reflect.DeepEqual(got[key], want[key]) {
					g, _ := json.MarshalIndent(got[key], "", "  ")
					w, _ := json.MarshalIndent(want[key], "", "  ")
					t.Errorf("%s differs:\nchart:\n%s\nkustomize:\n%s", key, g, w)
				}
			}
			t.Logf("%d objects alike", len(want))
		})
	}
}

// dig returns the value at path in o (map keys, or indexes of lists).
func dig(o any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[p]
		case int:
			l, _ := o.([]any)
			if p >= len(l) {
				return nil
			}
			o = l[p]
		}
	}
	return o
}

func container(o object) map[string]any {
	c, _ := dig(o, "spec", "template", "spec", "containers", 0).(map[string]any)
	return c
}

func args(o object) []string {
	var out []string
	for _, a := range dig(container(o), "args").([]any) {
		out = append(out, a.(string))
	}
	return out
}

// TestChartValues renders the chart with non-default values and checks
// that each reaches the objects, and that every container's args parse
// with its binary's flags.
func TestChartValues(t *testing.T) {
	const ns = "aware-system"
	for _, tc := range []struct {
		name    string
		set     []string
		wantErr string
		check   func(t *testing.T, objs map[string]object)
	}{
		{name: "images from a registry", set: []string{"image.registry=ghcr.io/example/", "image.tag=v1.2.3"},
			check: func(t *testing.T, objs map[string]object) {
				for _, b := range []string{"recommender", "updater", "admission-controller", "rl-agent"} {
					img := dig(container(objs["Deployment/"+ns+"/aware-"+b]), "image")
					if want := "ghcr.io/example/aware-" + b + ":v1.2.3"; img != want {
						t.Errorf("%s runs %v, want %s", b, img, want)
					}
				}
			}},
		{name: "webhook fails closed", set: []string{"admissionController.webhook.failurePolicy=Fail",
			"admissionController.webhook.namespaceSelector.matchLabels.aware=on"},
			check: func(t *testing.T, objs map[string]object) {
				w := objs["MutatingWebhookConfiguration/<nil>/aware-admission-controller"]
				if got := dig(w, "webhooks", 0, "failurePolicy"); got != "Fail" {
					t.Errorf("failurePolicy %v", got)
				}
				if got := dig(w, "webhooks", 0, "namespaceSelector"); !reflect.DeepEqual(got, map[string]any{"matchLabels": map[string]any{"aware": "on"}}) {
					t.Errorf("namespaceSelector %v", got)
				}
			}},
		{name: "webhook certificate from files without a Secret", set: []string{"admissionController.certificate.mode=files"},
			wantErr: "filesSecretName is required"},
		{name: "webhook certificate mode unknown", set: []string{"admissionController.certificate.mode=acme"},
			wantErr: "must be self-managed or files"},
		{name: "webhook certificate from files", set: []string{"admissionController.certificate.mode=files",
			"admissionController.certificate.filesSecretName=webhook-tls"},
			check: func(t *testing.T, objs map[string]object) {
				d := objs["Deployment/"+ns+"/aware-admission-controller"]
				if a := args(d); !slices.Contains(a, "--cert-mode=files") || !slices.Contains(a, "--tls-cert-file=/etc/aware/tls/tls.crt") {
					t.Errorf("args %v", a)
				}
				if got := dig(d, "spec", "template", "spec", "volumes", 0, "secret", "secretName"); got != "webhook-tls" {
					t.Errorf("volume from Secret %v", got)
				}
				if rules := dig(objs["Role/"+ns+"/aware:admission-controller"], "rules").([]any); len(rules) != 2 {
					t.Errorf("the Role keeps %d rules, want the 2 of the Lease (no Secret access)", len(rules))
				}
			}},
		{name: "agent link in plaintext", set: []string{"agentLink.mode=plaintext"},
			check: func(t *testing.T, objs map[string]object) {
				if a := args(objs["Deployment/"+ns+"/aware-recommender"]); !slices.Contains(a, "--rl-agent-tls-mode=plaintext") {
					t.Errorf("recommender args %v", a)
				}
				if a := args(objs["Deployment/"+ns+"/aware-rl-agent"]); !slices.Contains(a, "--tls-mode=plaintext") {
					t.Errorf("rl-agent args %v", a)
				}
			}},
		{name: "agent link from files", set: []string{"agentLink.mode=files", "agentLink.agentSecretName=agent-tls", "agentLink.recommenderSecretName=rec-tls"},
			check: func(t *testing.T, objs map[string]object) {
				if a := args(objs["Deployment/"+ns+"/aware-recommender"]); !slices.Contains(a, "--rl-agent-tls-ca-file=/etc/aware/rl-agent-tls/ca.crt") {
					t.Errorf("recommender args %v", a)
				}
				if got := dig(objs["Deployment/"+ns+"/aware-rl-agent"], "spec", "template", "spec", "volumes", 1, "secret", "secretName"); got != "agent-tls" {
					t.Errorf("rl-agent TLS volume from %v", got)
				}
			}},
		{name: "agent link mode unknown", set: []string{"agentLink.mode=tls"}, wantErr: "must be self-managed, files or plaintext"},
		{name: "external agent", set: []string{"rlAgent.enabled=false", "agentLink.endpoint=agent.example:9090"},
			check: func(t *testing.T, objs map[string]object) {
				if _, ok := objs["Deployment/"+ns+"/aware-rl-agent"]; ok {
					t.Error("rl-agent installed although disabled")
				}
				if a := args(objs["Deployment/"+ns+"/aware-recommender"]); !slices.Contains(a, "--rl-agent-endpoint=agent.example:9090") {
					t.Errorf("recommender args %v", a)
				}
			}},
		{name: "one replica without leader election", set: []string{"recommender.replicas=1", "recommender.leaderElection=false"},
			check: func(t *testing.T, objs map[string]object) {
				if _, ok := objs["PodDisruptionBudget/"+ns+"/aware-recommender"]; ok {
					t.Error("a PodDisruptionBudget of minAvailable 1 for one replica would block every drain")
				}
				d := objs["Deployment/"+ns+"/aware-recommender"]
				if got := dig(d, "spec", "replicas"); got != float64(1) {
					t.Errorf("replicas %v", got)
				}
				if a := args(d); !slices.Contains(a, "--leader-elect=false") {
					t.Errorf("args %v", a)
				}
			}},
		{name: "another namespace and Prometheus", set: []string{"namespace=autoscaling", "prometheusAddress=http://prom:9090"},
			check: func(t *testing.T, objs map[string]object) {
				for k := range objs {
					if strings.Contains(k, "/"+ns+"/") {
						t.Errorf("%s still in %s", k, ns)
					}
				}
				if got := dig(objs["ConfigMap/autoscaling/aware-config-HASH"], "data", "prometheus-address"); got != "http://prom:9090" {
					t.Errorf("prometheus-address %v", got)
				}
				w := objs["MutatingWebhookConfiguration/<nil>/aware-admission-controller"]
				if got := dig(w, "webhooks", 0, "clientConfig", "service", "namespace"); got != "autoscaling" {
					t.Errorf("webhook Service namespace %v", got)
				}
			}},
		{name: "ensemble of a PersistentVolumeClaim with a majority", set: []string{
			"rlAgent.ensemble.checkpoints={a.ckpt,/data/b.ckpt,c.ckpt}", "rlAgent.ensemble.quorum=2",
			"rlAgent.ensemble.volume.persistentVolumeClaim.claimName=members", "rlAgent.ensemble.mountPath=/members/"},
			check: func(t *testing.T, objs map[string]object) {
				d := objs["Deployment/"+ns+"/aware-rl-agent"]
				a := args(d)
				if !slices.Contains(a, "--ensemble-checkpoints=/members/a.ckpt,/data/b.ckpt,/members/c.ckpt") || !slices.Contains(a, "--ensemble-quorum=2") {
					t.Errorf("args %v", a)
				}
				if got := dig(container(d), "volumeMounts", 1); !reflect.DeepEqual(got, map[string]any{"name": "ensemble", "mountPath": "/members/", "readOnly": true}) {
					t.Errorf("volume mount %v", got)
				}
				if got := dig(d, "spec", "template", "spec", "volumes", 1, "persistentVolumeClaim", "claimName"); got != "members" {
					t.Errorf("ensemble volume from %v", got)
				}
			}},
		{name: "ensemble of absolute paths needs no volume", set: []string{"rlAgent.ensemble.checkpoints={/var/lib/aware-rl-agent/a.ckpt,/var/lib/aware-rl-agent/b.ckpt}"},
			check: func(t *testing.T, objs map[string]object) {
				d := objs["Deployment/"+ns+"/aware-rl-agent"]
				if a := args(d); !slices.Contains(a, "--ensemble-quorum=0") {
					t.Errorf("args %v", a)
				}
				if n := len(dig(d, "spec", "template", "spec", "volumes").([]any)); n != 1 {
					t.Errorf("%d volumes, want only the state volume", n)
				}
			}},
		{name: "ensemble quorum above its members", set: append(slices.Clone(ensembleValues), "rlAgent.ensemble.quorum=4"),
			wantErr: "rlAgent.ensemble.quorum must be in [0, 3] (0: all 3 members), got 4"},
		{name: "ensemble quorum negative", set: append(slices.Clone(ensembleValues), "rlAgent.ensemble.quorum=-1"),
			wantErr: "rlAgent.ensemble.quorum must be in [0, 3] (0: all 3 members), got -1"},
		{name: "ensemble quorum not a number", set: append(slices.Clone(ensembleValues), "rlAgent.ensemble.quorum=two"),
			wantErr: "rlAgent.ensemble.quorum must be a whole number, got two"},
		{name: "ensemble quorum a fraction", set: append(slices.Clone(ensembleValues), "rlAgent.ensemble.quorum=1.5"),
			wantErr: "rlAgent.ensemble.quorum must be a whole number, got 1.5"},
		{name: "ensemble of one", set: []string{"rlAgent.ensemble.checkpoints={a.ckpt}", "rlAgent.ensemble.volume.configMap.name=x"},
			wantErr: "rlAgent.ensemble.checkpoints needs at least 2 checkpoints, got 1"},
		{name: "ensemble quorum without members", set: []string{"rlAgent.ensemble.quorum=2"},
			wantErr: "rlAgent.ensemble.quorum=2 needs rlAgent.ensemble.checkpoints"},
		{name: "ensemble without a volume", set: []string{"rlAgent.ensemble.checkpoints={a.ckpt,b.ckpt}"},
			wantErr: `"a.ckpt" is relative to rlAgent.ensemble.mountPath, but rlAgent.ensemble.volume names no volume`},
		{name: "monitoring with selector labels and Grafana's namespace", set: append(slices.Clone(monitoringValues),
			"monitoring.prometheusRule.labels.release=kube-prometheus-stack", "monitoring.podMonitor.labels.release=kube-prometheus-stack",
			"monitoring.podMonitor.interval=30s", "monitoring.dashboard.namespace=grafana"),
			check: func(t *testing.T, objs map[string]object) {
				for _, k := range []string{"PrometheusRule/" + ns + "/aware", "PodMonitor/" + ns + "/aware"} {
					if got := dig(objs[k], "metadata", "labels", "release"); got != "kube-prometheus-stack" {
						t.Errorf("%s label release=%v", k, got)
					}
				}
				if got := dig(objs["PodMonitor/"+ns+"/aware"], "spec", "podMetricsEndpoints", 0, "interval"); got != "30s" {
					t.Errorf("scrape interval %v", got)
				}
				cm := objs["ConfigMap/grafana/aware-grafana-dashboard"]
				if got := dig(cm, "metadata", "labels", "grafana_dashboard"); got != "1" {
					t.Errorf("dashboard ConfigMap in grafana: label grafana_dashboard=%v", got)
				}
				if d, _ := dig(cm, "data", "aware-dashboard.json").(string); !strings.Contains(d, `"uid": "aware-overview"`) {
					t.Errorf("dashboard ConfigMap lacks the dashboard")
				}
				if groups, _ := dig(objs["PrometheusRule/"+ns+"/aware"], "spec", "groups").([]any); len(groups) == 0 {
					t.Error("PrometheusRule without groups")
				}
			}},
		{name: "monitoring off by default", check: func(t *testing.T, objs map[string]object) {
			for k := range objs {
				if strings.HasPrefix(k, "PrometheusRule/") || strings.HasPrefix(k, "PodMonitor/") || strings.Contains(k, "grafana") {
					t.Errorf("%s rendered with the default values", k)
				}
			}
		}},
		{name: "resources", set: []string{"rlAgent.resources.limits.memory=4Gi"},
			check: func(t *testing.T, objs map[string]object) {
				if got := dig(container(objs["Deployment/"+ns+"/aware-rl-agent"]), "resources", "limits", "memory"); got != "4Gi" {
					t.Errorf("rl-agent memory limit %v", got)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := helmTemplate(t, tc.set...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs := parse(t, raw)
			tc.check(t, objs)
			for k, o := range objs {
				if o["kind"] != "Deployment" {
					continue
				}
				c := container(o)
				cmd := commands[c["name"].(string)]()
				target, rest, err := cmd.Find(args(o))
				if err == nil {
					err = target.ParseFlags(rest)
				}
				if err != nil {
					t.Errorf("%s: args %v: %v", k, args(o), err)
				}
			}
		})
	}
}
