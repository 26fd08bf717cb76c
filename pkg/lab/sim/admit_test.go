package sim

import (
	"slices"
	"testing"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// podCPUs is the CPU request of each pod there, in order.
func podCPUs(s *Simulator) []float64 {
	var out []float64
	for _, p := range s.Observation().Pods {
		out = append(out, p.Requests.CPU)
	}
	return out
}

func vpaRec(replicas int32, target, lo, hi float64) workload.Recommendation {
	return workload.Recommendation{Replicas: replicas, Containers: []workload.ContainerRecommendation{{
		Name:       "main",
		Target:     workload.Resources{CPU: target},
		LowerBound: workload.Resources{CPU: lo},
		UpperBound: workload.Resources{CPU: hi},
	}}}
}

// TestAdmit: as VPA's admission controller, Admit gives the pods created
// afterwards the target and leaves the running ones as they are; the
// updater (Apply) then resizes each pod on its own account: one out of
// the bounds takes the target, one within them keeps its request.
func TestAdmit(t *testing.T) {
	app := testApp(0.01, 0, 1)
	app.Requests.CPU, app.Limits.CPU = 0.2, 0.2
	s := newSim(t, Config{Resize: ResizeInPlace, Nodes: 1, NodeCapacity: workload.Resources{CPU: 4, Memory: 64 * gib}}, app, steadyTrace(t, 10, 60), 1)
	warm(t, s)

	changed, err := s.Admit(vpaRec(0, 0.3, 0.25, 0.35))
	if err != nil || !changed {
		t.Fatalf("Admit: changed %v, error %v; want a change", changed, err)
	}
	s.Step()
	if got := podCPUs(s); !slices.Equal(got, []float64{0.2}) {
		t.Fatalf("after Admit: pods at %v; want the running pod kept at 0.2", got)
	}
	// A second replica is admitted with the target; the limit follows at
	// the app's ratio (1).
	if _, err := s.Apply(workload.Recommendation{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	warm(t, s)
	got := podCPUs(s)
	slices.Sort(got)
	if !slices.Equal(got, []float64{0.2, 0.3}) {
		t.Fatalf("a new pod after Admit: pods at %v; want [0.2 0.3]", got)
	}
	if changed, err := s.Admit(vpaRec(0, 0.3, 0.25, 0.35)); err != nil || changed {
		t.Fatalf("the same target again: changed %v, error %v; want none", changed, err)
	}

	// The updater's bounds [0.25, 0.35] hold the new pod (0.3) and not the
	// old (0.2): the old one alone is resized, to the target 0.32.
	a, err := s.Apply(vpaRec(2, 0.32, 0.25, 0.35))
	if err != nil || !a.Vertical {
		t.Fatalf("Apply: %+v, error %v; want a vertical change", a, err)
	}
	m := s.Step()
	got = podCPUs(s)
	slices.Sort(got)
	if !slices.Equal(got, []float64{0.3, 0.32}) || m.Restarts != 0 {
		t.Fatalf("after the updater: pods at %v, %d restarts; want [0.3 0.32] in place", got, m.Restarts)
	}

	// Bounds that hold both: nothing changes, though the target differs.
	if a, err := s.Apply(vpaRec(2, 0.31, 0.25, 0.35)); err != nil || a.Vertical {
		t.Fatalf("Apply within bounds: %+v, error %v; want no vertical change", a, err)
	}
	s.Step()
	got = podCPUs(s)
	slices.Sort(got)
	if !slices.Equal(got, []float64{0.3, 0.32}) {
		t.Fatalf("within bounds: pods at %v; want them kept", got)
	}
}

// TestApplyWithoutAdmitResizesTogether: without Admit the pods share the
// template, and the updater resizes them all when it is out of bounds,
// as before per-pod checks: the demo's runs are unchanged.
func TestApplyWithoutAdmitResizesTogether(t *testing.T) {
	app := testApp(0.01, 0, 3)
	app.Requests.CPU, app.Limits.CPU = 0.2, 0.2
	s := newSim(t, Config{Resize: ResizeInPlace, Nodes: 1, NodeCapacity: workload.Resources{CPU: 4, Memory: 64 * gib}}, app, steadyTrace(t, 10, 60), 1)
	warm(t, s)
	if a, err := s.Apply(vpaRec(3, 0.22, 0.1, 0.3)); err != nil || a.Vertical {
		t.Fatalf("within bounds: %+v, %v; want no change", a, err)
	}
	if _, err := s.Apply(vpaRec(3, 0.4, 0.35, 0.5)); err != nil {
		t.Fatal(err)
	}
	s.Step()
	if got := podCPUs(s); !slices.Equal(got, []float64{0.4, 0.4, 0.4}) {
		t.Fatalf("out of bounds: pods at %v; want all three at 0.4", got)
	}
}

func TestAdmitRejectsInvalid(t *testing.T) {
	app := testApp(0.01, 0, 1)
	s := newSim(t, Config{}, app, steadyTrace(t, 10, 4), 1)
	if _, err := s.Admit(workload.Recommendation{Replicas: -1}); err == nil {
		t.Fatal("Admit of a negative replica count: no error")
	}
	if _, err := s.Admit(workload.Recommendation{Containers: []workload.ContainerRecommendation{{Name: "main", Target: workload.Resources{CPU: -1}}}}); err == nil {
		t.Fatal("Admit of a negative target: no error")
	}
	if changed, err := s.Admit(vpaRec(0, 0.5, 0, 0)); err != nil || !changed || s.spec.tmplReq.CPU != 0.5 {
		t.Fatalf("Admit(0.5): changed %v, error %v, template %v", changed, err, s.spec.tmplReq)
	}
}
