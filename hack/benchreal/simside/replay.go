package simside

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/hack/benchreal/slo"
	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// LoadGenTimeout is when the harness's load generator gives a request up
// (hack/benchreal/trial.go passes --timeout 10s); the simulator times
// requests out at the same age unless the settings say "timeout".
const LoadGenTimeout = 10 * time.Second

// FitSuffix marks a run whose recommender fitted its recommendations to
// the node's room (bench-real --fit-to-nodes): "fused+fit".
const FitSuffix = "+fit"

// policy is the simulator's counterpart of one of the harness's runs: the
// HPA and VPA models of pkg/core, both together (fusion's naive
// combination), or the fused default, built as the demo builds them.
func policy(name string) (workload.PolicyFactory, error) {
	// The simulator's node has room for what its policies ask (its
	// calibrated allocatable aside); it does not fit recommendations to
	// it, so a "+fit" run is replayed as the same policy without the fit.
	name, _ = strings.CutSuffix(name, FitSuffix)
	switch name {
	case "hpa":
		return hpa.NewPolicyFactory(hpa.PolicyOptions{}), nil // 70%, the harness's HPA target
	case "vpa":
		return vpa.NewPolicyFactory(vpa.PolicyOptions{}), nil
	case "hpa+vpa":
		return fusion.NewNaiveFactory(fusion.Options{}), nil
	case "fused":
		return fusion.NewPolicyFactory(fusion.Options{}), nil
	}
	if spec, ok := strings.CutPrefix(name, FusedPrefix); ok {
		o, err := fusion.ParseVariant(spec)
		if err != nil {
			return nil, err
		}
		return fusion.NewPolicyFactory(o), nil
	}
	return nil, fmt.Errorf("policy %q has no simulated counterpart (want hpa, vpa, hpa+vpa, fused or fused:SPEC)", name)
}

// Trace is what the real run replayed, from its settings.
type Trace struct {
	Kind     sim.TraceKind
	Mean     float64
	Seed     uint64
	Duration time.Duration
	Step     time.Duration
	SLO      float64
	Timeout  time.Duration
	// InitialCPU is the one replica's CPU request and limit at the start
	// (cores; the harness's --initial-cpu, 0.1 in files written before it).
	InitialCPU float64
	// AppMetrics is whether the real recommender read the app's request
	// rate and latency with an SLO (the settings' "sloMetrics"; false in
	// files written before it, whose MPAs had no spec.rl.slo and whose
	// recommender no Prometheus). Without them the replayed policies see
	// neither, as on the real node: the fused default's SLO floor, rate
	// metric and SLO override are then off there too.
	AppMetrics bool
	// AutoscalerAfter is bench-real --autoscaler-after (the settings'
	// "autoscalerAfter"; 0, with the app, when absent): the real autoscaler
	// was created this long after the load began, so it neither saw nor
	// changed the windows before.
	AutoscalerAfter time.Duration
	// RateWindow is the range of the real recommender's rate() and
	// histogram_quantile (the settings' "prometheusWindow"; the
	// recommender's default when absent or empty). With AppMetrics the
	// replayed policies see the request rate and p95 over it, as the real
	// one did (sim.Config.RateWindow); without, it is unused.
	RateWindow time.Duration
}

// ParseSettings reads the trace of a results file's settings (the
// harness's "trace", "mean", "seed", "duration", "window", "slo" and, if
// present, "timeout").
func ParseSettings(s map[string]string) (Trace, error) {
	var t Trace
	get := func(k string) (string, error) {
		v, ok := s[k]
		if !ok || v == "" {
			return "", fmt.Errorf("settings: no %q (a merged file without its runs' settings?)", k)
		}
		return v, nil
	}
	v, err := get("trace")
	if err != nil {
		return t, err
	}
	t.Kind = sim.TraceKind(v)
	if v, err = get("mean"); err != nil {
		return t, err
	}
	if t.Mean, err = strconv.ParseFloat(v, 64); err != nil || !(t.Mean > 0) {
		return t, fmt.Errorf("settings: mean %q must be a rate > 0", v)
	}
	if v, err = get("seed"); err != nil {
		return t, err
	}
	if t.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
		return t, fmt.Errorf("settings: seed %q: %w", v, err)
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"duration", &t.Duration}, {"window", &t.Step}} {
		if v, err = get(d.key); err != nil {
			return t, err
		}
		if *d.dst, err = time.ParseDuration(v); err != nil || *d.dst <= 0 {
			return t, fmt.Errorf("settings: %s %q must be a duration > 0", d.key, v)
		}
	}
	if v, err = get("slo"); err != nil {
		return t, err
	}
	objective, err := time.ParseDuration(v)
	if err != nil || objective <= 0 {
		return t, fmt.Errorf("settings: slo %q must be a duration > 0", v)
	}
	t.SLO = objective.Seconds()
	t.Timeout = LoadGenTimeout
	t.InitialCPU = 0.1
	if v, ok := s["initialCpu"]; ok {
		if t.InitialCPU, err = cores(v); err != nil {
			return t, fmt.Errorf("settings: initialCpu: %w", err)
		}
	}
	v = s["prometheusWindow"]
	if v == "" {
		v = slo.DefaultWindow
	}
	if t.RateWindow, err = time.ParseDuration(v); err != nil || t.RateWindow <= 0 {
		return t, fmt.Errorf("settings: prometheusWindow %q must be a duration > 0", v)
	}
	if v, ok := s["sloMetrics"]; ok {
		if t.AppMetrics, err = strconv.ParseBool(v); err != nil {
			return t, fmt.Errorf("settings: sloMetrics %q must be true or false", v)
		}
	}
	if v, ok := s["autoscalerAfter"]; ok {
		if t.AutoscalerAfter, err = time.ParseDuration(v); err != nil || t.AutoscalerAfter < 0 {
			return t, fmt.Errorf("settings: autoscalerAfter %q must be a duration >= 0", v)
		}
	}
	if v, ok := s["timeout"]; ok {
		if t.Timeout, err = time.ParseDuration(v); err != nil || t.Timeout <= 0 {
			return t, fmt.Errorf("settings: timeout %q must be a duration > 0", v)
		}
	}
	return t, nil
}

// Rates is the trace the load generator replayed for repetition rep: the
// same generator, kind, mean, seed (the settings' plus rep), step and
// number of steps as e2e/loadgen.TraceSeries.
func (t Trace) Rates(rep int) (sim.Trace, error) {
	steps := int((t.Duration + t.Step - 1) / t.Step)
	return sim.GenerateTrace(t.Kind, sim.TraceOptions{Mean: t.Mean, Steps: steps, Step: t.Step, Seed: t.Seed + uint64(rep)})
}

// Replay runs policy in the simulator on the trace of the real run of
// repetition rep (settings as a result.File's): the calibrated app on one
// node of cal.Node, resized in place (the harness's VPA and MPA use
// InPlaceOrRecreate), from the harness's initial deployment, with the
// simulator's arrivals drawn from the same seed as the load generator's.
// Every window becomes a result.Window as the harness records it, so
// result.Summarise and result.WriteTable read the run unchanged.
func Replay(cal Calibration, settings map[string]string, policyName string, rep int) (result.Run, error) {
	return ReplayDraw(cal, settings, policyName, rep, 0)
}

// drawStride separates the seeds of a repetition's draws from those of
// the other repetitions.
const drawStride = 1_000_003

// ReplayDraw is Replay with the simulator's draws (arrivals, latency
// samples, memory noise) of draw number draw: draw 0 is Replay's; the
// others replay the same trace with other draws, so that the mean over a
// few is the simulator's expectation for the run, not one outcome of it.
func ReplayDraw(cal Calibration, settings map[string]string, policyName string, rep, draw int) (result.Run, error) {
	run, _, err := replay(cal, settings, policyName, rep, draw, nil)
	return run, err
}

// replay is ReplayDraw, with the simulator's own steps as windows too
// (the run's windows when Timing.Step is the window). With pods, the
// real run of policyName and rep, it replays that run's own pods instead
// of the policy (ReplayPods).
func replay(cal Calibration, settings map[string]string, policyName string, rep, draw int, pods *result.Run) (result.Run, []result.Window, error) {
	run := result.Run{Policy: policyName, Rep: rep}
	var steps []result.Window
	if draw < 0 {
		return run, nil, fmt.Errorf("draw %d must be >= 0", draw)
	}
	tr, err := ParseSettings(settings)
	if err != nil {
		return run, nil, err
	}
	if rep < 0 {
		return run, nil, fmt.Errorf("repetition %d must be >= 0", rep)
	}
	var factory workload.PolicyFactory
	if pods != nil {
		factory, err = recordedPods(pods, cal.App(tr.SLO, tr.InitialCPU).Container)
	} else {
		factory, err = policy(policyName)
	}
	if err != nil {
		return run, nil, err
	}
	trace, err := tr.Rates(rep)
	if err != nil {
		return run, nil, err
	}
	k, err := cal.Timing.steps(tr.Step)
	if err != nil {
		return run, nil, fmt.Errorf("replay timing: %w", err)
	}
	step := tr.Step / time.Duration(k)
	trace = finer(trace, k)
	cfg := sim.DefaultConfig()
	cfg.Step, cfg.Nodes, cfg.NodeCapacity, cfg.NodeCores, cfg.NodeBackground, cfg.NodeTick = step, 1, cal.Node.Allocatable, cal.Node.Cores, cal.Node.Background, cal.Node.Tick
	cfg.Resize, cfg.Timeout = sim.ResizeInPlace, tr.Timeout
	cfg.SampledLatency, cfg.SampledUsage, cfg.UsageResolution = cal.SampledLatency, cal.SampledUsage, cal.UsageResolution
	cfg.ReadyWithinWindow = cal.ReadyWithinWindow
	if tr.AppMetrics {
		cfg.RateWindow = tr.RateWindow
	}
	app := cal.App(tr.SLO, tr.InitialCPU)
	app.BaseRate = tr.Mean
	s, err := sim.New(cfg, app, &trace, tr.Seed+uint64(rep)+uint64(draw)*drawStride)
	if err != nil {
		return run, nil, fmt.Errorf("simulator: %w", err)
	}
	p, err := factory(app.Constraints)
	if err != nil {
		return run, nil, fmt.Errorf("policy %s: %w", policyName, err)
	}
	run.SLO, run.Window = tr.SLO, tr.Step.Seconds()
	var vpaGate *vpaCadence
	if realVPA(policyName) && pods == nil {
		vpaGate = &vpaCadence{next: tr.AutoscalerAfter.Seconds() + cal.VPAFirstAction.Value, every: VPAUpdaterInterval}
	}
	// The look and the updater's delay are the project's recommender and
	// updater's; the real HPA scales in the loop it decides in, at the
	// window's end, and the real VPA's cadence is vpaCadence's.
	var look, act time.Duration
	switch {
	case pods != nil:
		// The recorded pods change at the windows' boundaries, from the
		// first on (recordedPods).
	case IsFused(policyName):
		look, act = cal.Timing.Look, cal.Timing.Act+time.Duration(cal.Timing.Lag)*tr.Step
	case cal.Timing.HPAPhases && (policyName == "hpa" || policyName == "hpa+vpa"):
		look = time.Duration(draw%k) * step
	}
	rec := newRecorder(cfg)
	var pool *windowPool
	var usage *usageWindow
	if k > 1 {
		pool, usage = newWindowPool(s, k), newUsageWindow(cal.UsageResolution, step, k)
	}
	var updater updaterQueue
	var admit *workload.Recommendation
	apply := func(now time.Duration) error {
		for _, r := range updater.take(now) {
			if _, err := s.Apply(r); err != nil {
				return fmt.Errorf("at %s: %w", now, err)
			}
		}
		return nil
	}
	ctx := context.Background()
	var used, ok float64
	for j := range trace.Rates {
		m := s.Step()
		w := rec.window(m, s.Observation())
		steps = append(steps, w)
		ok += m.Completed
		if pool != nil {
			usage.add(s.Observation())
			if w, done := pool.add(s, w); done {
				run.Windows = append(run.Windows, w)
				used += w.CPUUsed * (w.End - w.Start)
			}
		} else {
			run.Windows = append(run.Windows, w)
			used += w.CPUUsed * (w.End - w.Start)
		}
		now := time.Duration(j+1) * step
		if (now-look)%tr.Step == 0 && now >= look && (now > tr.AutoscalerAfter || pods != nil) {
			// Past the autoscaler's creation (the windows before it, the
			// replayed one, like the real one, neither saw nor changed).
			obs := s.Observation()
			if usage != nil {
				obs = usage.observe(obs, tr.Step)
			}
			if !tr.AppMetrics {
				obs = usageOnly(obs)
			}
			// A policy that cannot decide leaves the workload as it is, as
			// the recommender and the evaluator do.
			if r, err := p.Recommend(ctx, obs); err == nil {
				if vpaGate != nil {
					var due bool
					if r, due = vpaGate.gate(now.Seconds(), r); due && !cal.Timing.NoVPAAdmission {
						admit = &workload.Recommendation{Containers: r.Containers}
					}
				}
				updater.hold(r, now+act)
			}
		}
		// The pods change from the next step on, so the look above saw
		// only what was applied at earlier boundaries.
		if err := apply(now); err != nil {
			return run, nil, err
		}
		if admit != nil {
			// After the updater's loop, as VPA's admission controller the
			// pods created from now on take the recommender's target.
			if _, err := s.Admit(*admit); err != nil {
				return run, nil, fmt.Errorf("at %s: %w", now, err)
			}
			admit = nil
		}
	}
	// Measured as the harness measures it, not copied from the app.
	if ok > 0 {
		run.CPUSecondsPerRequest = used / ok
	}
	run.StartupSeconds = rec.startups
	return run, steps, nil
}

// FusedPrefix names a variant of the fused default as a policy:
// "fused:SPEC", SPEC as the recommender's --default-variant reads it.
const FusedPrefix = "fused:"

// IsFused reports whether policy is the fused default or a variant of it
// (a "+fit" run's too): the project's own recommender, which writes its
// decision to the autoscaler's status, and its updater, which acts on it
// later.
func IsFused(policy string) bool {
	name, _ := strings.CutSuffix(policy, FitSuffix)
	return name == "fused" || strings.HasPrefix(name, FusedPrefix)
}

// realVPA reports whether the real run's vertical side was VPA 1.8.1's
// (vpa, hpa+vpa), whose cadence the replay keeps (vpaCadence).
func realVPA(policyName string) bool {
	return policyName == "vpa" || policyName == "hpa+vpa"
}

// vpaCadence holds a replayed VPA's vertical recommendation to the real
// VPA's cadence: the real one first changed a pod VPAFirstAction after its
// creation (its recommender and updater loop once a minute; on the real
// node 64–110 s, where the project's VPA policy acts within a step), and
// its updater acts at most once a loop. Between its loops the pods keep
// what it last let through, and the pods created meanwhile take the
// target of its last loop, as the real admission controller gives a new
// pod the recommender's latest target even where the running pods are
// within bounds and keep theirs (sim.Simulator.Admit; without it,
// Timing.NoVPAAdmission, what the updater last let through). The
// horizontal side (the real HPA's) is not held.
type vpaCadence struct {
	next, every float64 // seconds since the run's start
	held        []workload.ContainerRecommendation
}

// gate returns r with its vertical part replaced by the last one let
// through, letting r's through when its loop is due at t, and whether it
// was.
func (c *vpaCadence) gate(t float64, r workload.Recommendation) (workload.Recommendation, bool) {
	due := t >= c.next
	if due {
		c.held = slices.Clone(r.Containers)
		for c.next <= t {
			c.next += c.every
		}
	}
	r.Containers = c.held
	return r, due
}

// usageOnly is obs as a recommender without the app's metrics sees it:
// no request rate, latency, error rate or SLO.
func usageOnly(obs workload.Observation) workload.Observation {
	obs.RequestRate, obs.Latency, obs.ErrorRate, obs.SLO = 0, workload.Latency{}, 0, 0
	return obs
}

// podState is what the recorder remembers of a simulated pod.
type podState struct {
	requests   workload.Resources
	started    time.Time
	hasMetrics bool
	ready      bool
	// created is when the pod (or its replacement after an eviction) was
	// created, in seconds from the start; counted is set once its
	// creation-to-Ready time is recorded.
	created float64
	counted bool
}

// recorder turns StepMetrics and the pods' samples into result.Windows,
// counting events as the harness's sampler counts them: a replica change
// when the desired count changed, a resize when a running pod's requests
// changed, an eviction when a pod was restarted by the rollout (an OOM
// kill restarts a container, not the pod).
type recorder struct {
	dt       float64
	start    time.Time
	prevRepl int32
	pods     map[string]*podState
	startups []float64
}

func newRecorder(cfg sim.Config) *recorder {
	// As the harness's sampler, the first window counts no replica change.
	return &recorder{dt: cfg.Step.Seconds(), start: cfg.Start, prevRepl: -1, pods: map[string]*podState{}}
}

func (r *recorder) window(m sim.StepMetrics, obs workload.Observation) result.Window {
	t0 := float64(m.Step) * r.dt
	w := result.Window{
		Index: m.Step, Start: t0, End: t0 + r.dt,
		Expected: m.Rate * r.dt,
		Sent:     int(math.Round(m.Arrivals)),
		OK:       int(math.Round(m.Completed)),
		Lost:     int(math.Round(m.Failed + m.TimedOut)),
		P95:      m.Latency.P95,
		Replicas: int(m.Replicas), Ready: int(m.Ready),
		CPURequested: m.Allocated.CPU, MemoryRequested: m.Allocated.Memory,
		CPUUsed: m.Used.CPU, MemoryUsed: m.Used.Memory,
		OOMKills:  m.OOMKills,
		Evictions: max(0, m.Restarts-m.OOMKills),
	}
	if w.Sent == 0 {
		w.P95 = 0 // the harness has no latency without requests
	}
	// As the app's gauge shows it, summed over the Ready pods.
	w.InFlight, w.InFlightPods = m.InFlight, float64(w.Ready)
	if r.prevRepl >= 0 && m.Replicas != r.prevRepl {
		w.ReplicaChanges = 1
	}
	r.prevRepl = m.Replicas
	seen := make(map[string]bool, len(obs.Pods))
	for _, p := range obs.Pods {
		seen[p.Name] = true
		if p.Ready {
			w.ReadyCPURequested += p.Requests.CPU
		}
		st, ok := r.pods[p.Name]
		switch {
		case !ok:
			// Created at the window's start, when the simulator reconciles;
			// the pods of the first window are the initial deployment, there
			// before the load (the harness counts only pods created after).
			st = &podState{created: t0, counted: m.Step == 0}
			r.pods[p.Name] = st
		case st.hasMetrics && !p.HasMetrics:
			// Evicted and Pending again: the harness would see a new pod.
			st.created, st.counted = t0, false
		case st.hasMetrics && p.HasMetrics && st.started.Equal(p.Started) && st.requests != p.Requests:
			w.Resizes++
		}
		if p.Ready && !st.counted {
			st.counted = true
			r.startups = append(r.startups, p.ReadySince.Sub(r.start).Seconds()-st.created)
		}
		st.requests, st.started, st.hasMetrics, st.ready = p.Requests, p.Started, p.HasMetrics, p.Ready
	}
	for name := range r.pods {
		if !seen[name] {
			delete(r.pods, name)
		}
	}
	return w
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ReadFile decodes a results file (result.WriteRuns's JSON) with its
// settings, which Replay needs and result.ReadRuns drops.
func ReadFile(r io.Reader) (result.File, error) {
	var f result.File
	d := json.NewDecoder(r)
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return f, fmt.Errorf("results: %w", err)
	}
	if f.Kind != result.FileKind {
		return f, fmt.Errorf("results: kind %q, want %q", f.Kind, result.FileKind)
	}
	return f, nil
}

// cores parses a CPU quantity as the harness writes it: "200m" or "0.5".
func cores(v string) (float64, error) {
	scale := 1.0
	if m, ok := strings.CutSuffix(v, "m"); ok {
		v, scale = m, 1e-3
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || !(x > 0) {
		return 0, fmt.Errorf("%q is not a CPU quantity > 0", v)
	}
	return x * scale, nil
}
