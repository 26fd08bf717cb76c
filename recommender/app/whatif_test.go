package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	mpafake "github.com/aware-k8s/aware/pkg/generated/clientset/versioned/fake"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/pkg/kube/usage"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

// fixedWorkloads lists the given targets, as the cluster would.
type fixedWorkloads []whatifTarget

func (f fixedWorkloads) Workloads(context.Context, *WhatifOptions) ([]whatifTarget, error) {
	return f, nil
}

var _ workloadLister = fixedWorkloads(nil)

// historyProm generates range-query answers for a recorded day: workload
// "web" serves a diurnal rate whose CPU is 0.04 core-seconds per request
// over two pods; "idle" (its own SLO histogram) serves a constant rate, which the fit must refuse.
// kube-state-metrics' requests are served for web only, so idle's come
// from the current spec.
func historyProm(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/api/v1/query_range" {
			http.Error(w, "range queries only", http.StatusBadRequest)
			return
		}
		q := r.Form.Get("query")
		start, _ := strconv.ParseFloat(r.Form.Get("start"), 64)
		end, _ := strconv.ParseFloat(r.Form.Get("end"), 64)
		step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
		web := strings.Contains(q, `"web"`) || strings.Contains(q, `web-[a-z0-9]`) || strings.Contains(q, "web_request")
		rate := func(ts float64) float64 {
			if !web {
				return 5
			}
			return 20 + 10*math.Sin(2*math.Pi*ts/86400)
		}
		type series struct {
			labels string
			value  func(ts float64, rng *rand.Rand) float64
		}
		var ss []series
		pods := []string{"a", "b"}
		perPod := func(f func(ts float64, rng *rand.Rand) float64) {
			for _, p := range pods {
				ss = append(ss, series{fmt.Sprintf(`"namespace":"shop","pod":"web-5d9c-%s","container":"app"`, p), f})
			}
		}
		switch {
		case strings.Contains(q, "_count"):
			ss = append(ss, series{``, func(ts float64, _ *rand.Rand) float64 { return rate(ts) }})
		case strings.Contains(q, "histogram_quantile"):
			ss = append(ss, series{``, func(float64, *rand.Rand) float64 { return 0.08 }})
		case strings.Contains(q, "container_cpu_usage_seconds_total"):
			perPod(func(ts float64, rng *rand.Rand) float64 { return 0.04*rate(ts)/2 + 0.01*rng.Float64() })
		case strings.Contains(q, "container_memory_working_set_bytes"):
			perPod(func(ts float64, rng *rand.Rand) float64 { return 150<<20 + float64(rng.IntN(1<<20)) })
		case strings.Contains(q, "kube_pod_container_resource_requests") && web && strings.Contains(q, `"cpu"`):
			perPod(func(float64, *rand.Rand) float64 { return 0.5 })
		case strings.Contains(q, "kube_pod_container_resource_requests") && web:
			perPod(func(float64, *rand.Rand) float64 { return 512 << 20 })
		case strings.Contains(q, "kube_pod_status_ready_time") && web:
			// Three pods of the day's rollouts, Ready 20 s after start.
			for _, p := range []string{"web-5d9c-a", "web-5d9c-b", "web-41ff-c"} {
				ss = append(ss, series{fmt.Sprintf(`"pod":%q`, p), func(float64, *rand.Rand) float64 { return 20 }})
			}
		case strings.Contains(q, "kube_deployment_status_replicas"):
			ss = append(ss, series{``, func(float64, *rand.Rand) float64 { return 2 }})
		}
		rng := rand.New(rand.NewPCG(uint64(start), 1))
		var out []string
		for _, s := range ss {
			var vs []string
			for ts := start; ts <= end; ts += step {
				vs = append(vs, fmt.Sprintf(`[%.3f,"%g"]`, ts, s.value(ts, rng)))
			}
			out = append(out, fmt.Sprintf(`{"metric":{%s},"values":[%s]}`, s.labels, strings.Join(vs, ",")))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[%s]}}`, strings.Join(out, ","))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func whatifOpts(t *testing.T, addr string) *WhatifOptions {
	o := NewWhatifOptions()
	o.PrometheusAddress, o.Namespace, o.Period, o.Replay.Seeds = addr, "shop", 24*time.Hour, 2
	o.Output = filepath.Join(t.TempDir(), "out")
	return o
}

var whatifNow = time.Date(2026, 3, 2, 0, 0, 30, 0, time.UTC)

func TestRunWhatif(t *testing.T) {
	srv := historyProm(t)
	o := whatifOpts(t, srv.URL)
	targets := fixedWorkloads{
		{Namespace: "shop", Deployment: "web", Container: "app", SLOMetric: "web_request_duration_seconds", SLO: 0.25, RequestCPU: 9, RequestMemory: 9},
		{Namespace: "shop", Deployment: "idle", Container: "app", SLOMetric: "idle_request_duration_seconds", RequestCPU: 0.25, RequestMemory: 128 << 20},
	}
	var out bytes.Buffer
	if err := runWhatif(context.Background(), o, targets, whatifNow, &out, io0{}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"shop/idle: not predicted: the request rate never varied",
		"shop/web: fit 0.04",
		"error bar",
		"Paired against actual",
		"whatif.json",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(filepath.Join(o.Output, "whatif.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res whatif.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Fits) != 2 || res.Fits[0].Refused != "" || res.Fits[1].Refused == "" {
		t.Fatalf("fits %+v", res.Fits)
	}
	if f := res.Fits[0]; !f.StartupMeasured || f.StartupDelaySeconds != 20 {
		t.Errorf("start-up %gs measured %v, the fixture's pods took 20 s", f.StartupDelaySeconds, f.StartupMeasured)
	}
	if s := res.Fits[0].CPU.Slope; math.Abs(s/0.04-1) > 0.05 {
		t.Errorf("CPU seconds per request %g, the fixture's is 0.04", s)
	}
	if len(res.Consistency) != 1 || res.Consistency[0].Steps != 1440 || !res.Consistency[0].LatencyMeasured {
		t.Errorf("consistency %+v", res.Consistency)
	}
	// kube-state-metrics' requests (0.5 cores) won over the spec's (9).
	if c := res.Consistency[0]; math.Abs(c.RecordedCost-2*(0.5+0.5/7.5)*24) > 0.01 {
		t.Errorf("recorded cost %g, want 2 pods × (0.5 cores + 0.5 GiB) for 24 h", c.RecordedCost)
	}
	if res.Report == nil || len(res.Report.Summaries) != len(whatif.Policies()) {
		t.Errorf("report %+v", res.Report)
	}

	// --from replays the file's histories again without Prometheus or the
	// cluster, with this invocation's settings: here a restart for each
	// resize and only the fused default.
	again := NewWhatifOptions()
	again.From, again.Output = filepath.Join(o.Output, "whatif.json"), filepath.Join(t.TempDir(), "again")
	again.Replay.Seeds, again.Replay.Policies, again.Replay.Resize = 2, []string{whatif.PolicyFused}, "Restart"
	again.Replay.InstallAfter = time.Hour
	if err := again.Validate(); err != nil {
		t.Fatalf("--from without --prometheus-address: %v", err)
	}
	out.Reset()
	if err := runWhatif(context.Background(), again, nil, time.Time{}, &out, io0{}); err != nil {
		t.Fatalf("--from: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "shop/idle: not predicted") {
		t.Errorf("--from: the refused workload is not reported:\n%s", out.String())
	}
	b, err = os.ReadFile(filepath.Join(again.Output, "whatif.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res2 whatif.Result
	if err := json.Unmarshal(b, &res2); err != nil {
		t.Fatal(err)
	}
	if res2.Resize != sim.ResizeRestart || len(res2.History) != 2 || res2.Fits[0].CPU.Slope != res.Fits[0].CPU.Slope || res2.InstallAfter != time.Hour {
		t.Errorf("--from: resize %q, %d histories, fit %g (first %g), installed after %s", res2.Resize, len(res2.History), res2.Fits[0].CPU.Slope, res.Fits[0].CPU.Slope, res2.InstallAfter)
	}
	if !strings.Contains(out.String(), "replayed as installed 1h0m0s after the period began") {
		t.Errorf("--from: the output does not say the policies were installed later:\n%s", out.String())
	}
	// The idle CPU is off by default, and the fit line says so.
	if f := res2.Fits[0]; f.Idle.Replayed || f.Idle.Mode != whatif.IdleOff || !strings.Contains(out.String(), "not replayed (--fit-idle off)") {
		t.Errorf("--from: idle %+v by default; output:\n%s", f.Idle, out.String())
	}
	if got := len(res2.Report.Summaries); got != 2 {
		t.Errorf("--from: %d policies replayed, want actual and fused", got)
	}
	if m, _ := filepath.Glob(filepath.Join(again.Output, "mpa-*.yaml")); len(m) != 0 {
		t.Errorf("--from wrote MPA manifests without reading the cluster: %v", m)
	}
}

// TestWhatifFromErrors: a missing file, a file without history, and
// --from beside a cluster's workload selection are refused clearly.
func TestWhatifFromErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"seeds":2,"fits":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"history":`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, want string }{
		{"missing", filepath.Join(dir, "none.json"), "no such file"},
		{"no history", empty, "holds no history"},
		{"truncated", bad, "reading a result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewWhatifOptions()
			o.From, o.Output = tc.from, filepath.Join(dir, "out")
			err := runWhatif(context.Background(), o, nil, time.Time{}, io0{}, io0{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--from") {
				t.Fatalf("err %v, want one naming --from and %q", err, tc.want)
			}
		})
	}
	o := NewWhatifOptions()
	o.From, o.Deployments = empty, []string{"web"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--from replays") {
		t.Errorf("--from with --deployment: %v", err)
	}
}

func TestRunWhatifPrometheusFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution"}`)
	}))
	defer srv.Close()
	o := whatifOpts(t, srv.URL)
	err := runWhatif(context.Background(), o, fixedWorkloads{{Namespace: "shop", Deployment: "web", Container: "app", SLOMetric: "m"}}, whatifNow, io0{}, io0{})
	if !errors.Is(err, usage.ErrPrometheusRefused) || !strings.Contains(err.Error(), "shop/web") {
		t.Fatalf("err %v, want a refusal naming the workload", err)
	}
	if err := runWhatif(context.Background(), o, fixedWorkloads{}, whatifNow, io0{}, io0{}); err == nil || !strings.Contains(err.Error(), "no workloads") {
		t.Fatalf("err %v", err)
	}
}

type io0 struct{}

func (io0) Write(p []byte) (int, error) { return len(p), nil }

func TestWhatifValidate(t *testing.T) {
	ok := func() *WhatifOptions {
		o := NewWhatifOptions()
		o.PrometheusAddress = "http://127.0.0.1:9090"
		return o
	}
	if err := ok().Validate(); err != nil {
		t.Fatalf("defaults with an address must be valid: %v", err)
	}
	withInFlight := ok()
	withInFlight.InFlightQuery = `sum by (pod) (app_requests_in_flight{namespace="{{.Namespace}}", pod=~"{{.PodRegex}}"})`
	if err := withInFlight.Validate(); err != nil {
		t.Fatalf("an in-flight template must be valid: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*WhatifOptions)
		want   string
	}{
		{"no address", func(o *WhatifOptions) { o.PrometheusAddress = "" }, "--prometheus-address"},
		{"no scheme", func(o *WhatifOptions) { o.PrometheusAddress = "prometheus:9090" }, "--prometheus-address"},
		{"zero step", func(o *WhatifOptions) { o.Step = 0 }, "--step"},
		{"period below step", func(o *WhatifOptions) { o.Period = time.Second }, "--period"},
		{"fractional step", func(o *WhatifOptions) { o.Step = 1500 * time.Millisecond }, "whole seconds"},
		{"namespace", func(o *WhatifOptions) { o.Namespace = "Shop" }, "--namespace"},
		{"deployments and mpas", func(o *WhatifOptions) { o.Deployments, o.MPAs, o.RateQuery = []string{"a"}, []string{"b"}, "x" }, "not both"},
		{"deployment without rate", func(o *WhatifOptions) { o.Deployments = []string{"a"} }, "--slo-metric or --rate-query"},
		{"bad metric", func(o *WhatifOptions) { o.SLOMetric = "a-b" }, "--slo-metric"},
		{"one seed", func(o *WhatifOptions) { o.Replay.Seeds = 1 }, "--seeds"},
		{"unknown policy", func(o *WhatifOptions) { o.Replay.Policies = []string{"hpa", "kpa"} }, `--policies: whatif: unknown policy "kpa"`},
		{"bad variant", func(o *WhatifOptions) { o.Replay.Policies = []string{"fused:target=2"} }, "--policies"},
		{"negative slo", func(o *WhatifOptions) { o.SLO = -time.Second }, "--slo"},
		{"in-flight template with an unknown field", func(o *WhatifOptions) { o.InFlightQuery = `sum(x{namespace="{{.Nope}}"})` }, "--in-flight-query"},
		{"in-flight template that does not parse", func(o *WhatifOptions) { o.InFlightQuery = `sum(x{namespace="{{.Namespace"})` }, "--in-flight-query"},
		{"in-flight query with --from", func(o *WhatifOptions) { o.From, o.InFlightQuery = "whatif.json", `sum by (pod) (x)` }, "--in-flight-query"},
		{"no concurrency", func(o *WhatifOptions) { o.PrometheusConcurrency = 0 }, "--prometheus-concurrency"},
		{"no memory residual", func(o *WhatifOptions) { o.Fit.MaxMemoryResidual = 0 }, "--fit-max-memory-residual"},
		{"NaN memory residual", func(o *WhatifOptions) { o.Fit.MaxMemoryResidual = math.NaN() }, "--fit-max-memory-residual"},
		{"no CPU fit load", func(o *WhatifOptions) { o.Fit.CPUFitMaxLoad = 0 }, "--fit-cpu-max-load"},
		{"infinite CPU fit load", func(o *WhatifOptions) { o.Fit.CPUFitMaxLoad = math.Inf(1) }, "--fit-cpu-max-load"},
		{"end not a time", func(o *WhatifOptions) { o.End = "yesterday" }, "--end"},
		{"end without zone", func(o *WhatifOptions) { o.End = "2026-11-30T01:00:00" }, "RFC 3339"},
		{"unknown resize", func(o *WhatifOptions) { o.Replay.Resize = "inplace" }, "--resize"},
		{"negative rate window", func(o *WhatifOptions) { o.Replay.RateWindow = -time.Second }, "--rate-window"},
		{"negative install", func(o *WhatifOptions) { o.Replay.InstallAfter = -time.Second }, "--install-after -1s must not be negative"},
		{"unknown latency model", func(o *WhatifOptions) { o.Fit.LatencyModel = "exponential" }, "--fit-latency"},
		{"unknown idle mode", func(o *WhatifOptions) { o.Fit.Idle = "yes" }, `--fit-idle "yes": want auto, on or off`},
		{"no idle mode", func(o *WhatifOptions) { o.Fit.Idle = "" }, "--fit-idle"},
		{"no idle share", func(o *WhatifOptions) { o.Fit.MaxIdleShare = 0 }, "--fit-max-idle-share 0"},
		{"idle share above the CPU", func(o *WhatifOptions) { o.Fit.MaxIdleShare = 1.5 }, "--fit-max-idle-share 1.5"},
		{"NaN idle share", func(o *WhatifOptions) { o.Fit.MaxIdleShare = math.NaN() }, "--fit-max-idle-share"},
		{"negative idle CPU", func(o *WhatifOptions) { o.Fit.IdleCPU = -0.01 }, "--fit-idle-cpu -0.01"},
		{"NaN idle CPU", func(o *WhatifOptions) { o.Fit.IdleCPU = math.NaN() }, "--fit-idle-cpu NaN"},
		{"idle CPU of the whole node", func(o *WhatifOptions) { o.Fit.IdleCPU, o.Fit.NodeCPU = 2, 2 }, "--fit-idle-cpu 2: want cores per pod in [0, --node-cpu 2)"},
		{"no node cores", func(o *WhatifOptions) { o.Fit.NodeCPU = 0 }, "--node-cpu"},
		{"infinite node cores", func(o *WhatifOptions) { o.Fit.NodeCPU = math.Inf(1) }, "--node-cpu"},
		{"no client timeout", func(o *WhatifOptions) { o.Replay.ClientTimeout = 0 }, "--client-timeout 0s must be positive"},
		{"negative node tick", func(o *WhatifOptions) { o.Fit.NodeTick = -time.Millisecond }, "--node-tick -1ms"},
		{"node tick past the CFS period", func(o *WhatifOptions) { o.Fit.NodeTick = 101 * time.Millisecond }, "--node-tick 101ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok()
			tc.mutate(o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestWhatifEnd(t *testing.T) {
	now := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ end, want string }{
		{"", "2026-11-30T02:00:00Z"},
		{"2026-11-30T01:08:30Z", "2026-11-30T01:08:30Z"},
		{"2026-11-30T03:08:30+02:00", "2026-11-30T01:08:30Z"},
	} {
		o := NewWhatifOptions()
		o.End = tc.end
		got, err := o.endTime(now)
		if err != nil || got.UTC().Format(time.RFC3339) != tc.want {
			t.Errorf("--end %q: %v, %v; want %s", tc.end, got, err, tc.want)
		}
	}
}

// TestWhatifCommand: the subcommand is wired under the recommender, and a
// bad flag fails before anything is contacted.
func TestWhatifCommand(t *testing.T) {
	var stderr bytes.Buffer
	code := cli.RunWithArgs(NewCommand(), []string{"whatif", "--prometheus-address", "prometheus:9090", "--step", "0", "--fit-idle", "always"}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--prometheus-address") || !strings.Contains(stderr.String(), "--step") ||
		!strings.Contains(stderr.String(), `--fit-idle "always": want auto, on or off`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	if code := cli.RunWithArgs(cmd, []string{"whatif", "--help"}, &stderr); code != 0 {
		t.Fatalf("help exit %d: %s", code, stderr.String())
	}
	for _, flag := range []string{"--period duration", "--step duration", "--output", "--kubeconfig", "--selector", "--mpa", "--deployment", "--rate-query", "--progress", "--mpa-update-mode string", "--fit-idle string", "--fit-idle-cpu float", "--install-after duration"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("help lacks %q", flag)
		}
	}
}

func TestKubeWorkloads(t *testing.T) {
	ctx := context.Background()
	deploy := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: appsv1.DeploymentSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "app", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
				{Name: "proxy", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
			}}}}}
	}
	mpa := func(name, target, kind string, labels map[string]string, slo *v1alpha1.SLOSpec) *v1alpha1.MultidimPodAutoscaler {
		m := &v1alpha1.MultidimPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels}}
		m.Spec.ScaleTargetRef = &autoscalingv1.CrossVersionObjectReference{Kind: kind, Name: target, APIVersion: "apps/v1"}
		if slo != nil {
			m.Spec.RL = &v1alpha1.RLSpec{SLO: slo}
		}
		return m
	}
	slo := &v1alpha1.SLOSpec{Metric: autoscalingv2.MetricIdentifier{Name: "web_request_duration_seconds"}, Percentile: 95, Target: metav1.Duration{Duration: 250 * time.Millisecond}}
	clients := &apiclient.Clients{
		Kube: kubefake.NewSimpleClientset(deploy("web"), deploy("api")),
		MPA: mpafake.NewSimpleClientset(
			mpa("web", "web", "Deployment", map[string]string{"team": "a"}, slo),
			mpa("api", "api", "Deployment", map[string]string{"team": "b"}, nil),
			mpa("db", "db", "StatefulSet", map[string]string{"team": "a"}, nil),
			mpa("gone", "gone", "Deployment", map[string]string{"team": "c"}, nil),
		),
	}
	k := kubeWorkloads{clients}
	tests := []struct {
		name  string
		edit  func(o *WhatifOptions)
		want  []string
		error string
	}{
		{"by selector, statefulsets skipped", func(o *WhatifOptions) { o.Selector = "team=a" }, []string{"web"}, ""},
		{"by name", func(o *WhatifOptions) { o.MPAs = []string{"api"} }, []string{"api"}, ""},
		{"missing mpa", func(o *WhatifOptions) { o.MPAs = []string{"nope"} }, nil, "MultidimPodAutoscaler shop/nope not found"},
		{"missing deployment", func(o *WhatifOptions) { o.MPAs = []string{"gone"} }, nil, "deployment shop/gone"},
		{"deployments", func(o *WhatifOptions) { o.Deployments, o.SLOMetric, o.SLO = []string{"api"}, "m", time.Second }, []string{"api"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewWhatifOptions()
			o.Namespace = "shop"
			tc.edit(o)
			got, err := k.Workloads(ctx, o)
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("err %v, want %q", err, tc.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, w := range got {
				names = append(names, w.Deployment)
			}
			if fmt.Sprint(names) != fmt.Sprint(tc.want) {
				t.Fatalf("workloads %v, want %v", names, tc.want)
			}
			w := got[0]
			if w.Container != "app" || math.Abs(w.RequestCPU-0.6) > 1e-9 || w.RequestMemory != 256<<20 || w.LimitCPU != 1 {
				t.Errorf("spec of %s: %+v (requests summed over containers)", w.Deployment, w)
			}
			switch tc.name {
			case "by selector, statefulsets skipped":
				if w.SLOMetric != "web_request_duration_seconds" || w.SLO != 0.25 || w.Percentile != 95 {
					t.Errorf("SLO from the MPA: %+v", w)
				}
			case "deployments":
				if w.SLOMetric != "m" || w.SLO != 1 {
					t.Errorf("SLO from the flags: %+v", w)
				}
			}
		})
	}
}

// TestWhatifGzip: --prometheus-gzip=false asks Prometheus for plain
// answers, which Go's transport would otherwise ask gzipped.
func TestWhatifGzip(t *testing.T) {
	for _, gzip := range []bool{true, false} {
		t.Run(fmt.Sprint(gzip), func(t *testing.T) {
			got := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case got <- r.Header.Get("Accept-Encoding"):
				default:
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"no"}`)
			}))
			defer srv.Close()
			o := whatifOpts(t, srv.URL)
			o.PrometheusGzip = gzip
			if err := runWhatif(context.Background(), o, fixedWorkloads{{Namespace: "shop", Deployment: "web", Container: "app", SLOMetric: "m"}}, whatifNow, io0{}, io0{}); !errors.Is(err, usage.ErrPrometheusRefused) {
				t.Fatalf("err %v, want the refusal", err)
			}
			if enc := <-got; strings.Contains(enc, "gzip") != gzip {
				t.Errorf("Accept-Encoding %q with --prometheus-gzip=%v", enc, gzip)
			}
		})
	}
}

// TestWhatifResize checks the replay's resize mode: --resize when given,
// else what --mpa-update-mode's updater would do to a running pod.
func TestWhatifResize(t *testing.T) {
	for _, tc := range []struct {
		resize, mode string
		want         sim.ResizeMode
	}{
		{"", "Off", sim.ResizeInPlace},
		{"", "Initial", sim.ResizeInPlace},
		{"", "InPlace", sim.ResizeInPlace},
		{"", "InPlaceOrRecreate", sim.ResizeInPlace},
		{"", "Recreate", sim.ResizeRestart},
		{"", "Auto", sim.ResizeRestart},
		{"Restart", "InPlace", sim.ResizeRestart},
		{"InPlace", "Auto", sim.ResizeInPlace},
	} {
		t.Run(tc.resize+"/"+tc.mode, func(t *testing.T) {
			o := NewWhatifOptions()
			o.Replay.Resize, o.MPAUpdateMode = tc.resize, tc.mode
			if got := o.resize(); got != tc.want {
				t.Fatalf("resize %q with update mode %s: %s, want %s", tc.resize, tc.mode, got, tc.want)
			}
		})
	}
}

// TestWhatifCluster: the replay's cluster flags reach the simulated
// cluster; by default it has the simulator's client timeout, a kubelet's
// readiness and CONFIG_HZ=250's tick.
func TestWhatifCluster(t *testing.T) {
	o := NewWhatifOptions()
	fs := pflag.NewFlagSet("whatif", pflag.ContinueOnError)
	o.AddFlags(fs)
	def := o.cluster()
	if def.Timeout != sim.DefaultConfig().Timeout || !def.ReadyWithinWindow || def.NodeTick != 4*time.Millisecond || o.Fit.ServesTimedOut {
		t.Fatalf("defaults %+v, serves timed out %v", def, o.Fit.ServesTimedOut)
	}
	if err := fs.Parse([]string{"--client-timeout", "10s", "--ready-within-window=false", "--node-tick", "1ms", "--serves-timed-out", "--node-cpu", "2", "--resize", "InPlace", "--rate-window", "30s", "--sampled-latency"}); err != nil {
		t.Fatal(err)
	}
	want := sim.Config{Resize: sim.ResizeInPlace, RateWindow: 30 * time.Second, SampledLatency: true,
		Timeout: 10 * time.Second, NodeCores: 2, NodeTick: time.Millisecond}
	if got := o.cluster(); got != want {
		t.Fatalf("cluster %+v, want %+v", got, want)
	}
	if !o.Fit.ServesTimedOut || o.Fit.NodeTick != time.Millisecond {
		t.Fatalf("fit options %+v", o.Fit)
	}
}
