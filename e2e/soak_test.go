//go:build e2e && soak

package e2e

// The soak (make soak, hack/soak.sh; docs/operations.md#soak): the four
// components run for hours over many autoscalers whose pods come and go,
// the agent learning for a share of them and the webhook admitting their
// pods, while the API server, the agent and the recommender are restarted
// in turn. Each component's resident memory, goroutines, open descriptors
// and API request rate (and the agent's state directory) are sampled, and
// each series must show no growth (e2e/soak judges them); at the end no
// component may have panicked and the state must agree with the API
// server's.
//
// Why an e2e test behind its own tag rather than a program under hack/
// (as hack/benchreal is): the soak runs the components exactly as the
// e2e tier does, and that is this package's test code: startProcess runs
// each from deploy/'s Deployment through framework.Overrides (a departure
// from deploy/ must be listed there, with its reason),
// startAdmissionController registers the webhook as the install does, and
// the fault tests' StopComponent restarts the API server as up.sh started
// it. A program would have to copy all of it, and the copies would drift.
// The tags keep it out of the e2e tier (`go test -tags e2e` does not build
// this file); `make lint` vets it with -tags 'e2e soak'. Its pure parts
// (slopes, judgement, report, plot) are the package e2e/soak, unit-tested
// in make test.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/e2e/emulator"
	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/soak"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// The soak's knobs, passed after -args (hack/soak.sh does).
var (
	soakDuration     = flag.Duration("soak.duration", 2*time.Hour, "How long the soak runs after its set-up.")
	soakMPAs         = flag.Int("soak.mpas", 1000, "Autoscalers, each over a Deployment of its own.")
	soakRestartEvery = flag.Duration("soak.restart-every", 20*time.Minute, "Restart one of kube-apiserver, rl-agent and recommender, in turn, this often.")
	soakSampleEvery  = flag.Duration("soak.sample-every", 30*time.Second, "How often each component is sampled.")
	soakWarmup       = flag.Duration("soak.warmup", 0, "Samples this soon after the start or a restart are left out of the within-segment slopes, shown but not judged (0: a quarter of --soak.restart-every).")
	soakSettle       = flag.Float64("soak.settle", soak.DefaultSettle, "Share of each segment between restarts, at its end, whose mean is the segment's settled level, which the judgement fits across segments.")
	soakRLShare      = flag.Float64("soak.rl-share", 0.2, "Share of the autoscalers with spec.rl (mode On), held in OnlineTraining.")
	soakChurn        = flag.Float64("soak.churn", 30, "Pods deleted per minute, picked at random (their ReplicaSets replace them through the webhook); 0: none.")
	soakRate         = flag.Float64("soak.rate", 3, "Emulated requests per second per autoscaler (10 ms of CPU each).")
	soakSetupTimeout = flag.Duration("soak.setup-timeout", 20*time.Minute, "Longest the set-up may take to bring every pod up.")
	soakSeed         = flag.Uint64("soak.seed", 1, "Seed of the churn's picks and the emulator.")
	soakOut          = flag.String("soak.out", "", "Directory for report.md, report.json, soak.svg and the components' logs (required).")
)

// soakOptions are the flags, checked.
type soakOptions struct {
	duration, restartEvery, sampleEvery, warmup, setupTimeout time.Duration
	mpas                                                      int
	rlShare, churn, rate, settle                              float64
	seed                                                      uint64
	out                                                       string
}

func soakOptionsFromFlags() (soakOptions, error) {
	o := soakOptions{
		duration: *soakDuration, restartEvery: *soakRestartEvery, sampleEvery: *soakSampleEvery, warmup: *soakWarmup,
		setupTimeout: *soakSetupTimeout, mpas: *soakMPAs, rlShare: *soakRLShare, churn: *soakChurn, rate: *soakRate, seed: *soakSeed,
		settle: *soakSettle,
	}
	if o.warmup == 0 {
		o.warmup = o.restartEvery / 4
	}
	switch {
	case *soakOut == "":
		return o, fmt.Errorf("-soak.out is required")
	case o.duration <= 0 || o.restartEvery <= 0 || o.sampleEvery <= 0 || o.setupTimeout <= 0:
		return o, fmt.Errorf("-soak.duration, -soak.restart-every, -soak.sample-every and -soak.setup-timeout must be positive")
	case o.warmup >= o.restartEvery:
		return o, fmt.Errorf("-soak.warmup %s leaves nothing of a %s segment between restarts", o.warmup, o.restartEvery)
	case !(o.settle > 0 && o.settle <= 1):
		return o, fmt.Errorf("-soak.settle %g: want a share in (0, 1]", o.settle)
	case o.mpas < 1 || o.rlShare < 0 || o.rlShare > 1 || o.churn < 0 || o.rate <= 0:
		return o, fmt.Errorf("-soak.mpas must be at least 1, -soak.rl-share in [0, 1], -soak.churn at least 0 and -soak.rate positive")
	}
	out, err := filepath.Abs(*soakOut)
	if err != nil {
		return o, err
	}
	o.out = out
	return o, os.MkdirAll(out, 0o755)
}

// soakLabel marks every pod of the soak's workload: the emulator and the
// churn pick pods by it.
const soakLabel = "aware-soak"

// soakApp is the emulated workload: the e2e's loopApp, 10 ms of CPU and
// 5 ms of I/O per request.
var soakApp = sim.App{Name: "soak", Demand: sim.Demand{CPUSeconds: 0.010, IOWait: 0.005, BaseMemory: 64 << 20, MemoryPerRequest: 1 << 20}}

// TestSoak is the soak. It is long (the default is 2 hours after the
// set-up) and runs only with the tags e2e and soak: make soak.
func TestSoak(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	o, err := soakOptionsFromFlags()
	if err != nil {
		t.Fatal(err)
	}
	// The components' tokens must outlive the soak (tokenTTL says why).
	tokenTTL = o.setupTimeout + o.duration + time.Hour
	// Runs last: the API server was restarted under the whole testbed.
	t.Cleanup(func() { tb.RestoreControlPlane(t) })
	requireAWARE(t)
	ctx := context.Background()
	s := newSoakRun(o)
	// The report is written however the soak ends once it has started: a
	// failure midway keeps what was sampled until then.
	t.Cleanup(func() { s.writeReport(t) })
	s.ns = tb.CreateNamespace(t, "soak")
	if err := s.createFlowSchemas(ctx, t); err != nil {
		t.Fatal(err)
	}

	// The components, as deploy/ runs them (through startProcess), at its
	// default intervals and verbosity: the soak measures what production
	// runs. Leader election is off, as in the fault tests: a leader that
	// cannot renew its Lease while the API server is down exits, for the
	// kubelet to restart, which no kubelet does here.
	// --profiling: heapProfiles reads each component's heap at each
	// segment's end.
	ac, names := startAdmissionController(t, s.ns, "--profiling")
	s.admission = ac
	agentAddr := freeAddr(t)
	s.agent = startProcess(t, processSpec{Binary: "rl-agent", Args: []string{"--listen-address=" + agentAddr, "--v=0", "--profiling"}})
	s.recommender = startComponent(t, "recommender", "--namespace="+s.ns, "--leader-elect=false",
		"--rl-agent-endpoint="+agentAddr, "--prometheus-address="+tb.PrometheusURL, "--v=0", "--profiling")
	s.updater = startUpdater(t, s.ns, names.lease, "--leader-elect=false", "--v=0", "--profiling")
	s.procs = []*component{s.recommender, s.updater, s.admission, s.agent}
	if s.stateDir = flagValue(s.agent.args, "state-dir"); s.stateDir == "" {
		t.Fatal("the agent runs without --state-dir")
	}

	setup := time.Now()
	s.createWorkloads(ctx, t)
	s.startEmulator(t)
	s.waitRunning(ctx, t)
	s.figure("set-up: pods running", time.Since(setup).Round(time.Second).String())
	s.waitRecommended(ctx)
	s.figure("set-up: total", time.Since(setup).Round(time.Second).String())

	s.run(ctx, t)
	s.finalChecks(ctx, t)
}

// createWorkloads creates the Deployments, one pod each, and their
// autoscalers: the first rl-share of them with spec.rl in mode On and
// gates that let the agent act within a minute (holdGates then keeps them
// in OnlineTraining). The webhook is registered before, so it admits
// every pod.
func (s *soakRun) createWorkloads(ctx context.Context, t *testing.T) {
	t.Helper()
	mpas, err := versioned.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	s.mpaClient = mpas
	s.rlMPAs = int(float64(s.o.mpas)*s.o.rlShare + 0.5)
	for i := range s.o.mpas {
		name := fmt.Sprintf("soak-%04d", i)
		if _, err := tb.Client.AppsV1().Deployments(s.ns).Create(ctx, soakDeployment(name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Deployment %s: %v", name, err)
		}
		if _, err := mpas.AutoscalingV1alpha1().MultidimPodAutoscalers(s.ns).Create(ctx, soakMPA(name, i < s.rlMPAs), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create MPA %s: %v", name, err)
		}
		if (i+1)%100 == 0 {
			t.Logf("created %d Deployments and autoscalers", i+1)
		}
	}
	s.figure("autoscalers", fmt.Sprintf("%d, %d of them with the agent (mode On)", s.o.mpas, s.rlMPAs))
}

func soakDeployment(name string) *appsv1.Deployment {
	lbls := map[string]string{"app": name, soakLabel: "workload"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					// Deleted pods go at once: KWOK runs no container.
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name:  "app",
						Image: "registry.invalid/aware/soak:1",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						ResizePolicy: []corev1.ContainerResizePolicy{
							{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
							{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired},
						},
					}},
				},
			},
		},
	}
}

// fastGates let a workload leave Bootstrapping after two episodes of two
// recommender ticks (agent_test.go's rlGates explains the bounds). The
// same gate would promote it to Serving two episodes later: holdGates
// stops that by widening the window once it is in OnlineTraining.
func fastGates() *v1alpha1.RLGates {
	return &v1alpha1.RLGates{
		Window: 2, EpisodeSteps: 2,
		PromoteMinMean: ptr.To(-1.0), PromoteMaxStdDev: ptr.To(2.0),
		RetrainBelowMean: ptr.To(-1.0), RetrainAboveStdDev: ptr.To(2.0),
	}
}

func soakMPA(name string, rl bool) *v1alpha1.MultidimPodAutoscaler {
	m := &v1alpha1.MultidimPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.MultidimPodAutoscalerSpec{
			ScaleTargetRef: &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			Policy:         &v1alpha1.PodUpdatePolicy{UpdateMode: ptr.To(v1alpha1.UpdateModeAuto)},
			Constraints: &v1alpha1.ScalingConstraints{
				Global: &v1alpha1.HorizontalScalingConstraints{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2)},
			},
			ResourcePolicy: &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{
				ContainerName: "*",
				MinAllowed:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				MaxAllowed:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			}}},
		},
	}
	if rl {
		m.Spec.RL = &v1alpha1.RLSpec{Mode: v1alpha1.RLModeOn, Gates: fastGates()}
	}
	return m
}

// startEmulator gives every pod of the workload usage, at --soak.rate per
// autoscaler split evenly over the Ready pods, until the test ends. Its
// tick is 10s, the metrics' resolution: a write per pod whose usage moved,
// not one per second.
func (s *soakRun) startEmulator(t *testing.T) {
	t.Helper()
	tr, err := sim.GenerateTrace(sim.Steady, sim.TraceOptions{Mean: s.o.rate * float64(s.o.mpas), Steps: 1, Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{soakLabel: "workload"})
	em, err := emulator.New(tb.Client, emulator.Config{Namespace: s.ns, Selector: sel, App: soakApp, Trace: tr, Tick: 10 * time.Second, Seed: s.o.seed})
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(logDir, "TestSoak-emulator.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tb.AddLogFile(t, logPath)
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(logf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	ran := make(chan error, 1)
	go func() { ran <- em.Run(ctx) }()
	s.emulator = em
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("emulator: %v", err)
		}
		logf.Close()
	})
}

// waitRunning waits, polling every 5s (a list of every pod each time), for
// a running pod of every Deployment.
func (s *soakRun) waitRunning(ctx context.Context, t *testing.T) {
	t.Helper()
	last := time.Now()
	err := framework.WaitFor(ctx, s.o.setupTimeout, 5*time.Second, "a running pod per Deployment", func(ctx context.Context) (bool, error) {
		pods, err := tb.RunningPods(ctx, s.ns, soakLabel+"=workload")
		if err != nil {
			return false, err
		}
		if time.Since(last) > time.Minute {
			t.Logf("set-up: %d of %d pods running", len(pods), s.o.mpas)
			last = time.Now()
		}
		return len(pods) >= s.o.mpas, fmt.Errorf("%d of %d running", len(pods), s.o.mpas)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitRecommended waits, within the set-up timeout, for a recommendation
// on every autoscaler, so that the soak starts from a steady state. It
// does not fail: the final checks judge the state that counts.
func (s *soakRun) waitRecommended(ctx context.Context) {
	start := time.Now()
	err := framework.WaitFor(ctx, s.o.setupTimeout, 10*time.Second, "a recommendation on every autoscaler", func(ctx context.Context) (bool, error) {
		l, err := s.mpaClient.AutoscalingV1alpha1().MultidimPodAutoscalers(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for i := range l.Items {
			if c := condition(&l.Items[i], v1alpha1.RecommendationProvided); c != nil && c.Status == corev1.ConditionTrue {
				n++
			}
		}
		return n == s.o.mpas, fmt.Errorf("%d of %d recommended", n, s.o.mpas)
	})
	v := time.Since(start).Round(time.Second).String()
	if err != nil {
		v += " (not all: " + err.Error() + ")"
	}
	s.figure("set-up: first recommendations after the pods ran", v)
}

// newSoakRun returns the run's state, its clock started.
func newSoakRun(o soakOptions) *soakRun {
	return &soakRun{o: o, samples: map[string]map[string][]soak.Point{}, lastCPU: map[string]cpuMark{}, cpu: map[string]float64{}}
}
