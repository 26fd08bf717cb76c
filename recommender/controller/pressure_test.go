package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

// fakePressure answers CPUPressure with fixed values.
type fakePressure struct {
	mu      sync.Mutex
	values  map[usage.ContainerKey]float64
	dropped usage.Drops
	err     error
	asked   []string // namespaces asked for
}

var _ PressureSource = (*fakePressure)(nil)

func (f *fakePressure) CPUPressure(_ context.Context, ns string) (usage.PressureReading, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ns)
	if f.err != nil {
		return usage.PressureReading{}, f.err
	}
	return usage.PressureReading{Containers: f.values, Dropped: f.dropped}, nil
}

func appKey(pod string) usage.ContainerKey {
	return usage.ContainerKey{Namespace: "ns", Pod: pod, Container: "app"}
}

// TestCPUPressureInObservation: the observation's CPU pressure is the mean
// over the pods with valid usage, a pod without a pressure series counting
// 0 (not measured), and a failed or absent source leaves it 0 without
// failing the loop.
func TestCPUPressureInObservation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		use      []usage.PodUsage
		source   *fakePressure // nil: no pressure source
		want     float64
		wantDrop map[string]float64
	}{
		{"mean over the pods", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20)},
			&fakePressure{values: map[usage.ContainerKey]float64{appKey("web-1"): 0.3, appKey("web-2"): 0.1}}, 0.2, nil},
		{"a pod without a series counts 0", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20)},
			&fakePressure{values: map[usage.ContainerKey]float64{appKey("web-1"): 0.3}}, 0.15, nil},
		{"a pod without usage does not count", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20)},
			&fakePressure{values: map[usage.ContainerKey]float64{appKey("web-1"): 0.3, appKey("web-2"): 0.9}}, 0.3, nil},
		{"a pod with invalid usage does not count", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", math.NaN(), 200<<20)},
			&fakePressure{values: map[usage.ContainerKey]float64{appKey("web-1"): 0.3, appKey("web-2"): 0.9}}, 0.3, map[string]float64{dropNaN: 1}},
		{"another namespace's pod or another container does not count", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20)},
			&fakePressure{values: map[usage.ContainerKey]float64{
				appKey("web-1"): 0.2, {Namespace: "other", Pod: "web-2", Container: "app"}: 0.9, {Namespace: "ns", Pod: "web-2", Container: "sidecar"}: 0.9,
			}}, 0.1, nil},
		{"the source's drops are counted", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20)},
			&fakePressure{values: map[usage.ContainerKey]float64{appKey("web-1"): 0.4}, dropped: usage.Drops{usage.DropNegative: 2}}, 0.2, map[string]float64{dropNegative: 2}},
		// The source keeps values in [0, 1]; the observation stays valid
		// even if one does not.
		{"out-of-range values from a source", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20)},
			&fakePressure{values: map[usage.ContainerKey]float64{appKey("web-1"): math.NaN(), appKey("web-2"): 1.5}}, 0.5, map[string]float64{dropNaN: 1}},
		{"the source failed", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20)},
			&fakePressure{err: errors.New("prometheus cpuPressure query: connection refused")}, 0, nil},
		{"no source", []usage.PodUsage{podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20)}, nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := twoPodWorkload()
			objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.RL = &v1alpha1.RLSpec{Mode: v1alpha1.RLModeShadow}
			f := newFixture(t, objs...)
			f.usage.set(tc.use...)
			adv := &obsAdvisor{}
			f.deps = func(d *Deps) {
				d.Advisor = adv
				if tc.source != nil {
					d.Pressure = tc.source
				}
			}
			f.start()
			f.tick()
			obs := adv.last(t)
			if got := obs.Containers[0].CPUPressure; math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("cpu pressure %v, want %v", got, tc.want)
			}
			if err := obs.Validate(); err != nil {
				t.Errorf("invalid observation: %v", err)
			}
			for _, r := range []string{dropNaN, dropInfinite, dropNegative} {
				if got := testutil.ToFloat64(f.c.metrics.invalidSamples.WithLabelValues(r)); got != tc.wantDrop[r] {
					t.Errorf("invalid samples{%s} = %g, want %g", r, got, tc.wantDrop[r])
				}
			}
			wantCond(t, f.mpa("ns", "web"), v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
			if tc.source != nil && (len(tc.source.asked) != 1 || tc.source.asked[0] != "") {
				t.Errorf("pressure read for namespaces %q, want once for all (\"\")", tc.source.asked)
			}
		})
	}
}

// TestCPUPressureFromPrometheus: the default template's answer reaches the
// observation, and the query is counted; a Prometheus that has no series
// (a kubelet without PSI) or is down leaves the pressure 0 and the loop
// unharmed.
func TestCPUPressureFromPrometheus(t *testing.T) {
	series := func(pod, v string) string {
		return fmt.Sprintf(`{"metric":{"namespace":"ns","pod":%q,"container":"app"},"value":[%d,%q]}`, pod, t0.Unix(), v)
	}
	for _, tc := range []struct {
		name   string
		answer string // "": no series
		down   bool
		want   float64
		result string
	}{
		{"measured", `{"resultType":"vector","result":[` + series("web-1", "0.12") + `,` + series("web-2", "0.04") + `]}`, false, 0.08, "success"},
		{"no series", "", false, 0, "success"},
		{"Prometheus down", "", true, 0, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prom := newPromServer(t)
			if tc.answer != "" {
				prom.instant = append(prom.instant, [2]string{"container_pressure_cpu_waiting_seconds_total", tc.answer})
			}
			prom.fail = tc.down
			objs := twoPodWorkload()
			objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.RL = &v1alpha1.RLSpec{Mode: v1alpha1.RLModeShadow}
			f := newFixture(t, objs...)
			f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.3, 200<<20))
			adv := &obsAdvisor{}
			f.deps = wrapDepsWithMetrics(t, f, func(d *Deps) {
				d.Pressure, d.Advisor = prom.source(t, d.Metrics), adv
			})
			f.start()
			f.tick()
			if got := adv.last(t).Containers[0].CPUPressure; math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("cpu pressure %v, want %v", got, tc.want)
			}
			if n := testutil.ToFloat64(f.c.metrics.promQueries.WithLabelValues("cpuPressure", tc.result)); n != 1 {
				t.Errorf("cpuPressure queries{result=%s} %g, want 1", tc.result, n)
			}
			wantCond(t, f.mpa("ns", "web"), v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
		})
	}
}
