//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/e2e/emulator"
	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	"github.com/aware-k8s/aware/recommender/controller"
)

// Fault injection against the loopback control plane. Each case runs while
// the emulator drives load, on a workload whose autoscaler is in update
// mode Auto with its replica count and pod size pinned (min = max, equal to
// what the pods run with), and with the updater running: whatever the
// recommender or the agent says during a fault, the only correct action is
// none. So "nothing lost" is checked exactly: the Deployment keeps its
// replicas, the same pods run with the same resources, none was evicted,
// and a recommendation is provided again after the fault. Beside it runs a
// workload whose autoscaler is not pinned (faults_wide_test.go), on which
// the metrics-server outage checks that the recommendation itself is kept:
// the same target, and a recommendationTime that stops until the metrics
// come back. Each case also
// checks the condition, status.rl reason or event that tells the operator
// what happened (docs/faults.md).
//
// The recommender and the updater run without leader election here: a
// leader that cannot renew its Lease through an API outage exits, to be
// restarted by the kubelet (TestLeaderElection covers that path), which a
// local process would not be.

// faultLoopFlags are the recommender's flags of the fault tests: loops of
// 5s with a status refresh every 10s, so that a status write falls in every
// outage below, a status write abandoned after 3s, and API calls failing
// for 10s reported.
var faultLoopFlags = []string{
	"--leader-elect=false",
	"--recommender-interval=5s",
	"--status-refresh-interval=10s",
	"--status-write-timeout=3s",
	"--api-failure-warning=10s",
}

// faultAPIFailureWarning is faultLoopFlags' --api-failure-warning.
const faultAPIFailureWarning = 10 * time.Second

// outageSample is what the recommender reported over an outage.
type outageSample struct {
	// longestFailure is the largest aware_recommender_api_failing_seconds
	// {call=rival-scan}: the longest run of failed scans seen (the gauge
	// is 0 again once a scan succeeds).
	longestFailure time.Duration
	// loops is how many loops ended (aware_recommender_loop_duration_seconds
	// _count).
	loops float64
}

// sampleOutage reads the recommender's metrics every second for d (it
// serves them without the API). A failed read fails the test.
func sampleOutage(t *testing.T, rec *component, d time.Duration) outageSample {
	t.Helper()
	ctx := context.Background()
	loops := func() float64 {
		n, _, err := rec.metric(ctx, "aware_recommender_loop_duration_seconds_count")
		if err != nil {
			t.Errorf("reading the recommender's metrics during the outage: %v", err)
		}
		return n
	}
	var s outageSample
	first := loops()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		v, _, err := rec.metric(ctx, "aware_recommender_api_failing_seconds", "call=rival-scan")
		if err != nil {
			t.Errorf("reading the recommender's metrics during the outage: %v", err)
			return s
		}
		s.longestFailure = max(s.longestFailure, time.Duration(v*float64(time.Second)))
	}
	s.loops = loops() - first
	return s
}

// pinnedReplicas is the replica count of the pinned workloads
// (createLoopDeployment's).
const pinnedReplicas = 2

// pinnedMPA is an autoscaler for Deployment name that can only confirm what
// createLoopDeployment runs: update mode Auto, replicas [2, 2], CPU and
// memory requests [100m, 100m] and [128Mi, 128Mi]; rl is a spec.rl block
// (indented two spaces) or empty.
func pinnedMPA(name, rl string) []byte {
	return fmt.Appendf(nil, `
apiVersion: autoscaling.aware.dev/v1alpha1
kind: MultidimPodAutoscaler
metadata:
  name: %[1]s
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: %[1]s
  policy:
    updateMode: Auto
  resourcePolicy:
    containerPolicies:
    - containerName: '*'
      minAllowed: {cpu: 100m, memory: 128Mi}
      maxAllowed: {cpu: 100m, memory: 128Mi}
      controlledResources: ["cpu", "memory"]
  constraints:
    global:
      minReplicas: %[2]d
      maxReplicas: %[2]d
%[3]s`, name, pinnedReplicas, rl)
}

// pinnedWorkload is a Deployment under load with a pinned autoscaler and a
// record of its pods as they were before any fault.
type pinnedWorkload struct {
	*mpaWorkload
	pods  map[types.UID]corev1.ResourceRequirements
	watch *podWatch
}

// startPinnedWorkload creates Deployment name (two pods), runs sloApp's
// load on it (serving the request histogram on metricsAddr when not
// empty) and creates its pinned autoscaler with spec.rl block rl.
func startPinnedWorkload(t *testing.T, ns, name, rl, metricsAddr string) *pinnedWorkload {
	t.Helper()
	ctx := context.Background()
	createLoopDeployment(t, ctx, ns, name)
	app := sloApp
	app.Container = name
	runSteadyEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": name}), app, baseRate, metricsAddr)
	pods, err := tb.RunningPods(ctx, ns, "app="+name)
	if err != nil {
		t.Fatal(err)
	}
	w := &pinnedWorkload{pods: map[types.UID]corev1.ResourceRequirements{}, watch: watchPods(t, ns, "app="+name)}
	for _, p := range pods {
		w.pods[p.UID] = p.Spec.Containers[0].Resources
	}
	var m v1alpha1.MultidimPodAutoscaler
	if err := yaml.UnmarshalStrict(pinnedMPA(name, rl), &m); err != nil {
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
	w.mpaWorkload = &mpaWorkload{ns: ns, name: name, client: client, mpa: created}
	return w
}

// nothingLost fails the test if the workload's replica count, pods or
// their resources changed, or a pod was evicted, since it started.
func (w *pinnedWorkload) nothingLost(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dep, err := tb.Client.AppsV1().Deployments(w.ns).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read the Deployment: %v", err)
	}
	if r := dep.Spec.Replicas; r == nil || *r != pinnedReplicas {
		t.Errorf("the Deployment's replicas changed to %v, want %d", r, pinnedReplicas)
	}
	// Every pod, ready or not: a fault may leave a pod unready for a
	// while (a KWOK node whose lease the API outage let expire), which
	// loses nothing; a replaced or deleted pod does.
	pods, err := tb.Client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.name})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range pods.Items {
		before, ok := w.pods[p.UID]
		if !ok {
			t.Errorf("pod %s (%s) was not there before the faults: a pod was replaced", p.Name, p.UID)
			continue
		}
		seen++
		if p.DeletionTimestamp != nil {
			t.Errorf("pod %s is being deleted", p.Name)
		}
		if got := p.Spec.Containers[0].Resources; !equality.Semantic.DeepEqual(got, before) {
			t.Errorf("pod %s: resources %v, were %v", p.Name, got, before)
		}
	}
	if seen != len(w.pods) {
		t.Errorf("%d of the %d pods from before the faults are left", seen, len(w.pods))
	}
	for uid := range w.pods {
		if w.watch.wasEvicted(uid) {
			t.Errorf("pod %s was evicted", uid)
		}
	}
}

// waitCondition waits for a recommendation made after since whose
// condition typ has status st and reason reason.
func (w *pinnedWorkload) waitCondition(t *testing.T, timeout time.Duration, since time.Time, typ v1alpha1.MultidimPodAutoscalerConditionType, st corev1.ConditionStatus, reason string, procs ...*component) *v1alpha1.MultidimPodAutoscaler {
	t.Helper()
	return w.waitRecommendation(t, timeout, fmt.Sprintf("%s %s %s", typ, st, reason), since, func(m *v1alpha1.MultidimPodAutoscaler) error {
		if c := condition(m, typ); c == nil || c.Status != st || c.Reason != reason {
			return fmt.Errorf("%s %s", typ, condString(c))
		}
		return nil
	}, procs...)
}

// waitTransition waits for condition typ to have turned to status st
// with reason reason at since or later, whether or not a new
// recommendation was made (a loop that cannot read usage keeps the last
// one).
func (w *pinnedWorkload) waitTransition(t *testing.T, timeout time.Duration, since time.Time, typ v1alpha1.MultidimPodAutoscalerConditionType, st corev1.ConditionStatus, reason string, procs ...*component) *v1alpha1.MultidimPodAutoscaler {
	t.Helper()
	var last *v1alpha1.MultidimPodAutoscaler
	framework.Eventually(t, timeout, fmt.Sprintf("%s to turn %s %s", typ, st, reason), func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			p.running(t)
		}
		m, err := w.get(ctx)
		if err != nil {
			return false, err
		}
		c := condition(m, typ)
		if c == nil || c.Status != st || c.Reason != reason || c.LastTransitionTime.Time.Before(since.Truncate(time.Second)) {
			return false, fmt.Errorf("%s %s", typ, condString(c))
		}
		last = m
		return true, nil
	})
	return last
}

// waitEvent waits for an event of reason on the autoscaler, last seen
// after since, and returns its message.
func (w *pinnedWorkload) waitEvent(t *testing.T, timeout time.Duration, since time.Time, typ, reason string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, timeout, "a "+typ+" "+reason+" event on "+w.name, func(ctx context.Context) (bool, error) {
		l, err := tb.Client.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + w.name + ",reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			last := e.LastTimestamp.Time
			if e.Series != nil {
				last = e.Series.LastObservedTime.Time
			}
			if last.IsZero() {
				last = e.EventTime.Time
			}
			// Event timestamps have a resolution of a second.
			if e.Type == typ && !last.Before(since.Truncate(time.Second)) {
				msg = e.Message
				return true, nil
			}
		}
		return false, fmt.Errorf("%d %s events, none of type %s since %s", len(l.Items), reason, typ, since.Format(time.RFC3339))
	})
	return msg
}

// prometheusOutage is how long TestControlPlaneFaults keeps Prometheus
// down. The issue asks for two minutes; the default is 40s to keep the e2e
// tier's time in CI's budget. What the case checks does not depend on the
// length once an outage spans several loops and the reads' timeout: the
// recommender reads Prometheus every loop (5s here), and every read in the
// outage fails the same way. AWARE_E2E_PROMETHEUS_OUTAGE (a Go duration,
// e.g. 2m) sets the length.
func prometheusOutage(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("AWARE_E2E_PROMETHEUS_OUTAGE")
	if s == "" {
		return 40 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 15*time.Second {
		t.Fatalf("AWARE_E2E_PROMETHEUS_OUTAGE=%q: want a duration of at least 15s", s)
	}
	return d
}

// TestControlPlaneFaults stops, one at a time, metrics-server, Prometheus,
// kube-apiserver and etcd under a running recommender and updater, and
// checks that nothing is lost and that the autoscaler's status, or an
// event, says what happened.
func TestControlPlaneFaults(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	// Runs before the logs are dumped: a repair fails the test.
	t.Cleanup(func() { tb.RestoreControlPlane(t) })
	requireAWARE(t)
	ns := tb.CreateNamespace(t, "cpfaults")
	addr := tb.Env["AWARE_EMULATOR_ADDR"]
	if addr == "" {
		t.Fatal("the testbed env sets no AWARE_EMULATOR_ADDR")
	}
	w := startPinnedWorkload(t, ns, "steady", sloBlock(emulator.RequestDurationMetric, sloMetTarget), addr)
	wide := startWideWorkload(t, ns, "wide")
	rec := startRecommender(t, ns, append([]string{
		"--prometheus-address=" + tb.PrometheusURL,
		"--prometheus-window=" + sloPromWindow.String(),
	}, faultLoopFlags...)...)
	upd := startUpdater(t, ns, "aware-admission-controller-"+ns, "--leader-elect=false", "--update-interval=5s")

	// The baseline: CPU and the SLO's latency both read.
	base := w.waitCondition(t, 3*time.Minute, time.Time{}, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", rec, upd)
	baseTarget := base.Status.Recommendation.ContainerRecommendations[0].Target
	t.Logf("baseline: desiredReplicas %d, target %v", base.Status.DesiredReplicas, baseTarget)
	wide.waitAdvancing(t, rec)

	t.Run("metrics-server down", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		ms := tb.StopComponent(t, "metrics-server")
		down := time.Now()
		m := w.waitTransition(t, time.Minute, down, v1alpha1.ScalingActive, corev1.ConditionFalse, "FailedGetResourceMetric", rec, upd)
		msg := w.waitEvent(t, 30*time.Second, down, corev1.EventTypeWarning, "FailedGetResourceMetric")
		t.Logf("metrics-server down: ScalingActive %s; event %q", condString(condition(m, v1alpha1.ScalingActive)), msg)
		// The last recommendation is kept, not dropped or zeroed.
		if got := m.Status.Recommendation.ContainerRecommendations[0].Target; !equality.Semantic.DeepEqual(got, baseTarget) {
			t.Errorf("target %v during the outage, %v before", got, baseTarget)
		}
		if m.Status.DesiredReplicas != pinnedReplicas {
			t.Errorf("desiredReplicas %d during the outage", m.Status.DesiredReplicas)
		}
		wide.heldThroughOutage(t, down, rec)
		ms.Start(t)
		back := time.Now()
		tb.WaitMetricsAPIReady(t, ns, 2*time.Minute)
		w.waitCondition(t, 2*time.Minute, back, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", rec, upd)
		w.nothingLost(t)
		// Recommendations resume: a new recommendationTime, after the
		// restart.
		after := wide.waitRecommendation(t, 2*time.Minute, "wide: a recommendation after metrics-server is back", back, func(m *v1alpha1.MultidimPodAutoscaler) error {
			if c := condition(m, v1alpha1.ScalingActive); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "ValidMetricFound" {
				return fmt.Errorf("ScalingActive %s", condString(c))
			}
			return nil
		}, rec)
		t.Logf("wide: recommendations resumed at %s, target %v", after.Status.RecommendationTime.Format(time.RFC3339Nano), after.Status.Recommendation.ContainerRecommendations[0].Target)
	})

	t.Run("Prometheus down", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		outage := prometheusOutage(t)
		prom := tb.StopComponent(t, "prometheus")
		down := time.Now()
		// Scaling goes on from CPU; the condition says the SLO is not read.
		first := w.waitCondition(t, time.Minute, down, v1alpha1.ScalingActive, corev1.ConditionTrue, "SLOMetricsUnavailable", rec, upd)
		t.Logf("Prometheus down: ScalingActive %s", condString(condition(first, v1alpha1.ScalingActive)))
		// Recommendations keep being made (and refreshed) through the outage.
		w.waitCondition(t, time.Minute, first.Status.RecommendationTime.Time, v1alpha1.ScalingActive, corev1.ConditionTrue, "SLOMetricsUnavailable", rec, upd)
		if left := time.Until(down.Add(outage)); left > 0 {
			time.Sleep(left)
		}
		m, err := w.get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c := condition(m, v1alpha1.ScalingActive); c == nil || c.Reason != "SLOMetricsUnavailable" || !m.Status.RecommendationTime.After(down.Add(outage-20*time.Second)) {
			t.Errorf("after %s of outage: ScalingActive %s, recommendationTime %v", outage, condString(c), m.Status.RecommendationTime)
		}
		prom.Start(t)
		back := time.Now()
		tb.WaitPrometheusReady(t, time.Minute)
		w.waitCondition(t, 2*time.Minute, back, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", rec, upd)
		w.nothingLost(t)
	})

	// An API outage. With kube-apiserver down the recommender can neither
	// read nor write; with etcd down (about 55s here: its graceful stop,
	// 30s stopped, and the API server's reconnection) lists fail (the loop
	// cuts them at half an interval and goes on) while the status writes
	// of this test were acknowledged throughout, in every run watched
	// (2026-11-27: no "Writing status; will retry" in the recommender's
	// log). Either way the list of other autoscalers fails loop after loop
	// for longer than --api-failure-warning (10s here): APIReadFailing,
	// then APIReadRecovered once it succeeds. With kube-apiserver down the
	// status writes fail too, and the one that succeeds records
	// StatusWriteRecovered, saying for how long the status was stale.
	apiOutage := func(t *testing.T, name string, wantWriteRecovered bool) {
		// The tails at the moment this case fails: the next case restarts
		// the control plane again, and by the parent's end the
		// recommender's last lines are about that.
		tb.DumpLogsOnFailure(t)
		// Why a warning is missing: the scans the recommender counted and
		// what its event recorder did with the events (client-go drops an
		// event the API server answers with an error status).
		rec.logLinesOnFailure(t, 80, "other autoscalers", "event", "Event")
		// Before the stop: reads fail from the start of a graceful stop.
		down := time.Now()
		c := tb.StopComponent(t, name)
		// 30s, three times --api-failure-warning: on a loaded machine a
		// loop slowed by its cut reads and abandoned writes can scan for
		// rivals only a few times in the outage, and with 20s the last
		// failed scan once came less than 10s after the first (CI run of
		// 2026-11-27: no APIReadFailing).
		out := sampleOutage(t, rec, 30*time.Second)
		failed := out.longestFailure
		t.Logf("%s down 30s: %g loops ended; the rival scans failed for at most %s", name, out.loops, failed)
		// Every API read of a loop is cut at half an interval and a status
		// write abandoned after --status-write-timeout, so the loop goes on
		// through the outage: 6 loops ended with kube-apiserver stopped,
		// and 4 and 2 with etcd stopped (2026-11-29: with 2 in 30s, a
		// loop there took about 15s). A loop held
		// from the outage's start by a read for the API server's own 60s
		// timeout ends none.
		if out.loops < 1 {
			t.Errorf("%s down 30s: only %g recommender loops ended; the loop waits for the API", name, out.loops)
		}
		rec.running(t)
		upd.running(t)
		c.Start(t)
		tb.WaitAPIServerReady(t, 2*time.Minute)
		// The KWOK node was marked NodeStatusUnknown for the lease it
		// could not renew and made Ready again; it must keep the address
		// metrics-server scrapes (hack/testbed/up.sh).
		tb.WaitNodesReady(t, 2*time.Minute)
		back := time.Now()
		// The warnings queued in the outage reach the restarted API
		// server back to back; one that found it refusing requests (its
		// RBAC informers not synced yet) was once dropped with all of
		// them, until the event sink retried such refusals
		// (pkg/kube/apiclient/events.go, docs/faults.md).
		// With kube-apiserver stopped every read is refused, so the scans
		// fail for the whole outage. With etcd stopped the API server may
		// answer the lists from its watch cache: in a run of 2026-11-29 no
		// scan failed between etcd's stop and its restart (the gauge stayed
		// 0, no list error in the recommender's log), so the warning is
		// owed only when the scans failed for --api-failure-warning.
		if name == "kube-apiserver" || failed >= faultAPIFailureWarning {
			warn := w.waitEvent(t, 2*time.Minute, down, corev1.EventTypeWarning, controller.ReasonAPIReadFailing)
			recovered := w.waitEvent(t, 2*time.Minute, down, corev1.EventTypeNormal, controller.ReasonAPIReadRecovered)
			t.Logf("%s restarted: %s %q; %s %q", name, controller.ReasonAPIReadFailing, warn, controller.ReasonAPIReadRecovered, recovered)
		} else {
			t.Logf("%s restarted: the API server answered the rival scans through the outage (longest failure %s, under --api-failure-warning %s), so no %s is owed", name, failed, faultAPIFailureWarning, controller.ReasonAPIReadFailing)
		}
		if wantWriteRecovered {
			msg := w.waitEvent(t, 2*time.Minute, down, corev1.EventTypeNormal, controller.ReasonStatusWriteRecovered)
			t.Logf("%s restarted: %s %q", name, controller.ReasonStatusWriteRecovered, msg)
			if n := mustMetric(t, rec, "aware_recommender_status_write_recoveries_total"); n < 1 {
				t.Errorf("aware_recommender_status_write_recoveries_total = %g", n)
			}
		}
		m := w.waitCondition(t, 2*time.Minute, back, v1alpha1.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", rec, upd)
		t.Logf("%s restarted: recommendations resumed at %s", name, m.Status.RecommendationTime.Format(time.RFC3339))
		w.nothingLost(t)
	}
	t.Run("kube-apiserver restarted", func(t *testing.T) { apiOutage(t, "kube-apiserver", true) })
	// This case was opt-in after a CI run of 2026-11-25 in which the
	// control plane seemed hung after it: the API server reconnected to
	// the restarted etcd within seconds, but KWOK's node lost its
	// addresses, so metrics-server served no pod metrics for many minutes
	// (hack/testbed/up.sh says why; RestoreControlPlane checks it).
	t.Run("etcd restarted", func(t *testing.T) { apiOutage(t, "etcd", false) })

	if n, _, err := upd.metric(context.Background(), "aware_updater_evictions_total"); err != nil || n != 0 {
		t.Errorf("the updater counted %g evictions (%v)", n, err)
	}
}
