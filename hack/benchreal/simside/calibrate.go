// Package simside sets the simulator beside the real-node benchmark (make
// bench-real, hack/benchreal): it calibrates the simulator's app from the
// real runs' measurements (Calibrate), replays every real run's trace and
// policy in the simulator on one node sized like the real one (Replay),
// and prints and plots the two side by side (WriteSideBySide, WriteSVG).
// Simulated runs are result.Runs, so result.Summarise and
// result.WriteTable read them as they read real ones.
//
// Like hack/benchreal/result it is pure: no client, no clock, no I/O
// beyond the readers and writers it is given. docs/real-node.md ("The
// simulator beside it") describes the method.
package simside

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// The real node (the testbed's kubelet on this machine) has about 2 CPUs
// and 24 GiB allocatable, and the four components of deploy/ run on it as
// pods requesting 700m and 1 GiB between them (recommender 100m/256Mi,
// updater 50m/128Mi, admission controller 50m/128Mi, rl-agent 500m/512Mi).
// The app's pods get what is left; the simulated node has that much.
// Its pods' requests run on all of its DefaultNodeCores cores, which only
// the CFS quota model reads (sim.Config.NodeCores).
const (
	DefaultNodeCPU    = 2 - 0.7
	DefaultNodeMemory = 24*sim.GiB - 1*sim.GiB
	DefaultNodeCores  = 2
)

// SimNode is the node the real runs are replayed on.
type SimNode struct {
	// Allocatable is DefaultNodeCPU and DefaultNodeMemory unless the
	// caller changes it; Cores the cores its pods' requests run on
	// (DefaultNodeCores; sim.Config.NodeCores).
	Allocatable workload.Resources `json:"allocatable"`
	Cores       float64            `json:"cores"`
	// Background is the cores the node's other work keeps busy, which the
	// CFS quota model reads (sim.Config.NodeBackground): the runs'
	// MeasuredBackground with Options.Background, else 0. The fit and the
	// replay of a run take the run's own (RunBackground) instead, which a
	// caller replaying runs sets here run by run.
	Background float64 `json:"background"`
	// MeasuredBackground is the median over the runs of the CPU the
	// machine used beside the app's pods, the hypervisor's steal
	// included, in cores (MeasureBackground); N is 0 without a run that
	// recorded the machine's CPU.
	MeasuredBackground Estimate `json:"measuredBackground"`
	// Tick is the node's scheduler tick, at which the kernel finds a CFS
	// quota spent (sim.Config.NodeTick): Options.Tick, else 0 (a quota
	// enforced to the instant).
	Tick time.Duration `json:"tick,omitempty"`
}

// Quota is what the CFS quota model reads of the node (QuotaP95), with
// background cores of other work beside the pod.
func (n SimNode) Quota(background float64) QuotaNode {
	return QuotaNode{Cores: n.Cores, Background: background, Tick: n.Tick}
}

// DefaultUsageResolution is the testbed's metrics-server's
// --metric-resolution (hack/testbed/up.sh): the HPA and the recommender
// read each pod's CPU as a rate over the last 10 s.
const DefaultUsageResolution = 10 * time.Second

// Minimum data Calibrate accepts: fewer and it refuses.
const (
	// MinFitWindows is the fewest calm windows for the memory fit.
	MinFitWindows = 10
	// MinThrottleWindows is the fewest windows for the latency fit; with
	// fewer the throttling is reported unresolved (not refused: the other
	// figures do not depend on it).
	MinThrottleWindows = 8
	// maxThrottleRho keeps the latency fit to the stationary regime, where
	// the simulator's formula applies; near saturation the backlog rules.
	maxThrottleRho = 0.9
)

// ErrThinData is wrapped by every refusal for lack of data.
var ErrThinData = errors.New("too little data to calibrate")

// Estimate is one calibrated figure: its value, a range and how it was
// measured. For a median the range is the interquartile range; for a
// least-squares coefficient it is ±1.96 standard errors.
type Estimate struct {
	Value  float64 `json:"value"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
	N      int     `json:"n"`
	Method string  `json:"method"`
}

// Throttling is how the real app's p95 grows with the load on its CPU
// limit, set against the simulator's formula. The simulator serves a pod
// as a processor-sharing queue of capacity c (its CPU limit), so with S =
// CPU seconds per request / c and ρ the pod's utilisation of its limit its
// p95 is W + ln(20)·S/(1−ρ). The real windows give the same regressor x =
// S/(1−ρ), and a least-squares line p95 = Shift + Slope·x says how the real
// container behaves: a Slope near ln 20 ≈ 3.0 is the simulator's shape, a
// smaller one a real container faster than the model at low load (the CFS
// quota lets a short request run at a full core within its period), a
// larger one a slower one.
type Throttling struct {
	Resolved bool   `json:"resolved"`
	Reason   string `json:"reason,omitempty"`
	Windows  int    `json:"windows"`
	// Shift and Slope are the free fit, R2 its coefficient of determination.
	Shift Estimate `json:"shift"`
	Slope Estimate `json:"slope"`
	R2    float64  `json:"r2"`
	// SimSlope is the simulator's, ln 20.
	SimSlope float64 `json:"simSlope"`
	// IOWait is what the simulated app uses as its I/O wait W: the median
	// of p95 − ln(20)·x over the windows, at least 0. It is the shift that
	// brings the simulator's p95 closest to the real one with the
	// simulator's own slope; the slope itself the simulator cannot take.
	IOWait Estimate `json:"ioWait"`
	// Burst is whether the simulated app uses the burst latency model
	// (sim.App.CPUBurst: the CFS quota queue, where a request runs at one
	// core while the pod's quota lasts; QuotaP95) rather than the fluid
	// one: the model whose p95 without I/O wait is nearer the real
	// windows' (FluidError, BurstError: the median over the windows of
	// |ln(real p95 / model p95)|). Without I/O wait because the test app
	// does none, and because a free W would hide much of the difference
	// at one pod size. BurstIOWait is the burst model's W, found as IOWait
	// is for the fluid one.
	Burst       bool     `json:"burst"`
	FluidError  float64  `json:"fluidError"`
	BurstError  float64  `json:"burstError"`
	BurstIOWait Estimate `json:"burstIoWait"`
	// BurstCV is the coefficient of variation of a request's CPU time the
	// burst model takes (sim.Demand.CPUSecondsCV), and BurstError and
	// BurstIOWait are at it: 0 (a constant CPU time, the test app's), or
	// with Options.VaryCPUTime the one of BurstCVs whose p95 without I/O
	// wait is nearest the real windows'. BurstErrors are each CV's error
	// (the median BurstError is): of BurstCVs with Options.TryCPUTimeCVs,
	// else of the constant CPU time alone. At a pod of 0.7 core the real windows'
	// p95 spreads as a varying work's does, and a CV brings the floor's
	// runs nearer; at 0.2 core it takes HPA+VPA's further
	// (docs/real-node-rounds.md, the p95's spread at the floor's pod
	// size), so it is not the default. Files written before it have none.
	BurstCV     float64   `json:"burstCV"`
	BurstErrors []float64 `json:"burstErrors,omitempty"`
	// BurstBias is the burst model's signed error at BurstCV and without
	// I/O wait, by pod size: the median of ln(real p95 / model p95) over
	// the same windows of pods below SmallPodCPU (Small) and of the others
	// (Large), with their counts (0 without such windows). One W cannot
	// mend errors of opposite signs, which the real node shows
	// (docs/real-node-rounds.md, the p95's spread at the floor's pod size).
	BurstBias BiasBySize `json:"burstBias"`
}

// Options change what Calibrate gives the simulated app, to set a
// model's alternative beside the real runs.
type Options struct {
	// TryCPUTimeCVs has the calibration find the burst model's error at
	// every one of BurstCVs (Throttling.BurstErrors, printed by Write): a
	// quota-queue simulation per window and CV, which a caller that does
	// not print the calibration need not pay (it took the simside tests
	// from 34 to 94 s under the race detector).
	TryCPUTimeCVs bool
	// VaryCPUTime gives the burst model's requests the CPU time's
	// coefficient of variation nearest the real p95 (Throttling.BurstCV)
	// instead of a constant CPU time; it implies TryCPUTimeCVs.
	VaryCPUTime bool
	// Background has the simulated node's other work keep each run's
	// measured background busy (RunBackground; SimNode.Background), in
	// the burst model's fit as in the replay.
	Background bool
	// Tick gives the simulated node a scheduler tick (SimNode.Tick), in
	// the burst model's fit as in the replay; 0 enforces the quota to the
	// instant.
	Tick time.Duration
	// IdlePeriod replays the pods' idle CPU as a burst every IdlePeriod
	// (sim.Demand.IdlePeriod: the test app's exec readiness probe runs
	// every 2 s in its cgroup), in the burst model's fit as in the
	// replay; 0 spreads it evenly.
	IdlePeriod time.Duration
	// IdleBurst is each burst's CPU time (sim.Demand.IdleBurst), the rest
	// of the idle CPU spread evenly; 0: all of it in the bursts.
	IdleBurst time.Duration
	// MemoryFit is which requests in flight the memory fit regresses the
	// pods' memory on (MemoryFitAuto, MemoryFitGauge, MemoryFitLittle).
	MemoryFit MemoryFit
}

// BurstCVs are the coefficients of variation of the requests' CPU time the
// burst model's calibration tries (Throttling.BurstCV).
var BurstCVs = []float64{0, 0.25, 0.5, 0.75, 1}

// SimCPUSecondsCV is the CV of a request's CPU time of the latency model
// the calibration chose: the burst model's, none in the fluid one.
func (t Throttling) SimCPUSecondsCV() float64 {
	if t.Burst {
		return t.BurstCV
	}
	return 0
}

// SimIOWait is the I/O wait of the latency model the calibration chose.
func (t Throttling) SimIOWait() float64 {
	if t.Burst {
		return t.BurstIOWait.Value
	}
	return t.IOWait.Value
}

// Calibration is the simulator's app as the real runs measured it.
type Calibration struct {
	// CPUSecondsPerRequest is core-seconds per request: each run's CPU
	// used over its requests answered, the pods' idle CPU included.
	CPUSecondsPerRequest Estimate `json:"cpuSecondsPerRequest"`
	// BaseCPU (cores per Ready pod) and CPUPerRequest (core-seconds per
	// request) are one least-squares fit of the calm windows' CPU
	// used, CPUR2 its coefficient of determination over CPUWindows
	// windows; the simulated app takes them when the fit resolves both
	// (CPUFitted), else CPUSecondsPerRequest and no idle CPU. The real
	// test app's pods use 12–16 millicores with no requests, which the
	// run's ratio spreads over the requests: 8–10% too little CPU at one
	// pod's 10 requests/s (docs/real-node.md).
	BaseCPU       Estimate `json:"baseCpu"`
	CPUPerRequest Estimate `json:"cpuPerRequest"`
	CPUR2         float64  `json:"cpuR2"`
	CPUWindows    int      `json:"cpuWindows"`
	CPUFitted     bool     `json:"cpuFitted"`
	// CPUFitReason says why the CPU fit was not taken.
	CPUFitReason string `json:"cpuFitReason,omitempty"`
	// BaseMemory (bytes per Ready pod) and MemoryPerRequest (bytes per
	// request in flight) are one least-squares fit, R2 its coefficient of
	// determination over MemoryWindows windows.
	BaseMemory       Estimate `json:"baseMemory"`
	MemoryPerRequest Estimate `json:"memoryPerRequest"`
	MemoryR2         float64  `json:"memoryR2"`
	MemoryWindows    int      `json:"memoryWindows"`
	// StartupSeconds is a new pod's creation-to-Ready time.
	StartupSeconds Estimate `json:"startupSeconds"`
	// VPAFirstAction is how long after its creation the real VPA first
	// changed a pod (InPlaceResizedByVPA or EvictedByVPA), in seconds:
	// its recommender and its updater each act once a minute, so it acts
	// minutes after the project's policies would. N is 0, and the value
	// VPAUpdaterInterval, when no run had a VPA that acted.
	VPAFirstAction Estimate   `json:"vpaFirstAction"`
	Throttling     Throttling `json:"throttling"`
	// Node is the simulated node.
	Node SimNode `json:"node"`
	// Runs is how many runs were read.
	Runs int `json:"runs"`
	// ReplayModel is how the replay models what the windows do not fit.
	ReplayModel
}

// ReplayModel is how the replay models what the real windows cannot fit:
// the sampling of each window's measurements, the fused default's timing,
// and what the app and the kubelet do that a fit of calm windows does not
// show. Calibrate sets what the real node measured.
type ReplayModel struct {
	// SampledLatency replays each window's percentiles as its requests'
	// sample gives them (sim.Config.SampledLatency). Calibrate sets it: a
	// real window's p95 is a histogram's of its requests, and varies from
	// window to window (MeasureSpread). Off, the replay has the model's
	// percentiles, to check an estimate on the model's own data.
	SampledLatency bool `json:"sampledLatency"`
	// SampledUsage replays each pod's CPU usage as its window's arrivals'
	// work (sim.Config.SampledUsage). Calibrate sets it: the real HPA and
	// recommender read metrics-server's rate over 10 s, which varies with
	// the arrivals, and an HPA whose mean utilisation sits just under its
	// tolerance scales out on the windows above it (docs/real-node.md).
	SampledUsage bool `json:"sampledUsage"`
	// UsageResolution is the period the pods' observed usage is a rate over
	// in the replay (sim.Config.UsageResolution): Calibrate sets
	// DefaultUsageResolution. 0: the window's usage.
	UsageResolution time.Duration `json:"usageResolution"`
	// Timing is when the replayed fused default decides and when its
	// decisions reach the pods (--sim-lag, --sim-step, --sim-look,
	// --sim-act); its zero value, the simulator's own, decides at each
	// window's end and applies the decision from the next window on.
	Timing Timing `json:"timing,omitzero"`
	// ServesTimedOut replays the app as one that serves every request it
	// holds to the end, past its client's timeout, by processor sharing
	// (sim.App.ServesTimedOut), as the test app does (hack/memlag.sh):
	// not a fit of the windows but what the app is. Off: the simulator's
	// fluid backlog, which drops at arrival what it cannot answer in time.
	ServesTimedOut bool `json:"servesTimedOut,omitempty"`
	// HeldMemoryPerRequest is the working set a request held in an
	// overload adds (sim.App.HeldMemoryPerRequest, bytes), as
	// hack/memlag.sh measured it on the test app; 0: MemoryPerRequest.
	HeldMemoryPerRequest float64 `json:"heldMemoryPerRequest,omitempty"`
	// HeldQuantum serves the requests held in an overload in turns of this
	// many CPU-seconds each, in arrival order (sim.App.HeldQuantum), as
	// Go's run queues do the test app's; 0: by processor sharing.
	HeldQuantum float64 `json:"heldQuantum,omitempty"`
	// ReadyWithinWindow lets a replayed pod serve from the moment it
	// becomes Ready (sim.Config.ReadyWithinWindow), as the node's do: a new
	// or restarted pod's start-up (StartupSeconds) then costs its own
	// seconds, not a whole window.
	ReadyWithinWindow bool `json:"readyWithinWindow,omitempty"`
	// IdlePeriod is Options.IdlePeriod in seconds (sim.Demand.IdlePeriod).
	IdlePeriod float64 `json:"idlePeriod,omitempty"`
	// IdleBurst is Options.IdleBurst in CPU-seconds (sim.Demand.IdleBurst).
	IdleBurst float64 `json:"idleBurst,omitempty"`
}

// Calibrate estimates the simulator's app from the real runs: the CPU
// seconds per request (median of the runs' own measurement), the I/O wait
// and the throttling shape (a fit of p95 against utilisation), the base
// memory and memory per request in flight (a fit of the memory used
// against Ready pods and requests in flight), and the start-up delay
// (median of the pods' creation-to-Ready times). It refuses, with an error
// wrapping ErrThinData, when the runs cannot support one of the figures
// the simulator needs; only the throttling shape may stay unresolved.
func Calibrate(runs []result.Run, o Options) (Calibration, error) {
	c := Calibration{Node: SimNode{Allocatable: workload.Resources{CPU: DefaultNodeCPU, Memory: DefaultNodeMemory}, Cores: DefaultNodeCores}, Runs: len(runs), ReplayModel: ReplayModel{SampledLatency: true, SampledUsage: true, UsageResolution: DefaultUsageResolution}}
	if len(runs) == 0 {
		return c, fmt.Errorf("%w: no runs", ErrThinData)
	}
	var cpu, cpuLossy, startup []float64
	for _, r := range runs {
		if v := r.CPUSecondsPerRequest; v > 0 && !math.IsInf(v, 0) {
			// A lost request burned CPU but was not answered, so a run that
			// lost many overstates the CPU per request: those runs count
			// only when no run kept its losses under maxLostShare.
			if lostShare(r) <= maxLostShare {
				cpu = append(cpu, v)
			} else {
				cpuLossy = append(cpuLossy, v)
			}
		}
		for _, s := range r.StartupSeconds {
			if s >= 0 && !math.IsInf(s, 0) {
				startup = append(startup, s)
			}
		}
	}
	how := "median over the runs that lost at most 1% of their requests of each run's CPU used (metrics.k8s.io, integrated over its windows) over its requests answered"
	if len(cpu) == 0 {
		cpu = cpuLossy
		how = "median over the runs (all lost more than 1% of their requests, so this overstates it) of each run's CPU used (metrics.k8s.io, integrated over its windows) over its requests answered"
	}
	if len(cpu) == 0 {
		return c, fmt.Errorf("%w: no run measured its CPU seconds per request (no requests answered, or no usage from metrics.k8s.io)", ErrThinData)
	}
	c.CPUSecondsPerRequest = median(cpu, how)
	if len(startup) == 0 {
		return c, fmt.Errorf("%w: no pod became Ready during any run, so the start-up delay is unmeasured (run a policy that adds or replaces pods)", ErrThinData)
	}
	c.StartupSeconds = median(startup, "median over the pods created during the runs of creation to Ready (scheduling, the container's start, the app's delay, the readiness probe)")
	c.VPAFirstAction = vpaFirstAction(runs)
	c.fitCPU(runs)
	c.Node.MeasuredBackground = MeasureBackground(runs)
	if o.Background {
		c.Node.Background = c.Node.MeasuredBackground.Value
	}
	c.Node.Tick = o.Tick
	c.IdlePeriod, c.IdleBurst = o.IdlePeriod.Seconds(), o.IdleBurst.Seconds()
	c.Throttling = fitThrottling(runs, c.cpu(), c.Node, o)
	if err := c.fitMemory(runs, o.MemoryFit); err != nil {
		return c, err
	}
	return c, nil
}

// VPAUpdaterInterval is VPA's --updater-interval default (seconds): its
// updater changes pods at most once a loop.
const VPAUpdaterInterval = 60

// vpaFirstAction is the median over the runs whose VPA acted of the time
// from the autoscaler's creation to its first change of a pod.
func vpaFirstAction(runs []result.Run) Estimate {
	var first []float64
	for _, r := range runs {
		for _, e := range r.Events {
			if e.Reason == "InPlaceResizedByVPA" || e.Reason == "EvictedByVPA" {
				first = append(first, max(0, e.At-r.AutoscalerAfter))
				break // events are in time order
			}
		}
	}
	if len(first) == 0 {
		return Estimate{Value: VPAUpdaterInterval, Lo: VPAUpdaterInterval, Hi: VPAUpdaterInterval,
			Method: "no run's VPA acted: one updater loop (VPA's --updater-interval default)"}
	}
	return median(first, "median over the runs whose VPA acted of its first InPlaceResizedByVPA or EvictedByVPA event after the autoscaler's creation")
}

// calmBefore is how many calm windows must precede one for it to count:
// the backlog an overload leaves takes a window or two to drain.
const calmBefore = 2

// maxLostShare is the most a run may lose and still measure the CPU per
// request.
const maxLostShare = 0.01

func lostShare(r result.Run) float64 {
	var sent, lost int
	for _, w := range r.Windows {
		sent += w.Sent
		lost += w.Lost
	}
	if sent == 0 {
		return 0
	}
	return float64(lost) / float64(sent)
}

// calmWindows are the windows whose averages describe one stationary
// state of one set of pods of one size: the pods neither changed nor
// started in the window (Ready = desired, no scaling, resize, eviction or
// OOM kill), nothing was lost, the load on the pods' limits stayed below
// ρ = 0.9 (the simulator's stationary regime), and the calmBefore windows
// before were calm too, so no backlog of an overload is still draining. Each comes
// with its S/(1−ρ) and ρ.
func calmWindows(runs []result.Run, cpu sim.Demand) (ws []result.Window, xs []float64) {
	for _, r := range runs {
		calm := 0 // calm windows in a row before this one
		for _, w := range r.Windows {
			ok := w.Ready > 0 && w.Ready == w.Replicas && w.OOMKills == 0 && w.ReplicaChanges == 0 &&
				w.Resizes == 0 && w.Evictions == 0 && w.CPURequested > 0 && w.Lost == 0 && w.End > w.Start
			var x float64
			if ok {
				var rho float64
				x, rho = throttleX(w, cpu)
				ok = rho <= maxThrottleRho
			}
			if ok && calm >= calmBefore {
				ws = append(ws, w)
				xs = append(xs, x)
			}
			calm++
			if !ok {
				calm = 0
			}
		}
	}
	return ws, xs
}

// cpu is the simulated app's CPU (sim.Demand's CPUSeconds and BaseCPU):
// the fit's where it resolved, else the runs' ratio without idle CPU.
func (c Calibration) cpu() sim.Demand {
	if c.CPUFitted {
		return sim.Demand{CPUSeconds: c.CPUPerRequest.Value, BaseCPU: c.BaseCPU.Value, IdlePeriod: c.IdlePeriod, IdleBurst: c.IdleBurst}
	}
	return sim.Demand{CPUSeconds: c.CPUSecondsPerRequest.Value}
}

// maxCPUFitRho keeps the CPU fit to windows whose pods' usage stays
// within their limit: nearer it, a window's surplus arrivals are served
// in the next, and the usage the window reports is cut.
const maxCPUFitRho = 0.8

// fitCPU fits the steady windows' CPU used on their Ready pods and the
// trace's requests per second (least squares without intercept: a pod's
// idle CPU and each request's), and takes it when both coefficients are
// resolved: the base at least 0 and the CPU per request above 0.
//
// Steady: every desired pod Ready, nothing changed, started or was lost in
// the window, and the runs' ratio puts the pods' load at most
// maxCPUFitRho of their limit; and in the calmBefore windows before,
// every desired pod was Ready, nothing was lost and the load was at most
// maxThrottleRho, so that no backlog was left to drain. Unlike
// calmWindows it lets the autoscalers change the pods in those windows:
// they act on a busy window's usage, so the windows after the unchanged
// ones are the quieter ones (1% too little CPU per request on the
// simulator's own runs).
func (c *Calibration) fitCPU(runs []result.Run) {
	ratio := sim.Demand{CPUSeconds: c.CPUSecondsPerRequest.Value}
	var pods, rate, used []float64
	for _, r := range runs {
		drained := 0 // windows in a row that left no backlog
		for _, w := range r.Windows {
			var rho float64
			if w.Ready > 0 && w.CPURequested > 0 && w.End > w.Start {
				_, rho = throttleX(w, ratio)
			}
			ready := w.Ready > 0 && w.Ready == w.Replicas && w.Lost == 0 && w.OOMKills == 0 && w.CPURequested > 0 && w.End > w.Start
			steady := ready && w.ReplicaChanges == 0 && w.Resizes == 0 && w.Evictions == 0 && rho <= maxCPUFitRho
			if steady && drained >= calmBefore && w.CPUUsed > 0 && w.Expected > 0 {
				pods = append(pods, float64(w.Ready))
				// The trace's rate, not the answers counted: the CPU
				// samples and the window's arrivals vary apart
				// (metrics.k8s.io's rates do not line up with the
				// windows), and a regressor's noise would bias its
				// coefficient to 0 and the base up.
				rate = append(rate, w.Expected/(w.End-w.Start))
				used = append(used, w.CPUUsed)
			}
			drained++
			if !ready || rho > maxThrottleRho {
				drained = 0
			}
		}
	}
	c.CPUWindows = len(used)
	if len(used) < MinFitWindows {
		c.CPUFitReason = fmt.Sprintf("%d steady windows with CPU usage at most %.0f%% of the limit, want %d", len(used), 100*maxCPUFitRho, MinFitWindows)
		return
	}
	f, err := leastSquares([][]float64{pods, rate}, used)
	if err != nil {
		c.CPUFitReason = "CPU against Ready pods and the request rate: " + err.Error()
		return
	}
	const how = "least squares, without intercept, of the windows' CPU used (metrics.k8s.io) on Ready pods and the trace's requests per second; steady windows (every pod Ready, no change or loss, load at most 0.8 of the limit)"
	c.BaseCPU, c.CPUPerRequest, c.CPUR2 = f.estimate(0, how), f.estimate(1, how), f.r2
	if c.BaseCPU.Value < 0 && c.BaseCPU.Hi >= -1e-9 {
		// Not resolved beside 0: the pods have no idle CPU to speak of.
		c.BaseCPU.Value = 0
		c.BaseCPU.Method += "; the fit was negative (not resolved beside 0) and is taken as 0"
	}
	switch {
	case c.BaseCPU.Value < 0:
		c.CPUFitReason = fmt.Sprintf("the fit gives a negative idle CPU per pod (%.4f cores)", c.BaseCPU.Value)
	case !(c.CPUPerRequest.Value > 0):
		c.CPUFitReason = fmt.Sprintf("the fit gives %.4g core-seconds per request", c.CPUPerRequest.Value)
	default:
		c.CPUFitted = true
	}
}

// throttleX is the simulator's regressor S/(1−ρ) for a window, with ρ.
func throttleX(w result.Window, cpu sim.Demand) (x, rho float64) {
	dt := w.End - w.Start
	// The offered load: the rate series' mean over the window, which the
	// queue's stationary state follows; the realised arrivals would add
	// their Poisson noise to the regressor (and bias the slope down).
	perPod := w.Expected / dt / float64(w.Ready)
	// The harness sets the CPU limit equal to the request and every
	// autoscaler here scales both together, so the request is the limit.
	c := cpu.ServingCPU(w.CPURequested / float64(w.Ready))
	s := cpu.CPUSeconds / c
	rho = perPod * s
	return s / (1 - rho), rho
}

func fitThrottling(runs []result.Run, cpu sim.Demand, node SimNode, o Options) Throttling {
	t := Throttling{SimSlope: math.Log(20)}
	// The calm windows run by run (calmWindows counts each run's calm
	// windows apart), each with the background its run's burst model
	// takes: the run's own with Options.Background, else none.
	var ws []result.Window
	var xs, bgs []float64
	for _, r := range runs {
		rws, rxs := calmWindows([]result.Run{r}, cpu)
		ws, xs = append(ws, rws...), append(xs, rxs...)
		bg := 0.0
		if o.Background {
			bg, _ = RunBackground(r)
		}
		for range rws {
			bgs = append(bgs, bg)
		}
	}
	var ys, resid []float64
	for i, w := range ws {
		if !(w.P95 > 0) {
			xs[i] = math.NaN() // no traffic: no latency
			continue
		}
		ys = append(ys, w.P95)
		resid = append(resid, w.P95-t.SimSlope*xs[i])
	}
	xs = slices.DeleteFunc(xs, math.IsNaN)
	t.Windows = len(xs)
	if len(xs) < MinThrottleWindows {
		t.Reason = fmt.Sprintf("%d calm windows with traffic, want %d", len(xs), MinThrottleWindows)
		return t
	}
	f, err := leastSquares([][]float64{ones(len(xs)), xs}, ys)
	if err != nil {
		t.Reason = "p95 against S/(1−ρ): " + err.Error() + " (the load on the pods' limits hardly varied)"
		return t
	}
	t.Resolved = true
	const how = "least squares of the windows' p95 on S/(1−ρ), S = CPU seconds per request / CPU request per Ready pod, ρ = the trace's rate per Ready pod × S; calm windows (one stationary state: no change of the pods, no loss, ρ ≤ 0.9, after two calm windows)"
	t.Shift, t.Slope, t.R2 = f.estimate(0, how), f.estimate(1, how), f.r2
	iow := median(resid, "median over the same windows of p95 − ln(20)·S/(1−ρ), at least 0: the shift that best fits the simulator's own slope")
	iow.Value, iow.Lo, iow.Hi = max(iow.Value, 0), max(iow.Lo, 0), max(iow.Hi, 0)
	t.IOWait = iow
	t.fitBurst(ws, bgs, cpu, node, o)
	t.BurstBias.SmallByMachineCPU = machineContention(runs, cpu, t.BurstCV, node, o.Background, false)
	t.BurstBias.LargeByMachineCPU = machineContention(runs, cpu, t.BurstCV, node, o.Background, true)
	return t
}

// fitBurst sets the burst model's W and both models' errors (Throttling.Burst)
// from the calm windows ws with traffic, on node (each window beside its
// background in bgs).
//
// Only the windows of one Ready pod count when there are MinThrottleWindows
// of them: the harness's keep-alive connections send a Deployment's load to
// one pod at a time (docs/real-node-rounds.md, round two), so the windows of
// several pods are slower than any balanced model, and would bias W up.
func (t *Throttling) fitBurst(ws []result.Window, bgs []float64, cpu sim.Demand, node SimNode, o Options) {
	// The windows with traffic, of one Ready pod where there are enough.
	var all, one []int
	for i, w := range ws {
		if !(w.P95 > 0) {
			continue
		}
		all = append(all, i)
		if w.Ready == 1 {
			one = append(one, i)
		}
	}
	if len(one) >= MinThrottleWindows {
		all = one
	}
	var fluid, ys, bg []float64
	var used []result.Window
	for _, i := range all {
		w := ws[i]
		ys = append(ys, w.P95)
		used = append(used, w)
		bg = append(bg, bgs[i])
		x, _ := throttleX(w, cpu)
		fluid = append(fluid, t.SimSlope*x)
	}
	logErr := func(model []float64, shift float64) float64 {
		e := make([]float64, len(ys))
		for i, y := range ys {
			e[i] = math.Abs(math.Log(y / (model[i] + shift)))
		}
		return median(e, "").Value
	}
	// Each CV's error (the constant CPU time's alone unless asked); the
	// constant CPU time's p95, or with VaryCPUTime the nearest (a tie
	// keeps the smaller CV).
	cvs := BurstCVs[:1]
	if o.TryCPUTimeCVs || o.VaryCPUTime {
		cvs = BurstCVs
	}
	var burst []float64
	t.BurstErrors = t.BurstErrors[:0]
	for i, cv := range cvs {
		model := make([]float64, len(used))
		for j, w := range used {
			model[j] = QuotaP95(cpu, cv, w.CPURequested/float64(w.Ready), w.Expected/(w.End-w.Start)/float64(w.Ready), node.Quota(bg[j]))
		}
		e := logErr(model, 0)
		t.BurstErrors = append(t.BurstErrors, e)
		if i == 0 || (o.VaryCPUTime && e < t.BurstError) {
			t.BurstCV, t.BurstError, burst = cv, e, model
		}
	}
	t.BurstBias = biasBySize(used, ys, burst)
	resid := make([]float64, len(ys))
	for i, y := range ys {
		resid[i] = y - burst[i]
	}
	iow := median(resid, "median over the same windows of p95 − the CFS quota queue's p95 (sim.App.CPUBurst, at BurstCV), at least 0: the burst model's shift")
	iow.Value, iow.Lo, iow.Hi = max(iow.Value, 0), max(iow.Lo, 0), max(iow.Hi, 0)
	t.BurstIOWait = iow
	t.FluidError = logErr(fluid, 0)
	t.Burst = t.BurstError < t.FluidError
}

// QuotaNode is what the CFS quota model reads of a pod's node: the cores
// its requests run on (sim.Config.NodeCores), those its other work keeps
// busy (NodeBackground) and its scheduler tick (NodeTick).
type QuotaNode struct {
	Cores, Background float64
	Tick              time.Duration
}

// QuotaP95 is the simulator's CFS quota model's p95 (sim.App.CPUBurst,
// without I/O wait) for one pod of CPU limit limit at rate requests/s of
// cpu's CPUSeconds each on average (with a coefficient of variation cv),
// its idle CPU (BaseCPU, as IdlePeriod gives it) taking its part of the
// limit, on node, in its stationary state.
func QuotaP95(cpu sim.Demand, cv, limit, rate float64, node QuotaNode) float64 {
	a := sim.App{Demand: sim.Demand{CPUSeconds: cpu.CPUSeconds, BaseCPU: cpu.BaseCPU, IdlePeriod: cpu.IdlePeriod, IdleBurst: cpu.IdleBurst, CPUSecondsCV: cv, CPUBurst: true}}
	w := a.ServePod(sim.PodInput{Rate: rate, Arrived: rate, CPU: limit, Cores: node.Cores, Background: node.Background, Tick: node.Tick.Seconds()}, 1, math.Inf(1))
	return w.Own + w.QueueDelay + w.Stationary*math.Log(20)
}

// App is the simulator's app the calibration describes, deployed as the
// harness deploys the test app (hack/benchreal/trial.go's manifest): one
// replica of initialCPU (limit the same) and 96Mi (limit 256Mi), 1–8
// replicas, 50m–1 CPU and 64Mi–1Gi per container, with the SLO given.
func (c Calibration) App(slo, initialCPU float64) sim.App {
	return sim.App{
		Name:         "testapp",
		Container:    "app",
		StartupDelay: seconds(c.StartupSeconds.Value),
		SLO:          slo,
		Replicas:     1,
		Requests:     workload.Resources{CPU: initialCPU, Memory: 96 * sim.MiB},
		Limits:       workload.Resources{CPU: initialCPU, Memory: 256 * sim.MiB},
		Constraints: workload.Constraints{
			MinReplicas: 1,
			MaxReplicas: 8,
			Containers: []workload.ContainerPolicy{{
				Name:       "*",
				Mode:       workload.ContainerModeAuto,
				MinAllowed: workload.Resources{CPU: 0.05, Memory: 64 * sim.MiB},
				MaxAllowed: workload.Resources{CPU: 1, Memory: 1 * sim.GiB},
			}},
		},
		Demand: sim.Demand{
			CPUSeconds:           c.cpu().CPUSeconds,
			BaseCPU:              c.cpu().BaseCPU,
			IdlePeriod:           c.cpu().IdlePeriod,
			IdleBurst:            c.cpu().IdleBurst,
			IOWait:               c.Throttling.SimIOWait(),
			CPUBurst:             c.Throttling.Burst,
			CPUSecondsCV:         c.Throttling.SimCPUSecondsCV(),
			BaseMemory:           c.BaseMemory.Value,
			MemoryPerRequest:     c.MemoryPerRequest.Value,
			ServesTimedOut:       c.ServesTimedOut,
			HeldMemoryPerRequest: c.HeldMemoryPerRequest,
			HeldQuantum:          c.HeldQuantum,
		},
	}
}

// Write prints the calibration: every figure with its range and method.
func (c Calibration) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "calibration of the simulator's app from %d real runs:\n", c.Runs)
	line := func(name string, e Estimate, scale float64, unit string) {
		if unit != "" {
			unit = " " + unit
		}
		fmt.Fprintf(&b, "  %-26s %.4g%s [%.4g, %.4g] (n = %d): %s\n", name, e.Value/scale, unit, e.Lo/scale, e.Hi/scale, e.N, e.Method)
	}
	line("CPU per request", c.CPUSecondsPerRequest, 1e-3, "ms")
	if c.CPUFitted {
		line("idle CPU per pod", c.BaseCPU, 1e-3, "millicores")
		line("CPU per request (fit)", c.CPUPerRequest, 1e-3, "ms")
		fmt.Fprintf(&b, "  %-26s R² %.3f over %d windows; the simulated app takes it\n", "CPU fit", c.CPUR2, c.CPUWindows)
	} else {
		fmt.Fprintf(&b, "  %-26s not taken (%s): the simulated app takes the CPU per request above and no idle CPU\n", "CPU fit", c.CPUFitReason)
	}
	line("base memory", c.BaseMemory, sim.MiB, "MiB")
	line("memory per request", c.MemoryPerRequest, sim.MiB, "MiB")
	fmt.Fprintf(&b, "  %-26s R² %.3f over %d windows\n", "memory fit", c.MemoryR2, c.MemoryWindows)
	line("start-up (creation→Ready)", c.StartupSeconds, 1, "s")
	line("VPA's first action", c.VPAFirstAction, 1, "s")
	t := c.Throttling
	if t.Resolved {
		line("p95 shift", t.Shift, 1e-3, "ms")
		line("p95 slope on S/(1−ρ)", t.Slope, 1, "")
		fmt.Fprintf(&b, "  %-26s R² %.3f over %d windows; the simulator's slope is ln 20 = %.3f\n", "p95 fit", t.R2, t.Windows, t.SimSlope)
		line("I/O wait (fluid model)", t.IOWait, 1e-3, "ms")
		line("I/O wait (burst model)", t.BurstIOWait, 1e-3, "ms")
		model := "fluid (processor sharing at the limit)"
		if t.Burst {
			model = "burst (the CFS quota queue: a request at one core while the pod's quota lasts)"
		}
		fmt.Fprintf(&b, "  %-26s %s: median |ln(real/model p95)| fluid %.2f, burst %.2f\n", "latency model (simulated)", model, t.FluidError, t.BurstError)
		if len(t.BurstErrors) == len(BurstCVs) {
			var tried []string
			for i, cv := range BurstCVs {
				tried = append(tried, fmt.Sprintf("%g: %.2f", cv, t.BurstErrors[i]))
			}
			how := "a constant CPU time, the test app's"
			if t.BurstCV > 0 {
				how = "the nearest of those tried, --sim-cpu-cv"
			}
			fmt.Fprintf(&b, "  %-26s %g (%s): the burst model's median |ln(real/model p95)| by CV %s\n", "CPU time's CV (burst)", t.BurstCV, how, strings.Join(tried, ", "))
		}
		if bb := t.BurstBias; bb.SmallWindows+bb.LargeWindows > 0 {
			part := func(n int, v float64) string {
				if n == 0 {
					return "no window"
				}
				return fmt.Sprintf("%+.2f (%d windows)", v, n)
			}
			fmt.Fprintf(&b, "  %-26s median ln(real/model p95), without I/O wait: pods under %g core %s, the others %s\n",
				"burst model's bias by size", SmallPodCPU, part(bb.SmallWindows, bb.Small), part(bb.LargeWindows, bb.Large))
		}
		for _, size := range []struct {
			name string
			mc   MachineContention
		}{{"small", t.BurstBias.SmallByMachineCPU}, {"large", t.BurstBias.LargeByMachineCPU}} {
			if mc := size.mc; mc.Slope.N > 0 {
				within := "no session of two runs"
				if w := mc.WithinSessions; w.N > 0 {
					within = fmt.Sprintf("%+.2f [%+.2f, %+.2f] within %d sessions", w.Mean, w.Lo, w.Hi, mc.Sessions)
				}
				model := "the model"
				if c.Node.Background > 0 {
					model = "the model beside each run's background"
				}
				fmt.Fprintf(&b, "  %-26s the %s pod's median ln(real/%s p95) run by run rises %+.2f [%+.2f, %+.2f] per core the machine used (r %.2f, %d runs; the line %+.2f at %.2f cores, %+.2f at %.2f); %s\n",
					"... against the machine", size.name, model, mc.Slope.Mean, mc.Slope.Lo, mc.Slope.Hi, mc.R, mc.Runs,
					mc.Intercept+mc.Slope.Mean*mc.MachineLo, mc.MachineLo, mc.Intercept+mc.Slope.Mean*mc.MachineHi, mc.MachineHi, within)
			}
		}
	} else {
		fmt.Fprintf(&b, "  %-26s unresolved: %s; the simulated app has no I/O wait\n", "throttling", t.Reason)
	}
	pct := "the model's (the same in every calm window)"
	if c.SampledLatency {
		pct = "a sample of each window's requests (sim.Config.SampledLatency)"
	}
	fmt.Fprintf(&b, "  %-26s %s\n", "latency percentiles", pct)
	usage := "the mean rate's (the same in every calm window)"
	if c.SampledUsage {
		usage = "the realised arrivals' work in each window (sim.Config.SampledUsage)"
		if c.UsageResolution > 0 {
			usage += fmt.Sprintf(", observed as a rate over %s (sim.Config.UsageResolution)", c.UsageResolution)
		}
	}
	fmt.Fprintf(&b, "  %-26s %s\n", "CPU usage", usage)
	overload := "a fluid backlog, dropping at arrival what it cannot answer within the timeout"
	if c.ServesTimedOut {
		overload = "every request held served to the end, past its client's timeout (sim.App.ServesTimedOut)"
		if c.HeldMemoryPerRequest > 0 {
			overload += fmt.Sprintf(", %.3g MiB each (sim.App.HeldMemoryPerRequest)", c.HeldMemoryPerRequest/sim.MiB)
		}
		if c.HeldQuantum > 0 {
			overload += fmt.Sprintf(", in turns of %v of CPU each (sim.App.HeldQuantum)", time.Duration(c.HeldQuantum*float64(time.Second)))
		} else {
			overload += ", sharing the CPU equally"
		}
	}
	fmt.Fprintf(&b, "  %-26s %s\n", "overload", overload)
	ready := "from the next window's start"
	if c.ReadyWithinWindow {
		ready = "from its start-up delay on, within the window (sim.Config.ReadyWithinWindow)"
	}
	fmt.Fprintf(&b, "  %-26s %s\n", "a new pod serves", ready)
	fmt.Fprintf(&b, "  %-26s %.3g cores, %.3g GiB allocatable (one node) on %g cores\n", "simulated node", c.Node.Allocatable.CPU, c.Node.Allocatable.Memory/sim.GiB, c.Node.Cores)
	if mb := c.Node.MeasuredBackground; mb.N > 0 {
		how := "not simulated (--sim-background simulates it)"
		if c.Node.Background > 0 {
			how = fmt.Sprintf("simulated, each run beside its own: every request at 1/(1 + background/%g) of a core (%.3f at the median)", c.Node.Cores, 1/(1+c.Node.Background/c.Node.Cores))
		}
		fmt.Fprintf(&b, "  %-26s %.3g cores [%.3g, %.3g] (n = %d): %s; %s\n", "node's background", mb.Value, mb.Lo, mb.Hi, mb.N, mb.Method, how)
	}
	if c.Node.Tick > 0 {
		fmt.Fprintf(&b, "  %-26s %v: the kernel finds a CFS quota spent at its next tick, and the overrun comes off the next period's (sim.Config.NodeTick)\n", "node's scheduler tick", c.Node.Tick)
	}
	if c.IdlePeriod > 0 {
		how := "not replayed: the CPU fit did not resolve an idle CPU"
		if d := c.cpu(); d.BaseCPU > 0 {
			burst := d.IdleBurstCPU()
			how = fmt.Sprintf("one burst of %.3g ms of CPU every %v, which spends the pod's CFS quota as its requests do (sim.Demand.IdlePeriod), the rest (%.3g millicores) spread evenly", 1e3*burst, time.Duration(c.IdlePeriod*float64(time.Second)), 1e3*(d.BaseCPU-burst/c.IdlePeriod))
		}
		fmt.Fprintf(&b, "  %-26s %s\n", "pods' idle CPU", how)
	}
	if t := c.Timing.String(); t != "" {
		fmt.Fprintf(&b, "  %-26s %s\n", "decision timing", t)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
