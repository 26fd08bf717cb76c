//go:build benchreal

// Command benchreal runs the same trace against each autoscaling policy in
// turn on the real node (make bench-real, hack/bench-real.sh): the real
// HPA of the testbed's controller-manager, VPA built from its module, both
// together, and the fused default of the MultidimPodAutoscaler served by
// the four components running as pods from deploy/. The workload is the
// test app (aware-testapp) in the host's network, driven by the load
// generator (loadgen) as a local process. Every 15-s window is recorded;
// the table and the paired comparison are printed and written with every
// run's windows as JSON. With --simulate the simulator is set beside the
// runs (package simside): calibrated from them, it replays every run, and
// the two are printed and plotted side by side. docs/real-node.md explains
// every measure.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
	"github.com/aware-k8s/aware/hack/benchreal/agent"
	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/hack/benchreal/simside"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// Policies are the runs the harness knows, in their default order: the
// agent policies (package agent) last, served by the rl-agent of deploy/
// acting on the fused default.
var Policies = []string{"hpa", "vpa", "hpa+vpa", "fused", agent.Learner, agent.Ensemble}

// DefaultSimTick is the replay's scheduler tick (--sim-tick): the bench
// machines' kernels tick at CONFIG_HZ=250. On the real runs' own pods
// (simside.ReplayPods) it brings the simulator's SLO-violating windows
// nearer the real ones on the machine the benchmark runs on now, mean
// |Δ| 10.2 → 4.0 points over ten policy-rounds, and further on older,
// slower ones (docs/real-node-rounds.md, "The simulator on the real
// runs' own pods").
const DefaultSimTick = 4 * time.Millisecond

type options struct {
	// report is how --merge reads and reports runs.
	report reportOptions
	// mpa is how the autoscalers run beside the app.
	mpa mpaOptions
	// app is the test app's and the load generator's shape.
	app appOptions
	// bin is where the binaries and sources the runs use are.
	bin      binOptions
	policies []string
	repeat   int
	firstRep int
	duration time.Duration
	trace    string
	mean     float64
	seed     uint64
	slo      time.Duration
	window   time.Duration
	cooldown time.Duration
	out      string
	smoke    bool
	simulate bool
	// sim holds --simulate's options.
	sim simOptions
}

// reportOptions are how runs are reported and merged: the results files
// --merge reads, the CPU other processes may take before a run counts as
// disturbed, whether --merge keeps disturbed runs, and the policy every
// other is compared with.
type reportOptions struct {
	files         []string
	maxOutside    float64
	keepDisturbed bool
	reference     string
}

// mpaOptions are how the autoscalers run beside the app: the SLO inputs,
// the recommender's flags, when the load and the autoscaler start, and the
// what-if.
type mpaOptions struct {
	// sloMetrics gives the autoscaler spec.rl.slo on the app's metrics.
	sloMetrics bool
	// prometheusWindow is the recommender's --prometheus-window ("": its
	// default).
	prometheusWindow string
	// fitToNodes gives the recommender --fit-to-nodes.
	fitToNodes bool
	// loadPhase, when positive, starts each MPA run's load this long after
	// a recommender loop.
	loadPhase time.Duration
	// autoscalerAfter, when positive, creates each run's autoscaler this
	// long after its load began, instead of with the app.
	autoscalerAfter time.Duration
	// whatif runs the recommender's whatif (binOptions.recommender) on
	// each run of whatifPolicies.
	whatif bool
}

// appOptions shape the test app and its load: each request's CPU time and
// memory, the app's base memory, start-up delay and port, its pods' first
// CPU request, and the load generator's requests per connection.
type appOptions struct {
	cpu           time.Duration
	memPerRequest string
	baseMemory    string
	startupDelay  time.Duration
	port          int
	initialCPU    string
	perConnection int
}

// binOptions are where the binaries and sources the runs use are.
type binOptions struct {
	repo        string
	loadgen     string
	vpa         string
	vpaDir      string
	rlAgent     string
	recommender string
	agentCache  string
}

// simOptions are --simulate's: what the calibration fits and how the replay
// models what it cannot.
type simOptions struct {
	nodeCPU    float64
	nodeMemory float64
	// modelLatency replays the model's percentiles, not a sample's.
	modelLatency bool
	// modelUsage replays the mean rate's CPU usage, not the arrivals'.
	modelUsage bool
	// cpuRatio replays the runs' CPU ratio without idle CPU, not the fit.
	cpuRatio bool
	// cpuCV gives the burst model's requests a varying CPU time.
	cpuCV bool
	// background gives the simulated node the runs' background.
	background bool
	// tick gives the simulated node a scheduler tick.
	tick time.Duration
	// memoryFit is which requests in flight the memory fit reads.
	memoryFit simside.MemoryFit
	// model is the calibration's ReplayModel as the flags set it:
	// the fused default's timing (--sim-lag, --sim-step, --sim-look,
	// --sim-act, --sim-hpa-phases), the usage's resolution, and the app's
	// and the kubelet's models (--sim-serves-timed-out,
	// --sim-ready-within-window). Its sampling is modelLatency's and
	// modelUsage's, negated.
	model simside.ReplayModel
	// vpaAdmission is model.Timing's NoVPAAdmission, negated.
	vpaAdmission bool
	// heldMemory is Calibration.HeldMemoryPerRequest in MiB.
	heldMemory float64
	// heldQuantum is Calibration.HeldQuantum, as a duration of CPU time.
	heldQuantum time.Duration
	// idlePeriod is Options.IdlePeriod: the pods' idle CPU as a burst
	// this often.
	idlePeriod time.Duration
	// idleBurst is Options.IdleBurst.
	idleBurst time.Duration
	// draws is how many draws of the simulator each run is replayed with.
	draws int
}

func main() {
	var o options
	var policies, merge string
	flag.StringVar(&policies, "policies", strings.Join(Policies, ","), "comma-separated policies to run, of "+strings.Join(Policies, ", ")+", and fused:SPEC (the recommender's and the updater's --default-variant=SPEC, e.g. fused:target=0.7/floor=usage)")
	flag.IntVar(&o.repeat, "repeat", 3, "repetitions of every policy; the order alternates (reversed in odd repetitions)")
	flag.IntVar(&o.firstRep, "first-rep", 0, "number of the first repetition (to spread repetitions over invocations; a repetition's seed is --seed plus its number)")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "length of each run's load (at least 8m)")
	flag.StringVar(&o.trace, "trace", "step-change", "the simulator's trace kind the load generator replays")
	flag.Float64Var(&o.mean, "mean", 20, "the trace's mean rate, requests/s")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the trace and the arrivals of repetition 0")
	flag.DurationVar(&o.slo, "slo", 250*time.Millisecond, "the p95 latency objective")
	flag.DurationVar(&o.window, "window", 15*time.Second, "width of a record")
	flag.DurationVar(&o.app.cpu, "cpu", 10*time.Millisecond, "the app's CPU time per request")
	flag.StringVar(&o.app.initialCPU, "initial-cpu", "200m", "the app's CPU request and limit at the start of every run (one replica)")
	flag.IntVar(&o.app.perConnection, "requests-per-connection", 1, "the load generator closes a connection after about this many requests: 1 (the default since round nineteen), a connection per request, so SO_REUSEPORT spreads every request over the Ready pods as many clients would, and as the simulator does; 100 (the default before) keeps a few connections, each on one pod, so a new pod gets load only as they turn over")
	flag.StringVar(&o.app.memPerRequest, "memory-per-request", "1Mi", "the app's memory per request in flight")
	flag.StringVar(&o.app.baseMemory, "base-memory", "48Mi", "the app's base memory")
	flag.DurationVar(&o.app.startupDelay, "startup-delay", 5*time.Second, "the app's start-up delay before it is ready")
	flag.IntVar(&o.app.port, "app-port", 0, "loopback port the app's replicas share (0: the testbed's base port + 40)")
	flag.DurationVar(&o.cooldown, "cooldown", 20*time.Second, "pause between runs, after the previous run's pods are gone")
	flag.StringVar(&o.out, "out", "bench-real-out", "directory for results.json, results.txt, timelines.txt (each run's decisions and events in time order) and logs")
	flag.StringVar(&o.bin.repo, "repo", ".", "the repository's root (deploy/ is installed from it)")
	flag.StringVar(&o.bin.loadgen, "loadgen", "", "the load generator's binary")
	flag.StringVar(&o.bin.vpa, "vpa-bin", "", "directory of VPA's recommender, updater and admission-controller")
	flag.StringVar(&o.bin.vpaDir, "vpa-module-dir", "", "VPA's module source directory (its deploy/ CRD and RBAC)")
	flag.StringVar(&merge, "merge", "", "comma-separated results.json files to merge and report, instead of running; FILE@POLICY[@POLICY...] keeps only those policies' runs of FILE")
	flag.Float64Var(&o.report.maxOutside, "max-outside-cpu", result.DefaultMaxOutsideCores, "a run during which processes outside the benchmark took more than this many cores on average is reported as disturbed, and --merge leaves it out")
	flag.BoolVar(&o.report.keepDisturbed, "keep-disturbed", false, "--merge: keep the disturbed runs (--max-outside-cpu) in the merged results")
	flag.StringVar(&o.report.reference, "reference", "fused", "the policy every other is compared with")
	flag.BoolVar(&o.smoke, "smoke", false, "allow runs shorter than 8m, to try the harness (results say so)")
	flag.BoolVar(&o.simulate, "simulate", false, "after the runs (or with --merge): calibrate the simulator's app from them, replay every run's policy and repetition in the simulator, print the two side by side and write simulated.json, side-by-side.txt and sim-POLICY.svg")
	flag.IntVar(&o.sim.draws, "sim-draws", 5, "--simulate: replay every run with this many draws of the simulator's randomness (arrivals, latency samples) and set their mean beside the real run: one draw is one outcome of the simulator, as the real run is one of the node")
	flag.BoolVar(&o.sim.modelLatency, "sim-model-latency", false, "--simulate: replay each window's p95 as the model's, the same in every calm window, rather than as a sample of its requests (sim.Config.SampledLatency); to set the two side by side")
	flag.BoolVar(&o.sim.modelUsage, "sim-model-usage", false, "--simulate: replay each pod's CPU usage as the mean rate's, the same in every calm window, rather than as the work of the window's arrivals (sim.Config.SampledUsage); to set the two side by side")
	flag.DurationVar(&o.sim.model.UsageResolution, "sim-usage-resolution", simside.DefaultUsageResolution, "--simulate: the period the policies' observed CPU usage is a rate over in the replay, as the testbed's metrics-server's --metric-resolution gives it (sim.Config.UsageResolution); 0: each window's own usage")
	flag.BoolVar(&o.sim.cpuCV, "sim-cpu-cv", false, "--simulate: give the burst model's requests the CPU time's coefficient of variation whose p95 is nearest the real windows' (simside.Throttling.BurstCV), rather than a constant CPU time; to set the two side by side")
	flag.DurationVar(&o.sim.idlePeriod, "sim-idle-period", 0, "--simulate: the replayed pods' idle CPU comes as one burst this often, which spends the pod's CFS quota as the requests do (sim.Demand.IdlePeriod; the test app's exec readiness probe starts a process in its cgroup every 2s), in the burst model's fit as in the replay; 0 spreads it evenly over time, the limit less it serving the requests")
	flag.DurationVar(&o.sim.idleBurst, "sim-idle-burst", 0, "--simulate, with --sim-idle-period: each burst's CPU time (sim.Demand.IdleBurst; an exec probe of the test app took 9ms in its container's cgroup, 2026-12-07), the rest of the idle CPU spread evenly; 0: all of it in the bursts")
	flag.DurationVar(&o.sim.tick, "sim-tick", DefaultSimTick, "--simulate: the simulated node's scheduler tick (sim.Config.NodeTick), at which the kernel finds a CFS quota spent, so that requests run on past it and the overrun comes off the next period's; the default is the bench machines' (CONFIG_HZ=250); 0 enforces the quota to the instant")
	flag.Func("sim-memory-fit", "--simulate: what the calibration's memory fit regresses the pods' working set on beside their count (simside.MemoryFit): gauge, the app's requests in flight as the testbed's Prometheus scraped its in-flight gauge, over the windows whose pods stayed as they were at any load; little, the requests in flight by Little's law off the p95 over calm windows (the fit before runs recorded the gauge); auto, gauge where at least 10 windows have it, else little (default auto)", func(v string) (err error) {
		o.sim.memoryFit, err = simside.ParseMemoryFit(v)
		return err
	})
	flag.IntVar(&o.sim.model.Timing.Lag, "sim-lag", 0, "--simulate: apply each replayed decision of the fused default and its variants this many windows later than --sim-act says (simside.Timing.Lag); 0 as the simulator does")
	flag.DurationVar(&o.sim.model.Timing.Step, "sim-step", 0, "--simulate: the simulator's step in the replay, a whole fraction of the runs' window (simside.Timing.Step), whose steps make up each window; 0: the window, as the simulator does. A finer step lets a decision land within a window (--sim-look, --sim-act)")
	flag.DurationVar(&o.sim.model.Timing.Look, "sim-look", 0, "--simulate: how far into each window the replayed fused default decides, a whole number of --sim-step (simside.Timing.Look); on the node, with --load-phase 5s, its recommender looks some 9.5 s in (docs/real-node-rounds.md); 0: at the window's end, as the simulator does")
	flag.BoolVar(&o.sim.model.ServesTimedOut, "sim-serves-timed-out", true, "--simulate: the replayed app serves every request it holds to the end, past its client's timeout, sharing the CPU among them (sim.App.ServesTimedOut), as the test app does: in an overload it answers nothing once it holds more than it can answer in time (hack/memlag.sh); false: the fluid backlog, which drops at arrival what it cannot answer in time, as all replays before 2026-12-07")
	flag.DurationVar(&o.sim.heldQuantum, "sim-held-quantum", 0, "--simulate, with --sim-serves-timed-out: the requests held in an overload are served in turns of this much CPU time each, in arrival order (sim.App.HeldQuantum), as Go's run queues give the test app's requests turns of a few milliseconds (docs/real-node-rounds.md, 2026-12-07); 0: an equal share of the CPU (processor sharing)")
	flag.Float64Var(&o.sim.heldMemory, "sim-held-memory", 0.36, "--simulate, with --sim-serves-timed-out: MiB of working set each request held in an overload adds (sim.App.HeldMemoryPerRequest); the default is what hack/memlag.sh measured on the test app at 1.8× a 200m quota (561 requests in flight, 0.36 MiB each, docs/real-node-rounds.md, round forty-three); 0: the fitted memory per request")
	flag.BoolVar(&o.sim.vpaAdmission, "sim-vpa-admission", true, "--simulate: the replayed VPA's (vpa, hpa+vpa) pods created between its updater's loops take the target of its last loop, as the real admission controller gives a new pod the recommender's latest target, while the running pods keep theirs within bounds (sim.Simulator.Admit); false: they take what its updater last let through, as all replays before 2026-12-06")
	flag.BoolVar(&o.sim.model.ReadyWithinWindow, "sim-ready-within-window", true, "--simulate: a replayed pod serves from the moment it becomes Ready, its start-up delay after it was created or restarted, and counts Ready at the window's end, as the node's do (sim.Config.ReadyWithinWindow); false: it serves from the next window's start, as all replays before 2026-12-07")
	flag.BoolVar(&o.sim.model.Timing.HPAPhases, "sim-hpa-phases", false, "--simulate: replay the real HPA's loop (hpa, hpa+vpa) at a phase of its own within the window, one --sim-step later with each draw in turn (simside.Timing.HPAPhases), rather than at each window's end; the controller-manager's loop runs out of phase with the windows. Needs --sim-step")
	flag.DurationVar(&o.sim.model.Timing.Act, "sim-act", 0, "--simulate: how long after each decision of the replayed fused default the simulated updater applies it, at the next step boundary (simside.Timing.Act); on the node some 14 s; 0: at once, as the simulator does")
	flag.BoolVar(&o.sim.background, "sim-background", false, "--simulate: replay each run beside its own measured background (the machine's CPU beside the app's pods: simside.RunBackground), which slows the requests that share a core with it (sim.Config.NodeBackground), and fit the burst model so; to set the two side by side")
	flag.BoolVar(&o.sim.cpuRatio, "sim-cpu-ratio", false, "--simulate: give the simulated app the runs' CPU used over requests answered and no idle CPU, rather than the fit of the pods' idle CPU and each request's (simside.Calibration.CPUFitted); to set the two side by side")
	flag.Float64Var(&o.sim.nodeCPU, "sim-node-cpu", simside.DefaultNodeCPU, "--simulate: the simulated node's allocatable CPU (default: 2 cores less the components' requests)")
	flag.Float64Var(&o.sim.nodeMemory, "sim-node-memory-gib", simside.DefaultNodeMemory/sim.GiB, "--simulate: the simulated node's allocatable memory in GiB (default: 24 GiB less the components' requests)")
	flag.BoolVar(&o.mpa.sloMetrics, "slo-metrics", true, "the testbed's Prometheus scrapes every replica of the app, the recommender reads it (--prometheus-address), and the autoscaler has spec.rl.slo on the app's latency histogram, so the fused default and the agents see the request rate and the p95 as the simulator's policies do; a run whose recommender lacked them is reported and fails the invocation. false: as runs before issue 37 (no SLO inputs)")
	flag.StringVar(&o.mpa.prometheusWindow, "prometheus-window", "", "--slo-metrics: the recommender's --prometheus-window, the range of rate() in its SLO queries (empty: its default, 2m, which lags a load step by about a minute; the simulator's policies see the current window)")
	flag.StringVar(&o.bin.agentCache, "agent-cache", filepath.Join(cacheHome(), "aware", "agents"), "directory of the ensemble's trained members, one subdirectory per commit of the training code and training configuration")
	flag.StringVar(&o.bin.rlAgent, "rl-agent", "", "the rl-agent binary that trains the ensemble's members when they are not cached")
	flag.BoolVar(&o.mpa.fitToNodes, "fit-to-nodes", false, "give the recommender --fit-to-nodes: the fused default's and the agents' recommendations are fitted to the room the node has for the app's pods")
	flag.DurationVar(&o.mpa.loadPhase, "load-phase", 0, "start the load of every MPA run this long after the end of a recommender loop (0: whenever the app is ready, as before), so that the recommender's first look at the load comes at the same point in every run; the fused default's start-up path depends on it (docs/real-node.md). Less than the recommender's 15-s interval. With --autoscaler-after a multiple of 15 s, the autoscaler is created at the same point of the loop in every run too")
	flag.DurationVar(&o.mpa.autoscalerAfter, "autoscaler-after", 0, "create each run's autoscaler (HPA, VPA or MultidimPodAutoscaler) this long after its load began, instead of with the app (0): its first look then finds the app already loaded, as when an autoscaler is installed on a running workload. The windows before it count in every policy's results alike")
	flag.BoolVar(&o.mpa.whatif, "whatif", false, "after each run of the real HPA (policy hpa), run `recommender whatif` on that run's history in the testbed's Prometheus (which then also scrapes the real kubelet's cAdvisor) and keep its prediction of the fused default; the report sets each prediction beside the real fused run of the same repetition (docs/whatif.md)")
	flag.StringVar(&o.bin.recommender, "recommender", "", "--whatif: the recommender binary")
	flag.Parse()
	o.policies = strings.Split(policies, ",")
	if merge != "" {
		o.report.files = strings.Split(merge, ",")
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "benchreal: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(o.report.files) > 0 {
		err = mergeReport(o)
	} else {
		err = run(ctx, o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchreal: %v\n", err)
		os.Exit(1)
	}
}

// cacheHome is $HOME/.cache (or the OS's user cache directory).
func cacheHome() string {
	if d, err := os.UserCacheDir(); err == nil {
		return d
	}
	return filepath.Join(os.TempDir(), "cache")
}

func (o options) validate() error {
	var errs []error
	if !(o.report.maxOutside >= 0) || math.IsInf(o.report.maxOutside, 0) {
		errs = append(errs, fmt.Errorf("--max-outside-cpu %g must be a finite number of cores >= 0", o.report.maxOutside))
	}
	if o.simulate && (!(o.sim.nodeCPU > 0) || !(o.sim.nodeMemory > 0)) {
		errs = append(errs, fmt.Errorf("--sim-node-cpu %g and --sim-node-memory-gib %g must be > 0", o.sim.nodeCPU, o.sim.nodeMemory))
	}
	if o.simulate && (o.sim.draws < 1 || o.sim.draws > 100) {
		errs = append(errs, fmt.Errorf("--sim-draws %d must be within [1, 100]", o.sim.draws))
	}
	if o.simulate && o.sim.heldQuantum < 0 {
		errs = append(errs, fmt.Errorf("--sim-held-quantum %s must be >= 0", o.sim.heldQuantum))
	}
	if o.simulate && o.sim.heldQuantum > 0 && !o.sim.model.ServesTimedOut {
		errs = append(errs, errors.New("--sim-held-quantum orders the held queue of --sim-serves-timed-out, which is off"))
	}
	if o.simulate && o.sim.idlePeriod != 0 && o.sim.idlePeriod < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--sim-idle-period %s must be 0 (spread evenly) or at least the CFS period, 100ms", o.sim.idlePeriod))
	}
	if o.simulate && (o.sim.idleBurst < 0 || o.sim.idleBurst > 0 && o.sim.idlePeriod == 0) {
		errs = append(errs, fmt.Errorf("--sim-idle-burst %s must be >= 0, and set only with --sim-idle-period", o.sim.idleBurst))
	}
	if o.simulate && (o.sim.tick < 0 || o.sim.tick > 100*time.Millisecond) {
		errs = append(errs, fmt.Errorf("--sim-tick %s must be from 0 to the CFS period, 100ms", o.sim.tick))
	}
	if o.simulate && (o.sim.model.Timing.Lag < 0 || o.sim.model.Timing.Lag > 4) {
		errs = append(errs, fmt.Errorf("--sim-lag %d must be within [0, 4] windows", o.sim.model.Timing.Lag))
	}
	if o.simulate && (o.sim.model.Timing.Step < 0 || o.sim.model.Timing.Look < 0 || o.sim.model.Timing.Act < 0 || o.sim.model.Timing.Act > 2*time.Minute) {
		errs = append(errs, fmt.Errorf("--sim-step %s, --sim-look %s and --sim-act %s must be >= 0, --sim-act at most 2m", o.sim.model.Timing.Step, o.sim.model.Timing.Look, o.sim.model.Timing.Act))
	}
	if o.simulate && o.sim.model.Timing.HPAPhases && o.sim.model.Timing.Step == 0 {
		errs = append(errs, errors.New("--sim-hpa-phases needs a --sim-step finer than the window"))
	}
	if o.simulate && o.sim.model.Timing.Look > 0 && o.sim.model.Timing.Step == 0 {
		errs = append(errs, fmt.Errorf("--sim-look %s needs a --sim-step that divides both it and the window", o.sim.model.Timing.Look))
	}
	if o.simulate && o.sim.model.UsageResolution < 0 {
		errs = append(errs, fmt.Errorf("--sim-usage-resolution %s must be >= 0", o.sim.model.UsageResolution))
	}
	if len(o.report.files) > 0 {
		return errors.Join(errs...)
	}
	for _, p := range o.policies {
		if err := validPolicy(p); err != nil {
			errs = append(errs, err)
		}
	}
	if o.mpa.loadPhase < 0 || o.mpa.loadPhase >= 15*time.Second {
		errs = append(errs, fmt.Errorf("--load-phase %s must be in [0, 15s), the recommender's interval", o.mpa.loadPhase))
	}
	if o.mpa.autoscalerAfter < 0 || (o.mpa.autoscalerAfter > 0 && o.mpa.autoscalerAfter >= o.duration) {
		errs = append(errs, fmt.Errorf("--autoscaler-after %s must be in [0, --duration %s)", o.mpa.autoscalerAfter, o.duration))
	}
	if o.repeat < 1 {
		errs = append(errs, errors.New("--repeat must be at least 1"))
	}
	if o.duration < 8*time.Minute && !o.smoke {
		errs = append(errs, fmt.Errorf("--duration %s: a run lasts at least 8m", o.duration))
	}
	if o.bin.loadgen == "" {
		errs = append(errs, errors.New("--loadgen is required"))
	}
	if o.mpa.whatif && (!o.mpa.sloMetrics || o.bin.recommender == "") {
		errs = append(errs, errors.New("--whatif needs --slo-metrics (the request rate) and --recommender"))
	}
	needVPA := slices.ContainsFunc(o.policies, func(p string) bool { return strings.Contains(p, "vpa") })
	if needVPA && (o.bin.vpa == "" || o.bin.vpaDir == "") {
		errs = append(errs, errors.New("--vpa-bin and --vpa-module-dir are required for the vpa policies"))
	}
	return errors.Join(errs...)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s benchreal: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	tb, err := framework.Load()
	if err != nil {
		return err
	}
	env, err := nodeinstall.EnvFrom(tb)
	if err != nil {
		return err
	}
	if o.app.port == 0 {
		o.app.port = env.BasePort + 40
	}
	logDir := filepath.Join(o.out, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	mpas, err := versioned.NewForConfig(tb.Config)
	if err != nil {
		return err
	}
	h := &harness{o: o, tb: tb, env: env, logDir: logDir, mpas: mpas}
	in := &nodeinstall.Installer{TB: tb, Env: env, Repo: o.bin.repo, FieldManager: "aware-bench-real"}
	if o.mpa.sloMetrics {
		in.Mutate = sloMutate(tb.PrometheusURL, o.mpa.prometheusWindow)
		removeJob, err := h.setupSLOMetrics(ctx)
		if err != nil {
			return err
		}
		defer removeJob()
	}
	if o.mpa.fitToNodes {
		in.Mutate = fitMutate(in.Mutate)
	}
	if slices.Contains(o.policies, agent.Ensemble) {
		if h.ensembleDir, err = h.ensembleMembers(ctx); err != nil {
			return err
		}
	}
	logf("installing deploy/ as pods on %s (images :%s)", env.Node, env.Tag)
	if _, err := in.Install(ctx); err != nil {
		return err
	}
	defer func() {
		// The components' logs go with their pods: keep them beside the
		// runs' (their lines carry times, timelines.txt each run's span).
		dst := filepath.Join(logDir, "components")
		if n, err := env.KeepPodLogs(nodeinstall.Namespace, dst); err != nil {
			logf("keeping the components' logs: %v", err)
		} else {
			logf("kept %d log files of the components in %s", n, dst)
		}
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := in.Uninstall(c); err != nil {
			logf("uninstall: %v", err)
		}
	}()
	if slices.ContainsFunc(o.policies, func(p string) bool { return strings.Contains(p, "vpa") }) {
		stopVPA, err := h.startVPA(ctx)
		if err != nil {
			return err
		}
		defer stopVPA()
	}
	var runs []result.Run
	order := 0
	for rep := o.firstRep; rep < o.firstRep+o.repeat; rep++ {
		ps := slices.Clone(o.policies)
		if rep%2 == 1 {
			slices.Reverse(ps)
		}
		for _, p := range ps {
			if ctx.Err() != nil {
				break
			}
			logf("run %d: %s, repetition %d", order, p, rep)
			r, err := h.trial(ctx, p, rep, order)
			order++
			if err != nil {
				logf("run %s repetition %d failed: %v", p, rep, err)
				if ctx.Err() != nil {
					break
				}
				continue
			}
			runs = append(runs, r)
			// Written after every run, so an interrupted invocation keeps
			// what it measured.
			if err := h.write(runs); err != nil {
				return err
			}
		}
	}
	if len(runs) == 0 {
		return errors.New("no run completed")
	}
	if err := h.write(runs); err != nil {
		return err
	}
	// Results without the SLO inputs are kept (written above) but fail
	// the invocation, so that nobody takes them for like-for-like ones.
	var missing []string
	for _, r := range runs {
		if r.SLOMissing != "" {
			missing = append(missing, fmt.Sprintf("%s repetition %d: %s", r.Policy, r.Rep, r.SLOMissing))
		}
	}
	if o.simulate {
		sets := make([]map[string]string, len(runs))
		for i := range sets {
			sets[i] = o.settings()
		}
		if err := simulate(o, runs, sets, o.settings()); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the SLO inputs were missing (--slo-metrics): %s", strings.Join(missing, "; "))
	}
	return nil
}

// settings are the invocation's, written beside the runs.
func (o options) settings() map[string]string {
	return map[string]string{
		"trace": o.trace, "mean": fmt.Sprint(o.mean), "seed": fmt.Sprint(o.seed), "duration": o.duration.String(),
		"slo": o.slo.String(), "window": o.window.String(), "cpu": o.app.cpu.String(), "memoryPerRequest": o.app.memPerRequest,
		"baseMemory": o.app.baseMemory, "startupDelay": o.app.startupDelay.String(), "initialCpu": o.app.initialCPU, "requestsPerConnection": fmt.Sprint(o.app.perConnection), "smoke": fmt.Sprint(o.smoke),
		"sloMetrics": fmt.Sprint(o.mpa.sloMetrics), "prometheusWindow": o.promWindow(), "fitToNodes": fmt.Sprint(o.mpa.fitToNodes), "loadPhase": o.mpa.loadPhase.String(), "autoscalerAfter": o.mpa.autoscalerAfter.String(),
	}
}

func (h *harness) write(runs []result.Run) error {
	if err := writeRuns(filepath.Join(h.o.out, "results.json"), h.o.settings(), runs); err != nil {
		return err
	}
	return report(h.o, runs)
}

// report prints and writes the runs' table, the disturbed runs and the
// warnings (one line each), and every run's timeline.
func report(o options, runs []result.Run, warnings ...string) error {
	var b strings.Builder
	if err := result.WriteTable(&b, runs, o.report.reference); err != nil {
		return err
	}
	if err := result.WriteOutside(&b, runs, o.report.maxOutside); err != nil {
		return err
	}
	if err := result.WriteWhatIf(&b, runs, "fused"); err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(&b, "\nWARNING: %s\n", w)
	}
	fmt.Print(b.String())
	if err := os.WriteFile(filepath.Join(o.out, "results.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	// Each run's decisions and events, merged in time order: the path it
	// took, readable without the JSON.
	var t strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&t, "== %s repetition %d\n", r.Policy, r.Rep)
		if err := result.Timeline(&t, r); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(o.out, "timelines.txt"), []byte(t.String()), 0o644)
}

func mergeReport(o options) error {
	var runs []result.Run
	// Every run keeps its own file's settings: the simulator replays its
	// trace from them.
	var sets []map[string]string
	var groups []result.Group
	for _, arg := range o.report.files {
		p, keep, err := mergeInput(arg)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		rf, err := simside.ReadFile(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		kept, err := keepPolicies(rf.Runs, keep)
		if err != nil {
			return fmt.Errorf("--merge %s: %w", arg, err)
		}
		if !o.report.keepDisturbed {
			var dropped []result.Run
			kept, dropped = result.Quiet(kept, o.report.maxOutside)
			for _, r := range dropped {
				logf("%s: leaving out %s repetition %d: %.2f cores outside the benchmark (--max-outside-cpu %.2f; --keep-disturbed keeps it)", p, r.Policy, r.Rep, r.CPU.OutsideCores(), o.report.maxOutside)
			}
		}
		runs = append(runs, kept...)
		groups = append(groups, result.Group{Name: p, Runs: kept})
		for range kept {
			sets = append(sets, rf.Settings)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	// The inputs' settings are kept when they all agree, so that a merged
	// file can be merged (and simulated) again.
	settings := map[string]string{}
	for i, s := range sets {
		s = maps.Clone(s)
		delete(s, "merged")
		if i == 0 {
			maps.Copy(settings, s)
		} else if !maps.Equal(s, settings) {
			clear(settings)
			break
		}
	}
	settings["merged"] = strings.Join(o.report.files, ",")
	if err := writeRuns(filepath.Join(o.out, "results.json"), settings, runs); err != nil {
		return err
	}
	var warnings []string
	if w := result.SpeedMismatch(groups, result.DefaultMaxSpeedRatio); w != "" {
		logf("WARNING: %s", w)
		warnings = append(warnings, w)
	}
	if err := report(o, runs, warnings...); err != nil {
		return err
	}
	if !o.simulate {
		return nil
	}
	return simulate(o, runs, sets, settings)
}

// calibrate is --simulate's calibration from the runs, with the replay
// model the flags choose.
func calibrate(o options, runs []result.Run) (simside.Calibration, error) {
	cal, err := simside.Calibrate(runs, simside.Options{TryCPUTimeCVs: true, VaryCPUTime: o.sim.cpuCV, Background: o.sim.background, Tick: o.sim.tick, IdlePeriod: o.sim.idlePeriod, IdleBurst: o.sim.idleBurst, MemoryFit: o.sim.memoryFit})
	if err != nil {
		return cal, fmt.Errorf("--simulate: %w", err)
	}
	cal.Node.Allocatable.CPU, cal.Node.Allocatable.Memory = o.sim.nodeCPU, o.sim.nodeMemory*sim.GiB
	// The replay model is the flags'; the idle period, which the fit took
	// too, is one of them.
	cal.ReplayModel = o.sim.model
	cal.IdlePeriod, cal.IdleBurst = o.sim.idlePeriod.Seconds(), o.sim.idleBurst.Seconds()
	cal.SampledLatency, cal.SampledUsage = !o.sim.modelLatency, !o.sim.modelUsage
	cal.Timing.NoVPAAdmission = !o.sim.vpaAdmission
	if o.sim.model.ServesTimedOut {
		cal.HeldMemoryPerRequest, cal.HeldQuantum = o.sim.heldMemory*sim.MiB, o.sim.heldQuantum.Seconds()
	}
	if o.sim.cpuRatio {
		cal.CPUFitted, cal.CPUFitReason = false, "--sim-cpu-ratio"
	}
	return cal, nil
}

// simulate sets the simulator beside the real runs (simside): it
// calibrates the simulator's app from them, replays each run's policy and
// repetition on its trace, prints the calibration, the side-by-side table
// and the simulated runs' own table, and writes simulated.json,
// side-by-side.txt and one SVG per policy (its first repetition).
func simulate(o options, runs []result.Run, sets []map[string]string, settings map[string]string) error {
	cal, err := calibrate(o, runs)
	if err != nil {
		return err
	}
	// The agent policies have no simulated counterpart here (the
	// simulator's agents are evaluated by rl-agent eval and the demo).
	var kept []result.Run
	var keptSets []map[string]string
	for i, r := range runs {
		if agent.Is(r.Policy) {
			continue
		}
		kept, keptSets = append(kept, r), append(keptSets, sets[i])
	}
	if len(kept) < len(runs) {
		logf("--simulate: the agent policies' %d runs are not simulated", len(runs)-len(kept))
	}
	runs, sets = kept, keptSets
	if len(runs) == 0 {
		return errors.New("--simulate: no run of a policy the simulator replays")
	}
	// sims are draw 0 of every run, the ones written and tabled; draws
	// holds all --sim-draws of them, whose means the side-by-side sets
	// beside the real runs.
	sims := make([]result.Run, 0, len(runs))
	var draws, onPods, podSims []result.Run
	for i, r := range runs {
		runCal := cal
		if o.sim.background {
			// Each run beside its own background, as the fit has it.
			if bg, ok := simside.RunBackground(r); ok {
				runCal.Node.Background = bg
			}
		}
		for d := range o.sim.draws {
			// The closed-loop replay of the run's policy, and the replay
			// on the run's own pods: draw 0 of each is written, all are
			// set beside the real run.
			for _, rp := range []struct {
				what       string
				replay     func() (result.Run, error)
				first, all *[]result.Run
			}{
				{"", func() (result.Run, error) { return simside.ReplayDraw(runCal, sets[i], r.Policy, r.Rep, d) }, &sims, &draws},
				{" on its own pods", func() (result.Run, error) { return simside.ReplayPods(runCal, sets[i], r, d) }, &podSims, &onPods},
			} {
				s, err := rp.replay()
				if err != nil {
					return fmt.Errorf("--simulate: %s repetition %d%s: %w", r.Policy, r.Rep, rp.what, err)
				}
				s.Order = r.Order
				if d == 0 {
					*rp.first = append(*rp.first, s)
				}
				*rp.all = append(*rp.all, s)
			}
		}
	}
	calJSON, err := json.Marshal(cal)
	if err != nil {
		return err
	}
	simSettings := maps.Clone(settings)
	simSettings["calibration"] = string(calJSON)
	for name, rs := range map[string][]result.Run{"simulated.json": sims, "simulated-pods.json": podSims} {
		if err := writeRuns(filepath.Join(o.out, name), simSettings, rs); err != nil {
			return err
		}
	}
	var b strings.Builder
	if err := cal.Write(&b); err != nil {
		return err
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "simulated: the mean of %d draws per run (--sim-draws)\n", o.sim.draws)
	if err := simside.WriteSideBySide(&b, runs, draws); err != nil {
		return err
	}
	b.WriteString("\n")
	if err := simside.WritePodsReplay(&b, runs, onPods, draws); err != nil {
		return err
	}
	b.WriteString("\nthe simulated runs (draw 0):\n")
	if err := result.WriteTable(&b, sims, o.report.reference); err != nil {
		return err
	}
	fmt.Print(b.String())
	if err := os.WriteFile(filepath.Join(o.out, "side-by-side.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	first := map[string]int{}
	for i, r := range runs {
		if j, ok := first[r.Policy]; !ok || r.Rep < runs[j].Rep {
			first[r.Policy] = i
		}
	}
	for p, i := range first {
		var svg bytes.Buffer
		if err := simside.WriteSVG(&svg, runs[i], sims[i]); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		name := filepath.Join(o.out, "sim-"+policySlug(p)+".svg")
		if err := os.WriteFile(name, svg.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeRuns writes runs with their settings to the file name
// (result.WriteRuns).
func writeRuns(name string, settings map[string]string, runs []result.Run) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := result.WriteRuns(f, settings, runs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
