package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/updater/logic"
)

func TestStaleRecommendation(t *testing.T) {
	for name, age := range map[string]time.Duration{"old": time.Hour, "missing time": -1} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, testConfig(), 3, newMPA(v1alpha1.UpdateModeRecreate, 8, age), freshLease(t0),
				newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"), newPod("c", "100m", "128Mi"))
			f.run(0)
			if len(f.target.updates) != 0 || len(f.writes()) != 0 {
				t.Fatalf("acted on a stale recommendation: scale %v writes %v", f.target.updates, f.writes())
			}
			if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipStaleRecommendation)); got != 1 {
				t.Errorf("stale skips = %g", got)
			}
			if ev := f.events(); !hasEvent(ev, EventStaleRecommendation) {
				t.Errorf("events %v", ev)
			}
		})
	}
}

func TestDryRunDoesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.DryRun = true
	cfg.Vertical.MinReplicas = 1
	f := newFixture(t, cfg, 2, newMPA(v1alpha1.UpdateModeInPlaceOrRecreate, 6, 0), freshLease(t0),
		newPod("a", "100m", "128Mi"), newPod("b", "100m", "128Mi"))
	f.run(0)
	if len(f.target.updates) != 0 || len(f.writes()) != 0 {
		t.Fatalf("dry run wrote: scale %v writes %v", f.target.updates, f.writes())
	}
	for _, a := range f.mpas.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("dry run wrote to the MPA: %v", a)
		}
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("dry run emitted events: %v", ev)
	}
	if counter(t, f.ctrl.metrics.scaleOperations, "up", resultDryRun) != 1 ||
		counter(t, f.ctrl.metrics.resizes, string(logic.ReasonOutsideBounds), resultDryRun) != 2 {
		t.Error("dry-run decisions not counted")
	}
}

func TestMetricsLint(t *testing.T) {
	f := newFixture(t, testConfig(), 4, newMPA(v1alpha1.UpdateModeAuto, 8, 0), freshLease(t0), newPod("a", "100m", "128Mi"))
	f.run(0)
	if err := serve.LintMetrics(f.reg, "updater"); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := testConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := testConfig()
	bad.UpdateInterval, bad.MaxRecommendationAge, bad.AdmissionLeaseNamespace = 0, 0, ""
	if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
}

// TestStaleRecommendationEventOncePerTransition: the Warning event is
// posted when a recommendation becomes stale, not on every loop while it
// stays stale; a fresh recommendation in between, or a re-created
// autoscaler, makes the next staleness a new one. The gauge counts the
// autoscalers stale at the last loop; the skip counter counts every loop.
func TestStaleRecommendationEventOncePerTransition(t *testing.T) {
	type step struct {
		fresh     bool
		recreate  bool // same name, new UID
		wantEvent bool
	}
	stale := func(ev bool) step { return step{wantEvent: ev} }
	for _, tc := range []struct {
		name  string
		dry   bool
		steps []step
	}{
		{"stays stale", false, []step{stale(true), stale(false), stale(false), stale(false)}},
		{"fresh in between", false, []step{stale(true), stale(false), {fresh: true}, stale(true), stale(false)}},
		{"re-created while stale", false, []step{stale(true), {recreate: true, wantEvent: true}, stale(false)}},
		{"dry run posts nothing but counts", true, []step{stale(false), stale(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.DryRun = tc.dry
			m := newMPA(v1alpha1.UpdateModeRecreate, 3, time.Hour)
			f := newFixture(t, cfg, 3, m, nil, newPod("a", "1", "1Gi"), newPod("b", "1", "1Gi"), newPod("c", "1", "1Gi"))
			skips := 0
			for i, s := range tc.steps {
				at := time.Duration(i) * time.Minute
				m = m.DeepCopy()
				m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at - time.Hour)}
				if s.fresh {
					m.Status.RecommendationTime = &metav1.Time{Time: t0.Add(at)}
				}
				if s.recreate {
					m.UID = types.UID(string(m.UID) + "-new")
				}
				if err := f.mpaIdx.Update(m); err != nil {
					t.Fatal(err)
				}
				f.run(at)
				ev := f.events()
				if got := hasEvent(ev, EventStaleRecommendation); got != s.wantEvent || len(ev) > 1 {
					t.Errorf("loop %d: events %v, want a stale event: %v", i, ev, s.wantEvent)
				}
				wantGauge := 1.0
				if s.fresh {
					wantGauge = 0
				} else {
					skips++
				}
				if got := testutil.ToFloat64(f.ctrl.metrics.staleRecommendations); got != wantGauge {
					t.Errorf("loop %d: stale gauge = %g, want %g", i, got, wantGauge)
				}
				if got := counter(t, f.ctrl.metrics.skips, string(logic.SkipStaleRecommendation)); got != float64(skips) {
					t.Errorf("loop %d: stale skips = %g, want %d", i, got, skips)
				}
			}
			// Deleted: no longer counted.
			if err := f.mpaIdx.Delete(m); err != nil {
				t.Fatal(err)
			}
			f.run(time.Hour)
			if got := testutil.ToFloat64(f.ctrl.metrics.staleRecommendations); got != 0 || len(f.ctrl.stale) != 0 {
				t.Errorf("after deletion: gauge %g, state %v", got, f.ctrl.stale)
			}
		})
	}
}
