package controller

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

func TestCheckpointSaveRestoreAndGC(t *testing.T) {
	orphan := &v1alpha1.MultidimPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone-app", UID: "cp-gone"},
		Spec:       v1alpha1.MultidimPodAutoscalerCheckpointSpec{MPAObjectName: "gone", ContainerName: "app"},
	}
	f := newFixture(t, append(twoPodWorkload(), orphan)...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	f.start()
	for range 11 { // past the 10-minute checkpoint interval
		f.tick()
		f.clock.Step(time.Minute)
	}
	f.tick()
	ctx := context.Background()
	cps := f.client.AutoscalingV1alpha1().MultidimPodAutoscalerCheckpoints("ns")
	cp, err := cps.Get(ctx, "web-app", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("checkpoint <mpa>-<container> not saved: %v", err)
	}
	if len(cp.OwnerReferences) != 1 || cp.OwnerReferences[0].UID != "uid-web" || cp.OwnerReferences[0].Kind != "MultidimPodAutoscaler" {
		t.Errorf("owner references %+v", cp.OwnerReferences)
	}
	if cp.Spec.MPAObjectName != "web" || cp.Spec.ContainerName != "app" || cp.Status.Version != CheckpointVersion || cp.Status.TotalSamplesCount < 11 {
		t.Errorf("checkpoint %+v", cp)
	}
	if _, err := cps.Get(ctx, "gone-app", metav1.GetOptions{}); err == nil {
		t.Error("checkpoint of a deleted autoscaler was not collected")
	}

	// A new recommender (restart) restores the history: same samples, same
	// CPU percentiles within the compact format's precision.
	old := f.c.loop.states["ns/web"].policy.(histograms).Recommender().State("app")
	g := newFixture(t)
	g.client, g.kube = f.client, f.kube
	g.clock.SetTime(f.clock.Now())
	g.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	g.start()
	g.tick()
	m := g.mpa("ns", "web")
	wantCond(t, m, v1alpha1.FetchingHistory, "False", "CheckpointRestored")
	restored := g.c.loop.states["ns/web"].policy.(histograms).Recommender().State("app")
	if restored.Samples() != cp.Status.TotalSamplesCount+1 {
		t.Errorf("%d samples after restore and one loop, checkpoint had %d", restored.Samples(), cp.Status.TotalSamplesCount)
	}
	for _, p := range []float64{0.5, 0.9, 0.95} {
		a, b := old.CPU().Percentile(p), restored.CPU().Percentile(p)
		if math.Abs(a-b) > 0.05*a {
			t.Errorf("cpu p%g %g after restore, %g before", p*100, b, a)
		}
	}
}

func TestCorruptCheckpointIsIgnored(t *testing.T) {
	bad := &v1alpha1.MultidimPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-app"},
		Spec:       v1alpha1.MultidimPodAutoscalerCheckpointSpec{MPAObjectName: "web", ContainerName: "app"},
		Status: v1alpha1.MultidimPodAutoscalerCheckpointStatus{Version: CheckpointVersion,
			CPUHistogram: v1alpha1.HistogramCheckpoint{TotalWeight: 1, BucketWeights: map[string]int32{"99999": 5}}},
	}
	foreign := bad.DeepCopy()
	foreign.Name, foreign.Spec.ContainerName, foreign.Status.Version = "web-side", "side", "v3"
	f := newFixture(t, append(twoPodWorkload(), bad, foreign)...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20))
	f.start()
	f.tick()
	m := f.mpa("ns", "web")
	wantCond(t, m, v1alpha1.RecommendationProvided, "True", "RecommendationProvided")
	wantCond(t, m, v1alpha1.FetchingHistory, "False", "NoHistorySource")
	if got := testutil.ToFloat64(f.c.metrics.checkpoints.WithLabelValues("restore", "error")); got != 2 {
		t.Fatalf("restore errors %g, want 2", got)
	}
}

func TestCheckpointAPIRoundTrip(t *testing.T) {
	r, err := vpa.NewRecommender(vpa.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := r.State("app")
	for i := range 100 {
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := s.AddCPUSample(at, 0.1+float64(i%10)/20, 0.5); err != nil {
			t.Fatal(err)
		}
		if err := s.AddMemorySample(at, float64(100+i)*(1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := fromAPI(ptr(toAPI(s.Checkpoint(), t0)))
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := vpa.NewRecommender(vpa.Options{})
	s2 := r2.State("app")
	if err := s2.Restore(cp); err != nil {
		t.Fatal(err)
	}
	for _, p := range []float64{0.5, 0.9, 0.95} {
		if a, b := s.CPU().Percentile(p), s2.CPU().Percentile(p); math.Abs(a-b) > 1e-9 {
			t.Errorf("cpu p%g: %g != %g", p, a, b)
		}
		if a, b := s.Memory().Percentile(p), s2.Memory().Percentile(p); math.Abs(a-b) > 1e-9 {
			t.Errorf("memory p%g: %g != %g", p, a, b)
		}
	}
	if s2.Samples() != 100 || s2.Confidence() != s.Confidence() {
		t.Errorf("samples %d confidence %g, want 100 and %g", s2.Samples(), s2.Confidence(), s.Confidence())
	}
	if _, err := fromAPI(&v1alpha1.MultidimPodAutoscalerCheckpointStatus{Version: "other"}); err == nil {
		t.Error("a foreign version must be rejected")
	}
	if _, err := fromAPI(&v1alpha1.MultidimPodAutoscalerCheckpointStatus{Version: CheckpointVersion,
		CPUHistogram: v1alpha1.HistogramCheckpoint{TotalWeight: 1, BucketWeights: map[string]int32{"x": 1}}}); err == nil {
		t.Error("a non-numeric bucket must be rejected")
	}
}

func ptr[T any](v T) *T { return &v }

// carrySpy records the policy a spec change rebuilt it from.
type carrySpy struct {
	workload.Policy
	from workload.Policy
}

func (p *carrySpy) CarryOver(old workload.Policy) bool { p.from = old; return true }

var (
	_ carrier = (*carrySpy)(nil)
	_ carrier = (*fusion.Fused)(nil)
)

// TestSpecChangeCarriesWhatThePolicyLearned: a spec change rebuilds the
// policy and hands it the old one (the fused default's CPU-per-request
// estimate survives a Shadow→On switch); a re-created autoscaler of the
// same name starts afresh.
func TestSpecChangeCarriesWhatThePolicyLearned(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.3, 200<<20), podUsage("ns", "web-2", 0.5, 300<<20))
	inner := fusion.NewPolicyFactory(fusion.Options{})
	f.deps = func(d *Deps) {
		d.NewPolicy = func(c workload.Constraints) (workload.Policy, error) {
			p, err := inner(c)
			return &carrySpy{Policy: p}, err
		}
	}
	f.start()
	f.tick()
	first := f.c.loop.states["ns/web"].policy

	ctx := context.Background()
	update := func(change func(m *v1alpha1.MultidimPodAutoscaler)) {
		t.Helper()
		m := f.mpa("ns", "web")
		change(m)
		if _, err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers("ns").Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.sync()
		f.clock.Step(time.Minute)
		f.tick()
	}
	update(func(m *v1alpha1.MultidimPodAutoscaler) {
		m.Generation++
		seven := int32(7)
		m.Spec.Constraints = &v1alpha1.ScalingConstraints{Global: &v1alpha1.HorizontalScalingConstraints{MaxReplicas: &seven}}
	})
	second := f.c.loop.states["ns/web"].policy.(*carrySpy)
	if second == first || second.from != first {
		t.Errorf("after a spec change the policy was rebuilt from %p, want the old one %p", second.from, first)
	}
	update(func(m *v1alpha1.MultidimPodAutoscaler) { m.UID, m.Generation = "uid-web-2", 1 })
	if third := f.c.loop.states["ns/web"].policy.(*carrySpy); third == second || third.from != nil {
		t.Errorf("a re-created autoscaler got the old one's policy state (from %p)", third.from)
	}
}
