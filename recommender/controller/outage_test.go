package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/rival"
)

// eventsWith returns the events among evs whose reason is reason.
func eventsWith(evs []string, reason string) []string {
	var out []string
	for _, e := range evs {
		if f := strings.Fields(e); len(f) > 1 && f[1] == reason {
			out = append(out, e)
		}
	}
	return out
}

// TestAPIReadFailures: the list of other autoscalers failing loop after
// loop (etcd down) is reported once the run has lasted FailureWarning, by a
// Warning APIReadFailing event on the handled autoscaler repeated every
// FailureWarning while the run lasts, and its success
// after such a run by APIReadRecovered; a shorter run records neither. The
// gauge shows the current run meanwhile.
func TestAPIReadFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		// failed is the number of failed scans, a loop (a minute) apart,
		// before one succeeds.
		failed                   int
		wantWarning, wantRecover []string
		// wantGauge is the gauge after the last failure.
		wantGauge float64
	}{
		{"one failure", 1, nil, nil, 0},
		{"two minutes of failures, under the warning's three", 3, nil, nil, 120},
		{"four minutes of failures", 5,
			[]string{"Warning APIReadFailing the API server has failed 4 lists of the other autoscalers of the targets over 3m0s (the rivals found before are used); the last error: list: connection refused"},
			[]string{"Normal APIReadRecovered the other autoscalers of the targets are listed again after 5 failed attempts over 5m0s; the last error: list: connection refused"},
			240},
		// Repeated while the run lasts: a warning the API server refused
		// (the recorder does not retry those) is followed by another.
		{"seven minutes of failures", 8,
			[]string{
				"Warning APIReadFailing the API server has failed 4 lists of the other autoscalers of the targets over 3m0s (the rivals found before are used); the last error: list: connection refused",
				"Warning APIReadFailing the API server has failed 7 lists of the other autoscalers of the targets over 6m0s (the rivals found before are used); the last error: list: connection refused",
			},
			[]string{"Normal APIReadRecovered the other autoscalers of the targets are listed again after 8 failed attempts over 8m0s; the last error: list: connection refused"},
			420},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, twoPodWorkload()...)
			f.cfg.FailureWarning = 3 * time.Minute
			f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
			src := &fakeRivals{}
			src.set(nil, errors.New("list: connection refused"))
			f.deps = func(d *Deps) { d.Rivals = src }
			f.start()
			var evs []string
			for range tc.failed {
				f.tick()
				evs = append(evs, drainEvents(f.recorder)...)
				f.clock.Step(time.Minute)
			}
			gauge := testutil.ToFloat64(f.c.metrics.apiFailing.WithLabelValues(callRivalScan))
			if gauge != tc.wantGauge {
				t.Errorf("aware_recommender_api_failing_seconds{call=rival-scan} %g during the failures, want %g", gauge, tc.wantGauge)
			}
			if got := eventsWith(evs, ReasonAPIReadFailing); !slices.Equal(got, tc.wantWarning) {
				t.Errorf("warnings %q, want %q", got, tc.wantWarning)
			}
			src.set(map[mpa.Target][]rival.Rival{}, nil)
			f.tick()
			if got := eventsWith(drainEvents(f.recorder), ReasonAPIReadRecovered); !slices.Equal(got, tc.wantRecover) {
				t.Errorf("recoveries %q, want %q", got, tc.wantRecover)
			}
			if g := testutil.ToFloat64(f.c.metrics.apiFailing.WithLabelValues(callRivalScan)); g != 0 {
				t.Errorf("gauge %g after the scan succeeded, want 0", g)
			}
			// Succeeding again is not news.
			f.clock.Step(time.Minute)
			f.tick()
			if got := eventsWith(drainEvents(f.recorder), ReasonAPIReadRecovered); len(got) > 0 {
				t.Errorf("a second recovery: %q", got)
			}
		})
	}
}

// TestStatusWriteFailing: status writes failing for FailureWarning record
// a Warning StatusWriteFailing event, repeated every FailureWarning while
// they fail, the gauge shows for how long they
// have failed, and the write that succeeds records StatusWriteRecovered and
// zeroes the gauge.
func TestStatusWriteFailing(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.cfg.FailureWarning = 20 * time.Second
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20))
	f.start()
	down := true
	f.client.PrependReactor("update", "multidimpodautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if down && a.GetSubresource() == "status" {
			return true, nil, apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
		}
		return false, nil, nil
	})
	ctx := context.Background()
	f.c.RunOnce(ctx)
	var evs []string
	for range 5 { // attempts at 0, 10, 20, 30 and 40s
		f.c.processNext(ctx)
		evs = append(evs, drainEvents(f.recorder)...)
		f.clock.Step(10 * time.Second)
		f.c.writes.queue.Forget("ns/web")
		f.c.writes.queue.Add("ns/web")
	}
	want := []string{
		"Warning StatusWriteFailing the status cannot be written: 3 attempts over 20s failed (the status is as old as that); the last error: updating status of ns/web: Timeout: request did not complete within the allowed duration",
		"Warning StatusWriteFailing the status cannot be written: 5 attempts over 40s failed (the status is as old as that); the last error: updating status of ns/web: Timeout: request did not complete within the allowed duration",
	}
	if got := eventsWith(evs, ReasonStatusWriteFailing); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	// The gauge was set at the last failure, 40s after the first.
	if g := testutil.ToFloat64(f.c.metrics.apiFailing.WithLabelValues(callStatusWrite)); g != 40 {
		t.Errorf("aware_recommender_api_failing_seconds{call=status-write} %g, want 40", g)
	}
	down = false
	f.c.processNext(ctx)
	wantRecovered := "Normal StatusWriteRecovered the status is written again after 5 failed attempts over 50s; the last error: updating status of ns/web: Timeout: request did not complete within the allowed duration"
	if got := drainEvents(f.recorder); !slices.Contains(got, wantRecovered) {
		t.Errorf("events %q, want %q", got, wantRecovered)
	}
	if g := testutil.ToFloat64(f.c.metrics.apiFailing.WithLabelValues(callStatusWrite)); g != 0 {
		t.Errorf("gauge %g after the write succeeded, want 0", g)
	}
	f.c.writes.queue.ShutDown()
}

// TestStatusWriteRecovered: writes that fail while the API server (or
// etcd) is down are retried; the write that succeeds after them records a
// StatusWriteRecovered event saying for how long and why the status was
// stale, once, and a write without earlier failures records none.
//
// An API server that has just restarted may acknowledge the first write
// with an object that names nothing (seen in e2e); the event must still
// be recorded on the autoscaler, or the API server refuses it.
func TestStatusWriteRecovered(t *testing.T) {
	for _, emptyAck := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty acknowledgement %v", emptyAck), func(t *testing.T) { testStatusWriteRecovered(t, emptyAck) })
	}
}

// namingRecorder records the involved object of every event.
type namingRecorder struct {
	*record.FakeRecorder
	objects []string
}

func (r *namingRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	m, err := meta.Accessor(obj)
	name := "<no metadata>"
	if err == nil {
		name = m.GetNamespace() + "/" + m.GetName()
	}
	r.objects = append(r.objects, reason+" "+name)
	r.FakeRecorder.Eventf(obj, typ, reason, format, args...)
}

func testStatusWriteRecovered(t *testing.T, emptyAck bool) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20))
	named := &namingRecorder{FakeRecorder: f.recorder}
	f.deps = func(d *Deps) { d.Recorder = named }
	f.start()
	down := true
	f.client.PrependReactor("update", "multidimpodautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		if down {
			return true, nil, apierrors.NewServiceUnavailable("etcdserver: leader changed")
		}
		if emptyAck {
			// Store the write, answer with an object naming nothing.
			obj := a.(k8stesting.UpdateAction).GetObject()
			if err := f.client.Tracker().Update(a.GetResource(), obj, "ns"); err != nil {
				return true, nil, err
			}
			return true, &v1alpha1.MultidimPodAutoscaler{}, nil
		}
		return false, nil, nil
	})
	ctx := context.Background()
	f.c.RunOnce(ctx)
	for range 3 {
		f.c.processNext(ctx)
		f.clock.Step(10 * time.Second)
		// The rate limiter re-adds the key after its backoff; take it
		// back now rather than wait for it.
		f.c.writes.queue.Forget("ns/web")
		f.c.writes.queue.Add("ns/web")
	}
	drainEvents(f.recorder)
	if m := f.mpa("ns", "web"); m.Status.RecommendationTime != nil {
		t.Fatalf("status written while the API server was down: %+v", m.Status)
	}
	down = false
	f.c.processNext(ctx)
	if m := f.mpa("ns", "web"); m.Status.RecommendationTime == nil {
		t.Fatal("status not written after the API server came back")
	}
	want := "Normal StatusWriteRecovered the status is written again after 3 failed attempts over 30s; the last error: updating status of ns/web: etcdserver: leader changed"
	if got := drainEvents(f.recorder); !slices.Contains(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if got := testutil.ToFloat64(f.c.metrics.statusWriteOutages); got != 1 {
		t.Errorf("recoveries counted %g, want 1", got)
	}
	if want := ReasonStatusWriteRecovered + " ns/web"; !slices.Contains(named.objects, want) {
		t.Errorf("events on %q, want one %q", named.objects, want)
	}
	// The next write, with no failure before it, is not news.
	f.clock.Step(time.Hour)
	f.tick()
	for _, e := range drainEvents(f.recorder) {
		if strings.Contains(e, ReasonStatusWriteRecovered) {
			t.Errorf("a second recovery event: %q", e)
		}
	}
	f.c.writes.queue.ShutDown()
}
