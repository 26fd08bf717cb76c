//go:build e2e && soak

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"

	"github.com/aware-k8s/aware/e2e/emulator"
	"github.com/aware-k8s/aware/e2e/soak"
	"github.com/aware-k8s/aware/hack/benchvpa/bench"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
)

// soakRun is the soak's state. The samples, figures and checks are
// written by the test's goroutine only; the churn and the gate holder run
// beside it and report through atomics.
type soakRun struct {
	o         soakOptions
	ns        string
	mpaClient versioned.Interface
	rlMPAs    int
	emulator  *emulator.Emulator

	recommender, updater, admission, agent *component
	// procs are the four components in the order they are reported.
	procs    []*component
	stateDir string

	// start is when the soak proper started (after the set-up); sample
	// times are seconds since then.
	start    time.Time
	samples  map[string]map[string][]soak.Point
	lastCPU  map[string]cpuMark
	cpu      map[string]float64 // CPU seconds used in the soak, by component
	load     []float64          // the 1-minute load average at each sample
	report   soak.Report
	finished bool
	// exits are the non-clean exits of components stopped for a restart.
	exits []string

	deleted, deleteErrors, held atomic.Int64
}

type cpuMark struct {
	pid int
	cpu float64
}

func (s *soakRun) figure(name, value string) {
	s.report.Figures = append(s.report.Figures, soak.Figure{Name: name, Value: value})
}

func (s *soakRun) check(name string, pass bool, detail string) {
	s.report.Checks = append(s.report.Checks, soak.Check{Name: name, Pass: pass, Detail: detail})
}

// flowSchemaName is the FlowSchema that sorts component's API requests
// apart from every other client's, so that the API server's own
// apiserver_flowcontrol_dispatched_requests_total counts them: no
// component exports client-side request metrics, and the API server
// labels nothing else by client.
func flowSchemaName(component string) string { return "aware-soak-" + component }

// createFlowSchemas creates one FlowSchema per component's ServiceAccount,
// in the priority level those requests fall in anyway (workload-low, as
// the suggested service-accounts FlowSchema has it), so that counting them
// changes nothing about how they are served. They are deleted at the end.
func (s *soakRun) createFlowSchemas(ctx context.Context, t *testing.T) error {
	ws, err := workloads()
	if err != nil {
		return err
	}
	fsc := tb.Client.FlowcontrolV1().FlowSchemas()
	for _, comp := range componentNames {
		w, ok := ws[comp]
		if !ok {
			return fmt.Errorf("no Deployment in deploy/ runs %s", comp)
		}
		schema := &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: flowSchemaName(comp)},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
				// Before the suggested schemas (service-accounts is 9000),
				// after the mandatory ones.
				MatchingPrecedence:  500,
				DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
						ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: w.Namespace, Name: w.ServiceAccount}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
						ClusterScope: true, Namespaces: []string{"*"}}},
					NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
				}},
			},
		}
		if _, err := fsc.Create(ctx, schema, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create FlowSchema %s: %w", schema.Name, err)
		}
		t.Cleanup(func() {
			if err := fsc.Delete(context.Background(), schema.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete FlowSchema %s: %v", schema.Name, err)
			}
		})
	}
	return nil
}

// restartOrder is the rotation of restarts, as the soak's issue names it.
var restartOrder = []string{"kube-apiserver", "rl-agent", "recommender"}

// run is the soak proper: a sample every sample-every, a restart every
// restart-every (none in the last interval, so the end is judged on a
// settled state), the churn and the gate holder beside them.
func (s *soakRun) run(ctx context.Context, t *testing.T) {
	t.Helper()
	s.start = time.Now()
	deadline := s.start.Add(s.o.duration)
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.churn(bg) }()
	go func() { defer wg.Done(); s.holdGates(bg, t) }()
	defer func() { stop(); wg.Wait() }()

	t.Logf("soak: %s from %s, a restart every %s, samples every %s", s.o.duration, s.start.Format(time.RFC3339), s.o.restartEvery, s.o.sampleEvery)
	tick := time.NewTicker(s.o.sampleEvery)
	defer tick.Stop()
	next, k := s.start.Add(s.o.restartEvery), 0
	lastLog := time.Time{}
	for {
		s.sample(ctx, t)
		if time.Since(lastLog) >= 5*time.Minute {
			t.Logf("soak: %s in: %s", time.Since(s.start).Round(time.Second), s.summary())
			lastLog = time.Now()
		}
		if !time.Now().Before(deadline) {
			break
		}
		<-tick.C
		if now := time.Now(); !now.Before(next) && next.Before(deadline) {
			s.heapProfiles(ctx, t)
			s.restart(t, restartOrder[k%len(restartOrder)])
			k++
			next = next.Add(s.o.restartEvery)
		}
	}
	s.heapProfiles(ctx, t)
	s.finished = true
	s.figure("soak", fmt.Sprintf("%s, %d restarts", time.Since(s.start).Round(time.Second), len(s.report.Restarts)))
}

// restart stops and starts one component and records how long it was
// away. The API server is the testbed's process, restarted as up.sh
// started it; the nodes must be Ready again after it (their leases
// lapsed while it was away).
func (s *soakRun) restart(t *testing.T, name string) {
	t.Helper()
	began := time.Now()
	r := soak.Restart{At: began.Sub(s.start).Seconds(), Component: name}
	t.Logf("soak: restarting %s at %s", name, began.Sub(s.start).Round(time.Second))
	switch name {
	case "kube-apiserver":
		c := tb.StopComponent(t, name)
		c.Start(t)
		tb.WaitAPIServerReady(t, 2*time.Minute)
		tb.WaitNodesReady(t, 2*time.Minute)
	default:
		c := s.agent
		if name == "recommender" {
			c = s.recommender
		}
		// SIGTERM, as at a rollout; a component that does not exit
		// cleanly is a finding of its own.
		if err := c.terminate(t); err != nil {
			s.exits = append(s.exits, fmt.Sprintf("%s at %.1f min: %v", name, r.At/60, err))
		}
		c.restart(t)
	}
	r.Took = time.Since(began).Seconds()
	s.report.Restarts = append(s.report.Restarts, r)
}

// heapProfiles saves each running component's heap profile, taken after a
// collection (gc=1), as heap/COMPONENT-MINUTEm.pb.gz in the output
// directory: one at the end of every segment, before its restart, so that
// `go tool pprof -diff_base` between two of them names what a rise in a
// segment's level is made of. A profile that cannot be read is logged and
// skipped: it is evidence, not a check.
func (s *soakRun) heapProfiles(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dir := filepath.Join(s.o.out, "heap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("soak: heap profiles: %v", err)
		return
	}
	at := int(time.Since(s.start).Minutes() + 0.5)
	for _, c := range s.procs {
		b, err := c.get(ctx, "/debug/pprof/heap?gc=1")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03dm.pb.gz", c.name, at)), b, 0o644)
		}
		if err != nil {
			t.Logf("soak: heap profile of %s: %v", c.name, err)
		}
	}
}

// sample reads every component once. A read that fails (the API
// server's metrics while it restarts, a component's /metrics at a bad
// moment) leaves that series without the point; the report says how many
// points each slope has.
func (s *soakRun) sample(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	at := time.Since(s.start).Seconds()
	add := func(comp, metric string, v float64) {
		if s.samples[comp] == nil {
			s.samples[comp] = map[string][]soak.Point{}
		}
		s.samples[comp][metric] = append(s.samples[comp][metric], soak.Point{T: at, V: v})
	}
	apiText, apiErr := tb.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	for _, c := range s.procs {
		select {
		case <-c.done:
			continue // exited: the final checks report it
		default:
		}
		pid := c.cmd.Process.Pid
		proc := "/proc/" + strconv.Itoa(pid)
		if b, err := os.ReadFile(proc + "/status"); err == nil {
			if rss, _, err := bench.ParseProcStatus(string(b)); err == nil {
				add(c.name, soak.MetricRSS, rss)
			}
		}
		if fds, err := os.ReadDir(proc + "/fd"); err == nil {
			add(c.name, soak.MetricFDs, float64(len(fds)))
		}
		if b, err := os.ReadFile(proc + "/stat"); err == nil {
			if cpu, err := bench.ParseProcStat(string(b)); err == nil {
				// CPU used in the soak: the growth of each run's counter,
				// a new run counting from its start.
				last, ok := s.lastCPU[c.name]
				switch {
				case ok && last.pid == pid:
					s.cpu[c.name] += cpu - last.cpu
				case ok:
					s.cpu[c.name] += cpu
				}
				s.lastCPU[c.name] = cpuMark{pid, cpu}
			}
		}
		if text, err := c.get(ctx, "/metrics"); err == nil {
			for series, metric := range map[string]string{"go_goroutines": soak.MetricGoroutines, "go_memstats_heap_inuse_bytes": soak.MetricHeapInuse} {
				if v, ok, err := sumSamples(string(text), series); err == nil && ok {
					add(c.name, metric, v)
				}
			}
		}
		if apiErr == nil {
			if n, ok, err := sumSamples(string(apiText), "apiserver_flowcontrol_dispatched_requests_total", "flow_schema="+flowSchemaName(c.name)); err == nil && ok {
				add(c.name, soak.MetricAPIRequests, n)
			}
		}
	}
	if size, err := dirSize(s.stateDir); err == nil {
		add(s.agent.name, soak.MetricStateDir, float64(size))
	} else {
		t.Logf("soak: the agent's state directory: %v", err)
	}
	if l := loadAvg(); l >= 0 {
		s.load = append(s.load, l)
	}
}

// summary is the last sample of each component, for the progress log.
func (s *soakRun) summary() string {
	var parts []string
	for _, c := range s.procs {
		m := s.samples[c.name]
		last := func(metric string) float64 {
			if p := m[metric]; len(p) > 0 {
				return p[len(p)-1].V
			}
			return -1
		}
		parts = append(parts, fmt.Sprintf("%s %.0fMiB %.0fg %.0ffd", c.name, last(soak.MetricRSS)/(1<<20), last(soak.MetricGoroutines), last(soak.MetricFDs)))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; %d pods deleted, %d gates held", s.deleted.Load(), s.held.Load())
}

// dirSize sums the sizes of the regular files under dir; files removed
// while it walks (a compaction's temporaries) are skipped.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// loadAvg is the machine's 1-minute load average, -1 if unreadable.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// churn deletes a running pod of the workload, picked at random, at
// --soak.churn per minute, until ctx ends: its ReplicaSet creates another
// through the webhook. The pods are read from an informer, one watch
// rather than a list per pick. Bounded: one delete per interval, none
// beyond the soak.
func (s *soakRun) churn(ctx context.Context) {
	if s.o.churn <= 0 {
		return
	}
	factory := informers.NewSharedInformerFactoryWithOptions(tb.Client, 0, informers.WithNamespace(s.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = soakLabel + "=workload" }))
	lister := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())
	rng := rand.New(rand.NewPCG(s.o.seed, s.o.seed^0x6368))
	tick := time.NewTicker(time.Duration(float64(time.Minute) / s.o.churn))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods, err := lister.List(labels.Everything())
		if err != nil {
			continue
		}
		pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning })
		if len(pods) == 0 {
			continue
		}
		slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		p := pods[rng.IntN(len(pods))]
		err = tb.Client.CoreV1().Pods(s.ns).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		switch {
		case err == nil:
			s.deleted.Add(1)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil:
			// Gone already (the updater evicted it, or the informer was
			// behind), or the soak is over: no pick this time.
		default:
			// The API server restarting: counted, not fatal.
			s.deleteErrors.Add(1)
		}
	}
}

// heldWindow is the gate window holdGates sets, and heldPromoteMinMean
// and heldPromoteMaxStdDev the promotion gate that keeps a workload in
// OnlineTraining, learning, for the whole soak although its window is
// full: a rewards' mean of 1 with no spread, which a reward in [0, 1]
// reaches only if every episode of the window scored exactly 1 (such a
// workload goes on to Serving, which the report counts). The window is
// small so that the agent's per-workload reward windows, and the
// checkpoint that carries them, reach their bound within the first
// 20-minute segment: 40 episodes of two 15-s ticks fill in 20 minutes.
// The window of 1,000 used before (the CRD's maximum) filled for 8.3
// hours, so a 2-hour soak judged a bounded structure while it still grew
// (docs/results/soak.md, "What the agent keeps").
const (
	heldWindow           = 40
	heldPromoteMinMean   = 1.0
	heldPromoteMaxStdDev = 1e-9
)

// holdGates keeps the agent's workloads in OnlineTraining: when an
// autoscaler's status shows it there with the fast gates, it sets the
// held gates. The stage machine keeps the stage and the episodes so far
// when its gates change (lifecycle.Machine.SetGates). One whose status
// comes too late for the patch (two episodes, four recommender ticks)
// goes on to Serving; the report counts both. It watches the autoscalers
// until ctx ends, watching again after the API server's restarts.
func (s *soakRun) holdGates(ctx context.Context, t *testing.T) {
	if s.rlMPAs == 0 {
		return
	}
	mpas := s.mpaClient.AutoscalingV1alpha1().MultidimPodAutoscalers(s.ns)
	patch := fmt.Appendf(nil, `{"spec":{"rl":{"gates":{"window":%d,"promoteMinMean":%g,"promoteMaxStdDev":%g}}}}`,
		heldWindow, heldPromoteMinMean, heldPromoteMaxStdDev)
	for ctx.Err() == nil {
		w, err := mpas.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.MultidimPodAutoscaler)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			if m.Spec.RL == nil || m.Spec.RL.Gates == nil || m.Spec.RL.Gates.Window == heldWindow ||
				m.Status.RL == nil || m.Status.RL.Stage != v1alpha1.RLStageOnlineTraining {
				continue
			}
			if _, err := mpas.Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				s.held.Add(1)
			} else if ctx.Err() == nil {
				t.Logf("soak: hold the gates of %s: %v", m.Name, err)
			}
		}
		w.Stop()
		// A watch the API server ended at once (it is restarting) is not
		// retried in a tight loop.
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// finalChecks checks, once the soak has run, that nothing crashed and
// that the state agrees with the API server's. Each check that needs the
// components to catch up with the last restart polls for up to 3 minutes.
func (s *soakRun) finalChecks(ctx context.Context, t *testing.T) {
	t.Helper()
	var exited []string
	for _, c := range s.procs {
		select {
		case <-c.done:
			exited = append(exited, fmt.Sprintf("%s: %v", c.name, c.exitErr))
		default:
		}
	}
	s.check("every component running at the end", len(exited) == 0, detailOr(strings.Join(exited, "; "), "all four"))
	s.check("clean exits at SIGTERM", len(s.exits) == 0, detailOr(strings.Join(s.exits, "; "), fmt.Sprintf("%d restarts of the agent or the recommender", countOther(s.report.Restarts))))

	var panics []string
	for _, c := range s.procs {
		b, err := os.ReadFile(c.logPath)
		if err != nil {
			panics = append(panics, fmt.Sprintf("%s: %v", c.name, err))
			continue
		}
		for _, l := range soak.Panics(string(b)) {
			panics = append(panics, c.name+": "+l)
		}
	}
	s.check("no panics in any component's log", len(panics) == 0, detailOr(strings.Join(first(panics, 5), "; "), "none in 4 logs"))

	// A recommendation refreshed within the recommender's
	// --status-refresh-interval (5m, deploy/'s default) and a minute.
	const fresh = 6 * time.Minute
	s.poll(ctx, "every autoscaler recommended recently (RecommendationProvided, recommendationTime within 6m)", func(ctx context.Context) (bool, string, error) {
		l, err := s.mpaClient.AutoscalingV1alpha1().MultidimPodAutoscalers(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var bad []string
		for i := range l.Items {
			m := &l.Items[i]
			c := condition(m, v1alpha1.RecommendationProvided)
			switch {
			case c == nil || c.Status != corev1.ConditionTrue:
				bad = append(bad, m.Name+" not recommended")
			case m.Status.RecommendationTime == nil || time.Since(m.Status.RecommendationTime.Time) > fresh:
				bad = append(bad, m.Name+" stale")
			}
		}
		ok := len(l.Items) == s.o.mpas && len(bad) == 0
		return ok, fmt.Sprintf("%d autoscalers, %d not recommended recently %v", len(l.Items), len(bad), first(bad, 5)), nil
	})

	s.poll(ctx, "the agent's workloads are the autoscalers with spec.rl, stage by stage", func(ctx context.Context) (bool, string, error) {
		l, err := s.mpaClient.AutoscalingV1alpha1().MultidimPodAutoscalers(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		inStatus := map[string]int{}
		rl := 0
		for i := range l.Items {
			m := &l.Items[i]
			if m.Spec.RL == nil {
				continue
			}
			rl++
			st := "none"
			if m.Status.RL != nil && m.Status.RL.Stage != "" {
				st = string(m.Status.RL.Stage)
			}
			inStatus[st]++
		}
		ok := rl == s.rlMPAs && inStatus["none"] == 0
		var parts []string
		for _, st := range []v1alpha1.RLStage{v1alpha1.RLStageBootstrapping, v1alpha1.RLStageOnlineTraining, v1alpha1.RLStageServing, v1alpha1.RLStageRetraining} {
			n, _, err := s.agent.metric(ctx, "aware_rlagent_workloads", "stage="+string(st))
			if err != nil {
				return false, "", err
			}
			ok = ok && int(n) == inStatus[string(st)]
			parts = append(parts, fmt.Sprintf("%s %d (agent %g)", st, inStatus[string(st)], n))
		}
		return ok, fmt.Sprintf("%d with spec.rl: %s", rl, strings.Join(parts, ", ")), nil
	})

	// Absent labels read as 0: no such answer yet.
	errs, _, _ := s.admission.metric(ctx, "aware_admission_requests_total", "result=error")
	timeouts, _, _ := s.admission.metric(ctx, "aware_admission_requests_total", "result=timeout")
	total, totalOK, err := s.admission.metric(ctx, "aware_admission_requests_total")
	s.check("the webhook admitted pods, none with an error or a timeout", err == nil && totalOK && total > 0 && errs == 0 && timeouts == 0,
		fmt.Sprintf("%g admission requests, %g errors, %g timeouts (%v)", total, errs, timeouts, err))

	s.poll(ctx, "every Deployment has its replicas ready", func(ctx context.Context) (bool, string, error) {
		l, err := tb.Client.AppsV1().Deployments(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var bad []string
		pods := 0
		for _, d := range l.Items {
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			pods += int(d.Status.ReadyReplicas)
			if d.Status.ReadyReplicas != want {
				bad = append(bad, fmt.Sprintf("%s %d/%d", d.Name, d.Status.ReadyReplicas, want))
			}
		}
		return len(bad) == 0, fmt.Sprintf("%d Deployments, %d pods ready, %d short %v", len(l.Items), pods, len(bad), first(bad, 5)), nil
	})

	s.figure("pods deleted by the churn", fmt.Sprintf("%d (%d deletes failed, the API server away)", s.deleted.Load(), s.deleteErrors.Load()))
	s.figure("gates held in OnlineTraining", fmt.Sprintf("%d of %d autoscalers with spec.rl", s.held.Load(), s.rlMPAs))
	ticks, emErr := s.emulator.Ticks()
	s.figure("emulator", fmt.Sprintf("%d ticks, last error %v", ticks, emErr))
}

// poll records a check that holds once cond says so within 3 minutes, with
// cond's last detail.
func (s *soakRun) poll(ctx context.Context, name string, cond func(context.Context) (bool, string, error)) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ok, detail, err := cond(cctx)
		cancel()
		if err != nil {
			detail = err.Error()
		}
		if ok || time.Now().After(deadline) {
			s.check(name, ok, detail)
			return
		}
		time.Sleep(10 * time.Second)
	}
}

func detailOr(detail, otherwise string) string {
	if detail == "" {
		return otherwise
	}
	return detail
}

func first(xs []string, n int) []string { return xs[:min(n, len(xs))] }

func countOther(rs []soak.Restart) int {
	n := 0
	for _, r := range rs {
		if r.Component != "kube-apiserver" {
			n++
		}
	}
	return n
}

// writeReport judges the samples and writes report.md, report.json (with
// every sample) and soak.svg into --soak.out, with the components' logs
// under logs/. It fails the test if the soak failed.
func (s *soakRun) writeReport(t *testing.T) {
	if s.start.IsZero() {
		t.Logf("soak: the set-up did not finish; no report (figures so far: %+v)", s.report.Figures)
		return
	}
	if !s.finished {
		s.check("the soak ran its whole duration", false, fmt.Sprintf("stopped after %s of %s", time.Since(s.start).Round(time.Second), s.o.duration))
	}
	span := time.Since(s.start).Seconds()
	for _, c := range s.procs {
		s.figure("CPU of "+c.name, fmt.Sprintf("%.1f%% of a core", 100*s.cpu[c.name]/span))
	}
	if len(s.load) > 0 {
		var sum, peak float64
		for _, l := range s.load {
			sum += l
			peak = max(peak, l)
		}
		s.figure("load average (1 min) over the soak", fmt.Sprintf("mean %.2f, peak %.2f", sum/float64(len(s.load)), peak))
	}
	s.report.Title = fmt.Sprintf("Soak: %d autoscalers (%d with the agent), %s, a restart every %s", s.o.mpas, s.rlMPAs, s.o.duration, s.o.restartEvery)
	s.report.Level = 0.95
	j := soak.DefaultJudgement(s.o.warmup.Seconds())
	j.Settle = s.o.settle
	s.report.Judge(s.samples, j)

	// report.json is what cmd/soakjudge reads to judge the soak again.
	rec := soak.Record{Report: s.report, Warmup: s.o.warmup.Seconds(), SpanSeconds: span, Samples: s.samples, Finished: time.Now().UTC()}
	var md, js, svg bytes.Buffer
	if err := rec.Write(soak.Outputs{Markdown: &md, JSON: &js, SVG: &svg}); err != nil {
		t.Errorf("soak report: %v", err)
	}
	for name, b := range map[string]*bytes.Buffer{"report.md": &md, "report.json": &js, "soak.svg": &svg} {
		if err := os.WriteFile(filepath.Join(s.o.out, name), b.Bytes(), 0o644); err != nil {
			t.Errorf("soak report: %v", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(s.o.out, "logs"), 0o755); err == nil {
		for _, c := range s.procs {
			if b, err := os.ReadFile(c.logPath); err == nil {
				_ = os.WriteFile(filepath.Join(s.o.out, "logs", c.name+".log"), b, 0o644)
			}
		}
	}
	t.Logf("soak report in %s:\n%s", s.o.out, md.String())
	if !s.report.Pass {
		t.Errorf("the soak failed: %s", filepath.Join(s.o.out, "report.md"))
	}
}
