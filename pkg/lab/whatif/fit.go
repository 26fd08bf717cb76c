package whatif

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// Refusals: the fit declines to predict, and says why, rather than replay
// an app that does not describe the workload.
var (
	// ErrTooThin: too few usable steps, or a rate that never varied, so
	// the regression cannot tell per-request cost from idle cost.
	ErrTooThin = errors.New("whatif: data too thin to fit")
	// ErrPoorFit: the simulator's model does not explain the history
	// (CPU R² or memory residuals beyond the options' bounds).
	ErrPoorFit = errors.New("whatif: the model fits the history poorly")
)

// FitOptions bound the fit. Zero fields take DefaultFitOptions' values.
type FitOptions struct {
	// MinPoints is the fewest steps with rate, CPU, memory and replicas
	// all present that the fit accepts.
	MinPoints int
	// MinCPUR2 is the least share of the total CPU's variance the rate
	// must explain.
	MinCPUR2 float64
	// MaxMemoryResidual is the largest RMS residual of the per-pod working
	// set, as a fraction of its mean. Memory is judged by its residual, not
	// R², because a working set that hardly moves is well fitted by its
	// base alone yet has an R² near 0.
	MaxMemoryResidual float64
	// StartupDelay is the pods' start-up delay assumed when the history
	// measures it for fewer than MinStartupPods pods.
	StartupDelay   time.Duration
	MinStartupPods int
	// NodeCPU is the CPU a pod without a CPU limit may use (the node's).
	NodeCPU float64
	// NodeTick is the nodes' scheduler tick (sim.Config.NodeTick: 4 ms
	// at CONFIG_HZ=250), at which the kernel finds a CFS quota spent; the
	// burst latency model runs a request past its quota to the next tick
	// and takes the overrun off the next period. 0 (a whatif.json written
	// before it): the quota is enforced to the instant.
	NodeTick time.Duration
	// ServesTimedOut replays the app as one that serves every request it
	// holds to the end, past its client's timeout (sim.App.ServesTimedOut):
	// overloaded, it shares its CPU among all of them and answers nothing
	// in time, as a Go HTTP server whose handlers do not watch their
	// request's context does. False: requests that cannot be answered in
	// time are dropped as they arrive, and the pod answers at capacity.
	ServesTimedOut bool
	// LatencyModel is the simulator's latency model the app is replayed
	// with: LatencyFluid (a request shares the pod's CPU limit: an
	// exponential of mean S/(1−ρ)), LatencyBurst (sim.App.CPUBurst: it
	// runs at one core while the CFS quota lasts, as requests of nearly
	// constant CPU time do), or LatencyAuto, the one whose p95 is nearer
	// the recorded p95 over the calm steps (at least MinLatencySteps;
	// else fluid). DefaultFitOptions sets LatencyAuto; "" (a whatif.json
	// written before it) is fluid, as then.
	LatencyModel string
	// LatencyWindow is the range the recorded p95 is a quantile over (the
	// latency query's rate() range: the larger of the reader's window and
	// the step). A calm step for LatencyAuto is the last of a range that
	// calm: every step in it had the same replicas and a load below 0.9
	// of the pods' limit. A p95 over 2 minutes still holds an overload's
	// timeouts for 2 minutes after the replicas that ended it; counted as
	// calm, they made both models' errors 3–4 times (docs/whatif.md).
	// 0 (a whatif.json written before it): the step alone.
	LatencyWindow time.Duration
	// Idle says whether the CPU line's intercept is replayed as each
	// pod's idle CPU (fitIdle): IdleAuto, IdleOn or IdleOff, the default
	// (and "", a whatif.json written before it). Off by default because on
	// the real node's five histories the idle CPU moved the fused
	// default's predicted cost from 8.4% low to 13.9% high on average and
	// the replay of what ran further from its violating steps
	// (docs/whatif.md, "The pods' idle CPU replayed").
	Idle string
	// MaxIdleShare is the largest idle CPU per pod, as a share of the
	// pods' mean CPU, that IdleAuto replays (0: DefaultMaxIdleShare).
	MaxIdleShare float64
	// IdleCPU is the pods' idle CPU per pod (cores) known from elsewhere,
	// for example a pod's usage without traffic: the CPU line is fitted on
	// the total CPU less IdleCPU × replicas, and the replay's pods use it
	// idle, whatever Idle says. A history whose replicas followed its rate
	// (an HPA's) cannot tell the two apart itself (fitIdle). Given from
	// bench-real's calibration it brought the slope to the calibration's
	// but the prediction no nearer (docs/whatif.md), so it is not the
	// default. 0 (and a whatif.json written before it): Idle decides.
	IdleCPU float64
	// CPUFitMaxLoad bounds the steps the CPU line is fitted on to steady
	// ones (steadySteps): the pods' CPU below this share of their limit in
	// the step and the one before, and the replicas those of the step
	// before. At its limit a pod's usage is capped while its requests
	// queue, and after it the pod works off the queue; a new pod starts.
	// Those steps' CPU is not their rate's work. 0 (a whatif.json written
	// before it, which Result.Refit must fit as then) or 1 and more: every
	// usable step.
	CPUFitMaxLoad float64
}

// Latency models of FitOptions.LatencyModel.
const (
	LatencyAuto  = "auto"
	LatencyFluid = "fluid"
	LatencyBurst = "burst"
	// MinLatencySteps is the fewest calm steps with a recorded p95 that
	// LatencyAuto chooses from.
	MinLatencySteps = 10
)

// DefaultFitOptions: a day of one-minute steps is plenty; an hour is the
// least accepted.
func DefaultFitOptions() FitOptions {
	return FitOptions{MinPoints: 60, MinCPUR2: 0.5, MaxMemoryResidual: 0.25, StartupDelay: 30 * time.Second, MinStartupPods: 3, NodeCPU: 16, LatencyModel: LatencyAuto, Idle: IdleOff, MaxIdleShare: DefaultMaxIdleShare, CPUFitMaxLoad: DefaultCPUFitMaxLoad}
}

func (o FitOptions) withDefaults() FitOptions {
	d := DefaultFitOptions()
	if o.MinPoints <= 0 {
		o.MinPoints = d.MinPoints
	}
	if o.MinCPUR2 == 0 {
		o.MinCPUR2 = d.MinCPUR2
	}
	if o.MaxMemoryResidual == 0 {
		o.MaxMemoryResidual = d.MaxMemoryResidual
	}
	if o.StartupDelay == 0 {
		o.StartupDelay = d.StartupDelay
	}
	if o.MinStartupPods <= 0 {
		o.MinStartupPods = d.MinStartupPods
	}
	if o.NodeCPU == 0 {
		o.NodeCPU = d.NodeCPU
	}
	if o.MaxIdleShare == 0 {
		o.MaxIdleShare = d.MaxIdleShare
	}
	return o
}

// DefaultCPUFitMaxLoad is FitOptions.CPUFitMaxLoad's default: the load
// the latency model's calm steps stay below too.
const DefaultCPUFitMaxLoad = 0.9

// Regression is a least-squares line y = Intercept + Slope·x and how well
// it fits.
type Regression struct {
	Slope     float64 `json:"slope"`
	Intercept float64 `json:"intercept"`
	// R2 is the share of y's variance the line explains (1 − SSres/SStot).
	R2 float64 `json:"r2"`
	// RMSResidual is the root mean square of y − line, in y's unit.
	RMSResidual float64 `json:"rmsResidual"`
	// MeanY is y's mean, to judge the residual against.
	MeanY  float64 `json:"meanY"`
	Points int     `json:"points"`
	// SlopeSE is the slope's standard error, √(SSres/(n−2)/Sxx); 0 with
	// two points or fewer.
	SlopeSE float64 `json:"slopeSE,omitempty"`
}

// SlopeInterval is the slope's 95% interval (Student's t on n−2 degrees
// of freedom); the slope alone at both ends without a standard error.
func (r Regression) SlopeInterval() (lo, hi float64) {
	if !(r.SlopeSE > 0) || r.Points <= 2 {
		return r.Slope, r.Slope
	}
	h := stats.TQuantile(0.975, float64(r.Points-2)) * r.SlopeSE
	return r.Slope - h, r.Slope + h
}

// regress fits y on x; ok is false when x has no variance.
func regress(x, y []float64) (Regression, bool) {
	n := float64(len(x))
	r := Regression{Points: len(x)}
	if len(x) < 2 {
		return r, false
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	r.MeanY = my
	// Relative to the scale of x, so a constant rate with rounding noise
	// still counts as constant.
	if !(sxx > 1e-12*n*(mx*mx+1e-12)) {
		return r, false
	}
	r.Slope = sxy / sxx
	r.Intercept = my - r.Slope*mx
	var ss float64
	for i := range x {
		e := y[i] - (r.Intercept + r.Slope*x[i])
		ss += e * e
	}
	r.RMSResidual = math.Sqrt(ss / n)
	if len(x) > 2 {
		r.SlopeSE = math.Sqrt(ss / (n - 2) / sxx)
	}
	if syy > 0 {
		r.R2 = 1 - ss/syy
	} else {
		r.R2 = 1
	}
	return r, true
}

// Fit is the simulator's app estimated from a history, with its quality.
type Fit struct {
	Workload string `json:"workload"`
	// CPU regresses the total CPU (cores, per-pod CPU × replicas) on the
	// request rate: its slope is the CPU seconds per request, its
	// intercept the CPU the pods use idle. CPUSteps says which steps it
	// was fitted on: CPUStepsSteady, or CPUStepsAll.
	CPU      Regression `json:"cpu"`
	CPUSteps string     `json:"cpuSteps,omitempty"`
	// Idle is that intercept per pod, and whether the app replays it as
	// its pods' idle CPU (sim.Demand.BaseCPU).
	Idle IdleFit `json:"idle"`
	// Memory regresses the per-pod working set (bytes) on the requests a
	// pod holds in flight: its intercept is the base memory, its slope the
	// memory per request in flight. MemoryInFlight says where the requests
	// in flight came from.
	Memory         Regression `json:"memory"`
	MemoryInFlight string     `json:"memoryInFlight,omitempty"`
	// Latency says which latency model the app is replayed with and why.
	Latency LatencyFit `json:"latency"`
	// StartupDelaySeconds is the start-up delay the app is given;
	// StartupMeasured is false when it is FitOptions.StartupDelay.
	StartupDelaySeconds float64 `json:"startupDelaySeconds"`
	StartupMeasured     bool    `json:"startupMeasured"`
	// Refused says why the fit declines to predict; empty when it does.
	Refused string `json:"refused,omitempty"`
	// App is the fitted app; meaningful only when Refused is empty.
	App sim.App `json:"-"`
}

// Where the memory fit's requests in flight come from (Fit.MemoryInFlight).
const (
	// InFlightGauge: the history's own count (Series.InFlight), at the
	// steps that have it, when at least FitOptions.MinPoints do.
	InFlightGauge = "gauge"
	// InFlightLittle: Little's law on the simulator's response time.
	InFlightLittle = "little"
)

// The steps of the CPU line (Fit.CPUSteps).
const (
	// CPUStepsSteady: the steady steps only (steadySteps).
	CPUStepsSteady = "steady"
	// CPUStepsAll: every usable step, because FitOptions.CPUFitMaxLoad is
	// 0 or at least 1, or fewer than FitOptions.MinPoints steps were
	// steady, or their line failed the fit's checks (slope, R²).
	CPUStepsAll = "all"
)

// steadySteps are the usable steps idx (positions k into idx) whose CPU is
// their rate's work: the pods' CPU was below o.CPUFitMaxLoad of their
// limit in the step and the step before, and the replicas were the step
// before's. Excluded: a pod at its limit, whose usage is capped while its
// requests queue (on the real node's HPA histories, 2-4 steps of 30 at
// the load step, which moved the slope by −6% to +23%); the step after it,
// when the pod works the queue off; and a step whose replicas changed,
// with a new pod's start-up.
func steadySteps(s *Series, idx []int, o FitOptions) []int {
	load := func(i int) float64 {
		limit := at(s.LimitCPU, i)
		if !ok(limit) || limit <= 0 {
			limit = o.NodeCPU
		}
		return s.CPU[i] / limit
	}
	var steady []int
	for k, i := range idx {
		if i == 0 || !ok(s.CPU[i-1], s.Replicas[i-1]) || s.Replicas[i-1] != s.Replicas[i] {
			continue
		}
		if load(i) < o.CPUFitMaxLoad && load(i-1) < o.CPUFitMaxLoad {
			steady = append(steady, k)
		}
	}
	return steady
}

// measuredInFlight pairs the per-pod requests in flight the history
// recorded with the working set, at the usable steps idx that have both.
func measuredInFlight(s *Series, idx []int) (inflight, mem []float64) {
	if len(s.InFlight) == 0 {
		return nil, nil
	}
	for _, i := range idx {
		if v := s.InFlight[i]; ok(v) && v >= 0 {
			inflight = append(inflight, v)
			mem = append(mem, s.Memory[i])
		}
	}
	return inflight, mem
}

// FitApp estimates the simulator's app from s. It returns an error wrapping
// ErrSeries, ErrTooThin or ErrPoorFit when it cannot predict, with the fit
// as far as it went (Refused holds the reason).
//
// The model is the simulator's: a request costs CPUSeconds of CPU, a Ready
// pod BaseCPU more when FitOptions.Idle replays the line's intercept
// (fitIdle), a pod's working set is BaseMemory plus MemoryPerRequest per
// request in flight, and a pod serves as a processor-sharing queue of
// capacity its CPU limit less its idle CPU. In flight per pod is the
// history's own count where it has one (Series.InFlight, at MinPoints
// steps or more: InFlightGauge); else it is estimated by Little's law from
// the per-pod rate and the simulator's own response time for it, S/(1−ρ)
// with S = CPUSeconds over that capacity and ρ at most 0.98, so that under
// overload it is too few and the memory per request too much; the history
// has no I/O wait, so the app has none (IOWait 0), and memory per request
// is what makes the fitted app's working set follow the recorded one.
func FitApp(s *Series, o FitOptions) (Fit, error) {
	o = o.withDefaults()
	f := Fit{Workload: s.Name, StartupDelaySeconds: o.StartupDelay.Seconds()}
	if d, ok := median(s.StartupDelays); ok && len(s.StartupDelays) >= o.MinStartupPods {
		f.StartupDelaySeconds, f.StartupMeasured = d, true
	}
	refuse := func(err error, format string, args ...any) (Fit, error) {
		f.Refused = fmt.Sprintf(format, args...)
		return f, fmt.Errorf("%w: %s: %s", err, s.Name, f.Refused)
	}
	if err := s.Validate(); err != nil {
		f.Refused = err.Error()
		return f, err
	}
	var rate, total, reps []float64
	var idx []int
	for i := range s.Rate {
		r, c, m, n := s.Rate[i], s.CPU[i], s.Memory[i], s.Replicas[i]
		if !ok(r, c, m, n) || n <= 0 || r < 0 || c < 0 || m < 0 {
			continue
		}
		rate = append(rate, r)
		// With a known idle CPU the line is the requests' work alone.
		total = append(total, c*n-o.IdleCPU*n)
		reps = append(reps, n)
		idx = append(idx, i)
	}
	if len(idx) < o.MinPoints {
		return refuse(ErrTooThin, "%d usable steps (rate, CPU, memory and replicas all present), need %d", len(idx), o.MinPoints)
	}
	// The steady steps when there are enough of them and their line
	// passes the checks below; else every usable step, as it would have
	// before (a rate that moved only in its overloads says too little in
	// its steady steps).
	f.CPUSteps = CPUStepsAll
	cpuIdx := make([]int, len(idx)) // positions into idx the line was fitted on
	for k := range cpuIdx {
		cpuIdx[k] = k
	}
	cpu, varied := regress(rate, total)
	if o.CPUFitMaxLoad > 0 && o.CPUFitMaxLoad < 1 {
		if steady := steadySteps(s, idx, o); len(steady) >= o.MinPoints {
			if c, v := regress(pick(rate, steady), pick(total, steady)); v && c.Slope > 0 && c.R2 >= o.MinCPUR2 {
				f.CPUSteps, cpu, cpuIdx = CPUStepsSteady, c, steady
			}
		}
	}
	cpuReps := pick(reps, cpuIdx)
	f.CPU = cpu
	if !varied {
		return refuse(ErrTooThin, "the request rate never varied over %d steps, so CPU per request cannot be told from idle CPU", len(idx))
	}
	if cpu.Slope <= 0 {
		return refuse(ErrPoorFit, "CPU does not grow with the request rate (%.3g core-seconds per request)", cpu.Slope)
	}
	if cpu.R2 < o.MinCPUR2 {
		return refuse(ErrPoorFit, "the request rate explains %.0f%% of the CPU's variance, need %.0f%% (is the rate query the workload's?)", 100*cpu.R2, 100*o.MinCPUR2)
	}
	cpuSeconds := cpu.Slope
	f.Idle = fitIdle(cpu, cpuReps, o)
	f.Idle.ReplicasRateCorr = correlation(cpuReps, pick(rate, cpuIdx))
	// The pods serve requests with their limit less their idle CPU, as
	// the simulator's do (sim.Demand.ServingCPU).
	demand := sim.Demand{BaseCPU: f.Idle.baseCPU()}
	inflight, mem := measuredInFlight(s, idx)
	f.MemoryInFlight = InFlightGauge
	if len(mem) < o.MinPoints {
		f.MemoryInFlight = InFlightLittle
		inflight, mem = make([]float64, len(idx)), make([]float64, len(idx))
		for k, i := range idx {
			limit := at(s.LimitCPU, i)
			if !ok(limit) || limit <= 0 {
				limit = o.NodeCPU
			}
			lambda := s.Rate[i] / s.Replicas[i]
			svc := cpuSeconds / demand.ServingCPU(limit)
			rho := math.Min(lambda*svc, 0.98)
			inflight[k] = lambda * svc / (1 - rho)
			mem[k] = s.Memory[i]
		}
	}
	m, varied := regress(inflight, mem)
	if !varied { // one pod's load never changed: all of it is base memory
		m.Slope, m.Intercept = 0, m.MeanY
	}
	f.Memory = m
	base, perReq := m.Intercept, m.Slope
	if perReq < 0 || base < 0 {
		// A working set that falls with load is not the model's; keep the
		// mean as the base and judge the residual of that.
		base, perReq = m.MeanY, 0
		var ss float64
		for _, y := range mem {
			ss += (y - base) * (y - base)
		}
		f.Memory.RMSResidual = math.Sqrt(ss / float64(len(mem)))
	}
	if m.MeanY <= 0 {
		return refuse(ErrTooThin, "the working set is zero throughout")
	}
	if rel := f.Memory.RMSResidual / m.MeanY; rel > o.MaxMemoryResidual {
		return refuse(ErrPoorFit, "the working set's residual is %.0f%% of its mean, more than %.0f%%", 100*rel, 100*o.MaxMemoryResidual)
	}
	app, err := f.app(s, cpuSeconds, base, perReq, o)
	if err != nil {
		return refuse(ErrSeries, "%v", err)
	}
	f.Latency = chooseLatency(s, app, o)
	app.CPUBurst = f.Latency.Model == LatencyBurst
	f.App = app
	return f, nil
}

// pick is xs at the positions ks.
func pick(xs []float64, ks []int) []float64 {
	out := make([]float64, len(ks))
	for j, k := range ks {
		out[j] = xs[k]
	}
	return out
}

// median is the median of the finite, non-negative values of xs: a
// readiness flap makes one pod's delay long, and the median ignores it.
func median(xs []float64) (float64, bool) {
	var v []float64
	for _, x := range xs {
		if ok(x) && x >= 0 {
			v = append(v, x)
		}
	}
	return stats.Median(v)
}

// app builds the simulator's app, deployed as the history starts.
func (f *Fit) app(s *Series, cpuSeconds, base, perReq float64, o FitOptions) (sim.App, error) {
	reqCPU, okc := filled(s.RequestCPU)
	reqMem, okm := filled(s.RequestMemory)
	reps, okr := filled(s.Replicas)
	rates, _ := filled(s.Rate)
	if !okc || !okm || !okr {
		return sim.App{}, errors.New("requests or replicas are never recorded")
	}
	limCPU, _ := filled(s.LimitCPU)
	limMem, _ := filled(s.LimitMemory)
	var mean float64
	for _, r := range rates {
		mean += r
	}
	peak := 0.0
	for _, r := range reps {
		peak = math.Max(peak, r)
	}
	a := sim.App{
		Name:         s.Name,
		Container:    s.Container,
		StartupDelay: time.Duration(f.StartupDelaySeconds * float64(time.Second)),
		SLO:          s.SLO,
		BaseRate:     mean / float64(len(rates)),
		Replicas:     int32(max(1, math.Round(reps[0]))),
		Requests:     workload.Resources{CPU: reqCPU[0], Memory: reqMem[0]},
		Constraints: workload.Constraints{
			MinReplicas: 1,
			// Room for the policies to scale beyond what ran.
			MaxReplicas: int32(max(10, 2*math.Ceil(peak))),
		},
		Demand: sim.Demand{
			CPUSeconds:       cpuSeconds,
			BaseCPU:          f.Idle.baseCPU(),
			BaseMemory:       base,
			MemoryPerRequest: perReq,
			ServesTimedOut:   o.ServesTimedOut,
		},
	}
	if len(limCPU) > 0 {
		a.Limits.CPU = limCPU[0]
	}
	if len(limMem) > 0 {
		a.Limits.Memory = limMem[0]
	}
	if err := a.Validate(); err != nil {
		return sim.App{}, err
	}
	return a, nil
}

// LatencyFit is the choice of the replay's latency model: Model, and with
// LatencyAuto, each model's median |ln(recorded p95 / model p95)| over
// the Steps calm steps it was chosen on.
type LatencyFit struct {
	Model      string  `json:"model"`
	Steps      int     `json:"steps,omitempty"`
	FluidError float64 `json:"fluidError,omitempty"`
	BurstError float64 `json:"burstError,omitempty"`
}

// chooseLatency applies o.LatencyModel to the fitted app. A calm step has
// a recorded p95, the same replicas as the step before, and a load below
// 0.9 of the pods' CPU limit: one stationary state, which is what both
// models describe. The model p95 of a step is the simulator's own
// (App.ServePod at the step's per-pod rate and the pods' limit).
func chooseLatency(s *Series, app sim.App, o FitOptions) LatencyFit {
	switch o.LatencyModel {
	case LatencyFluid, LatencyBurst:
		return LatencyFit{Model: o.LatencyModel}
	case LatencyAuto:
	default:
		return LatencyFit{Model: LatencyFluid}
	}
	lf := LatencyFit{Model: LatencyFluid}
	dt := s.Step.Seconds()
	span := 1 // steps the p95 covers
	if o.LatencyWindow > s.Step && s.Step > 0 {
		span = int(math.Ceil(float64(o.LatencyWindow) / float64(s.Step)))
	}
	var fluid, burst []float64
	for i := span; i < len(s.Rate); i++ {
		p95, n := at(s.P95, i), s.Replicas[i]
		if !ok(p95, n) || p95 <= 0 || n <= 0 {
			continue
		}
		limit := at(s.LimitCPU, i)
		if !ok(limit) || limit <= 0 {
			limit = o.NodeCPU
		}
		// The range the p95 covers, and the step before it, had the same
		// replicas; in the range the limit held and the load stayed below
		// 0.9 of it.
		calm := at(s.Replicas, i-span) == n
		var lambda float64
		for j := i - span + 1; j <= i && calm; j++ {
			r, l := s.Rate[j], at(s.LimitCPU, j)
			calm = ok(r) && s.Replicas[j] == n && r/n*app.CPUSeconds/limit <= 0.9 && (!ok(l) || l == limit)
			lambda += r / n / float64(span)
		}
		if !calm {
			continue
		}
		model := func(b bool) float64 {
			a := app
			a.CPUBurst = b
			w := a.ServePod(sim.PodInput{Rate: lambda, Arrived: lambda * dt, CPU: limit, Cores: o.NodeCPU, Tick: o.NodeTick.Seconds()}, dt, math.Inf(1))
			return a.IOWait + w.Own + w.QueueDelay + w.Stationary*math.Log(20)
		}
		fluid = append(fluid, math.Abs(math.Log(p95/model(false))))
		burst = append(burst, math.Abs(math.Log(p95/model(true))))
	}
	lf.Steps = len(fluid)
	if lf.Steps < MinLatencySteps {
		return lf
	}
	lf.FluidError, _ = stats.Median(fluid)
	lf.BurstError, _ = stats.Median(burst)
	if lf.BurstError < lf.FluidError {
		lf.Model = LatencyBurst
	}
	return lf
}
