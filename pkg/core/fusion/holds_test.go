package fusion

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// TestSaturationAtLimit is the case make e2e-node found on a real kubelet
// (docs/real-node.md): a pod whose CPU limit equals its request, sized
// for light load, is then driven to its limit. Its usage is capped there,
// its readiness probe times out under the load, and as a pod within its
// CPU initialisation period the HPA arithmetic ignores its usage.
func TestSaturationAtLimit(t *testing.T) {
	const (
		request = 0.1 // cores; the limit is the same
		idle    = 0.034
	)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	window := 15 * time.Second
	obs := func(at time.Time, usage, limit float64, pod workload.PodSample) workload.Observation {
		pod.Name, pod.HasMetrics, pod.Usage = "app-0", true, workload.Resources{CPU: usage, Memory: 64 << 20}
		pod.Requests = workload.Resources{CPU: request, Memory: 128 << 20}
		ready := int32(0)
		if pod.Ready {
			ready = 1
		}
		return workload.Observation{
			Time: at, Window: window, Replicas: 1, ReadyReplicas: ready, Samples: 1,
			Containers: []workload.ContainerObservation{{
				Name: "app", Requests: pod.Requests, Limits: workload.Resources{CPU: limit, Memory: 256 << 20},
				Usage: pod.Usage, Peak: pod.Usage,
			}},
			Pods: []workload.PodSample{pod},
		}
	}
	for _, tc := range []struct {
		name  string
		usage float64
		limit float64
		pod   func(now time.Time) workload.PodSample
		// wantScaleOut: replicas rise; wantHold: the CPU target is not
		// below the request.
		wantScaleOut, wantHold bool
	}{
		{
			name: "a pod that lost readiness at its limit is scaled out and keeps its CPU", usage: 0.095, limit: request,
			pod: func(now time.Time) workload.PodSample {
				return workload.PodSample{Started: now.Add(-2 * time.Minute), ReadySince: now.Add(-30 * time.Second)}
			},
			wantScaleOut: true, wantHold: true,
		},
		{
			name: "a ready pod at its limit keeps its CPU", usage: 0.095, limit: request,
			pod: func(now time.Time) workload.PodSample {
				return workload.PodSample{Ready: true, Started: now.Add(-20 * time.Minute), ReadySince: now.Add(-19 * time.Minute)}
			},
			wantScaleOut: true, wantHold: true,
		},
		{
			name: "a pod starting at its limit keeps its CPU but is not scaled out", usage: 0.095, limit: request,
			pod: func(now time.Time) workload.PodSample {
				return workload.PodSample{Started: now.Add(-time.Minute), ReadySince: now.Add(-time.Minute - time.Second)}
			},
			wantHold: true,
		},
		{
			name: "below its limit the light load lowers the CPU", usage: idle, limit: 0.2,
			pod: func(now time.Time) workload.PodSample {
				return workload.PodSample{Ready: true, Started: now.Add(-20 * time.Minute), ReadySince: now.Add(-19 * time.Minute)}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicyFactory(Options{})(workload.Constraints{MinReplicas: 1, MaxReplicas: 5})
			if err != nil {
				t.Fatal(err)
			}
			now := t0
			ready := func(now time.Time) workload.PodSample {
				return workload.PodSample{Ready: true, Started: t0.Add(-time.Minute), ReadySince: t0}
			}
			// Ten minutes of light load: the histogram knows only it.
			for range 40 {
				if _, err := p.Recommend(context.Background(), obs(now, idle, tc.limit, ready(now))); err != nil {
					t.Fatal(err)
				}
				now = now.Add(window)
			}
			rec, err := p.Recommend(context.Background(), obs(now, tc.usage, tc.limit, tc.pod(now)))
			if err != nil {
				t.Fatal(err)
			}
			c, _ := rec.Container("app")
			if got := rec.Replicas > 1; got != tc.wantScaleOut {
				t.Errorf("replicas %d (reason %q), want scale-out %v", rec.Replicas, rec.Reason, tc.wantScaleOut)
			}
			if got := c.Target.CPU >= request; got != tc.wantHold {
				t.Errorf("CPU target %.3f of a %.3f request (reason %q), want held %v", c.Target.CPU, request, rec.Reason, tc.wantHold)
			}
		})
	}
}

func TestCPUSaturation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limited := []workload.ContainerObservation{
		{Name: "a", Limits: workload.Resources{CPU: 0.1}, Usage: workload.Resources{CPU: 0.095}},
		{Name: "b", Limits: workload.Resources{CPU: 0.1}, Usage: workload.Resources{CPU: 0.09}},
	}
	pod := func(ready bool, usage float64, started, readySince time.Duration) workload.PodSample {
		return workload.PodSample{Ready: ready, HasMetrics: true, Usage: workload.Resources{CPU: usage},
			Started: t0.Add(started), ReadySince: t0.Add(readySince)}
	}
	for _, tc := range []struct {
		name       string
		containers []workload.ContainerObservation
		ready      int32
		pods       []workload.PodSample
		want       saturation
	}{
		{name: "no per-pod samples, ready", containers: limited, ready: 1, want: saturation{pods: true, serving: true}},
		{name: "no per-pod samples, none ready", containers: limited, want: saturation{pods: true}},
		{name: "a container without a limit", ready: 1, containers: []workload.ContainerObservation{
			limited[0], {Name: "b", Usage: workload.Resources{CPU: 0.5}},
		}},
		{name: "ready pods at the limit", containers: limited, ready: 2, pods: []workload.PodSample{
			pod(true, 0.19, 0, time.Second), pod(true, 0.185, 0, time.Second),
		}, want: saturation{pods: true, serving: true}},
		{name: "one of two ready pods at the limit", containers: limited, ready: 2, pods: []workload.PodSample{
			pod(true, 0.19, 0, time.Second), pod(true, 0.05, 0, time.Second),
		}},
		{name: "a starting pod at the limit beside an idle ready one", containers: limited, ready: 1, pods: []workload.PodSample{
			pod(false, 0.2, 0, -time.Second), pod(true, 0.02, 0, time.Second),
		}},
		{name: "only a starting pod, at the limit", containers: limited, pods: []workload.PodSample{
			pod(false, 0.2, 0, -time.Second), {Name: "pending"},
		}, want: saturation{pods: true}},
		{name: "a pod that lost readiness, at the limit", containers: limited, pods: []workload.PodSample{
			pod(false, 0.2, 0, time.Minute),
		}, want: saturation{pods: true, serving: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := workload.Observation{Time: t0.Add(time.Hour), Samples: 1, ReadyReplicas: tc.ready, Replicas: 2, Containers: tc.containers, Pods: tc.pods}
			if got := cpuSaturation(&obs); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestYoungHistoryLowersNothing: with Options.ShrinkAfter, a 400m pod whose
// first samples are the idle start is not cut before five minutes of
// history; after that it is.
func TestYoungHistoryLowersNothing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const after = 5 * time.Minute
	p, err := NewPolicyFactory(Options{ShrinkAfter: after})(workload.Constraints{MinReplicas: 1, MaxReplicas: 5})
	if err != nil {
		t.Fatal(err)
	}
	req := workload.Resources{CPU: 0.4, Memory: 256 << 20}
	for i := range 29 { // a window every 15 s for seven minutes
		at := time.Duration(i) * 15 * time.Second
		usage := 0.13
		if i == 0 {
			usage = 0.05 // the idle start
		}
		obs := workload.Observation{
			Time: t0.Add(at), Window: 15 * time.Second, Replicas: 1, ReadyReplicas: 1, Samples: 1,
			Containers: []workload.ContainerObservation{{
				Name: "app", Requests: req, Limits: req,
				Usage: workload.Resources{CPU: usage, Memory: 60 << 20}, Peak: workload.Resources{CPU: usage, Memory: 60 << 20},
			}},
		}
		rec, err := p.Recommend(context.Background(), obs)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := rec.Container("app")
		lowered := c.Target.CPU < req.CPU || c.Target.Memory < req.Memory
		if want := at >= after; lowered != want {
			t.Errorf("after %v of history: target %+v of requests %+v: lowered %v, want %v", at, c.Target, req, lowered, want)
		}
	}
}

// TestSaturatedScaleOutWaitsForUnstartedPods: rule 11 asks one more replica
// for serving pods at their limit, but not while a pod already asked for
// has not started (the real node's round eighteen: the default went from
// 2 to 3 replicas with the second pod unschedulable); a pod that started
// and is not Ready yet does not hold it, and neither replicas are cut.
func TestSaturatedScaleOutWaitsForUnstartedPods(t *testing.T) {
	const request = 0.5 // cores; the limit is the same
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(usage float64) workload.PodSample {
		return workload.PodSample{Name: "app-0", Ready: true, HasMetrics: true, Started: t0.Add(-time.Hour), ReadySince: t0.Add(-time.Hour),
			Usage: workload.Resources{CPU: usage, Memory: 64 << 20}, Requests: workload.Resources{CPU: request, Memory: 128 << 20}}
	}
	obs := func(now time.Time, second *workload.PodSample, usage float64) workload.Observation {
		o := workload.Observation{
			Time: now, Window: 15 * time.Second, Replicas: 1, ReadyReplicas: 1, Samples: 1,
			Containers: []workload.ContainerObservation{{
				Name: "app", Requests: workload.Resources{CPU: request, Memory: 128 << 20}, Limits: workload.Resources{CPU: request, Memory: 256 << 20},
				Usage: workload.Resources{CPU: usage, Memory: 64 << 20}, Peak: workload.Resources{CPU: usage, Memory: 64 << 20},
			}},
			Pods: []workload.PodSample{at(usage)},
		}
		if second != nil {
			o.Replicas++
			o.Pods = append(o.Pods, *second)
			if second.HasMetrics {
				o.Samples++
			}
		}
		return o
	}
	for _, tc := range []struct {
		name    string
		second  func(now time.Time) *workload.PodSample
		want    int32
		waiting bool
	}{
		{"one pod at its limit: one more", func(time.Time) *workload.PodSample { return nil }, 2, false},
		{"a second pod not started: held at two", func(time.Time) *workload.PodSample {
			return &workload.PodSample{Name: "app-1", Requests: workload.Resources{CPU: request, Memory: 128 << 20}}
		}, 2, true},
		{"a second pod started, not Ready yet: one more", func(now time.Time) *workload.PodSample {
			return &workload.PodSample{Name: "app-1", HasMetrics: true, Started: now.Add(-5 * time.Second), ReadySince: now.Add(-6 * time.Second),
				Usage: workload.Resources{CPU: 0.01, Memory: 32 << 20}, Requests: workload.Resources{CPU: request, Memory: 128 << 20}}
		}, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicyFactory(Options{})(workload.Constraints{MinReplicas: 1, MaxReplicas: 5})
			if err != nil {
				t.Fatal(err)
			}
			now := t0
			for range 40 {
				if _, err := p.Recommend(context.Background(), obs(now, nil, 0.2)); err != nil {
					t.Fatal(err)
				}
				now = now.Add(15 * time.Second)
			}
			rec, err := p.Recommend(context.Background(), obs(now, tc.second(now), 0.49))
			if err != nil {
				t.Fatal(err)
			}
			waiting := strings.Contains(rec.Reason, "CPUSaturatedPodsNotStarted")
			if rec.Replicas != tc.want || waiting != tc.waiting || !strings.Contains(rec.Reason, "CPUSaturated") {
				t.Errorf("replicas %d, reason %q; want %d, waiting for the pod %v", rec.Replicas, rec.Reason, tc.want, tc.waiting)
			}
		})
	}
}
