//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/aware-k8s/aware/e2e/emulator"
	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

const mib = 1 << 20

// loopApp is the emulated workload: 10 ms of CPU and 5 ms of I/O per
// request, 64 MiB idle, 1 MiB per request in flight.
var loopApp = sim.App{Name: "hamster", Container: "hamster", Demand: sim.Demand{CPUSeconds: 0.010, IOWait: 0.005, BaseMemory: 64 * mib, MemoryPerRequest: 1 * mib}}

const (
	// baseRate keeps each of the two pods at 30m of CPU: 60% of the 50%
	// utilisation target, so the baseline never scales out.
	baseRate = 6.0
	// highRate is 300m per pod at two replicas: with recommended requests
	// capped at 100m (maxAllowed) that is 6x the target.
	highRate = 60.0
)

// scaleDownWindow is the MPA's scale-down stabilization window
// (spec.constraints.global.behavior.scaleDown): short, so the test sees a
// scale-down within minutes, and long against the loops' periods (updater
// 5s, recommender 10s, metrics-server 10s) so "not before the window" is a
// real constraint.
const scaleDownWindow = 30 * time.Second

// loopMPA is the MPA hamster in mode Auto, between two and six replicas,
// scaling down no sooner than window after the load falls, towards 50% CPU
// utilization.
func loopMPA(window time.Duration) mpaManifest {
	return mpaManifest{
		name: "hamster", mode: v1alpha1.UpdateModeAuto, maxCPU: "100m", maxMemory: "1Gi", minReplicas: 2, maxReplicas: 6,
		global: fmt.Sprintf(`      behavior:
        scaleDown:
          stabilizationWindowSeconds: %d
`, int(window/time.Second)),
		spec: `  goals:
    metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 50
`,
	}
}

// TestAutoscalingLoop runs the loop on real metrics: the emulator drives a
// Deployment's KWOK pods from the simulator's model, the recommender (a
// local process with its own ServiceAccount from deploy/) reads
// metrics.k8s.io (and Prometheus) and writes a recommendation into the MPA's status, and
// when the emulator's load rises the updater (likewise) scales the
// Deployment out through its scale subresource.
func TestAutoscalingLoop(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "loop")

	createLoopDeployment(t, ctx, ns, "hamster")

	em := startEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": "hamster"}), baseRate)

	getMPA := createMPA(t, ns, loopMPA(scaleDownWindow))

	rec := startRecommender(t, ns,
		// The real Prometheus, for usage history at start-up (and the SLO
		// and goal metrics an MPA may name).
		"--prometheus-address="+tb.PrometheusURL,
		"--history-length=30m",
		"--history-resolution=1m",
	)

	if !t.Run("emulated usage reaches metrics.k8s.io and Prometheus", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		framework.Eventually(t, 90*time.Second, "PodMetrics of both pods at the modelled 30m", func(ctx context.Context) (bool, error) {
			list, err := tb.Metrics.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=hamster"})
			if err != nil {
				return false, err
			}
			if len(list.Items) != 2 {
				return false, fmt.Errorf("%d PodMetrics", len(list.Items))
			}
			for _, pm := range list.Items {
				if len(pm.Containers) != 1 {
					return false, fmt.Errorf("%s: %d containers", pm.Name, len(pm.Containers))
				}
				cpu := pm.Containers[0].Usage.Cpu().MilliValue()
				if math.Abs(float64(cpu)-30) > 6 {
					return false, fmt.Errorf("%s: cpu %dm", pm.Name, cpu)
				}
			}
			return true, nil
		})
		q := fmt.Sprintf(`%s{namespace=%q}`, emulator.RequestRateMetric, ns)
		framework.Eventually(t, 60*time.Second, "Prometheus to scrape the emulator's per-pod request rate", func(ctx context.Context) (bool, error) {
			s, err := tb.PromQuery(ctx, q)
			if err != nil {
				return false, err
			}
			if len(s) != 2 {
				return false, fmt.Errorf("%d series", len(s))
			}
			for _, x := range s {
				if math.Abs(x.Value-baseRate/2) > 1e-9 || x.Metric["job"] != "workload-emulator" {
					return false, fmt.Errorf("series %v = %g", x.Metric, x.Value)
				}
			}
			return true, nil
		})
	}) {
		t.FailNow()
	}

	if !t.Run("recommendation from real metrics", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		var last *v1alpha1.MultidimPodAutoscaler
		framework.Eventually(t, 3*time.Minute, "status.recommendation and RecommendationProvided=True", func(ctx context.Context) (bool, error) {
			rec.running(t)
			m, err := getMPA(ctx)
			if err != nil {
				return false, err
			}
			last = m
			cond := condition(m, v1alpha1.RecommendationProvided)
			if m.Status.Recommendation == nil || len(m.Status.Recommendation.ContainerRecommendations) == 0 {
				return false, fmt.Errorf("no recommendation yet; RecommendationProvided %+v", cond)
			}
			if cond == nil || cond.Status != corev1.ConditionTrue {
				return false, fmt.Errorf("RecommendationProvided %+v", cond)
			}
			return true, nil
		})
		cr := last.Status.Recommendation.ContainerRecommendations[0]
		t.Logf("recommendation: desiredReplicas=%d container=%s target=%v lower=%v upper=%v", last.Status.DesiredReplicas, cr.ContainerName, cr.Target, cr.LowerBound, cr.UpperBound)
		if cr.ContainerName != "hamster" {
			t.Errorf("recommendation for container %q, want hamster", cr.ContainerName)
		}
		// The target follows the measured 30m per pod at the goal's 50%
		// utilisation: 60m, inside the policy's [10m, 100m] and off both
		// ends, so neither clamp can produce it (expected_test.go).
		checkCPUTarget(t, "hamster", last, emulatedPodCPU, goalUtilization)
		// The working set is below VPA's per-pod minimum, which is the
		// target (inside the policy's [32Mi, 1Gi]).
		if mem := cr.Target.Memory().Value(); math.Abs(float64(mem-expectedMemoryTarget)) > 0.02*expectedMemoryTarget {
			t.Errorf("memory target %s, want %dMi within 2%%", cr.Target.Memory(), expectedMemoryTarget/mib)
		}
		// 30m of usage against the recommended ~60m is the goal's 50%:
		// the two pods stay (inside [2, 6] only because the load asks for
		// the minimum's count; the scale-out below shows it can move).
		if last.Status.DesiredReplicas != 2 {
			t.Errorf("desiredReplicas %d at the baseline load, want 2", last.Status.DesiredReplicas)
		}
		if last.Status.RecommendationTime == nil {
			t.Error("no status.recommendationTime")
		}
	}) {
		t.FailNow()
	}

	// The updater runs for both subtests below. No admission controller
	// renews its heartbeat Lease, so it scales and never evicts.
	upd := startUpdater(t, ns, "aware-admission-controller-"+ns, "--update-interval=5s")

	if !t.Run("load increase scales replicas up", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		// The baseline must not scale: give the updater a few loops first.
		time.Sleep(12 * time.Second)
		if n := deploymentReplicas(t, ns, "hamster"); n != 2 {
			t.Fatalf("the updater changed replicas to %d at the baseline load", n)
		}
		tr, err := sim.GenerateTrace(sim.Steady, sim.TraceOptions{Mean: highRate, Steps: 1, Step: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		em.SetTrace(tr)
		start := time.Now()
		framework.Eventually(t, 3*time.Minute, "the updater to scale hamster above 2 replicas", func(ctx context.Context) (bool, error) {
			rec.running(t)
			upd.running(t)
			n := deploymentReplicas(t, ns, "hamster")
			if n <= 2 {
				m, err := getMPA(ctx)
				if err != nil {
					return false, err
				}
				return false, fmt.Errorf("spec.replicas %d; status.desiredReplicas %d", n, m.Status.DesiredReplicas)
			}
			return true, nil
		})
		t.Logf("scaled out %s after the load increase", time.Since(start).Round(time.Second))
		m, err := getMPA(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status.LastScaleTime == nil {
			t.Error("the updater did not record status.lastScaleTime")
		}
		// The Deployment's replicas and selector came from the components'
		// watches (deploy/ grants list and watch of it), not from /scale.
		for _, c := range []*component{rec, upd} {
			if n := mustMetric(t, c, "aware_"+c.name+"_scale_target_reads_total", "source=watch"); n < 1 {
				t.Errorf("%s read the target from a watch %g times, want at least once", c.name, n)
			}
		}
		n := deploymentReplicas(t, ns, "hamster")
		if n > 6 {
			t.Errorf("%d replicas, above maxReplicas 6", n)
		}
		if _, err := tb.WaitForRunningPods(ctx, ns, "app=hamster", int(n), 60*time.Second); err != nil {
			t.Error(err)
		}
	}) {
		t.FailNow()
	}

	t.Run("load decrease scales down after the stabilization window", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		// Start from a settled peak: 600m of CPU at 50% of 100m requests
		// wants 12 pods, clamped to maxReplicas 6.
		const peak = 6
		framework.Eventually(t, 2*time.Minute, "hamster to reach maxReplicas", func(ctx context.Context) (bool, error) {
			upd.running(t)
			if n := deploymentReplicas(t, ns, "hamster"); n != peak {
				return false, fmt.Errorf("spec.replicas %d", n)
			}
			return true, nil
		})
		if _, err := tb.WaitForRunningPods(ctx, ns, "app=hamster", peak, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		tr, err := sim.GenerateTrace(sim.Steady, sim.TraceOptions{Mean: baseRate, Steps: 1, Step: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// Taken before the drop, so the bound below is if anything early.
		drop := time.Now()
		em.SetTrace(tr)
		// Until the load drop is measured, every recommendation still
		// asks for the peak. The fused default's desiredReplicas is
		// stabilized by the recommender with the MPA's behavior: it holds
		// the highest proposal of the last scaleDownWindow, so no
		// scale-down may happen before drop+scaleDownWindow. The updater
		// applies such a count without its own window (it would double
		// the delay; pkg/core/hpa NormalizeStabilized), so what this
		// checks is the recommender's window; the updater's, which holds
		// an agent's count, is TestAgentScaleDownWindow's. Poll every
		// second and record the first count below the peak.
		var fell, recommended time.Time
		var floor int32 = peak
		err = framework.WaitFor(ctx, scaleDownWindow+4*time.Minute, time.Second, "the updater to scale hamster down to minReplicas", func(ctx context.Context) (bool, error) {
			rec.running(t)
			upd.running(t)
			m, err := getMPA(ctx)
			if err != nil {
				return false, err
			}
			if m.Status.DesiredReplicas < peak && recommended.IsZero() {
				recommended = time.Now()
				t.Logf("status.desiredReplicas fell to %d after %s", m.Status.DesiredReplicas, recommended.Sub(drop).Round(time.Second))
			}
			n := deploymentReplicas(t, ns, "hamster")
			if n < peak && fell.IsZero() {
				fell = time.Now()
				t.Logf("replicas fell to %d after %s (window %s)", n, fell.Sub(drop).Round(time.Second), scaleDownWindow)
			}
			floor = min(floor, n)
			if n > 2 {
				return false, fmt.Errorf("spec.replicas %d; status.desiredReplicas %d", n, m.Status.DesiredReplicas)
			}
			return true, nil
		})
		if !fell.IsZero() && fell.Sub(drop) < scaleDownWindow {
			t.Errorf("replicas fell %s after the load drop, inside the %s scale-down stabilization window", fell.Sub(drop).Round(time.Millisecond), scaleDownWindow)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("at minReplicas 2 after %s", time.Since(drop).Round(time.Second))
		if floor < 2 {
			t.Errorf("replicas went down to %d, below minReplicas 2", floor)
		}
		if _, err := tb.WaitForRunningPods(ctx, ns, "app=hamster", 2, 90*time.Second); err != nil {
			t.Error(err)
		}
	})
}

// startRecommender runs the recommender for namespace ns as
// aware-system/aware-recommender, electing a leader on a Lease of its own
// (aware-recommender-<ns>, granted the rights deploy/ grants on
// aware-recommender) so tests on the same control plane never wait for each
// other's leader.
func startRecommender(t *testing.T, ns string, args ...string) *component {
	t.Helper()
	lease := "aware-recommender-" + ns
	tb.GrantRenamed(t, "aware-system", "aware:recommender", "aware-system", "aware-recommender", "aware-e2e:recommender:"+ns,
		map[string]string{"aware-recommender": lease})
	deleteLeaseAtEnd(t, lease)
	// Leader election in aware-system as deploy/ has it, on the Lease of
	// this test.
	return startComponent(t, "recommender", append([]string{
		"--namespace=" + ns,
		"--recommender-interval=10s",
		"--checkpoints-interval=1m",
		// TestRivalAutoscalers waits a minute for a deleted rival to be
		// noticed; the default scans once a minute.
		"--rival-scan-interval=5s",
		"--leader-elect-resource-name=" + lease,
	}, args...)...)
}

// startUpdater runs the updater for namespace ns as
// aware-system/aware-updater, with its leader Lease aware-updater-<ns> and
// the admission controller's heartbeat Lease admissionLease (both in
// aware-system), granted the rights deploy/ grants on the production names.
func startUpdater(t *testing.T, ns, admissionLease string, args ...string) *component {
	t.Helper()
	lease := "aware-updater-" + ns
	tb.GrantRenamed(t, "aware-system", "aware:updater", "aware-system", "aware-updater", "aware-e2e:updater:"+ns,
		map[string]string{"aware-updater": lease, "aware-admission-controller": admissionLease})
	deleteLeaseAtEnd(t, lease)
	// Leader election and the heartbeat Lease in aware-system as deploy/
	// has them, on the Leases of this test.
	return startComponent(t, "updater", append([]string{
		"--namespace=" + ns,
		"--leader-elect-resource-name=" + lease,
		"--admission-lease-name=" + admissionLease,
	}, args...)...)
}

// deleteLeaseAtEnd deletes the Lease aware-system/name when the test ends,
// after the component holding it (started later, so stopped earlier): the
// namespace's deletion does not reach aware-system.
func deleteLeaseAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		err := tb.Client.CoordinationV1().Leases("aware-system").Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Lease aware-system/%s: %v", name, err)
		}
	})
}

func condition(m *v1alpha1.MultidimPodAutoscaler, typ v1alpha1.MultidimPodAutoscalerConditionType) *v1alpha1.MultidimPodAutoscalerCondition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == typ {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

func deploymentReplicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	d, err := tb.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// startEmulator runs the workload emulator in-process against the real API
// server at a steady rate, serving /metrics on AWARE_EMULATOR_ADDR (the
// address Prometheus scrapes), until the test ends.
func startEmulator(t *testing.T, ns string, sel labels.Selector, rate float64) *emulator.Emulator {
	t.Helper()
	addr := tb.Env["AWARE_EMULATOR_ADDR"]
	if addr == "" {
		t.Fatal("the testbed env sets no AWARE_EMULATOR_ADDR")
	}
	return runSteadyEmulator(t, ns, sel, loopApp, rate, addr)
}

// runSteadyEmulator runs the workload emulator of app in-process against
// the real API server at a steady rate until the test ends, serving its
// metrics on metricsAddr unless that is empty, and returns once it has
// modelled a window.
func runSteadyEmulator(t *testing.T, ns string, sel labels.Selector, app sim.App, rate float64, metricsAddr string) *emulator.Emulator {
	t.Helper()
	tr, err := sim.GenerateTrace(sim.Steady, sim.TraceOptions{Mean: rate, Steps: 1, Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return runTraceEmulator(t, ns, sel, app, tr, metricsAddr)
}

// runTraceEmulator is runSteadyEmulator with the load trace tr, whose
// window 0 starts when the emulator does.
func runTraceEmulator(t *testing.T, ns string, sel labels.Selector, app sim.App, tr sim.Trace, metricsAddr string) *emulator.Emulator {
	t.Helper()
	rate := tr.Rate(0)
	em, err := emulator.New(tb.Client, emulator.Config{Namespace: ns, Selector: sel, App: app, Trace: tr, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Its log goes to a file of the test's, shown when the test fails,
	// rather than into the test binary's stderr among every test's.
	logPath := filepath.Join(logDir, strings.ReplaceAll(t.Name(), "/", "_")+"-emulator.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tb.AddLogFile(t, logPath)
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(logf))).WithValues("namespace", ns, "selector", sel.String())
	logger.Info("Emulator starting", "app", app.Container, "rate", rate, "metricsAddr", metricsAddr)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	var served <-chan error
	if metricsAddr != "" {
		if served, err = emulator.Serve(ctx, metricsAddr, em); err != nil {
			cancel()
			t.Fatalf("serve emulator metrics: %v", err)
		}
	}
	ran := make(chan error, 1)
	go func() { ran <- em.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		err := <-ran
		if served != nil {
			err = errors.Join(err, <-served)
		}
		logger.Info("Emulator stopped", "err", err)
		logf.Close()
		if err != nil {
			t.Errorf("emulator: %v", err)
		}
		if _, err := em.Ticks(); err != nil && !strings.Contains(err.Error(), "context canceled") {
			t.Logf("emulator's last step: %v", err)
		}
	})
	framework.Eventually(t, 30*time.Second, "the emulator to model a window", func(context.Context) (bool, error) {
		n, err := em.Ticks()
		return n > 0 && err == nil, err
	})
	return em
}
