package simside

import (
	"errors"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// gauged returns n windows of one or two steady pods whose gauge reads 2 to
// 150 requests in flight, overloaded from 60 on (p95 of seconds, so Little's
// law off the p95 reads them wrong), holding 50 MiB a pod and 1 MiB a
// request in flight, exactly.
func gauged(n int) []result.Window {
	ws := calm(n)
	for i := range ws {
		v := 2 + float64(i*37%149)
		ws[i].InFlight, ws[i].InFlightPods = v, float64(ws[i].Ready)
		if v > 60 {
			ws[i].P95 = 2 + v/30
		}
		ws[i].MemoryUsed = float64(ws[i].Ready)*50*sim.MiB + v*sim.MiB
	}
	return ws
}

func TestFitMemory(t *testing.T) {
	run := func(ws []result.Window) []result.Run {
		return []result.Run{{Policy: "hpa", SLO: 0.25, Window: 15, CPUSecondsPerRequest: 0.02, StartupSeconds: []float64{12}, Windows: ws}}
	}
	for _, tc := range []struct {
		name    string
		windows []result.Window
		fit     MemoryFit
		// perRequest is the memory per request wanted (bytes); 0 with want
		// set: a refusal naming want.
		perRequest float64
		method     string
		want       string
	}{
		{"auto takes the gauge", gauged(30), MemoryFitAuto, sim.MiB, "in-flight gauge", ""},
		{"gauge", gauged(30), MemoryFitGauge, sim.MiB, "in-flight gauge", ""},
		{"a pod missing from the gauge's answers is left out", func() []result.Window {
			ws := gauged(30)
			for i := range ws {
				if i%5 == 4 {
					ws[i].InFlightPods = float64(ws[i].Ready) - 0.5
					ws[i].MemoryUsed *= 3
				}
			}
			return ws
		}(), MemoryFitAuto, sim.MiB, "in-flight gauge", ""},
		{"a window after a scaling is left out", func() []result.Window {
			ws := gauged(30)
			ws[10].ReplicaChanges = 1
			for _, i := range []int{10, 11, 12} {
				ws[i].MemoryUsed *= 3 // a new pod's memory, seen late
			}
			return ws
		}(), MemoryFitGauge, sim.MiB, "in-flight gauge", ""},
		{"auto without the gauge: Little's law on calm windows", calm(20), MemoryFitAuto, sim.MiB, "mean latency read off the p95", ""},
		{"little ignores the gauge", func() []result.Window {
			ws := calm(20)
			for i := range ws {
				v := 1000.0 // would give a per-request memory near 0
				ws[i].InFlight, ws[i].InFlightPods = v, float64(ws[i].Ready)
			}
			return ws
		}(), MemoryFitLittle, sim.MiB, "mean latency read off the p95", ""},
		{"gauge with too few windows refuses", gauged(MinFitWindows + calmBefore - 1), MemoryFitGauge, 0, "", "windows with the app's requests in flight"},
		{"auto with too few gauged windows falls back", gauged(MinFitWindows + calmBefore - 1), MemoryFitAuto, 0, "", "calm windows with memory usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Calibration
			err := c.fitMemory(run(tc.windows), tc.fit)
			if tc.want != "" {
				if !errors.Is(err, ErrThinData) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("fitMemory: %v, want ErrThinData naming %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			within(t, "base memory", c.BaseMemory.Value, 50*sim.MiB, 1e-3*sim.MiB)
			within(t, "memory per request", c.MemoryPerRequest.Value, tc.perRequest, 1e-3*sim.MiB)
			if !strings.Contains(c.MemoryPerRequest.Method, tc.method) {
				t.Errorf("method %q, want it to name %q", c.MemoryPerRequest.Method, tc.method)
			}
		})
	}
}

func TestParseMemoryFit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want MemoryFit
		err  bool
	}{
		{"auto", MemoryFitAuto, false},
		{"gauge", MemoryFitGauge, false},
		{"little", MemoryFitLittle, false},
		{"", "", true},
		{"Gauge", "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMemoryFit(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("ParseMemoryFit(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
			}
			if err == nil && got.String() != tc.in {
				t.Errorf("String() = %q, want %q", got.String(), tc.in)
			}
		})
	}
}
