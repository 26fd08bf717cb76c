//go:build benchreal

package main

import (
	"testing"

	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/hack/benchreal/observe"
	"github.com/aware-k8s/aware/hack/benchreal/slo"
)

func TestWindowsInFlight(t *testing.T) {
	// Three 15-s windows; looks every 5 s. The first window's looks all
	// answered, the second's one of two, the third's none.
	recs := []loadgen.Record{{Window: 0, Start: 0, End: 15}, {Window: 1, Start: 15, End: 30}, {Window: 2, Start: 30, End: 45}}
	s := &sampler{
		samples: []observe.Sample{{T: 5, Replicas: 1, Ready: 1, MemoryUsed: 100}, {T: 20, Replicas: 2, Ready: 1, MemoryUsed: 300}},
		looks: []look{
			{T: 5, slo: slo.Look{InFlight: 2, InFlightPods: 1, InFlightOK: true}},
			{T: 10, slo: slo.Look{InFlight: 4, InFlightPods: 1, InFlightOK: true}},
			{T: 15, slo: slo.Look{InFlight: 9, InFlightPods: 1, InFlightOK: true}},
			{T: 20, slo: slo.Look{InFlight: 7, InFlightPods: 2, InFlightOK: false}},
			{T: 25, slo: slo.Look{InFlight: 10, InFlightPods: 2, InFlightOK: true}},
			{T: 35, slo: slo.Look{}},
		},
	}
	ws := s.windows(recs)
	if len(ws) != 3 {
		t.Fatalf("%d windows, want 3", len(ws))
	}
	for _, tc := range []struct {
		name string
		i    int
		want float64 // < 0: none
		pods float64
	}{
		{"every look answered (the look at the end counts)", 0, 5, 1},
		{"an unanswered look is left out", 1, 10, 2},
		{"no answer", 2, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ws[tc.i]
			switch {
			case tc.want < 0 && got.InFlightPods != 0:
				t.Errorf("in flight %v over %v pods, want no answer", got.InFlight, got.InFlightPods)
			case tc.want >= 0 && got.InFlight != tc.want:
				t.Errorf("in flight %v, want %v", got.InFlight, tc.want)
			}
			if p := ws[tc.i].InFlightPods; p != tc.pods {
				t.Errorf("in flight over %v pods, want %v", p, tc.pods)
			}
		})
	}
}
