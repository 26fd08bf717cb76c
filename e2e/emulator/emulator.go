// Package emulator produces the load and the metrics of a real workload for
// pods that KWOK runs without containers. It watches one workload's pods in
// the API server, runs the simulator's per-pod model (sim.App.ServePod)
// against a load trace every tick, and publishes the result the way a
// cluster does:
//
//   - per-pod CPU and memory usage as KWOK usage annotations
//     (kwok.x-k8s.io/usage-cpu.<container>, kwok.x-k8s.io/usage-memory.<container>),
//     which KWOK turns into kubelet resource metrics, metrics-server into the
//     metrics.k8s.io API and Prometheus into container_* series;
//   - per-pod request counts, the current request rate and a request-duration
//     histogram on /metrics (see Collector), for Prometheus;
//   - an OOM kill (the model's peak working set above the memory limit)
//     is reported as the kubelet reports it (KWOK emulates no OOM kills
//     itself): the pod stays, and the killed container's status gets a
//     restartCount one higher, lastState.terminated with reason OOMKilled
//     and exit code 137, and a new running state. That status is what the
//     recommender reads (recommender/controller/observe.go), and the pod's
//     requests, resized or not, are those of the restarted container.
//
// Arrivals are fluid: the trace rate of the current window is split evenly
// over the Ready pods (round-robin load balancing), without the simulator's
// Poisson draw, so that a test sees the load it asked for. A pod that became
// Ready less than App.StartupDelay ago gets no traffic and uses its base
// memory, as in the simulator. A restarted container (restartCount grew)
// loses its backlog. CFS sharing of an oversubscribed node is not modelled:
// each pod's capacity is its CPU limit (or NodeCPU without one).
package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// KWOK's usage annotations; a ".<container>" suffix scopes one to a container.
const (
	UsageCPUAnnotation    = "kwok.x-k8s.io/usage-cpu"
	UsageMemoryAnnotation = "kwok.x-k8s.io/usage-memory"
)

// Config describes the emulated workload.
type Config struct {
	// Namespace and Selector pick the workload's pods.
	Namespace string
	Selector  labels.Selector
	// App is the per-request model. App.Container names the container that
	// serves (the pod's first container when empty or absent). Replicas,
	// Requests and Limits are ignored: they are read from the pods.
	App sim.App
	// Trace is the workload's total offered load; its windows start when Run
	// starts (or SetTrace is called). A zero Trace.Step means Tick.
	Trace sim.Trace
	// Tick is the model window and how often usage is published (default 1s).
	Tick time.Duration
	// Timeout is when a queued request gives up (default 30s).
	Timeout time.Duration
	// NodeCPU is the capacity of a container without a CPU limit, in cores
	// (default 8, the testbed's node size).
	NodeCPU float64
	// Seed drives the peak working-set noise.
	Seed uint64
}

// Emulator runs one workload. It is a prometheus.Collector (see metrics.go).
type Emulator struct {
	cfg    Config
	client kubernetes.Interface
	rng    *rand.Rand

	mu         sync.Mutex
	trace      sim.Trace
	traceStart time.Time
	pods       map[types.UID]*podState
	ooms       map[string]float64 // pod name -> kills, kept after deletion
	ticks      int
	lastErr    error
}

type podState struct {
	name      string
	restarts  int32
	backlog   float64
	published string // the annotation values last written, "cpu/memory"
	// killed is, after an OOM kill was written, the restart count that
	// reports it; until the informer shows it the container is
	// restarting: it serves nothing and is not killed again.
	killed int32

	rate                float64 // arrivals/s in the last window
	inFlight            float64 // requests the pod held in the last window (sim.PodWindow.InFlight)
	usage               [2]float64
	arrivals, completed float64
	timedOut, failed    float64
	latencySum          float64
	buckets             []float64 // cumulative completed requests ≤ LatencyBuckets[i]
}

// New checks cfg and returns an emulator that Run starts.
func New(client kubernetes.Interface, cfg Config) (*Emulator, error) {
	if cfg.Namespace == "" || cfg.Selector == nil || cfg.Selector.Empty() {
		return nil, errors.New("emulator: a namespace and a non-empty selector are required")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.NodeCPU <= 0 {
		cfg.NodeCPU = 8
	}
	app := cfg.App
	if app.Container == "" {
		app.Container = "-" // Validate wants one; podContainer falls back to the first
	}
	if err := app.Validate(); err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	if len(cfg.Trace.Rates) == 0 {
		return nil, errors.New("emulator: the trace has no windows")
	}
	if cfg.Trace.Step <= 0 {
		cfg.Trace.Step = cfg.Tick
	}
	return &Emulator{
		cfg:    cfg,
		client: client,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x656d75)),
		trace:  cfg.Trace,
		pods:   map[types.UID]*podState{},
		ooms:   map[string]float64{},
	}, nil
}

// SetTrace replaces the load trace; its window 0 starts now.
func (e *Emulator) SetTrace(t sim.Trace) {
	if t.Step <= 0 {
		t.Step = e.cfg.Tick
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.trace, e.traceStart = t, time.Now()
}

// Run watches the pods and steps the model every tick until ctx ends.
func (e *Emulator) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0,
		informers.WithNamespace(e.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = e.cfg.Selector.String() }))
	lister := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("emulator: %v cache did not sync", typ)
		}
	}
	e.mu.Lock()
	if e.traceStart.IsZero() {
		e.traceStart = time.Now()
	}
	e.mu.Unlock()
	t := time.NewTicker(e.cfg.Tick)
	defer t.Stop()
	for {
		if err := e.step(ctx, lister, time.Now()); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Emulator step")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Ticks returns how many windows have been modelled, and the last error a
// step met (nil if the last step was clean).
func (e *Emulator) Ticks() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ticks, e.lastErr
}

// OOMKills returns how many pods the emulator has killed.
func (e *Emulator) OOMKills() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n float64
	for _, k := range e.ooms {
		n += k
	}
	return int(n)
}

// Rate returns the total offered load (requests/s) at now.
func (e *Emulator) Rate(now time.Time) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rateLocked(now)
}

func (e *Emulator) rateLocked(now time.Time) float64 {
	return e.trace.Rate(int(now.Sub(e.traceStart) / e.trace.Step))
}

// write is one API call the step decided on, made without the lock: a
// merge patch of the pod, or of its status.
type write struct {
	pod    string
	patch  []byte
	status bool   // patch the status subresource (an OOM kill)
	record func() // on success
}

func (e *Emulator) step(ctx context.Context, lister corelisters.PodLister, now time.Time) error {
	pods, err := lister.Pods(e.cfg.Namespace).List(e.cfg.Selector)
	if err != nil {
		return err
	}
	writes := e.model(pods, now)
	var errs []error
	for _, w := range writes {
		var sub []string
		if w.status {
			sub = []string{"status"}
		}
		_, err := e.client.CoreV1().Pods(e.cfg.Namespace).Patch(ctx, w.pod, types.MergePatchType, w.patch, metav1.PatchOptions{}, sub...)
		switch {
		case err == nil:
			e.mu.Lock()
			w.record()
			e.mu.Unlock()
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone or changed meanwhile (an OOM kill's patch is made at
			// the resourceVersion it was computed from): the informer
			// will tell, and the next step decides again.
		default:
			errs = append(errs, fmt.Errorf("pod %s: %w", w.pod, err))
		}
	}
	e.mu.Lock()
	e.ticks++
	e.lastErr = errors.Join(errs...)
	e.mu.Unlock()
	return errors.Join(errs...)
}

// model advances every pod by one window and returns the writes to make.
func (e *Emulator) model(pods []*corev1.Pod, now time.Time) []write {
	e.mu.Lock()
	defer e.mu.Unlock()
	app := &e.cfg.App
	dt := e.cfg.Tick.Seconds()
	seen := make(map[types.UID]bool, len(pods))
	var serving []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		seen[p.UID] = true
		st := e.pods[p.UID]
		if st == nil {
			st = &podState{name: p.Name, buckets: make([]float64, len(LatencyBuckets))}
			e.pods[p.UID] = st
		}
		r := restarts(p)
		if r != st.restarts {
			st.restarts, st.backlog = r, 0 // the container's queue died with it
		}
		if st.killed != 0 && r >= st.killed {
			st.killed = 0 // the kill is in the status: the container runs again
		}
		if since, ok := readySince(p); ok && st.killed == 0 && now.Sub(since) >= app.StartupDelay {
			serving = append(serving, p)
		}
	}
	for uid := range e.pods {
		if !seen[uid] {
			delete(e.pods, uid)
		}
	}
	total := e.rateLocked(now)
	var lam float64
	if len(serving) > 0 {
		lam = total / float64(len(serving))
	}
	isServing := make(map[types.UID]bool, len(serving))
	for _, p := range serving {
		isServing[p.UID] = true
	}
	var writes []write
	timeout := e.cfg.Timeout.Seconds()
	for _, p := range pods {
		st := e.pods[p.UID]
		if st == nil || st.killed != 0 {
			continue
		}
		c := podContainer(p, app.Container)
		var cpu, mem float64
		if !isServing[p.UID] {
			st.rate, st.backlog, st.inFlight = 0, 0, 0
			mem = app.BaseMemory
		} else {
			capacity := e.cfg.NodeCPU
			if l, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && l.MilliValue() > 0 {
				capacity = math.Min(float64(l.MilliValue())/1000, e.cfg.NodeCPU)
			}
			var memLimit float64
			if l, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				memLimit = float64(l.Value())
			}
			// The emulator publishes expected counts: the window's
			// arrivals are its mean, lam·dt.
			w := app.ServePod(sim.PodInput{
				Rate: lam, Arrived: lam * dt, Backlog: st.backlog,
				CPU: capacity, MemoryLimit: memLimit, Z: e.rng.NormFloat64(),
			}, dt, timeout)
			st.backlog = w.Backlog
			st.rate = lam
			st.inFlight = w.InFlight
			st.arrivals += lam * dt
			st.completed += w.Completed
			st.timedOut += w.TimedOut
			st.failed += w.Failed
			st.latencySum += w.Completed*w.MeanLatency(app) + w.TimedOut*timeout
			for i, b := range LatencyBuckets {
				st.buckets[i] += w.Completed * w.LatencyCDF(app, b)
				if b >= timeout {
					st.buckets[i] += w.TimedOut
				}
			}
			cpu, mem = w.Usage.CPU, w.Usage.Memory
			if w.OOMKilled {
				// The kill lost the requests the pod held.
				st.inFlight = 0
				patch, after, err := oomKillPatch(p, c.Name, now)
				if err != nil {
					// A Running pod whose status lacks the container:
					// nothing a kubelet would restart.
					continue
				}
				name := p.Name
				writes = append(writes, write{pod: name, patch: patch, status: true, record: func() {
					st.killed = after
					e.ooms[name]++
				}})
				continue
			}
		}
		st.usage = [2]float64{cpu, mem}
		if pub := st.published; pub == "" || changed(pub, cpu, mem) {
			val := formatUsage(cpu, mem)
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
				UsageCPUAnnotation + "." + c.Name:    val[0],
				UsageMemoryAnnotation + "." + c.Name: val[1],
			}}})
			writes = append(writes, write{pod: p.Name, patch: patch, record: func() { st.published = val[0] + "/" + val[1] }})
		}
	}
	return writes
}

// oomKillPatch is the status patch of a kubelet that has restarted
// container name of p after an OOM kill at now: its restartCount one
// higher, lastState terminated with reason OOMKilled (exit code 137, as
// for SIGKILL) over the run that ended, and a new running state. The
// containerStatuses list is replaced whole (a merge patch has no merge key
// for it), so the patch carries p's resourceVersion: made on a status that
// changed meanwhile it fails with a conflict rather than undo the change.
// after is the pod's restart count once the patch is in.
func oomKillPatch(p *corev1.Pod, name string, now time.Time) (patch []byte, after int32, err error) {
	statuses := make([]corev1.ContainerStatus, len(p.Status.ContainerStatuses))
	found := false
	for i, cs := range p.Status.ContainerStatuses {
		cs = *cs.DeepCopy()
		if cs.Name == name {
			found = true
			started := metav1.NewTime(now)
			if r := cs.State.Running; r != nil {
				started = r.StartedAt
			} else if p.Status.StartTime != nil {
				started = *p.Status.StartTime
			}
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "OOMKilled", StartedAt: started, FinishedAt: metav1.NewTime(now),
			}}
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
			cs.RestartCount++
		}
		statuses[i] = cs
	}
	if !found {
		return nil, 0, fmt.Errorf("pod %s has no status for container %s", p.Name, name)
	}
	body := map[string]any{"status": map[string]any{"containerStatuses": statuses}}
	if rv := p.ResourceVersion; rv != "" {
		body["metadata"] = map[string]any{"resourceVersion": rv}
	}
	patch, err = json.Marshal(body)
	return patch, restarts(p) + 1, err
}

// formatUsage renders usage as KWOK annotation quantities: whole millicores
// (at least 1m) and whole KiB.
func formatUsage(cpu, mem float64) [2]string {
	return [2]string{
		fmt.Sprintf("%dm", max(1, int64(math.Round(cpu*1000)))),
		fmt.Sprintf("%dKi", max(1, int64(math.Round(mem/1024)))),
	}
}

// changed reports whether usage moved enough from what was published to be
// worth a write: 2% and 2m of CPU, or 2% and 1MiB of memory.
func changed(published string, cpu, mem float64) bool {
	var oldCPU, oldMem int64
	if _, err := fmt.Sscanf(published, "%dm/%dKi", &oldCPU, &oldMem); err != nil {
		return true
	}
	dc := math.Abs(cpu*1000 - float64(oldCPU))
	dm := math.Abs(mem/1024 - float64(oldMem))
	return (dc >= 2 && dc >= 0.02*float64(oldCPU)) || (dm >= 1024 && dm >= 0.02*float64(oldMem))
}

// podContainer returns the container named name, or the pod's first.
func podContainer(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	return &p.Spec.Containers[0]
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// readySince returns when the pod last became Ready, if it is.
func readySince(p *corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time, c.Status == corev1.ConditionTrue
		}
	}
	return time.Time{}, false
}
