package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	admissionapp "github.com/aware-k8s/aware/admission-controller/app"
	recommenderapp "github.com/aware-k8s/aware/recommender/app"
	rlagentapp "github.com/aware-k8s/aware/rl-agent/app"
	updaterapp "github.com/aware-k8s/aware/updater/app"
)

// fixture is a rendered install of one Deployment whose args and env use
// what the real ones do: a ConfigMap key, the pod's namespace, a
// positional subcommand, a bool flag, a Service address.
const fixture = `
apiVersion: v1
kind: ConfigMap
metadata: {name: conf-abc, namespace: sys}
data: {prom: "http://prom:9090"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: aware-admission-controller, namespace: sys}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      serviceAccountName: aware-admission-controller
      containers:
      - name: admission-controller
        image: x
        args:
        - serve
        - --namespace=$(POD_NAMESPACE)
        - --register-webhook
        - --webhook-service-name=aware-admission-controller
        - --webhook-service-port=443
        - --webhook-bind-address=:8443
        - --metrics-bind-address=:8080
        - --health-bind-address=:8081
        - --from-config=$(PROM)/x
        - --escaped=$$(PROM)
        - --undefined=$(NOPE)
        env:
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: PROM, valueFrom: {configMapKeyRef: {name: conf-abc, key: prom}}}
        - {name: GOGC, value: "400"}
`

func testLoopback() *Loopback {
	ports := map[string]int{"metrics": 1, "health": 2, "grpc": 3, "webhook": 4}
	return &Loopback{
		Kubeconfig: "/kc",
		Addr:       func(l string) string { return fmt.Sprintf("127.0.0.1:%d", ports[l]) },
		TempDir:    func() string { return "/tmp/x" },
	}
}

func TestWorkloads(t *testing.T) {
	ws, err := Workloads([]byte(fixture))
	if err != nil {
		t.Fatal(err)
	}
	w, ok := ws["admission-controller"]
	if !ok || len(ws) != 1 {
		t.Fatalf("workloads %v", ws)
	}
	if w.ServiceAccount != "aware-admission-controller" || w.Namespace != "sys" || w.Deployment != "aware-admission-controller" {
		t.Errorf("workload %+v", w)
	}
	for _, want := range []string{"--namespace=sys", "--from-config=http://prom:9090/x", "--escaped=$(PROM)", "--undefined=$(NOPE)"} {
		if !slices.Contains(w.Args, want) {
			t.Errorf("args %v lack %s", w.Args, want)
		}
	}
	if want := []string{"POD_NAMESPACE=sys", "PROM=http://prom:9090", "GOGC=400"}; !slices.Equal(w.Env, want) {
		t.Errorf("env %v, want %v", w.Env, want)
	}

	for name, broken := range map[string]string{
		"missing ConfigMap":   strings.Replace(fixture, "name: conf-abc, namespace", "name: other, namespace", 1),
		"missing key":         strings.Replace(fixture, "key: prom", "key: nokey", 1),
		"unresolvable field":  strings.Replace(fixture, "metadata.namespace", "metadata.name", 1),
		"no service account":  strings.Replace(fixture, "serviceAccountName: aware-admission-controller", "", 1),
		"a second Deployment": fixture + "---\n" + strings.SplitN(fixture, "---\n", 2)[1],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Workloads([]byte(broken)); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestProcessArgs(t *testing.T) {
	ws, err := Workloads([]byte(fixture))
	if err != nil {
		t.Fatal(err)
	}
	base := ws["admission-controller"]
	for _, tc := range []struct {
		name     string
		manifest func([]string) []string
		set      []string
		want     []string
		wantErr  string
	}{
		{name: "loopback defaults", want: []string{"serve", "--namespace=sys", "--register-webhook",
			"--webhook-bind-address=127.0.0.1:4", "--metrics-bind-address=127.0.0.1:1", "--health-bind-address=127.0.0.1:2",
			"--from-config=http://prom:9090/x", "--escaped=$(PROM)", "--undefined=$(NOPE)",
			"--kubeconfig=/kc", "--v=2", "--webhook-url=https://127.0.0.1:4/mutate-pods"}},
		{name: "a flag added to the manifest reaches the process",
			manifest: func(a []string) []string { return append(a, "--new-flag=1") },
			want:     []string{"serve", "--namespace=sys", "--register-webhook", "--webhook-bind-address=127.0.0.1:4", "--metrics-bind-address=127.0.0.1:1", "--health-bind-address=127.0.0.1:2", "--from-config=http://prom:9090/x", "--escaped=$(PROM)", "--undefined=$(NOPE)", "--new-flag=1", "--kubeconfig=/kc", "--v=2", "--webhook-url=https://127.0.0.1:4/mutate-pods"}},
		{name: "a flag removed from the manifest leaves the process",
			manifest: func(a []string) []string {
				return slices.DeleteFunc(a, func(s string) bool { return strings.HasPrefix(s, "--from-config") })
			},
			want: []string{"serve", "--namespace=sys", "--register-webhook", "--webhook-bind-address=127.0.0.1:4", "--metrics-bind-address=127.0.0.1:1", "--health-bind-address=127.0.0.1:2", "--escaped=$(PROM)", "--undefined=$(NOPE)", "--kubeconfig=/kc", "--v=2", "--webhook-url=https://127.0.0.1:4/mutate-pods"}},
		{name: "the test's values in place of the manifest's and the defaults",
			set:  []string{"--namespace=t1", "--webhook-url=https://127.0.0.1:9/x", "--heartbeat-interval=2s", "--v=4"},
			want: []string{"serve", "--namespace=t1", "--register-webhook", "--webhook-bind-address=127.0.0.1:4", "--metrics-bind-address=127.0.0.1:1", "--health-bind-address=127.0.0.1:2", "--from-config=http://prom:9090/x", "--escaped=$(PROM)", "--undefined=$(NOPE)", "--kubeconfig=/kc", "--v=4", "--webhook-url=https://127.0.0.1:9/x", "--heartbeat-interval=2s"}},
		{name: "a bool flag set by the test", set: []string{"--leader-elect"},
			want: []string{"serve", "--namespace=sys", "--register-webhook", "--webhook-bind-address=127.0.0.1:4", "--metrics-bind-address=127.0.0.1:1", "--health-bind-address=127.0.0.1:2", "--from-config=http://prom:9090/x", "--escaped=$(PROM)", "--undefined=$(NOPE)", "--kubeconfig=/kc", "--v=2", "--webhook-url=https://127.0.0.1:4/mutate-pods", "--leader-elect=true"}},
		{name: "a flag the table does not list", set: []string{"--cert-mode=files"}, wantErr: "--cert-mode, which is not in framework.Overrides"},
		{name: "a flag of another component", set: []string{"--update-interval=1s"}, wantErr: "--update-interval, which is not in framework.Overrides"},
		{name: "a positional test argument", set: []string{"serve"}, wantErr: "is not a --flag"},
		{name: "a manifest flag with a separate value",
			manifest: func(a []string) []string { return append(a, "--cert-mode", "files") },
			wantErr:  "write --cert-mode files as --cert-mode=files"},
		{name: "a short manifest flag",
			manifest: func(a []string) []string { return append(a, "-v=3") },
			wantErr:  `argument "-v=3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := base
			w.Args = slices.Clone(base.Args)
			if tc.manifest != nil {
				w.Args = tc.manifest(w.Args)
			}
			got, err := ProcessArgs(w, testLoopback(), tc.set)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("args\n  %v\nwant\n  %v", got, tc.want)
			}
		})
	}
}

func TestNodeArgs(t *testing.T) {
	port := func(component, listener string) int {
		return map[string]int{"recommender/metrics": 10, "recommender/health": 11, "rl-agent/grpc": 23}[component+"/"+listener]
	}
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{name: "listeners rewritten, the rest kept",
			args: []string{"--leader-elect=true", "--rl-agent-endpoint=aware-rl-agent.aware-system.svc:9090", "--metrics-bind-address=:8080", "--health-bind-address=:8081"},
			want: []string{"--leader-elect=true", "--rl-agent-endpoint=aware-rl-agent.aware-system.svc:23", "--metrics-bind-address=127.0.0.1:10", "--health-bind-address=127.0.0.1:11"}},
		{name: "no health address", args: []string{"--metrics-bind-address=:8080"}, wantErr: "no --health-bind-address"},
		{name: "an endpoint without a port", args: []string{"--rl-agent-endpoint=agent", "--metrics-bind-address=:8080", "--health-bind-address=:8081"}, wantErr: "--rl-agent-endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NodeArgs("recommender", tc.args, port)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("args %v, want %v", got, tc.want)
			}
		})
	}
}

// commands maps a container name in deploy/ to its binary's command.
var commands = map[string]func() *cobra.Command{
	"recommender":          recommenderapp.NewCommand,
	"updater":              updaterapp.NewCommand,
	"admission-controller": admissionapp.NewCommand,
	"rl-agent":             rlagentapp.NewCommand,
}

// parse parses args with the flags of component's binary (and subcommand).
func parse(component string, args []string) (*cobra.Command, error) {
	cmd, rest, err := commands[component]().Find(args)
	if err != nil {
		return nil, err
	}
	return cmd, cmd.ParseFlags(rest)
}

// TestOverridesNameRealFlags: every flag of the table is one its
// components define (all four, for a flag every process gets), so that a
// renamed flag fails here and not as a process that will not start.
func TestOverridesNameRealFlags(t *testing.T) {
	sub := map[string][]string{"rl-agent": {"serve"}}
	for _, o := range Overrides {
		t.Run(o.Component+"/"+o.Flag, func(t *testing.T) {
			if o.Why == "" {
				t.Error("no Why")
			}
			var comps []string
			if o.Component != "" {
				comps = []string{o.Component}
			} else {
				for c := range commands {
					comps = append(comps, c)
				}
			}
			var have []string
			for _, c := range comps {
				cmd, err := parse(c, sub[c])
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range append([]string{o.Flag}, o.Replaces...) {
					if cmd.Flags().Lookup(f) == nil {
						if o.Process != nil || o.Component != "" {
							t.Errorf("%s has no --%s", c, f)
						}
						continue
					}
					have = append(have, c)
				}
			}
			if len(have) == 0 {
				t.Errorf("no component has --%s", o.Flag)
			}
		})
	}
}

// install returns deploy/ as kustomize renders it, but for the generated
// ConfigMap's hashed name: every file its kustomizations list, and the
// aware-config ConfigMap of its configMapGenerator.
func install(t *testing.T) []byte {
	t.Helper()
	type kustomization struct {
		Resources          []string `json:"resources"`
		ConfigMapGenerator []struct {
			Name      string   `json:"name"`
			Namespace string   `json:"namespace"`
			Literals  []string `json:"literals"`
		} `json:"configMapGenerator"`
	}
	var out []byte
	var walk func(dir string)
	walk = func(dir string) {
		raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k kustomization
		if err := yaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
		for _, r := range k.Resources {
			p := filepath.Join(dir, r)
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				walk(p)
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(append(append(out, "\n---\n"...), b...), '\n')
		}
		for _, g := range k.ConfigMapGenerator {
			data := map[string]string{}
			for _, l := range g.Literals {
				key, v, _ := strings.Cut(l, "=")
				data[key] = v
			}
			b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": g.Name, "namespace": g.Namespace}, "data": data})
			if err != nil {
				t.Fatal(err)
			}
			out = append(append(out, "\n---\n"...), b...)
		}
	}
	walk("../../deploy")
	return out
}

// TestInstallOnLoopback runs the table over the real deploy/: each
// component runs as its own ServiceAccount, its process args parse with its
// binary's flags, and it binds only loopback addresses and calls no
// Service name; on the real node each listener of each component gets a
// port of its own.
func TestInstallOnLoopback(t *testing.T) {
	ws, err := Workloads(install(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != len(commands) {
		t.Fatalf("the install runs %d components, want %d", len(ws), len(commands))
	}
	for c, w := range ws {
		t.Run(c, func(t *testing.T) {
			if w.ServiceAccount != "aware-"+c {
				t.Errorf("runs as %s", w.ServiceAccount)
			}
			args, err := ProcessArgs(w, testLoopback(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parse(c, args); err != nil {
				t.Fatalf("args %v: %v", args, err)
			}
			for _, a := range args {
				if _, v, _ := strings.Cut(a, "="); strings.HasPrefix(v, ":") || strings.Contains(v, ".svc") {
					t.Errorf("a process on loopback would get %s", a)
				}
			}
		})
	}
	used := map[string]string{}
	ports := map[string]int{}
	port := func(component, listener string) int {
		k := component + "/" + listener
		if _, ok := ports[k]; !ok {
			ports[k] = 1000 + len(ports)
		}
		return ports[k]
	}
	for c, w := range ws {
		args, err := NodeArgs(c, w.Args, port)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range args {
			name, v, _ := strings.Cut(a, "=")
			if !strings.HasPrefix(v, "127.0.0.1:") {
				continue
			}
			if prev, dup := used[v]; dup {
				t.Errorf("%s %s and %s share %s", c, name, prev, v)
			}
			used[v] = c + " " + name
		}
	}
	if len(used) < 2*len(ws) {
		t.Errorf("the node rewrote %d listener addresses, want at least metrics and health of each component: %v", len(used), used)
	}
}
