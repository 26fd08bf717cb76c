//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
)

// The pinned workload of TestControlPlaneFaults can only be confirmed, so
// its "nothing lost" holds whatever the recommender computes in a fault.
// The wide workload beside it has bounds far from what its load asks for
// (CPU 10m..4, memory 32Mi..8Gi, replicas 1..20), so a recommendation
// computed in the metrics-server outage (from no usage, say) would show as
// a changed target, and one refreshed would show as a recommendationTime
// that advances. Its update mode is Off: what is checked is the
// recommendation; the pinned workload covers what the updater does.
const (
	wideMaxCPU      = "4"
	wideMaxMemory   = "8Gi"
	wideMinReplicas = 1
	wideMaxReplicas = 20
	// wideHold is how long the outage is watched for a recommendationTime
	// that advances: 2.5 status refreshes (10s) and 5 loops (5s) of
	// faultLoopFlags, so a recommender that refreshed the status in the
	// outage would be seen doing it.
	wideHold = 25 * time.Second
)

// wideWorkload is a Deployment under the baseline load with an unpinned
// autoscaler in update mode Off.
type wideWorkload struct{ *mpaWorkload }

// startWideWorkload creates Deployment name (two pods of 100m and 128Mi),
// runs sloApp's load on it (30m of CPU per pod, no metrics served) and
// creates its autoscaler with the wide bounds.
func startWideWorkload(t *testing.T, ns, name string) *wideWorkload {
	t.Helper()
	ctx := context.Background()
	createLoopDeployment(t, ctx, ns, name)
	app := sloApp
	app.Container = name
	runSteadyEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), app, baseRate, "")
	createMPA(t, ns, mpaManifest{
		name: name, mode: v1alpha1.UpdateModeOff, maxCPU: wideMaxCPU, maxMemory: wideMaxMemory,
		minReplicas: wideMinReplicas, maxReplicas: wideMaxReplicas,
	})
	client, err := versioned.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &wideWorkload{&mpaWorkload{ns: ns, name: name, client: client}}
}

// insideBounds says why m's recommendation is at or beyond one of the wide
// bounds, or nil: a value clamped to a bound would not change when the
// input does, and would prove nothing.
func (w *wideWorkload) insideBounds(m *v1alpha1.MultidimPodAutoscaler) error {
	target := m.Status.Recommendation.ContainerRecommendations[0].Target
	for _, b := range []struct {
		name     corev1.ResourceName
		min, max string
	}{
		{corev1.ResourceCPU, "10m", wideMaxCPU},
		{corev1.ResourceMemory, "32Mi", wideMaxMemory},
	} {
		q, ok := target[b.name]
		if !ok {
			return fmt.Errorf("no %s target", b.name)
		}
		if q.Cmp(resource.MustParse(b.min)) <= 0 || q.Cmp(resource.MustParse(b.max)) >= 0 {
			return fmt.Errorf("%s target %s is not strictly inside [%s, %s]", b.name, q.String(), b.min, b.max)
		}
	}
	if r := m.Status.DesiredReplicas; r <= wideMinReplicas || r >= wideMaxReplicas {
		return fmt.Errorf("desiredReplicas %d is not strictly inside [%d, %d]", r, wideMinReplicas, wideMaxReplicas)
	}
	return nil
}

// waitAdvancing waits for a recommendation from usage strictly inside the
// bounds, then for a later one: before the outage recommendationTime
// advances (a refresh every 10s), so that a time that stops in the outage
// says something.
func (w *wideWorkload) waitAdvancing(t *testing.T, rec *component) *v1alpha1.MultidimPodAutoscaler {
	t.Helper()
	ok := func(m *v1alpha1.MultidimPodAutoscaler) error {
		if c := condition(m, v1alpha1.ScalingActive); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "ValidMetricFound" {
			return fmt.Errorf("ScalingActive %s", condString(c))
		}
		return w.insideBounds(m)
	}
	first := w.waitRecommendation(t, 3*time.Minute, "wide: a recommendation inside its bounds", time.Time{}, ok, rec)
	next := w.waitRecommendation(t, time.Minute, "wide: a later recommendation", first.Status.RecommendationTime.Time, ok, rec)
	t.Logf("wide: recommendationTime advanced %s -> %s; target %v, desiredReplicas %d",
		first.Status.RecommendationTime.Format(time.RFC3339), next.Status.RecommendationTime.Format(time.RFC3339),
		next.Status.Recommendation.ContainerRecommendations[0].Target, next.Status.DesiredReplicas)
	return next
}

// heldThroughOutage checks, in a metrics-server outage that began at down,
// that the recommender says so (FailedGetResourceMetric) and keeps the
// last recommendation made before it, target, replicas and
// recommendationTime, for wideHold.
func (w *wideWorkload) heldThroughOutage(t *testing.T, down time.Time, rec *component) {
	t.Helper()
	held := (&pinnedWorkload{mpaWorkload: w.mpaWorkload}).waitTransition(t, time.Minute, down, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", rec)
	rt := held.Status.RecommendationTime
	// Status times have a resolution of a second, and the last loop
	// before the stop may have read usage in the second the stop began.
	if rt == nil || rt.After(down.Truncate(time.Second)) {
		t.Fatalf("wide: recommendationTime %v after the outage began at %s", rt, down.Format(time.RFC3339Nano))
	}
	want := held.Status.Recommendation.ContainerRecommendations
	wantReplicas := held.Status.DesiredReplicas
	if err := w.insideBounds(held); err != nil {
		t.Errorf("wide: the recommendation kept is not the one from usage: %v", err)
	}
	end := time.Now().Add(wideHold)
	reads := 0
	err := framework.WaitFor(context.Background(), wideHold+30*time.Second, 2*time.Second, "wide: the outage", func(ctx context.Context) (bool, error) {
		rec.running(t)
		m, err := w.get(ctx)
		if err != nil {
			return false, err
		}
		reads++
		if got := m.Status.RecommendationTime; got == nil || !got.Equal(rt) {
			return false, fmt.Errorf("%w: recommendationTime %v in the outage, %v before: a recommendation was made without usage", framework.ErrPermanent, got, rt)
		}
		if got := m.Status.Recommendation.ContainerRecommendations; !equality.Semantic.DeepEqual(got, want) {
			return false, fmt.Errorf("%w: recommendation %v in the outage, %v before", framework.ErrPermanent, got, want)
		}
		if m.Status.DesiredReplicas != wantReplicas {
			return false, fmt.Errorf("%w: desiredReplicas %d in the outage, %d before", framework.ErrPermanent, m.Status.DesiredReplicas, wantReplicas)
		}
		if c := condition(m, v1alpha1.ScalingActive); c == nil || c.Reason != "FailedGetResourceMetric" {
			return false, fmt.Errorf("%w: ScalingActive %s in the outage", framework.ErrPermanent, condString(c))
		}
		return !time.Now().Before(end), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wide: %d reads over %s of outage kept recommendationTime %s and target %v", reads, wideHold, rt.Format(time.RFC3339), want[0].Target)
}
