package safeguard

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// fixed is a policy that recommends the same thing every time.
type fixed struct {
	rec   workload.Recommendation
	err   error
	calls int
}

func (f *fixed) Name() string { return "fixed" }

func (f *fixed) Recommend(context.Context, workload.Observation) (workload.Recommendation, error) {
	f.calls++
	return f.rec, f.err
}

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func obsWith(peakCPU, peakMem float64) workload.Observation {
	return workload.Observation{
		Time: t0, Window: time.Minute, Replicas: 2, ReadyReplicas: 2, Samples: 10,
		Containers: []workload.ContainerObservation{{
			Name:     "app",
			Requests: workload.Resources{CPU: 1, Memory: 1000},
			Usage:    workload.Resources{CPU: peakCPU / 2, Memory: peakMem / 2},
			Peak:     workload.Resources{CPU: peakCPU, Memory: peakMem},
		}},
	}
}

func recWith(replicas int32, cpu, mem float64) workload.Recommendation {
	r := workload.Resources{CPU: cpu, Memory: mem}
	return workload.Recommendation{
		Replicas: replicas, Source: workload.SourceAgent, Reason: "agent",
		Containers: []workload.ContainerRecommendation{{Name: "app", Target: r, LowerBound: r, UpperBound: r, UncappedTarget: r}},
	}
}

func TestSafeguard(t *testing.T) {
	user := workload.Resources{CPU: 1, Memory: 1000} // equals the current requests
	cases := []struct {
		name string
		opts Options
		// peaks of earlier observations (CPU, memory), then the current one.
		history [][2]float64
		peak    [2]float64
		rec     workload.Recommendation
		refused bool
	}{
		{"cpu down, cold", Options{}, nil, [2]float64{0.5, 500}, recWith(3, 0.5, 1000), false},
		{"cpu down, cpu peak at 90%", Options{}, nil, [2]float64{0.9, 100}, recWith(3, 0.5, 1000), true},
		{"cpu down, cpu peak just under 90%", Options{}, nil, [2]float64{0.899, 100}, recWith(3, 0.5, 1000), false},
		{"memory down, memory peak above request", Options{}, nil, [2]float64{0.1, 1200}, recWith(2, 1, 800), true},
		{"memory down, only cpu hot", Options{}, nil, [2]float64{0.95, 100}, recWith(2, 1, 800), false},
		{"cpu up while hot", Options{}, nil, [2]float64{0.99, 990}, recWith(2, 2, 1000), false},
		{"unchanged while hot", Options{}, nil, [2]float64{0.99, 990}, recWith(2, 1, 1000), false},
		{"horizontal only while hot", Options{}, nil, [2]float64{0.99, 990}, recWith(5, 1, 1000), false},
		{"cpu up, memory down, memory hot", Options{}, nil, [2]float64{0.1, 950}, recWith(2, 2, 500), true},
		{"peak earlier in the window", Options{Window: 3}, [][2]float64{{0.95, 100}, {0.2, 100}}, [2]float64{0.2, 100}, recWith(2, 0.5, 1000), true},
		{"peak fell out of the window", Options{Window: 2}, [][2]float64{{0.95, 100}, {0.2, 100}}, [2]float64{0.2, 100}, recWith(2, 0.5, 1000), false},
		{"custom threshold", Options{Threshold: 0.5}, nil, [2]float64{0.6, 100}, recWith(2, 0.5, 1000), true},
		{"custom threshold, cold", Options{Threshold: 0.5}, nil, [2]float64{0.4, 100}, recWith(2, 0.5, 1000), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fixed{rec: tc.rec}
			p, err := Wrap(inner, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.history {
				if _, err := p.Recommend(context.Background(), obsWith(h[0], h[1])); err != nil {
					t.Fatal(err)
				}
			}
			got, err := p.Recommend(context.Background(), obsWith(tc.peak[0], tc.peak[1]))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.refused {
				if !reflect.DeepEqual(got, tc.rec) {
					t.Fatalf("recommendation changed:\n got %+v\nwant %+v", got, tc.rec)
				}
				return
			}
			if got.Source != workload.SourceSafeguard {
				t.Errorf("Source = %q, want %q", got.Source, workload.SourceSafeguard)
			}
			if !strings.Contains(got.Reason, "refused downward step") || !strings.Contains(got.Reason, "policy: agent") {
				t.Errorf("Reason = %q", got.Reason)
			}
			if got.Replicas != tc.rec.Replicas {
				t.Errorf("Replicas = %d, want %d (horizontal part passes through)", got.Replicas, tc.rec.Replicas)
			}
			c := got.Containers[0]
			if c.Target != user || c.LowerBound != user || c.UpperBound != user || c.UncappedTarget != user {
				t.Errorf("container = %+v, want the user allocation %+v everywhere", c, user)
			}
			// The inner policy's slice must not have been modified.
			if tc.rec.Containers[0].Target == user {
				t.Fatal("test case recommends the user allocation itself")
			}
			if inner.rec.Containers[0].Target != tc.rec.Containers[0].Target {
				t.Error("wrapped policy's recommendation was mutated")
			}
		})
	}
}

func TestSafeguardRestoresDeclaredUserAllocation(t *testing.T) {
	declared := workload.Resources{CPU: 2, Memory: 4000}
	inner := &fixed{rec: recWith(2, 0.5, 1000)}
	p, err := Wrap(inner, Options{UserAllocation: func(name string) (workload.Resources, bool) {
		return declared, name == "app"
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Recommend(context.Background(), obsWith(0.95, 100))
	if err != nil {
		t.Fatal(err)
	}
	if got.Containers[0].Target != declared {
		t.Fatalf("target = %+v, want the declared %+v", got.Containers[0].Target, declared)
	}
}

func TestSafeguardMultipleContainers(t *testing.T) {
	obs := obsWith(0.95, 100)
	obs.Containers = append(obs.Containers, workload.ContainerObservation{
		Name: "sidecar", Requests: workload.Resources{CPU: 1, Memory: 1000}, Peak: workload.Resources{CPU: 0.1, Memory: 100},
	})
	rec := recWith(2, 0.5, 1000)
	side := workload.Resources{CPU: 0.5, Memory: 500}
	rec.Containers = append(rec.Containers, workload.ContainerRecommendation{Name: "sidecar", Target: side})
	p, err := Wrap(&fixed{rec: rec}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Recommend(context.Background(), obs)
	if err != nil {
		t.Fatal(err)
	}
	if got.Containers[0].Target != (workload.Resources{CPU: 1, Memory: 1000}) {
		t.Errorf("hot container not restored: %+v", got.Containers[0])
	}
	if got.Containers[1].Target != side {
		t.Errorf("cold container changed: %+v", got.Containers[1])
	}
	if strings.Contains(got.Reason, "sidecar") {
		t.Errorf("reason mentions the cold container: %q", got.Reason)
	}
}

func TestSafeguardErrors(t *testing.T) {
	if _, err := Wrap(nil, Options{}); err == nil {
		t.Error("Wrap(nil) succeeded")
	}
	for _, o := range []Options{{Threshold: 1.5}, {Threshold: -0.1}, {Window: -1}} {
		if _, err := Wrap(&fixed{}, o); err == nil {
			t.Errorf("Wrap with %+v succeeded", o)
		}
	}
	boom := errors.New("boom")
	p, err := Wrap(&fixed{err: boom}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Recommend(context.Background(), obsWith(0.1, 100)); !errors.Is(err, boom) {
		t.Errorf("inner error not returned: %v", err)
	}
	bad := obsWith(0.1, 100)
	bad.Containers[0].Peak.CPU = -1
	inner := &fixed{rec: recWith(1, 1, 1000)}
	p, _ = Wrap(inner, Options{})
	if _, err := p.Recommend(context.Background(), bad); err == nil {
		t.Error("invalid observation accepted")
	}
	if inner.calls != 0 {
		t.Error("inner policy called with an invalid observation")
	}
	if got := p.Name(); got != "safeguard(fixed)" {
		t.Errorf("Name = %q", got)
	}
}

// TestSafeguardRestore: with Restore, a container held below its user
// allocation (harvested) gets it back once its recent peak reaches the
// threshold of the allocation in force, even when the inner policy keeps or
// grows that allocation; without Restore, or while cold, or at the user
// allocation, it passes through.
func TestSafeguardRestore(t *testing.T) {
	user := workload.Resources{CPU: 2, Memory: 4000} // above obsWith's requests {1, 1000}
	userOf := func(string) (workload.Resources, bool) { return user, true }
	cases := []struct {
		name     string
		opts     Options
		peak     [2]float64
		rec      workload.Recommendation
		restored bool
	}{
		{"harvested, kept, cpu hot", Options{Restore: true, UserAllocation: userOf}, [2]float64{0.9, 100}, recWith(1, 1, 1000), true},
		{"harvested, grown a little, memory hot", Options{Restore: true, UserAllocation: userOf}, [2]float64{0.1, 950}, recWith(1, 1.2, 1100), true},
		{"harvested, kept, cold", Options{Restore: true, UserAllocation: userOf}, [2]float64{0.89, 899}, recWith(1, 1, 1000), false},
		{"harvested, kept, hot, without restore", Options{UserAllocation: userOf}, [2]float64{0.95, 950}, recWith(1, 1, 1000), false},
		{"at the user allocation, kept, hot", Options{Restore: true, UserAllocation: func(string) (workload.Resources, bool) {
			return workload.Resources{CPU: 1, Memory: 1000}, true
		}}, [2]float64{0.95, 950}, recWith(1, 1, 1000), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Wrap(&fixed{rec: tc.rec}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Recommend(context.Background(), obsWith(tc.peak[0], tc.peak[1]))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.restored {
				if !reflect.DeepEqual(got, tc.rec) {
					t.Fatalf("recommendation changed:\n got %+v\nwant %+v", got, tc.rec)
				}
				return
			}
			want := user
			if tc.opts.UserAllocation != nil {
				want, _ = tc.opts.UserAllocation("app")
			}
			if got.Source != workload.SourceSafeguard || got.Containers[0].Target != want {
				t.Fatalf("got %+v (source %s), want the user allocation %+v from the safeguard", got.Containers[0], got.Source, want)
			}
		})
	}
	if _, err := Wrap(&fixed{}, Options{Restore: true}); err == nil {
		t.Error("Restore without a user allocation accepted")
	}
}

func TestHot(t *testing.T) {
	for _, tc := range []struct {
		name             string
		peak, alloc, thr float64
		want             bool
	}{
		{"peak at the threshold", 0.9, 1, 0.9, true},
		{"peak above the allocation", 1.2, 1, 0.9, true},
		{"peak below the threshold", 0.89, 1, 0.9, false},
		{"no allocation to protect", 5, 0, 0.9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Hot(tc.peak, tc.alloc, tc.thr); got != tc.want {
				t.Errorf("Hot(%g, %g, %g) = %v, want %v", tc.peak, tc.alloc, tc.thr, got, tc.want)
			}
		})
	}
}
