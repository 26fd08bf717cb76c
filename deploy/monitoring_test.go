package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/admission-controller/pkg/webhook"
	"github.com/aware-k8s/aware/pkg/kube/certs"
	"github.com/aware-k8s/aware/pkg/kube/target"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	recommender "github.com/aware-k8s/aware/recommender/controller"
	"github.com/aware-k8s/aware/rl-agent/server"
	updater "github.com/aware-k8s/aware/updater/controller"
)

// The monitoring files: the chart's are the ones promtool checks (make
// lint); components/monitoring holds copies for kustomize.
const (
	chartRules       = "helm/aware/files/rules.yaml"
	chartDashboard   = "helm/aware/files/aware-dashboard.json"
	componentRule    = "components/monitoring/prometheusrule.yaml"
	componentDash    = "components/monitoring/aware-dashboard.json"
	componentMonitor = "components/monitoring"
)

// metricName matches the aware_* metric names an expression or a text
// names; aware-system and the like have no underscore.
var metricName = regexp.MustCompile(`\baware_[a-z][a-z0-9_]*[a-z0-9]\b`)

// recorder is a prometheus.Registerer that keeps the series names of what
// is registered on it, read from the collectors' descriptors: a vector
// with no child yet, which a registry's Gather leaves out, still names its
// metric. A histogram is exported as its _bucket, _sum and _count series.
type recorder struct{ names map[string]bool }

var _ prometheus.Registerer = (*recorder)(nil)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	suffixes := []string{""}
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		suffixes = []string{"_bucket", "_sum", "_count"}
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			return fmt.Errorf("no name in descriptor %s", d)
		}
		for _, s := range suffixes {
			r.names[m[1]+s] = true
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// exportedMetrics registers every component's metrics the way its app
// does, on a recorder, and returns the names of the series they export.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	r := &recorder{names: map[string]bool{}}
	if _, err := recommender.NewMetrics(r); err != nil {
		t.Fatal(err)
	}
	if _, err := updater.NewMetrics(r); err != nil {
		t.Fatal(err)
	}
	resolver := target.New(nil, nil, nil)
	for _, c := range []string{"recommender", "updater"} {
		if err := resolver.RegisterMetrics(r, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := webhook.NewMetrics(r); err != nil {
		t.Fatal(err)
	}
	if err := certs.RegisterExpiry(r, nil); err != nil {
		t.Fatal(err)
	}
	o := server.DefaultOptions()
	cfg := nn.DefaultConfig(learn.StateDim, int(learn.NumActions))
	ppo, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o.Learner, o.Registerer = ppo, r
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, err := server.NewAuthorizer([]string{"aware-recommender"}, r); err != nil {
		t.Fatal(err)
	}
	return r.names
}

// unexported returns, sorted, the aware_* names text mentions that are not
// in exported.
func unexported(text []byte, exported map[string]bool) []string {
	var out []string
	for _, n := range metricName.FindAll(text, -1) {
		if s := string(n); !exported[s] && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// TestMonitoringNamesExportedMetrics fails when an alert or a dashboard
// panel names an aware_* metric no component exports (a renamed or
// removed metric leaves the alert silent forever).
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	for _, n := range []string{"aware_rlagent_workload_capacity_ratio", "aware_recommender_agent_request_duration_seconds_count", certs.ExpiryMetricName} {
		if !exported[n] {
			t.Fatalf("the recorder missed %s: %v", n, exported)
		}
	}
	for _, f := range []string{chartRules, chartDashboard, componentRule, componentDash} {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(metricName.FindAll(b, -1)); n == 0 {
				t.Fatal("names no aware_* metric")
			}
			if u := unexported(b, exported); len(u) > 0 {
				t.Errorf("names metrics no component exports: %v", u)
			}
		})
	}
}

// TestUnexported checks the check itself on made-up texts.
func TestUnexported(t *testing.T) {
	exported := map[string]bool{"aware_updater_stale_recommendations": true, "aware_rlagent_requests_total": true}
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"all exported", `sum(aware_updater_stale_recommendations) > 0 and rate(aware_rlagent_requests_total[5m])`, nil},
		{"a misspelt name", `aware_updater_stale_recommendation > 0`, []string{"aware_updater_stale_recommendation"}},
		{"a histogram series of a counter", `aware_rlagent_requests_total_count`, []string{"aware_rlagent_requests_total_count"}},
		{"each unknown once, sorted", `aware_b_x + aware_a_x + aware_b_x`, []string{"aware_a_x", "aware_b_x"}},
		{"not metric names", `namespace="aware-system", uid: aware-overview`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unexported([]byte(tc.text), exported); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("unexported = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMonitoringCopiesAgree: the kustomize component's PrometheusRule
// holds the groups of the chart's rule file, which promtool checks, and its
// dashboard is the chart's; each is well formed.
func TestMonitoringCopiesAgree(t *testing.T) {
	read := func(f string) []byte {
		t.Helper()
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var rules, rule map[string]any
	if err := yaml.UnmarshalStrict(read(chartRules), &rules); err != nil {
		t.Fatalf("%s: %v", chartRules, err)
	}
	if err := yaml.UnmarshalStrict(read(componentRule), &rule); err != nil {
		t.Fatalf("%s: %v", componentRule, err)
	}
	if groups, _ := rules["groups"].([]any); len(groups) == 0 || len(rules) != 1 {
		t.Fatalf("%s: want only groups, got %v", chartRules, rules)
	}
	if rule["kind"] != "PrometheusRule" || !reflect.DeepEqual(rule["spec"], rules) {
		t.Errorf("%s's spec is not the groups of %s: copy them", componentRule, chartRules)
	}
	d1, d2 := read(chartDashboard), read(componentDash)
	if !bytes.Equal(d1, d2) {
		t.Errorf("%s differs from %s: copy it", componentDash, chartDashboard)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(d1, &dash); err != nil {
		t.Fatalf("%s: %v", chartDashboard, err)
	}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", chartDashboard, p.Title)
		}
	}
	if _, err := os.Stat(filepath.Join(componentMonitor, "kustomization.yaml")); err != nil {
		t.Error(err)
	}
}
