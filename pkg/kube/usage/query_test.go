package usage

import (
	"os/exec"
	"strings"
	"testing"
	"text/template"
)

// Our evaluator renders what text/template renders, for the defaults and
// for every construct it supports, over several data sets (text/template
// is imported by this test only, as the reference).
func TestQueryTemplatesRenderAsTextTemplate(t *testing.T) {
	def := DefaultQueries()
	datas := []QueryData{
		{},
		{Namespace: "shop", PodRegex: "web-.*", Metric: "http_request_duration_seconds", Selector: `route="/"`,
			Percentile: 95, Quantile: 0.95, Window: "2m", ObjectKind: "ingress", ObjectName: "main"},
		{Namespace: "a", Metric: "x_total", Quantile: 0.5, Percentile: 50, Window: "30s", Container: "app"},
	}
	for _, tc := range []struct{ name, text string }{
		{"default cpu", def.CPU},
		{"default memory", def.Memory},
		{"default latency", def.Latency},
		{"default request rate", def.RequestRate},
		{"default error rate", def.ErrorRate},
		{"default pods", def.Pods},
		{"default object", def.Object},
		{"default external", def.External},
		{"plain text", `up{job="x"}`},
		{"comment", `a{{/* why */}}b`},
		{"trim markers", "a  {{- .Namespace -}}  b"},
		{"numbers print as fmt does", `{{.Quantile}} {{.Percentile}} {{1.5}} {{3}}`},
		{"if else if else", `{{if eq .Namespace "shop"}}S{{else if .Namespace}}N{{else}}-{{end}}`},
		{"with else", `{{with .Container}}c={{.}}{{else}}none{{end}}`},
		{"root through $ inside with", `{{with .Selector}}{{$.Namespace}}:{{.}}{{end}}`},
		{"$ field", `{{$.Window}}`},
		{"pipelines and parentheses", `{{.Metric | trimSuffix "_seconds" | trimPrefix "http_"}} {{(trimSuffix "_total" .Metric)}}`},
		{"printf print println", `{{printf "%s/%.2f/%d" .Namespace .Quantile 7}} {{print .Window 1}} {{println .Metric}}`},
		{"len not and or", `{{len .Namespace}} {{not .Container}} {{and .Namespace .Window}} {{or .Container .Window "z"}} {{and .Container "y"}}`},
		{"comparisons", `{{eq .Quantile 0.95}} {{ne .Namespace "a"}} {{lt .Percentile 90.0}} {{le 1 2}} {{gt .Window "1m"}} {{ge "b" "a"}} {{eq .Namespace "x" "a" "shop"}} {{eq true true}}`},
		{"piped comparison", `{{if .Namespace | eq "a"}}A{{end}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, err := parseQuery(tc.name, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			ref := template.Must(template.New(tc.name).Option("missingkey=error").Funcs(template.FuncMap{
				"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
				"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
			}).Parse(tc.text))
			for i, d := range datas {
				var want strings.Builder
				if err := ref.Execute(&want, d); err != nil {
					t.Fatalf("data %d: text/template: %v", i, err)
				}
				got, err := ours.execute(d)
				if err != nil {
					t.Fatalf("data %d: %v", i, err)
				}
				if got != want.String() {
					t.Errorf("data %d: got %q, text/template %q", i, got, want.String())
				}
			}
		})
	}
}

func TestQueryTemplatesRefused(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"syntax", `{{.Nope`, "unclosed action"},
		{"unknown field", `{{.Nope}}`, "no field Nope"},
		{"field of a field", `{{.Namespace.Name}}`, "without fields of their own"},
		{"unknown function", `{{index .Namespace 0}}`, `function "index" not defined`},
		{"range", `{{range .Namespace}}x{{end}}`, "query templates support"},
		{"variables", `{{$x := .Namespace}}{{$x}}`, "variables"},
		{"define", `{{define "x"}}y{{end}}{{template "x"}}`, "define and block"},
		{"template call", `{{template "x"}}`, "query templates support"},
		{"nil", `{{nil}}`, "query templates support"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseQuery("q", tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// Errors at execution, as text/template gives them: they surface at start
// (NewPrometheus executes each template once) or at the query.
func TestQueryTemplatesExecutionErrors(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"field of a string", `{{with .Namespace}}{{.Window}}{{end}}`},
		{"incompatible comparison", `{{eq .Quantile 1}}`},
		{"trimSuffix of a number", `{{trimSuffix "x" .Quantile}}`},
		{"argument to a non-function", `{{.Namespace | .Window}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := parseQuery("q", tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.execute(QueryData{Namespace: "a", Quantile: 0.5}); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// The reason query.go exists: the recommender must not execute
// text/template, whose execution makes the linker keep every exported method
// of every type (docs/results/performance.md: 56 MB against 35 MB stripped, and
// resident memory with it). This package must not import it, and the
// recommender, built as the Makefile builds it (-tags grpcnotrace), must not
// link html/template (gRPC's request tracing pulls it in otherwise).
func TestRecommenderDoesNotLinkTemplateExecution(t *testing.T) {
	for _, tc := range []struct {
		name, format, pkg, forbidden string
	}{
		{"usage imports", "{{join .Imports \"\\n\"}}", "github.com/aware-k8s/aware/pkg/kube/usage", "text/template"},
		{"recommender links", "{{.ImportPath}}", "github.com/aware-k8s/aware/recommender", "html/template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"list", "-tags", "grpcnotrace", "-f", tc.format, tc.pkg}
			if tc.forbidden == "html/template" {
				args = []string{"list", "-tags", "grpcnotrace", "-deps", "-f", tc.format, tc.pkg}
			}
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			pkgs := strings.Fields(string(out))
			if len(pkgs) == 0 {
				t.Fatal("go list listed nothing")
			}
			for _, p := range pkgs {
				if p == tc.forbidden {
					t.Errorf("%s: %s", tc.pkg, p)
				}
			}
		})
	}
}
