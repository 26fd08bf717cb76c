//go:build benchreal

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
	"github.com/aware-k8s/aware/e2e/testapp"
	"github.com/aware-k8s/aware/hack/benchreal/agent"
	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/hack/benchreal/simside"
	"github.com/aware-k8s/aware/hack/benchreal/slo"
	"github.com/aware-k8s/aware/hack/benchvpa/bench"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	"github.com/aware-k8s/aware/recommender/controller"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type harness struct {
	o      options
	tb     *framework.Testbed
	env    nodeinstall.Env
	logDir string
	mpas   versioned.Interface
	// ensembleDir is the node directory holding the ensemble's members.
	ensembleDir string
	// vpaPIDs are VPA's processes (startVPA), which run on the host for
	// the whole invocation: their CPU is a part of every run's CPUShare.
	vpaPIDs []int
}

// hasMPA: the policy's autoscaler is a MultidimPodAutoscaler.
func hasMPA(policy string) bool { return simside.IsFused(policy) || agent.Is(policy) }

// namespace of one run: a fresh one each time, so nothing of a run (a
// VPA checkpoint, an HPA's history) reaches the next.
func namespace(policy string, rep int) string {
	return fmt.Sprintf("bench-real-%s-%d", policySlug(policy), rep)
}

// trial runs the trace once against policy.
func (h *harness) trial(ctx context.Context, policy string, rep, order int) (result.Run, error) {
	ns := namespace(policy, rep)
	r := result.Run{Policy: policy, Rep: rep, Order: order, SLO: h.o.slo.Seconds(), Window: h.o.window.Seconds()}
	if h.o.mpa.fitToNodes && hasMPA(policy) {
		// Another policy than the same one without the fit: it is
		// reported, paired and merged under its own name.
		r.Policy += simside.FitSuffix
	}
	in := &nodeinstall.Installer{TB: h.tb, Env: h.env}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := h.deleteNamespace(c, ns); err != nil {
			logf("deleting %s: %v", ns, err)
		}
	}()
	if err := h.deleteNamespace(ctx, ns); err != nil {
		return r, err
	}
	if hasMPA(policy) {
		if err := h.setVariant(ctx, variantOf(policy)); err != nil {
			return r, err
		}
	}
	if agent.Is(policy) {
		if err := h.prepareAgent(ctx, policy); err != nil {
			return r, err
		}
	}
	objects := h.appManifest(ns)
	if h.o.mpa.autoscalerAfter <= 0 {
		objects += h.autoscalerManifest(ns, policy)
	}
	if _, err := in.Kubectl(ctx, strings.NewReader(objects), "apply", "-f", "-"); err != nil {
		return r, err
	}
	if err := framework.WaitFor(ctx, 3*time.Minute, 2*time.Second, "the app ready in "+ns, func(ctx context.Context) (bool, error) {
		d, err := h.tb.Client.AppsV1().Deployments(ns).Get(ctx, "testapp", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.ReadyReplicas >= 1, nil
	}); err != nil {
		return r, err
	}
	var queriesBefore map[string]float64
	checkRecommender := h.o.mpa.sloMetrics && hasMPA(policy)
	if checkRecommender {
		queriesBefore = h.recommenderQueries(ctx)
	}
	if h.o.mpa.loadPhase > 0 && hasMPA(policy) {
		if err := h.afterLoop(ctx, h.o.mpa.loadPhase); err != nil {
			return r, err
		}
		r.LoadPhase = h.o.mpa.loadPhase.Seconds()
	}
	cpuBefore := readCPU(h.tb.Dir, h.vpaPIDs)
	start := time.Now()
	r.Start = start.UTC().Format(time.RFC3339)
	records := filepath.Join(h.o.out, fmt.Sprintf("loadgen-%s-%d.jsonl", policySlug(policy), rep))
	lg := exec.Command(h.o.bin.loadgen,
		"--target", fmt.Sprintf("http://127.0.0.1:%d/", h.o.app.port),
		"--trace", h.o.trace, "--mean", fmt.Sprint(h.o.mean), "--trace-step", h.o.window.String(),
		"--seed", fmt.Sprint(h.o.seed+uint64(rep)), "--duration", h.o.duration.String(),
		"--window", h.o.window.String(), "--timeout", "10s", "--records", records,
		"--requests-per-connection", fmt.Sprint(h.o.app.perConnection))
	logFile, err := os.Create(filepath.Join(h.logDir, fmt.Sprintf("loadgen-%d.log", order)))
	if err != nil {
		return r, err
	}
	defer logFile.Close()
	lg.Stdout, lg.Stderr = logFile, logFile
	if err := lg.Start(); err != nil {
		return r, fmt.Errorf("start loadgen: %w", err)
	}
	// The autoscaler that arrives late: created while the load runs.
	late := make(chan error, 1)
	lateCtx, cancelLate := context.WithCancel(ctx)
	defer cancelLate()
	if h.o.mpa.autoscalerAfter > 0 {
		r.AutoscalerAfter = h.o.mpa.autoscalerAfter.Seconds()
		go func() {
			select {
			case <-lateCtx.Done():
				late <- lateCtx.Err()
			case <-time.After(h.o.mpa.autoscalerAfter):
				_, err := in.Kubectl(lateCtx, strings.NewReader(h.autoscalerManifest(ns, policy)), "apply", "-f", "-")
				late <- err
			}
		}()
	} else {
		late <- nil
	}
	s := newSampler(h.tb, ns, "testapp", start, h.o.window)
	s.policy, s.sloMetrics, s.promWindow = policy, h.o.mpa.sloMetrics, h.o.promWindow()
	s.autoscalerAfter = h.o.mpa.autoscalerAfter
	if hasMPA(policy) {
		s.mpas = h.mpas
	}
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.loop(sctx)
	}()
	// Interrupted, the load generator stops sending and writes the
	// windows it has: SIGINT, not the context's kill.
	waited := make(chan error, 1)
	go func() { waited <- lg.Wait() }()
	var lgErr error
	select {
	case lgErr = <-waited:
	case <-ctx.Done():
		_ = lg.Process.Signal(os.Interrupt)
		<-waited
		lgErr = ctx.Err()
	}
	stopSampling()
	wg.Wait()
	cpuAfter := readCPU(h.tb.Dir, h.vpaPIDs)
	if lgErr != nil {
		return r, fmt.Errorf("loadgen: %w (log %s)", lgErr, logFile.Name())
	}
	if err := <-late; err != nil {
		return r, fmt.Errorf("--autoscaler-after: creating the autoscaler: %w", err)
	}
	recs, err := readRecords(records)
	if err != nil {
		return r, err
	}
	r.CPU = cpuAfter.minus(cpuBefore)
	if lg.ProcessState != nil {
		r.CPU.LoadGen = (lg.ProcessState.UserTime() + lg.ProcessState.SystemTime()).Seconds()
	}
	r.Windows = s.windows(recs)
	r.StartupSeconds = s.startups()
	if h.o.mpa.sloMetrics {
		r.SLOMetrics = true
		looks := make([]slo.Look, len(r.Windows))
		for i, w := range r.Windows {
			looks[i] = slo.Look{Traffic: w.Sent > 0, Rate: w.SLORate, RateOK: w.SLORate > 0, P95: w.SLOP95, P95OK: w.SLOP95 > 0, Reason: w.ScalingReason}
		}
		// Two windows of warm-up: the first replica's series need two
		// scrapes and the rate() range needs two samples.
		missing := []string{slo.Judge(looks, 2).Missing()}
		if checkRecommender {
			if after := h.recommenderQueries(ctx); queriesBefore != nil && after != nil {
				r.RecommenderQueries = slo.Delta(queriesBefore, after)
				missing = append(missing, slo.RecommenderMissing(r.RecommenderQueries))
			}
		}
		if r.SLOMissing = strings.Join(slices.DeleteFunc(missing, func(m string) bool { return m == "" }), "; "); r.SLOMissing != "" {
			logf("WARNING: %s repetition %d: the SLO inputs were MISSING: %s", policy, rep, r.SLOMissing)
		}
	}
	decisions, events := h.namespaceEvents(ctx, ns, start)
	if hasMPA(policy) {
		r.Decisions = decisions
	}
	r.Events = events
	if h.o.mpa.whatif && slices.Contains(whatifPolicies, policy) {
		// A failed what-if leaves the run without it: the run's
		// measurements stand.
		if r.WhatIf, err = h.whatIf(ctx, ns, policy, rep, start); err != nil {
			logf("WARNING: %s repetition %d: the what-if failed: %v", policy, rep, err)
		} else if r.WhatIf.Refused != "" {
			logf("%s repetition %d: the what-if's fit refused: %s", policy, rep, r.WhatIf.Refused)
		}
	}
	var ok float64
	for _, w := range r.Windows {
		ok += float64(w.OK)
	}
	if ok > 0 {
		r.CPUSecondsPerRequest = r.CPUUsedSeconds() / ok
	}
	return r, nil
}

// namespaceEvents lists the events of ns once, in time order, split into
// the recommender's RecommendationChanged decisions and every other event.
// A failure to list is logged and leaves the run without them: the run's
// measurements stand without their explanation.
func (h *harness) namespaceEvents(ctx context.Context, ns string, start time.Time) ([]result.Decision, []result.Event) {
	l, err := h.tb.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		logf("listing the events in %s: %v", ns, err)
		return nil, nil
	}
	slices.SortStableFunc(l.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	var decisions []result.Decision
	var events []result.Event
	for _, e := range l.Items {
		at := eventTime(e).Sub(start).Seconds()
		if e.Reason == controller.ReasonRecommendationChanged {
			decisions = append(decisions, result.Decision{At: at, Count: e.Count, Message: e.Message})
			continue
		}
		src := e.Source.Component
		if src == "" {
			src = e.ReportingController
		}
		events = append(events, result.Event{
			At: at, Count: e.Count, Type: e.Type, Reason: e.Reason,
			Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Source: src, Message: e.Message,
		})
	}
	return decisions, events
}

// eventTime is an event's last time (its series' for the new API).
func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

func (h *harness) deleteNamespace(ctx context.Context, ns string) error {
	c := h.tb.Client.CoreV1().Namespaces()
	if err := c.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := framework.WaitFor(ctx, 3*time.Minute, time.Second, ns+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return err
	}
	// The port is free again and the machine quiet before the next run.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(h.o.cooldown):
		return nil
	}
}

func readRecords(path string) ([]loadgen.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []loadgen.Record
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var r loadgen.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no records", path)
	}
	return out, nil
}

// appManifest is the app's Deployment and what it needs, the same for
// every policy: one replica of --initial-cpu and 96Mi, enough for the
// trace's first third; the CPU limit equals the request, so a replica
// cannot borrow idle cores and its size matters (the autoscalers scale
// limits with requests).
func (h *harness) appManifest(ns string) string {
	app := nodeinstall.TestApp{
		Namespace: ns, Env: h.env, Port: h.o.app.port,
		Args: []string{"--cpu=" + h.o.app.cpu.String(), "--memory-per-request=" + h.o.app.memPerRequest, "--base-memory=" + h.o.app.baseMemory,
			"--startup-delay=" + h.o.app.startupDelay.String(), "--shutdown-timeout=10s"},
		CPU: h.o.app.initialCPU, CPULimit: h.o.app.initialCPU, Memory: "96Mi", MemoryLimit: "256Mi",
	}
	// Every policy's app exports its metrics the same way, so the runs
	// differ only in the autoscaler.
	if h.o.mpa.sloMetrics {
		app.FileSD = h.fileSDDir()
	}
	return app.Manifest()
}

// autoscalerManifest is the policy's HPA, VPA or MultidimPodAutoscaler of
// the app, with the same bounds for every policy: 1-8 replicas, 50m-1
// CPU, 64Mi-1Gi per container.
func (h *harness) autoscalerManifest(ns, policy string) string {
	var b strings.Builder
	hpa := `---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: testapp, namespace: %[1]s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: testapp}
  minReplicas: 1
  maxReplicas: 8
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
`
	vpa := `---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: testapp, namespace: %[1]s}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: testapp}
  updatePolicy: {updateMode: InPlaceOrRecreate, minReplicas: 1}
  resourcePolicy:
    containerPolicies:
    - containerName: '*'
      minAllowed: {cpu: 50m, memory: 64Mi}
      maxAllowed: {cpu: "1", memory: 1Gi}
      controlledResources: [cpu, memory]
`
	switch {
	case policy == "hpa":
		fmt.Fprintf(&b, hpa, ns)
	case policy == "vpa":
		fmt.Fprintf(&b, vpa, ns)
	case policy == "hpa+vpa":
		fmt.Fprintf(&b, hpa, ns)
		fmt.Fprintf(&b, vpa, ns)
	case hasMPA(policy):
		m := nodeinstall.MPASpec{Namespace: ns, MinReplicas: 1, MaxReplicas: 8}
		if h.o.mpa.sloMetrics {
			m.SLOMetric, m.SLOTarget = testapp.RequestDurationMetric, h.o.slo
		}
		if agent.Is(policy) {
			m.Mode, m.Gates = agent.InitialMode(policy), agent.Gates()
		}
		b.WriteString(m.Manifest())
	}
	return b.String()
}

// cpuTimes are cumulative CPU seconds by part of the machine.
type cpuTimes struct {
	at                                 time.Time
	machine, steal, controlPlane, node float64
	pods, vpa                          float64
}

func (a cpuTimes) minus(b cpuTimes) result.CPUShare {
	return result.CPUShare{
		Machine: a.machine - b.machine, ControlPlane: a.controlPlane - b.controlPlane,
		Node: a.node - b.node, Components: a.pods - b.pods, VPA: a.vpa - b.vpa, Steal: a.steal - b.steal, Wall: a.at.Sub(b.at).Seconds(),
	}
}

// readCPU reads the machine's CPU time (/proc/stat), the testbed's
// processes' (its pids/), the node's kubelet and containerd (node/pids/),
// every pod's (the kubepods cgroup) and VPA's processes (vpaPIDs). A part
// that cannot be read is 0.
func readCPU(dir string, vpaPIDs []int) cpuTimes {
	c := cpuTimes{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		c.machine, c.steal = machineCPU(strings.SplitN(string(b), "\n", 2)[0])
	}
	c.controlPlane = pidsCPU(filepath.Join(dir, "pids"))
	c.node = pidsCPU(filepath.Join(dir, "node", "pids"))
	for _, pid := range vpaPIDs {
		c.vpa += procCPU(strconv.Itoa(pid))
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/kubepods/cpuacct.usage"); err == nil {
		var ns float64
		fmt.Sscan(strings.TrimSpace(string(b)), &ns)
		c.pods = ns / 1e9
	}
	return c
}

// machineCPU reads /proc/stat's "cpu" line (in USER_HZ ticks, 100 a
// second): the time the machine's CPUs ran anything, and the time the
// hypervisor stole from them. Busy is user, nice, system, irq and
// softirq; idle and iowait are not; steal is reported apart; guest and
// guest_nice are already in user and nice.
func machineCPU(line string) (busy, steal float64) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		var x float64
		if _, err := fmt.Sscan(v, &x); err != nil {
			continue
		}
		switch i {
		case 0, 1, 2, 5, 6: // user, nice, system, irq, softirq
			busy += x / 100
		case 7: // steal
			steal += x / 100
		}
	}
	return busy, steal
}

// pidsCPU sums the CPU time of the processes whose PID files are in dir
// (/proc/PID/stat, as make bench-vpa reads it); a process gone is 0.
func pidsCPU(dir string) float64 {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	var total float64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		total += procCPU(strings.TrimSpace(string(b)))
	}
	return total
}

// procCPU is the CPU time of process pid (/proc/PID/stat); 0 when gone.
func procCPU(pid string) float64 {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	cpu, err := bench.ParseProcStat(string(stat))
	if err != nil {
		return 0
	}
	return cpu
}
