package wire

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/aware-k8s/aware/pkg/core/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// TestToObservationContainers: every per-container measurement reaches the
// wire, each container its own, CPU pressure included.
func TestToObservationContainers(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []workload.ContainerObservation
	}{
		{"no pressure", []workload.ContainerObservation{{Name: "app", Usage: workload.Resources{CPU: 0.4, Memory: 1 << 20}}}},
		{"starved", []workload.ContainerObservation{{Name: "app", Usage: workload.Resources{CPU: 0.4}, CPUPressure: 0.3, OOMKills: 2}}},
		{"the whole window", []workload.ContainerObservation{{Name: "app", CPUPressure: 1}}},
		{"one container of two", []workload.ContainerObservation{
			{Name: "app", CPUPressure: 0.07, Peak: workload.Resources{CPU: 0.9}},
			{Name: "sidecar", Requests: workload.Resources{CPU: 0.1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := ToObservation(&workload.Observation{Replicas: 1, Containers: tc.in})
			if len(out.GetContainers()) != len(tc.in) {
				t.Fatalf("%d containers on the wire, want %d", len(out.GetContainers()), len(tc.in))
			}
			for i, c := range tc.in {
				w := out.GetContainers()[i]
				if w.GetName() != c.Name || w.GetCpuPressure() != c.CPUPressure || int(w.GetOomKills()) != c.OOMKills ||
					w.GetUsage().GetCpuCores() != c.Usage.CPU || w.GetUsage().GetMemoryBytes() != c.Usage.Memory ||
					w.GetPeak().GetCpuCores() != c.Peak.CPU || w.GetRequests().GetCpuCores() != c.Requests.CPU {
					t.Errorf("container %d: %+v on the wire, want %+v", i, w, c)
				}
			}
		})
	}
}

// TestToObservationStartupDelay: the pods' start-up delay goes on the wire
// when one is known, and is left unset otherwise.
func TestToObservationStartupDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		set  bool
	}{{"unknown", 0, false}, {"20 s", 20 * time.Second, true}} {
		t.Run(tc.name, func(t *testing.T) {
			out := ToObservation(&workload.Observation{Replicas: 1, StartupDelay: tc.d})
			if (out.GetStartupDelay() != nil) != tc.set || out.GetStartupDelay().AsDuration() != tc.d {
				t.Errorf("startup_delay %v, want %v (set %t)", out.GetStartupDelay(), tc.d, tc.set)
			}
		})
	}
}

// FuzzFromRecommendation: whatever bytes an agent sends, an accepted
// recommendation holds only finite, non-negative amounts and named
// containers.
func FuzzFromRecommendation(f *testing.F) {
	for _, r := range []*pb.Recommendation{
		{Replicas: 2, Containers: []*pb.ContainerRecommendation{{Name: "a", Target: &pb.Resources{CpuCores: 1, MemoryBytes: 2}}}},
		{Replicas: 1, Containers: []*pb.ContainerRecommendation{{Name: "a", Target: &pb.Resources{CpuCores: math.NaN()}}}},
		{Replicas: -1},
	} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r pb.Recommendation
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		rec, err := FromRecommendation(&r)
		if err != nil {
			return
		}
		if err := rec.Validate(); err != nil || rec.Replicas < 1 {
			t.Fatalf("accepted an invalid recommendation %+v: %v", rec, err)
		}
		for _, c := range rec.Containers {
			if c.Name == "" {
				t.Fatal("accepted an unnamed container")
			}
		}
	})
}
