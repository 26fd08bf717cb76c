package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/rival"
	"github.com/aware-k8s/aware/pkg/kube/usage"
)

type fakeRivals struct {
	mu     sync.Mutex
	rivals map[mpa.Target][]rival.Rival
	err    error
}

var _ RivalSource = (*fakeRivals)(nil)

func (f *fakeRivals) Scan(context.Context, string) (map[mpa.Target][]rival.Rival, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.rivals, nil
}

func (f *fakeRivals) set(rs map[mpa.Target][]rival.Rival, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rivals, f.err = rs, err
}

var webTarget = mpa.Target{Namespace: "ns", Group: "apps", Kind: "Deployment", Name: "web"}

// TestRivalAutoscalers: an HPA on the target leaves the replica count to it
// and a VPA the pod resources, with ConfigUnsupported naming them and a
// warning event; a failed scan keeps the rivals found before; once they
// are gone the autoscaler takes over, with a normal event.
func TestRivalAutoscalers(t *testing.T) {
	hpa := rival.Rival{Kind: "HorizontalPodAutoscaler", Name: "web-hpa", Dimension: rival.Horizontal}
	vpa := rival.Rival{Kind: "VerticalPodAutoscaler", Name: "web-vpa", Dimension: rival.Vertical}
	for _, tc := range []struct {
		name                 string
		rivals               []rival.Rival
		wantReplicas, wantVx bool
		wantMsg              []string
	}{
		{"HPA", []rival.Rival{hpa}, false, true, []string{"HorizontalPodAutoscaler web-hpa (replicas) also acts on Deployment/web", "leaves replicas (status.desiredReplicas is not set) to it"}},
		{"VPA", []rival.Rival{vpa}, true, false, []string{"VerticalPodAutoscaler web-vpa (pod resources)", "leaves pod resources"}},
		{"HPA and VPA", []rival.Rival{hpa, vpa}, false, false, []string{"web-hpa (replicas), VerticalPodAutoscaler web-vpa (pod resources) also act", "replicas (status.desiredReplicas is not set) and pod resources"}},
		// Mode Off acts on nothing: the recommendation stays whole, to be
		// compared with the rivals' before a migration.
		{"HPA and VPA, mode Off", []rival.Rival{hpa, vpa}, true, true, []string{"with updateMode Off this autoscaler only recommends there"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := twoPodWorkload()
			if strings.HasSuffix(tc.name, "mode Off") {
				off := v1alpha1.UpdateModeOff
				objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.Policy = &v1alpha1.PodUpdatePolicy{UpdateMode: &off}
			}
			f := newFixture(t, objs...)
			f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
			src := &fakeRivals{}
			src.set(map[mpa.Target][]rival.Rival{webTarget: tc.rivals}, nil)
			f.deps = func(d *Deps) { d.Rivals = src }
			f.start()
			check := func(phase string) {
				t.Helper()
				m := f.mpa("ns", "web")
				if got := m.Status.DesiredReplicas > 0; got != tc.wantReplicas {
					t.Errorf("%s: desiredReplicas %d, want set %v", phase, m.Status.DesiredReplicas, tc.wantReplicas)
				}
				if got := m.Status.Recommendation != nil; got != tc.wantVx {
					t.Errorf("%s: recommendation %+v, want set %v", phase, m.Status.Recommendation, tc.wantVx)
				}
				c := cond(t, m, v1alpha1.ConfigUnsupported)
				if c.Status != corev1.ConditionTrue || c.Reason != ReasonConflictingAutoscaler {
					t.Fatalf("%s: ConfigUnsupported %s/%s", phase, c.Status, c.Reason)
				}
				for _, part := range tc.wantMsg {
					if !strings.Contains(c.Message, part) {
						t.Errorf("%s: message %q lacks %q", phase, c.Message, part)
					}
				}
			}
			f.tick()
			check("contested")
			wantEvent(t, f.recorder, "Warning "+ReasonConflictingAutoscaler)

			// A failed scan does not forget the rivals.
			src.set(nil, errors.New("list: connection refused"))
			f.tick()
			check("scan failed")

			// The rivals are deleted: this autoscaler takes over.
			src.set(map[mpa.Target][]rival.Rival{}, nil)
			drainEvents(f.recorder)
			f.tick()
			m := f.mpa("ns", "web")
			if m.Status.DesiredReplicas == 0 || m.Status.Recommendation == nil {
				t.Errorf("after the rivals left: desired %d, recommendation %+v", m.Status.DesiredReplicas, m.Status.Recommendation)
			}
			wantCond(t, m, v1alpha1.ConfigUnsupported, corev1.ConditionFalse, "ConfigSupported")
			wantEvent(t, f.recorder, "Normal ConfigSupported")
		})
	}
}

// blockingRivals answers a scan only when its context ends, as a list does
// while etcd is down and the API server holds the request.
type blockingRivals struct{}

func (blockingRivals) Scan(ctx context.Context, _ string) (map[mpa.Target][]rival.Rival, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// blockingUsage is a metrics read the API server holds the same way.
type blockingUsage struct{}

func (blockingUsage) PodUsage(ctx context.Context, _ string) ([]usage.PodUsage, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestLoopReadsAreBounded: a list the API server holds (etcd down) ends
// with the loop's read budget; the loop goes on, reports the failed read
// and writes its status. Without the budget the loop would wait forever
// here (the fakes never answer).
func TestLoopReadsAreBounded(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.cfg.Interval = 200 * time.Millisecond
	f.deps = func(d *Deps) { d.Rivals, d.Usage = blockingRivals{}, blockingUsage{} }
	f.start()
	f.tick()
	c := cond(t, f.mpa("ns", "web"), v1alpha1.ScalingActive)
	if c.Status != corev1.ConditionFalse || c.Reason != "FailedGetResourceMetric" {
		t.Errorf("ScalingActive %s/%s, want False/FailedGetResourceMetric", c.Status, c.Reason)
	}
}

// countingRivals counts scans.
type countingRivals struct {
	fakeRivals
	scans int
}

func (c *countingRivals) Scan(ctx context.Context, ns string) (map[mpa.Target][]rival.Rival, error) {
	c.scans++
	return c.fakeRivals.Scan(ctx, ns)
}

// TestRivalScanInterval: the rivals are listed at most once per interval,
// the loops in between act on the last complete scan, and a failed scan is
// retried at the next loop.
func TestRivalScanInterval(t *testing.T) {
	hpa := rival.Rival{Kind: "HorizontalPodAutoscaler", Name: "web-hpa", Dimension: rival.Horizontal}
	f := newFixture(t, twoPodWorkload()...)
	f.cfg.RivalScanInterval = 3 * time.Minute // the fixture's loop is a minute
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	src := &countingRivals{}
	src.set(map[mpa.Target][]rival.Rival{webTarget: {hpa}}, nil)
	f.deps = func(d *Deps) { d.Rivals = src }
	f.start()
	contested := func() bool {
		return cond(t, f.mpa("ns", "web"), v1alpha1.ConfigUnsupported).Status == corev1.ConditionTrue
	}
	step := func(wantScans int, wantContested bool, what string) {
		t.Helper()
		f.tick()
		if src.scans != wantScans || contested() != wantContested {
			t.Fatalf("%s: %d scans, contested %v; want %d, %v", what, src.scans, contested(), wantScans, wantContested)
		}
		f.clock.Step(time.Minute)
	}
	step(1, true, "first loop")
	src.set(map[mpa.Target][]rival.Rival{}, nil) // the HPA is deleted
	step(1, true, "a minute later: the last scan stands")
	step(1, true, "two minutes later")
	step(2, false, "three minutes later: scanned again")
	src.set(nil, errors.New("list: connection refused"))
	f.clock.Step(2 * time.Minute)
	step(3, false, "a failed scan")
	src.set(map[mpa.Target][]rival.Rival{webTarget: {hpa}}, nil)
	step(4, true, "retried at the next loop")
}
