//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/e2e/emulator"
	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
)

// recommenderMPA is the autoscaler of the recommender and agent tests,
// for Deployment name, in update mode Off; rl is an optional spec.rl block
// (indented two spaces).
func recommenderMPA(name, rl string) mpaManifest {
	return mpaManifest{name: name, mode: v1alpha1.UpdateModeOff, maxCPU: "500m", maxMemory: "1Gi", minReplicas: 1, maxReplicas: 6, spec: rl}
}

// recommenderArgs are the flags every recommender of these tests gets:
// short loops so a test sees many of them, and a status refresh short
// enough to tell a live recommender from a dead one within seconds.
func recommenderArgs(ns string, extra ...string) []string {
	return append([]string{
		"--namespace=" + ns,
		"--recommender-interval=5s",
		"--status-refresh-interval=10s",
		// The tests create and delete rival autoscalers and wait for the
		// recommender to notice; the default scans once a minute.
		"--rival-scan-interval=5s",
	}, extra...)
}

// mpaWorkload is a Deployment driven by the emulator, with an MPA of the
// same name (no component runs yet).
type mpaWorkload struct {
	ns, name string
	client   versioned.Interface
	mpa      *v1alpha1.MultidimPodAutoscaler
}

// startMPAWorkload creates the Deployment name, waits for its two pods,
// runs the emulator at the baseline rate (30m of CPU per pod) and creates
// the MPA name with the spec.rl block rl.
func startMPAWorkload(t *testing.T, ns, name, rl string) *mpaWorkload {
	t.Helper()
	ctx := context.Background()
	createLoopDeployment(t, ctx, ns, name)
	runEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), baseRate)

	var m v1alpha1.MultidimPodAutoscaler
	if err := yaml.UnmarshalStrict(recommenderMPA(name, rl).yaml(), &m); err != nil {
		t.Fatalf("MPA manifest: %v", err)
	}
	client, err := versioned.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	created, err := client.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Create(ctx, &m, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create MPA: %v", err)
	}
	return &mpaWorkload{ns: ns, name: name, client: client, mpa: created}
}

func (w *mpaWorkload) get(ctx context.Context) (*v1alpha1.MultidimPodAutoscaler, error) {
	return w.client.AutoscalingV1alpha1().MultidimPodAutoscalers(w.ns).Get(ctx, w.name, metav1.GetOptions{})
}

// runEmulator runs the workload emulator in-process at a steady rate until
// the test ends. Unlike startEmulator it does not serve the emulator's
// metrics: the testbed's Prometheus scrapes one fixed address, which a
// test running concurrently in another process may hold, and these tests
// read usage through metrics.k8s.io only.
func runEmulator(t *testing.T, ns string, sel labels.Selector, rate float64) *emulator.Emulator {
	t.Helper()
	return runSteadyEmulator(t, ns, sel, loopApp, rate, "")
}

// waitRecommendation waits for a recommendation (RecommendationProvided
// True) made after since that ok accepts, and returns the MPA. ok's error
// says what is still missing.
func (w *mpaWorkload) waitRecommendation(t *testing.T, timeout time.Duration, what string, since time.Time, ok func(*v1alpha1.MultidimPodAutoscaler) error, procs ...*component) *v1alpha1.MultidimPodAutoscaler {
	t.Helper()
	var last *v1alpha1.MultidimPodAutoscaler
	framework.Eventually(t, timeout, what, func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			select {
			case <-p.done:
				return false, fmt.Errorf("%w: %s exited: %v", framework.ErrPermanent, p.name, p.exitErr)
			default:
			}
		}
		m, err := w.get(ctx)
		if err != nil {
			return false, err
		}
		if cond := condition(m, v1alpha1.RecommendationProvided); cond == nil || cond.Status != corev1.ConditionTrue {
			return false, fmt.Errorf("RecommendationProvided %+v", cond)
		}
		if m.Status.Recommendation == nil || len(m.Status.Recommendation.ContainerRecommendations) == 0 {
			return false, errors.New("no recommendation")
		}
		if rt := m.Status.RecommendationTime; rt == nil || !rt.After(since) {
			return false, fmt.Errorf("recommendationTime %v is not after %s", rt, since.Format(time.RFC3339))
		}
		if err := ok(m); err != nil {
			return false, fmt.Errorf("%w; status.rl %s", err, rlString(m.Status.RL))
		}
		last = m
		return true, nil
	})
	return last
}

func rlString(rl *v1alpha1.RLStatus) string {
	if rl == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{stage=%s source=%s reason=%s version=%s", rl.Stage, rl.Source, rl.Reason, rl.PolicyVersion)
	if rl.LastAgentContactTime != nil {
		fmt.Fprintf(&b, " lastContact=%s", rl.LastAgentContactTime.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, " message=%q}", rl.Message)
	return b.String()
}
