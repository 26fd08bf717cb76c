//go:build benchreal

package main

import (
	"math"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/kube/usage"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

func TestWhatIfOf(t *testing.T) {
	report := &eval.Report{Summaries: []eval.Summary{
		{Policy: whatif.PolicyActual, Runs: 3, Cost: 0.3, SLOViolationRate: 0.5},
		{Policy: whatif.PolicyFused, Runs: 3, Cost: 0.6, SLOViolationRate: 0.1},
	}}
	fitted := whatif.Fit{Workload: "ns/testapp", CPU: whatif.Regression{Slope: 0.012, R2: 0.97}}
	for _, tc := range []struct {
		name string
		res  whatif.Result
		err  string
	}{
		{name: "predicted", res: whatif.Result{Fits: []whatif.Fit{fitted}, Report: report,
			Consistency: []whatif.Consistency{{RecordedCost: 0.1, ReplayCost: 0.11}}}},
		{name: "refused", res: whatif.Result{Fits: []whatif.Fit{{Workload: "ns/testapp", Refused: "data too thin: 12 steps"}}}},
		{name: "no fit", res: whatif.Result{}, err: "0 fits"},
		{name: "no replay", res: whatif.Result{Fits: []whatif.Fit{fitted}}, err: "no replay"},
		{name: "no fused", res: whatif.Result{Fits: []whatif.Fit{fitted}, Report: &eval.Report{Summaries: report.Summaries[:1]}}, err: "no replay of fused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := whatIfOf(&tc.res, "out/whatif-hpa-0")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Dir != "out/whatif-hpa-0" {
				t.Errorf("dir %q", w.Dir)
			}
			if tc.name == "refused" {
				if w.Refused == "" || w.Predicted != nil {
					t.Errorf("refused fit gave %+v", w)
				}
				return
			}
			if w.CPUSecondsPerRequest != 0.012 || w.CPUR2 != 0.97 || w.RecordedCost != 0.1 || w.ReplayCost != 0.11 {
				t.Errorf("what-if %+v", w)
			}
			if p := w.Predicted[whatif.PolicyFused]; math.Abs(p.Cost-0.2) > 1e-12 || p.Violations != 0.1 {
				t.Errorf("fused predicted %+v, want the mean over 3 seeds 0.2 and 10%%", p)
			}
		})
	}
}

func TestPodCgroupQuery(t *testing.T) {
	got := podCgroupQuery("sum", "rate", "container_cpu_usage_seconds_total")
	want := `sum by (namespace, pod, container) (label_replace(rate(container_cpu_usage_seconds_total{pod=~"{{.PodRegex}}", namespace="{{.Namespace}}", container=""}[{{.Window}}]), "container", "app", "", ""))`
	if got != want {
		t.Errorf("query\n%s\nwant\n%s", got, want)
	}
}

func TestInFlightQuery(t *testing.T) {
	// The what-if checks its --in-flight-query as this one.
	if err := usage.CheckTemplate("in-flight", InFlightQuery); err != nil {
		t.Fatal(err)
	}
	want := `sum by (pod) (max_over_time(aware_testapp_requests_in_flight{namespace="{{.Namespace}}", pod=~"{{.PodRegex}}"}[{{.Window}}]))`
	if InFlightQuery != want {
		t.Errorf("query\n%s\nwant\n%s", InFlightQuery, want)
	}
}

func TestRefusal(t *testing.T) {
	out := "I1130 02:43:33 whatif.go:387] \"Read history\"\nbench-real-hpa-0/testapp: not predicted: the working set's residual is 31% of its mean, more than 25%\nError: whatif: every workload's fit refused to predict; nothing to replay\n"
	if got, want := refusal(out), "the working set's residual is 31% of its mean, more than 25%"; got != want {
		t.Errorf("refusal = %q, want %q", got, want)
	}
	if got := refusal("Error: whatif: prometheus range query: connection refused\n"); got != "" {
		t.Errorf("a failure read as a refusal: %q", got)
	}
}
