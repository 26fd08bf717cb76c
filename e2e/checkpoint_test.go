//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// TestRecommenderCheckpoints restarts the recommender and checks that the
// usage histograms survive in MultidimPodAutoscalerCheckpoint objects:
// without --prometheus-address a restarted recommender has no other source
// of history, so a checkpoint it writes after the restart that still starts
// at the first sample seen before it (and counts more samples) can only
// come from reading the old one back. Deleting the MPA deletes its
// checkpoint.
func TestRecommenderCheckpoints(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "ckpt")
	w := startMPAWorkload(t, ns, "hamster", "")
	checkpoints := w.client.AutoscalingV1alpha1().MultidimPodAutoscalerCheckpoints(ns)
	const cpName = "hamster-hamster" // <mpa>-<container>

	spec := processSpec{Binary: "recommender", Args: recommenderArgs(ns,
		"--leader-elect=false",
		"--checkpoints-interval=15s",
	)}
	spec.Name = "recommender-1"
	rec := startProcess(t, spec)
	parent := t // the restarted recommender runs until the test ends

	var saved *v1alpha1.MultidimPodAutoscalerCheckpoint
	if !t.Run("first recommender writes a checkpoint", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		m := w.waitRecommendation(t, 3*time.Minute, "a first recommendation", time.Time{}, func(m *v1alpha1.MultidimPodAutoscaler) error {
			if c := condition(m, v1alpha1.FetchingHistory); c == nil || c.Reason != "NoHistorySource" {
				return fmt.Errorf("FetchingHistory %+v, want reason NoHistorySource", c)
			}
			return nil
		}, rec)
		t.Logf("first recommendation at %s", m.Status.RecommendationTime.Format(time.RFC3339))
		// Wait for a checkpoint holding a few loops of samples, so that
		// "more samples after the restart" cannot be met by a fresh start.
		framework.Eventually(t, 2*time.Minute, "checkpoint "+cpName+" with samples", func(ctx context.Context) (bool, error) {
			rec.running(t)
			cp, err := checkpoints.Get(ctx, cpName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := cp.Status
			if s.TotalSamplesCount < 4 || s.FirstSampleStart.IsZero() || len(s.CPUHistogram.BucketWeights) == 0 {
				return false, fmt.Errorf("status %d samples from %s, %d cpu buckets", s.TotalSamplesCount, s.FirstSampleStart, len(s.CPUHistogram.BucketWeights))
			}
			saved = cp
			return true, nil
		})
		t.Logf("checkpoint before the restart: %d samples, first %s, last %s, written %s", saved.Status.TotalSamplesCount,
			saved.Status.FirstSampleStart.Format(time.RFC3339), saved.Status.LastSampleStart.Format(time.RFC3339), saved.Status.LastUpdateTime.Format(time.RFC3339))
		if n := len(saved.OwnerReferences); n != 1 || saved.OwnerReferences[0].UID != w.mpa.UID {
			t.Errorf("owner references %+v, want the MPA %s", saved.OwnerReferences, w.mpa.UID)
		}
	}) {
		t.FailNow()
	}

	if !t.Run("restarted recommender reads the checkpoint back", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		if err := rec.terminate(t); err != nil {
			t.Errorf("the recommender did not exit cleanly on SIGTERM: %v", err)
		}
		// Nothing may have overwritten the checkpoint meanwhile.
		cp, err := checkpoints.Get(ctx, cpName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		saved = cp
		restarted := time.Now()
		spec.Name = "recommender-2"
		rec2 := startProcess(parent, spec)
		m := w.waitRecommendation(t, 2*time.Minute, "a recommendation from the restarted recommender, history restored", restarted, func(m *v1alpha1.MultidimPodAutoscaler) error {
			c := condition(m, v1alpha1.FetchingHistory)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "CheckpointRestored" {
				return fmt.Errorf("FetchingHistory %+v, want False CheckpointRestored", c)
			}
			return nil
		}, rec2)
		t.Logf("restarted recommender's first recommendation at %s", m.Status.RecommendationTime.Format(time.RFC3339))
		if n := mustMetric(t, rec2, "aware_recommender_checkpoint_operations_total", "operation=restore", "result=success"); n != 1 {
			t.Errorf("%g checkpoints restored, want 1", n)
		}
		var after *v1alpha1.MultidimPodAutoscalerCheckpoint
		framework.Eventually(t, 2*time.Minute, "the restarted recommender to rewrite the checkpoint", func(ctx context.Context) (bool, error) {
			rec2.running(t)
			cp, err := checkpoints.Get(ctx, cpName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !cp.Status.LastUpdateTime.After(restarted) {
				return false, fmt.Errorf("last written %s", cp.Status.LastUpdateTime.Format(time.RFC3339))
			}
			after = cp
			return true, nil
		})
		t.Logf("checkpoint after the restart: %d samples, first %s, last %s", after.Status.TotalSamplesCount,
			after.Status.FirstSampleStart.Format(time.RFC3339), after.Status.LastSampleStart.Format(time.RFC3339))
		// A recommender that lost the history would start counting at
		// zero, from a first sample after the restart.
		if !after.Status.FirstSampleStart.Equal(&saved.Status.FirstSampleStart) {
			t.Errorf("first sample %s after the restart, %s before: the history was not restored",
				after.Status.FirstSampleStart.Format(time.RFC3339), saved.Status.FirstSampleStart.Format(time.RFC3339))
		}
		if after.Status.TotalSamplesCount <= saved.Status.TotalSamplesCount {
			t.Errorf("%d samples after the restart, %d before", after.Status.TotalSamplesCount, saved.Status.TotalSamplesCount)
		}
		if !after.Status.LastSampleStart.After(restarted) {
			t.Errorf("last sample %s is not after the restart at %s", after.Status.LastSampleStart.Format(time.RFC3339), restarted.Format(time.RFC3339))
		}
	}) {
		t.FailNow()
	}

	t.Run("deleting the MPA deletes its checkpoint", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		if err := w.client.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Delete(ctx, "hamster", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "checkpoint "+cpName+" to be deleted", func(ctx context.Context) (bool, error) {
			_, err := checkpoints.Get(ctx, cpName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("checkpoint still there: %v", err)
		})
	})
}
