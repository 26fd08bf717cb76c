package emulator

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

const mib = 1 << 20

func testPod(name, memLimit string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "w"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse(memLimit)},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute)),
		}}, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: podStart}},
		}}},
	}
}

// podStart is when testPod's container started.
var podStart = metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))

func TestStepPublishesUsageAndKillsOnOOM(t *testing.T) {
	small, big := testPod("small", "70Mi"), testPod("big", "1Gi")
	client := fake.NewClientset(small, big)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range []*corev1.Pod{small, big} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	app := sim.App{Name: "w", Container: "main", Demand: sim.Demand{CPUSeconds: 0.01, IOWait: 0.05, BaseMemory: 64 * mib, MemoryPerRequest: 1 * mib}}
	e, err := New(client, Config{
		Namespace: "ns", Selector: labels.SelectorFromSet(labels.Set{"app": "w"}), App: app,
		Trace: sim.Trace{Rates: []float64{200}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.traceStart = time.Now()
	ctx := context.Background()
	if err := e.step(ctx, corelisters.NewPodLister(idx), time.Now()); err != nil {
		t.Fatal(err)
	}
	// 100 req/s per pod, 10 ms each on a 1-core limit: 1 core·s/s ≈ 0.98
	// utilisation, about 100 requests in flight: far above 70Mi. The
	// kubelet restarts the container and says why; the pod stays.
	killed, err := client.CoreV1().Pods("ns").Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the OOM-killed pod: %v", err)
	}
	if e.OOMKills() != 1 {
		t.Errorf("OOMKills = %d, want 1", e.OOMKills())
	}
	checkOOMKilled(t, killed)
	if _, ok := killed.Annotations[UsageMemoryAnnotation+".main"]; ok {
		t.Errorf("usage published for the killed container: %v", killed.Annotations)
	}
	p, err := client.CoreV1().Pods("ns").Get(ctx, "big", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpu := p.Annotations[UsageCPUAnnotation+".main"]
	if cpu == "" || p.Annotations[UsageMemoryAnnotation+".main"] == "" {
		t.Fatalf("no usage annotations: %v", p.Annotations)
	}
	if q := resource.MustParse(cpu); q.MilliValue() < 900 || q.MilliValue() > 1000 {
		t.Errorf("cpu usage %s, want about 1 core", cpu)
	}
	want := `
# HELP aware_emulator_request_rate Requests per second the pod receives in the current window.
# TYPE aware_emulator_request_rate gauge
aware_emulator_request_rate{namespace="ns",pod="big"} 100
aware_emulator_request_rate{namespace="ns",pod="small"} 100
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), RequestRateMetric); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e, RequestDurationMetric); n != 2 {
		t.Errorf("%d duration histograms, want 2", n)
	}
	// The in-flight gauge is the requests the published working set holds:
	// memory = base + per request × in flight, the line a what-if fits;
	// the killed pod lost its requests.
	inFlight := e.pods[big.UID].inFlight
	mem := resource.MustParse(p.Annotations[UsageMemoryAnnotation+".main"])
	if want := app.BaseMemory + app.MemoryPerRequest*inFlight; inFlight < 5 || math.Abs(float64(mem.Value())-want) > 1<<10 {
		t.Errorf("big: %g requests in flight and a working set of %d bytes, want at least 5 and %.0f", inFlight, mem.Value(), want)
	}
	wantInFlight := fmt.Sprintf(`
# HELP %[1]s Modelled requests in flight in the pod in the current window: its throughput times its mean response time (Little's law), as an app's own in-flight gauge counts them.
# TYPE %[1]s gauge
%[1]s{namespace="ns",pod="big"} %[2]s
%[1]s{namespace="ns",pod="small"} 0
`, InFlightMetric, strconv.FormatFloat(inFlight, 'g', -1, 64))
	if err := testutil.CollectAndCompare(e, strings.NewReader(wantInFlight), InFlightMetric); err != nil {
		t.Error(err)
	}
}

// checkOOMKilled fails the test unless p's container main reports one OOM
// kill as the kubelet does: restartCount 1, lastState.terminated OOMKilled
// (exit code 137) over the run that began at podStart, running again.
func checkOOMKilled(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.RestartCount != 1 {
		t.Errorf("restartCount %d, want 1", cs.RestartCount)
	}
	term := cs.LastTerminationState.Terminated
	if term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Fatalf("lastState %+v, want terminated OOMKilled with exit code 137", cs.LastTerminationState)
	}
	if !term.StartedAt.Equal(&podStart) || !term.FinishedAt.After(podStart.Time) {
		t.Errorf("terminated from %v to %v, want from %v to later", term.StartedAt, term.FinishedAt, podStart)
	}
	if r := cs.State.Running; r == nil || r.StartedAt.Time.Before(term.FinishedAt.Time) {
		t.Errorf("state %+v, want running since the kill", cs.State)
	}
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		t.Errorf("phase %s, deletionTimestamp %v: the pod must run on", p.Status.Phase, p.DeletionTimestamp)
	}
}

// TestOOMKillRestartsOnce checks that a kill written is not written again
// while the informer still shows the status before it (the container is
// restarting), and that the restarted container, with its new
// restartCount, serves again from an empty queue.
// newTestEmulator returns an emulator of a 10-ms, 1-MiB-a-request app at
// rate requests/s over pods, its fake client and its pod cache.
func newTestEmulator(t *testing.T, rate float64, pods ...*corev1.Pod) (*Emulator, *fake.Clientset, cache.Indexer) {
	t.Helper()
	objs := make([]runtime.Object, len(pods))
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i, p := range pods {
		objs[i] = p
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(objs...)
	app := sim.App{Name: "w", Container: "main", Demand: sim.Demand{CPUSeconds: 0.01, IOWait: 0.05, BaseMemory: 64 * mib, MemoryPerRequest: 1 * mib}}
	e, err := New(client, Config{
		Namespace: "ns", Selector: labels.SelectorFromSet(labels.Set{"app": "w"}), App: app,
		Trace: sim.Trace{Rates: []float64{rate}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.traceStart = time.Now()
	return e, client, idx
}

func TestOOMKillRestartsOnce(t *testing.T) {
	e, client, idx := newTestEmulator(t, 100, testPod("small", "70Mi"))
	ctx := context.Background()
	lister := corelisters.NewPodLister(idx)
	now := time.Now()
	// Two steps on the stale cache: one kill.
	for i := range 2 {
		if err := e.step(ctx, lister, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.OOMKills(); n != 1 {
		t.Fatalf("OOMKills = %d after two steps on the cache from before the kill, want 1", n)
	}
	killed, err := client.CoreV1().Pods("ns").Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOOMKilled(t, killed)
	// The informer catches up: the container serves again (and, at this
	// load on 70Mi, is killed again, the second kill counted on top).
	if err := idx.Update(killed); err != nil {
		t.Fatal(err)
	}
	if err := e.step(ctx, lister, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := e.OOMKills(); n != 2 {
		t.Errorf("OOMKills = %d once the restart is seen, want 2", n)
	}
	again, err := client.CoreV1().Pods("ns").Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := again.Status.ContainerStatuses[0].RestartCount; r != 2 {
		t.Errorf("restartCount %d after the second kill, want 2", r)
	}
}

// TestInFlightGaugeFollowsServing: a serving pod reports the model's
// requests in flight; once it stops serving (not Ready) it holds none.
func TestInFlightGaugeFollowsServing(t *testing.T) {
	pod := testPod("web", "1Gi")
	e, _, idx := newTestEmulator(t, 50, pod)
	ctx, lister, now := context.Background(), corelisters.NewPodLister(idx), time.Now()
	inFlight := func() float64 {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(e)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == InFlightMetric && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no single %s series", InFlightMetric)
		return 0
	}
	if err := e.step(ctx, lister, now); err != nil {
		t.Fatal(err)
	}
	// 50 requests/s of 10 ms CPU and 50 ms I/O wait: about 3 in flight.
	if n := inFlight(); n < 1 {
		t.Fatalf("%g requests in flight while serving 50/s, want at least 1", n)
	}
	unready := pod.DeepCopy()
	unready.Status.Conditions[0].Status = corev1.ConditionFalse
	if err := idx.Update(unready); err != nil {
		t.Fatal(err)
	}
	if err := e.step(ctx, lister, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := inFlight(); n != 0 {
		t.Errorf("%g requests in flight in a pod that no longer serves, want 0", n)
	}
}

func TestChanged(t *testing.T) {
	pub := formatUsage(0.5, 100*mib)
	s := pub[0] + "/" + pub[1]
	if changed(s, 0.501, 100*mib) || changed(s, 0.5, 100.5*mib) {
		t.Error("tiny changes republished")
	}
	if !changed(s, 0.6, 100*mib) || !changed(s, 0.5, 110*mib) {
		t.Error("large changes not republished")
	}
}
