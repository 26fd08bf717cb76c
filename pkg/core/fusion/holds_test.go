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
// 2 to 3 replicas with the second pod unschedulable) or not been created
// yet (round twenty-five); a pod that started and is not Ready yet does
// not hold it, and neither replicas are cut.
func TestSaturatedScaleOutWaitsForUnstartedPods(t *testing.T) {
	const request = 0.5 // cores; the limit is the same
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(usage float64) workload.PodSample {
		return workload.PodSample{Name: "app-0", Ready: true, HasMetrics: true, Started: t0.Add(-time.Hour), ReadySince: t0.Add(-time.Hour),
			Usage: workload.Resources{CPU: usage, Memory: 64 << 20}, Requests: workload.Resources{CPU: request, Memory: 128 << 20}}
	}
	obs := func(now time.Time, second *workload.PodSample, missing bool, usage float64) workload.Observation {
		o := workload.Observation{
			Time: now, Window: 15 * time.Second, Replicas: 1, ReadyReplicas: 1, Samples: 1,
			Containers: []workload.ContainerObservation{{
				Name: "app", Requests: workload.Resources{CPU: request, Memory: 128 << 20}, Limits: workload.Resources{CPU: request, Memory: 256 << 20},
				Usage: workload.Resources{CPU: usage, Memory: 64 << 20}, Peak: workload.Resources{CPU: usage, Memory: 64 << 20},
			}},
			Pods: []workload.PodSample{at(usage)},
		}
		if missing {
			o.Replicas++ // asked for, not in the pod list yet
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
		missing bool // a second replica asked for and not created
		want    int32
		waiting bool
	}{
		{"one pod at its limit: one more", func(time.Time) *workload.PodSample { return nil }, false, 2, false},
		{"a second pod not started: held at two", func(time.Time) *workload.PodSample {
			return &workload.PodSample{Name: "app-1", Requests: workload.Resources{CPU: request, Memory: 128 << 20}}
		}, false, 2, true},
		{"a second pod asked for, not created yet: held at two", func(time.Time) *workload.PodSample { return nil }, true, 2, true},
		{"a second pod started, not Ready yet: one more", func(now time.Time) *workload.PodSample {
			return &workload.PodSample{Name: "app-1", HasMetrics: true, Started: now.Add(-5 * time.Second), ReadySince: now.Add(-6 * time.Second),
				Usage: workload.Resources{CPU: 0.01, Memory: 32 << 20}, Requests: workload.Resources{CPU: request, Memory: 128 << 20}}
		}, false, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, now := warmed(t, t0, func(now time.Time) workload.Observation { return obs(now, nil, false, 0.2) })
			rec, err := p.Recommend(context.Background(), obs(now, tc.second(now), tc.missing, 0.49))
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

// TestDeferredResizeSheds is the real node's round twenty (rule 12): at a
// load step the default went to two replicas and sized both pods for the
// SLO; the second pod's resize was deferred (the node had no room), so it
// ran at 200m, saturated, past the SLO, and rules 4, 8 and 11 held two
// replicas that the arithmetic at the new size sized as one. Once the
// deferral has lasted a minute the replica is shed at once, without the
// five-minute scale-down window; a deferral younger than that, or none,
// keeps two.
func TestDeferredResizeSheds(t *testing.T) {
	const (
		small = 0.2    // cores: the pods' first request and limit
		s     = 0.0119 // CPU-seconds per request (measured on the node)
	)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mem := workload.Resources{Memory: 64 << 20}
	pod := func(name string, usage, request float64) workload.PodSample {
		return workload.PodSample{Name: name, Ready: true, HasMetrics: true, Started: t0, ReadySince: t0.Add(5 * time.Second),
			Usage: mem.With(workload.CPU, usage), Requests: workload.Resources{CPU: request, Memory: 128 << 20}}
	}
	// obs: the newest pod, whose enacted resources the container
	// observation holds, is the last one.
	obs := func(now time.Time, rate, p95 float64, pods ...workload.PodSample) workload.Observation {
		last := pods[len(pods)-1]
		var usage, peak float64
		for _, p := range pods {
			usage += p.Usage.CPU / float64(len(pods))
			peak = max(peak, p.Usage.CPU)
		}
		return workload.Observation{
			Time: now, Window: 15 * time.Second, Replicas: int32(len(pods)), ReadyReplicas: int32(len(pods)), Samples: len(pods),
			RequestRate: rate, SLO: 0.25, Latency: workload.Latency{P50: p95 / 3, P95: p95, P99: p95 * 1.2},
			Containers: []workload.ContainerObservation{{
				Name: "app", Requests: last.Requests, Limits: workload.Resources{CPU: last.Requests.CPU, Memory: 256 << 20},
				Usage: mem.With(workload.CPU, usage), Peak: mem.With(workload.CPU, peak),
			}},
			Pods: pods,
		}
	}
	for _, tc := range []struct {
		name string
		// deferred is how long the deferral has lasted at every step
		// after the load step; 0 for none.
		deferred time.Duration
		want     int32
		shed     bool
	}{
		{"no deferral: two", 0, 2, false},
		{"deferred for 30 s: two", 30 * time.Second, 2, false},
		{"deferred for a minute: one", time.Minute, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Ten minutes of 10 requests/s on one 200m pod, within the
			// SLO: the estimate of s is known.
			p, now := warmed(t, t0, func(now time.Time) workload.Observation {
				return obs(now, 10, 0.15, pod("app-0", 10*s, small))
			})
			// Three times the load; the first pod was resized to the
			// floor, the second was created at 200m and its resize waits.
			var big float64
			for i := range 9 {
				first := pod("app-0", 15*s, 0.62)
				second := pod("app-1", small, small)
				if tc.deferred > 0 {
					second.ResizeDeferredSince = now.Add(-tc.deferred)
				}
				rec, err := p.Recommend(context.Background(), obs(now, 30, 0.6, first, second))
				if err != nil {
					t.Fatal(err)
				}
				big = rec.Containers[0].Target.CPU
				shed := strings.Contains(rec.Reason, "ScaleDownShedding")
				if rec.Replicas != tc.want || shed != tc.shed || tc.shed != strings.Contains(rec.Reason, "ResizeDeferred") {
					t.Fatalf("step %d: replicas %d, reason %q; want %d, shed %v", i, rec.Replicas, rec.Reason, tc.want, tc.shed)
				}
				now = now.Add(15 * time.Second)
			}
			// The pod size the arithmetic sized one pod with holds the
			// load within the target utilisation.
			if 30*s > 0.7*big*1.1 {
				t.Errorf("CPU target %.3f for %.3f cores of load", big, 30*s)
			}
		})
	}
}

// warmed is a fused default (maxReplicas 5) after ten minutes of 15-s
// observations from obs, and the time of the next one.
func warmed(t *testing.T, t0 time.Time, obs func(time.Time) workload.Observation) (workload.Policy, time.Time) {
	t.Helper()
	p, err := NewPolicyFactory(Options{})(workload.Constraints{MinReplicas: 1, MaxReplicas: 5})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	for range 40 {
		if _, err := p.Recommend(context.Background(), obs(now)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(15 * time.Second)
	}
	return p, now
}
