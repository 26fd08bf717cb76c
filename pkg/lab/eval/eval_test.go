package eval

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// static holds the workload at a fixed size, scaled from the app's initial
// request by cpuFactor.
type static struct {
	name      string
	replicas  int32
	container string
	req       workload.Resources
}

func (s *static) Name() string { return s.name }

func (s *static) Recommend(_ context.Context, _ workload.Observation) (workload.Recommendation, error) {
	return workload.Recommendation{Replicas: s.replicas, Containers: []workload.ContainerRecommendation{{Name: s.container, Target: s.req}}}, nil
}

func staticContender(name string, replicas int32, cpuFactor float64) Contender {
	return Contender{Name: name, New: func(r Run, _ sim.Config) (workload.Policy, error) {
		req := r.App.Requests
		req.CPU *= cpuFactor
		return &static{name: name, replicas: replicas, container: r.App.Container, req: req}, nil
	}}
}

// proportional scales replicas to keep CPU usage at half the requests.
type proportional struct{}

func (proportional) Name() string { return "proportional" }

func (proportional) Recommend(_ context.Context, o workload.Observation) (workload.Recommendation, error) {
	c := o.Containers[0]
	if o.Samples == 0 || c.Requests.CPU == 0 {
		return workload.Recommendation{}, nil
	}
	n := int32(math.Ceil(float64(o.Samples) * c.Usage.CPU / c.Requests.CPU / 0.5))
	return workload.Recommendation{Replicas: max(n, 1)}, nil
}

type failing struct{}

func (failing) Name() string { return "failing" }

func (failing) Recommend(context.Context, workload.Observation) (workload.Recommendation, error) {
	return workload.Recommendation{}, errors.New("no opinion")
}

func testRuns(t testing.TB, n, steps int) []Run {
	t.Helper()
	apps, err := sim.GenerateApps(11, n)
	if err != nil {
		t.Fatal(err)
	}
	kinds := sim.TraceKinds()
	var runs []Run
	for i, a := range apps {
		tr, err := sim.GenerateTrace(kinds[i%len(kinds)], sim.TraceOptions{Mean: a.BaseRate, Steps: steps, Step: 15 * time.Second, Seed: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, Run{App: a, Trace: &tr, Seed: uint64(100 + i)})
	}
	return runs
}

func contenders() []Contender {
	return []Contender{
		staticContender("static-small", 1, 0.25),
		staticContender("static-big", 8, 2),
		FromFactory("proportional", func(workload.Constraints) (workload.Policy, error) { return proportional{}, nil }),
	}
}

func evalJSON(t *testing.T, workers int) []byte {
	t.Helper()
	rep, err := Evaluate(context.Background(), testRuns(t, 12, 300), contenders(), Options{Workers: workers, SeriesRun: 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteScatterSVG(&buf); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTimeSeriesSVG(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDeterministicOutput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers [2]int
	}{
		{"same seed twice", [2]int{4, 4}},
		{"parallel equals serial", [2]int{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := evalJSON(t, tc.workers[0]), evalJSON(t, tc.workers[1])
			if !bytes.Equal(a, b) {
				t.Errorf("outputs differ (%d and %d bytes)", len(a), len(b))
			}
		})
	}
}

func TestSummaries(t *testing.T) {
	runs := testRuns(t, 6, 400)
	rep, err := Evaluate(context.Background(), runs, append(contenders(), FromFactory("failing", func(workload.Constraints) (workload.Policy, error) { return failing{}, nil })), Options{SeriesRun: -1})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Summary{}
	for _, s := range rep.Summaries {
		by[s.Policy] = s
		if s.Runs != len(runs) || s.Steps != len(runs)*400 {
			t.Errorf("%s: %d runs, %d steps", s.Policy, s.Runs, s.Steps)
		}
	}
	small, big := by["static-small"], by["static-big"]
	if !(small.SLOViolationRate > big.SLOViolationRate) || !(small.CoreHours < big.CoreHours) {
		t.Errorf("a starved deployment should be cheaper and violate more: small %+v, big %+v", small, big)
	}
	if !(small.CPUUtilization > big.CPUUtilization) {
		t.Errorf("CPU utilisation small %g <= big %g", small.CPUUtilization, big.CPUUtilization)
	}
	if by["failing"].PolicyErrors != by["failing"].Steps || by["failing"].ScalingActions != 0 {
		t.Errorf("failing policy: %+v", by["failing"])
	}
	if by["proportional"].HorizontalScales == 0 {
		t.Errorf("proportional policy never scaled")
	}
	if rep.Series != nil {
		t.Errorf("series kept with SeriesRun -1")
	}
	// Each static-big run pays 8 pods × 2×request from window 1 on: the
	// cost is bounded by the full run at that size.
	for _, x := range rep.Results {
		if x.Policy != "static-big" {
			continue
		}
		var app sim.App
		for _, r := range runs {
			if r.App.Name == x.App {
				app = r.App
			}
		}
		hours := 400 * 15.0 / 3600
		want := 8 * 2 * app.Requests.CPU * hours
		if x.CoreHours > want+1e-9 || x.CoreHours < 0.9*want {
			t.Errorf("%s core-hours %g, want at most %g and near it", x.App, x.CoreHours, want)
		}
	}
}

func TestErrors(t *testing.T) {
	runs := testRuns(t, 3, 50)
	bad := Contender{Name: "broken", New: func(Run, sim.Config) (workload.Policy, error) { return nil, errors.New("boom") }}
	for _, tc := range []struct {
		name    string
		ctx     func() context.Context
		cs      []Contender
		wantErr string
	}{
		{"constructor fails", context.Background, []Contender{contenders()[0], bad}, "policy broken on app-0000"},
		{"duplicate names", context.Background, []Contender{contenders()[0], contenders()[0]}, "duplicated"},
		{"no policies", context.Background, nil, "no policies"},
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, contenders(), "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Evaluate(tc.ctx(), runs, tc.cs, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestWriteFiles(t *testing.T) {
	rep, err := Evaluate(context.Background(), testRuns(t, 2, 100), contenders(), Options{SeriesRun: 0})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	paths, err := rep.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("wrote %v", paths)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(p, ".svg") {
			continue
		}
		if !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte("static-big")) {
			t.Errorf("%s is not an SVG naming the policies", p)
		}
		dec := xml.NewDecoder(bytes.NewReader(b))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed XML: %v", p, err)
			}
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, c := range contenders() {
		if !strings.Contains(table.String(), c.Name) {
			t.Errorf("table lacks %s:\n%s", c.Name, table.String())
		}
	}
}

func BenchmarkEvaluate(b *testing.B) {
	runs := testRuns(b, 8, 1000)
	cs := contenders()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Evaluate(context.Background(), runs, cs, Options{SeriesRun: -1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(runs)*len(cs)*1000)/b.Elapsed().Seconds(), "app-steps/s")
}

// hold returns the same recommendation every window without allocating.
type hold struct{ rec workload.Recommendation }

func (h *hold) Name() string { return "hold" }

func (h *hold) Recommend(context.Context, workload.Observation) (workload.Recommendation, error) {
	return h.rec, nil
}

// TestMemoryFlatInSteps checks that the evaluator streams metrics: ten times
// the windows must not mean more allocations.
func TestMemoryFlatInSteps(t *testing.T) {
	allocs := func(steps int) float64 {
		runs := testRuns(t, 2, steps)
		c := Contender{Name: "hold", New: func(r Run, _ sim.Config) (workload.Policy, error) {
			return &hold{workload.Recommendation{Replicas: 3, Containers: []workload.ContainerRecommendation{{Name: r.App.Container, Target: r.App.Requests}}}}, nil
		}}
		return testing.AllocsPerRun(3, func() {
			if _, err := Evaluate(context.Background(), runs, []Contender{c}, Options{Workers: 1, SeriesRun: -1}); err != nil {
				t.Fatal(err)
			}
		})
	}
	short, long := allocs(500), allocs(5000)
	if long > short+10 {
		t.Errorf("%g allocations for 5000 windows, %g for 500: the evaluator keeps per-window state", long, short)
	}
}

// TestKeepSeries: the runs KeepSeries names keep their time series in
// RunSeries, equal to what SeriesRun keeps of the same run alone, and no
// other run's; SeriesRun's is unaffected.
func TestKeepSeries(t *testing.T) {
	runs := testRuns(t, 4, 120)
	keep := map[int]bool{1: true, 3: true}
	rep, err := Evaluate(context.Background(), runs, contenders(), Options{SeriesRun: 0, Workers: 2, KeepSeries: func(i int) bool { return keep[i] }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Series == nil || rep.Series.App != runs[0].App.Name {
		t.Fatalf("SeriesRun's series %+v", rep.Series)
	}
	if len(rep.RunSeries) != len(keep) {
		t.Fatalf("kept runs %v, want %v", slices.Sorted(maps.Keys(rep.RunSeries)), keep)
	}
	for i := range keep {
		alone, err := Evaluate(context.Background(), runs[i:i+1], contenders(), Options{SeriesRun: 0, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		got := rep.RunSeries[i]
		if got == nil || got.App != runs[i].App.Name || !reflect.DeepEqual(got.Series, alone.Series.Series) {
			t.Errorf("run %d: kept series differ from the run's alone", i)
		}
	}
}
