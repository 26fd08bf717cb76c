package whatif

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// fixed always asks for the same pods, and counts its looks.
type fixed struct {
	looks *int
}

func (f fixed) Name() string { return "fixed" }

func (f fixed) Recommend(context.Context, workload.Observation) (workload.Recommendation, error) {
	*f.looks++
	return workload.Recommendation{Replicas: 7, Containers: []workload.ContainerRecommendation{{Name: "app", Target: workload.Resources{CPU: 0.3, Memory: 300 << 20}}}}, nil
}

// TestInstallAfter: a policy installed after the history began leaves the
// pods as they ran until its first look past that time, sees nothing
// before it, and decides from then on; what ran is replayed as always.
func TestInstallAfter(t *testing.T) {
	s := record(t, truthApp("ns/a"), 60, 10)
	f, err := FitApp(s, FitOptions{MinPoints: 30})
	if err != nil {
		t.Fatal(err)
	}
	const k = 5 // steps before the install
	tests := []struct {
		name  string
		after int // in steps; the install is half a step later, so its first look is at the next step's end
		// pods are what ran in the first recordedSteps points.
		recordedSteps int
	}{
		{"from the start", 0, 1},
		{"installed later", k, k + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var looks int
			extra := eval.Contender{Name: "fixed", New: func(eval.Run, sim.Config) (workload.Policy, error) { return fixed{&looks}, nil }}
			o := ReplayOptions{Seeds: 1, Policies: []string{PolicyFused}, Extra: []eval.Contender{extra}, Plot: true}
			if tc.after > 0 {
				o.InstallAfter = step*k + step/2
			}
			res, err := Replay(context.Background(), []Workload{{Series: s, Fit: f}}, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.InstallAfter != o.InstallAfter {
				t.Errorf("result's install after %s, want %s", res.InstallAfter, o.InstallAfter)
			}
			series := map[string][]eval.Point{}
			for _, sr := range res.Plots[0].Replayed.Series {
				series[sr.Policy] = sr.Points
			}
			// What ran is replayed whatever the install.
			for i, p := range series[PolicyActual] {
				if i > 0 && float64(p.Replicas) != math.Round(s.Replicas[i]) {
					t.Fatalf("what ran: step %d has %d replicas, recorded %g", i, p.Replicas, s.Replicas[i])
				}
			}
			if want := len(s.Rate) - tc.after; looks != want { // a look after every step
				t.Errorf("the fixed policy looked %d times, want %d", looks, want)
			}
			for name, pts := range series {
				if name == PolicyActual {
					continue
				}
				for i := 1; i < tc.recordedSteps; i++ {
					if p := pts[i]; float64(p.Replicas) != s.Replicas[i] || p.CPU != s.RequestCPU[i] {
						t.Errorf("%s: step %d has %d × %.3g cores before the install, what ran %g × %.3g", name, i, p.Replicas, p.CPU, s.Replicas[i], s.RequestCPU[i])
					}
				}
			}
			// The fixed policy's pods from its first decision on.
			for i, p := range series["fixed"][tc.recordedSteps:] {
				if p.Replicas != 7 || p.CPU != 0.3 {
					t.Fatalf("fixed: step %d has %d × %.3g cores, want 7 × 0.3", tc.recordedSteps+i, p.Replicas, p.CPU)
				}
			}
			var b bytes.Buffer
			if err := res.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if said := strings.Contains(b.String(), "--install-after"); said != (tc.after > 0) {
				t.Errorf("text says --install-after: %v, want %v", said, tc.after > 0)
			}
		})
	}
	t.Run("negative", func(t *testing.T) {
		if _, err := Replay(context.Background(), []Workload{{Series: s, Fit: f}}, ReplayOptions{InstallAfter: -step}); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Fatalf("err %v", err)
		}
	})
}
