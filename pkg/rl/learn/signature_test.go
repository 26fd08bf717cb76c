package learn

import (
	"math"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestSignature(t *testing.T) {
	const mib = 1 << 20
	busy := workload.Observation{
		Replicas: 4, ReadyReplicas: 2, RequestRate: 20, Latency: workload.Latency{P50: 0.2},
		// Two containers: their usage adds up per pod.
		Containers: []workload.ContainerObservation{
			{Name: "app", Usage: workload.Resources{CPU: 0.5, Memory: 60 * mib}},
			{Name: "sidecar", Usage: workload.Resources{CPU: 0.5, Memory: 4 * mib}},
		},
		StartupDelay: 20 * time.Second,
	}
	cases := []struct {
		name string
		obs  workload.Observation
		want [SignatureDim]float64
	}{
		{"empty", workload.Observation{}, [SignatureDim]float64{}},
		{"busy", busy, [SignatureDim]float64{
			// 1 core for 10 requests/s per ready pod: 0.1 s per request.
			SigCPUPerRequest:  (math.Log(0.1) + 3) / 2,
			SigMemoryPerPod:   (math.Log(64*mib) - 18) / 1.5,
			SigInFlightPerPod: math.Log1p(10*0.2) / 2,
			SigStartupDelay:   20.0 / 40,
			SigStartupSeen:    1,
		}},
		{"no ready pod: the replicas serve", func() workload.Observation {
			o := busy
			o.ReadyReplicas, o.StartupDelay = 0, 0
			return o
		}(), [SignatureDim]float64{
			SigCPUPerRequest:  (math.Log(1/5.0) + 3) / 2,
			SigMemoryPerPod:   (math.Log(64*mib) - 18) / 1.5,
			SigInFlightPerPod: math.Log1p(5*0.2) / 2,
		}},
		{"from the pods where it has them", func() workload.Observation {
			o := busy
			t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
			pod := func(ready bool, startup time.Duration) workload.PodSample {
				return workload.PodSample{Ready: ready, Started: t0, ReadySince: t0.Add(startup)}
			}
			// The median of 10, 30 and 40 s over the aggregate's 20 s; the
			// unready pod does not count.
			o.Pods = []workload.PodSample{pod(true, 30*time.Second), pod(true, 10*time.Second), pod(true, 40*time.Second), pod(false, time.Hour)}
			return o
		}(), [SignatureDim]float64{
			SigCPUPerRequest:  (math.Log(0.1) + 3) / 2,
			SigMemoryPerPod:   (math.Log(64*mib) - 18) / 1.5,
			SigInFlightPerPod: math.Log1p(10*0.2) / 2,
			SigStartupDelay:   30.0 / 40,
			SigStartupSeen:    1,
		}},
		{"pods that tell nothing", func() workload.Observation {
			o := busy
			o.Pods = []workload.PodSample{{Name: "starting"}}
			return o
		}(), [SignatureDim]float64{
			SigCPUPerRequest:  (math.Log(0.1) + 3) / 2,
			SigMemoryPerPod:   (math.Log(64*mib) - 18) / 1.5,
			SigInFlightPerPod: math.Log1p(10*0.2) / 2,
		}},
		{"clipped", workload.Observation{
			Replicas: 1, ReadyReplicas: 1, RequestRate: 1e-9, Latency: workload.Latency{P50: 1e9},
			Containers:   []workload.ContainerObservation{{Usage: workload.Resources{CPU: 8, Memory: 1e15}}},
			StartupDelay: time.Hour,
		}, [SignatureDim]float64{SigCPUPerRequest: 3, SigMemoryPerPod: 3, SigInFlightPerPod: math.Log1p(1) / 2, SigStartupDelay: 4, SigStartupSeen: 1}},
		{"non-finite", workload.Observation{
			Replicas: 2, ReadyReplicas: 2, RequestRate: math.NaN(), Latency: workload.Latency{P50: math.Inf(1)},
			Containers: []workload.ContainerObservation{{Usage: workload.Resources{CPU: math.Inf(1), Memory: math.NaN()}}},
		}, [SignatureDim]float64{}},
		{"infinite rate", workload.Observation{
			Replicas: 2, ReadyReplicas: 2, RequestRate: math.Inf(1), Latency: workload.Latency{P50: 0.1},
			Containers: []workload.ContainerObservation{{Usage: workload.Resources{CPU: 1, Memory: 1}}},
		}, [SignatureDim]float64{SigCPUPerRequest: -3, SigMemoryPerPod: -3, SigInFlightPerPod: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Signature(&tc.obs)
			if len(got) != SignatureDim {
				t.Fatalf("len %d, want %d", len(got), SignatureDim)
			}
			for i, w := range tc.want {
				if math.IsNaN(got[i]) || math.IsInf(got[i], 0) || math.Abs(got[i]-w) > 1e-12 {
					t.Errorf("signature[%d] = %v, want %v (all: %v)", i, got[i], w, got)
				}
			}
		})
	}
}
