package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// ResizeMode says how a vertical change reaches running pods.
type ResizeMode string

const (
	// ResizeRestart replaces outdated pods, at most MaxUnavailable of the
	// replicas at a time, like the VPA updater's evictions.
	ResizeRestart ResizeMode = "Restart"
	// ResizeInPlace resizes a pod without restarting it when its node has
	// room, and falls back to a restart otherwise.
	ResizeInPlace ResizeMode = "InPlace"
)

// Config describes the cluster and the knobs of the pod model.
type Config struct {
	// Step is the window between observations (default 15s, the HPA sync
	// period).
	Step time.Duration
	// Start is the simulated time of step 0; it only labels observations.
	Start time.Time
	// Nodes is the number of identical nodes (default 10).
	Nodes int
	// NodeCapacity is each node's allocatable (default 16 cores, 64 GiB).
	NodeCapacity workload.Resources
	// NodeCores is how many cores a node's pods may run on at once, which
	// the CFS quota model (App.CPUBurst) reads: more than the allocatable
	// where the system's reservations leave cores idle (default
	// NodeCapacity.CPU).
	NodeCores float64
	// Tenants is the fraction of each node's CPU beyond the app's requests
	// on it that other workloads request and use, every window (default 0:
	// the app runs alone). With 1 the nodes are packed and busy: a pod that
	// wants more than its request gets only its CFS share, its request. The
	// app's pods are scheduled as before (the others fill what they leave).
	// While a node's app pods together want no more than they request, they
	// keep their limits; beyond, each is cut to its share, which slows even
	// a pod within its request. So a policy that keeps usage within its
	// requests is barely affected; one that counts on capacity above them is.
	Tenants float64
	// Resize defaults to ResizeRestart.
	Resize ResizeMode
	// MaxUnavailable is the fraction of replicas a restart rollout may take
	// down at once (default 0.25; at least one pod).
	MaxUnavailable float64
	// Timeout is when a queued request gives up (default 30s).
	Timeout time.Duration
	// RateWindow is the period the policy's request rate, error rate and
	// latency percentiles cover, as a Prometheus rate() and
	// histogram_quantile over a range give them to the recommender
	// (its --prometheus-window): the observation pools the windows of the
	// last RateWindow (all of them until that many have run) and sets
	// Observation.RateWindow. Usage, replicas and the evaluator's
	// StepMetrics stay per window. 0, or not longer than Step: each
	// observation covers its own window, as before.
	RateWindow time.Duration
	// SampledLatency draws each window's latency percentiles as a sample
	// of its requests gives them (sampling.go): around the model's, with a
	// spread that grows as the window holds fewer requests and the pods run
	// busier. The observation's percentiles over RateWindow are read at the
	// windows' levels averaged by their samples (pooledLevels): they vary
	// less, and slowly, as consecutive ranges share most windows. Off: the
	// model's percentiles, as before (the demo, the evidence, training).
	SampledLatency bool
	// SampledUsage counts each pod's CPU usage as its window's realised
	// arrivals' work (PodInput.SampledUsage), as metrics-server's rate over
	// its resolution gives it: it varies around the mean with the Poisson
	// arrivals (a coefficient of variation of 1/√(λ·Step) at λ requests/s).
	// Off: the mean ρ·c in every calm window, as before (the demo, the
	// evidence, training).
	SampledUsage bool
	// UsageResolution is the period a pod's observed CPU usage is a rate
	// over, as metrics-server's resolution gives it to the HPA and the
	// recommender (--metric-resolution, 10s on the testbed). With
	// SampledUsage and a resolution shorter than Step, the usage a policy
	// sees counts only the arrivals of that part of the window (a binomial
	// thinning of the window's, by normal approximation, from a stream of
	// its own), so it varies as a shorter rate does: a coefficient of
	// variation of 1/√(λ·UsageResolution) rather than 1/√(λ·Step). The
	// cost and the evaluator's StepMetrics keep the window's usage. 0, or
	// not shorter than Step: the observation's usage is the window's.
	UsageResolution time.Duration
	// KeepHistory keeps every StepMetrics in memory (History).
	KeepHistory bool
}

// DefaultConfig returns the configuration the evaluator and demo use.
func DefaultConfig() Config {
	return Config{
		Step:           15 * time.Second,
		Start:          time.Date(2023, 7, 10, 0, 0, 0, 0, time.UTC),
		Nodes:          10,
		NodeCapacity:   workload.Resources{CPU: 16, Memory: 64 * gib},
		Resize:         ResizeRestart,
		MaxUnavailable: 0.25,
		Timeout:        30 * time.Second,
	}
}

// WithDefaults fills zero fields from DefaultConfig.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.Step == 0 {
		c.Step = d.Step
	}
	if c.Start.IsZero() {
		c.Start = d.Start
	}
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.NodeCapacity == (workload.Resources{}) {
		c.NodeCapacity = d.NodeCapacity
	}
	if c.NodeCores == 0 {
		c.NodeCores = c.NodeCapacity.CPU
	}
	if c.Resize == "" {
		c.Resize = d.Resize
	}
	if c.MaxUnavailable == 0 {
		c.MaxUnavailable = d.MaxUnavailable
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	return c
}

// Validate rejects configurations the model cannot run.
func (c Config) Validate() error {
	switch {
	case c.Step <= 0:
		return fmt.Errorf("step must be > 0, got %s", c.Step)
	case c.Nodes <= 0:
		return fmt.Errorf("nodes must be > 0, got %d", c.Nodes)
	case !(c.NodeCapacity.CPU > 0) || !(c.NodeCapacity.Memory > 0):
		return fmt.Errorf("node capacity must be positive, got %+v", c.NodeCapacity)
	case !(c.Tenants >= 0 && c.Tenants <= 1):
		return fmt.Errorf("tenants must be in [0, 1], got %g", c.Tenants)
	case c.Resize != ResizeRestart && c.Resize != ResizeInPlace:
		return fmt.Errorf("unknown resize mode %q", c.Resize)
	case !(c.MaxUnavailable > 0 && c.MaxUnavailable <= 1):
		return fmt.Errorf("maxUnavailable must be in (0, 1], got %g", c.MaxUnavailable)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be > 0, got %s", c.Timeout)
	case !(c.NodeCores >= 0) || math.IsInf(c.NodeCores, 0):
		return fmt.Errorf("nodeCores must be a finite number >= 0, got %g", c.NodeCores)
	case c.RateWindow < 0:
		return fmt.Errorf("rate window must be >= 0, got %s", c.RateWindow)
	case c.UsageResolution < 0:
		return fmt.Errorf("usage resolution must be >= 0, got %s", c.UsageResolution)
	}
	return nil
}

// StepMetrics is what happened in one window, for the evaluator.
type StepMetrics struct {
	Step int
	// Rate is the offered load (arrivals per second) of the window.
	Rate float64
	// Arrivals, Completed, Failed and TimedOut count requests; Failed are
	// lost to OOM kills or to no Ready pod.
	Arrivals, Completed, Failed, TimedOut float64
	// Latency percentiles count failed and timed-out requests at Timeout.
	Latency workload.Latency
	// MeanLatency is the mean response time of completed requests.
	MeanLatency float64
	SLO         float64
	// Replicas is the desired count; Ready and Pending count pods.
	Replicas, Ready, Pending int32
	// Requests and Limits are the per-pod template.
	Requests, Limits workload.Resources
	// Allocated sums the requests of scheduled pods (what is paid for);
	// Used sums their usage (CPU cores, memory working set).
	Allocated, Used workload.Resources
	OOMKills        int
	Restarts        int
}

// Actions reports what an applied recommendation changed.
type Actions struct {
	Horizontal bool
	Vertical   bool
}

type podPhase uint8

const (
	podPending podPhase = iota
	podStarting
	podRunning
)

type pod struct {
	name    string
	node    int32
	phase   podPhase
	gen     uint32
	readyAt float64 // seconds since start
	started float64
	// transition is when the Ready condition last changed.
	transition float64
	req        workload.Resources
	lim        workload.Resources
	backlog    float64 // requests queued beyond what the stationary queue holds
	// pressure is the share of the CPU the pod wanted (up to its limit) that
	// its node did not give it in the window: the simulator's cgroup CPU
	// pressure (PSI), 0 unless the node is oversubscribed.
	pressure float64
	// usage is what the pod's metrics show (PodWindow.MeasuredCPU); the
	// window's own went into StepMetrics.Used.
	usage  workload.Resources
	peak   workload.Resources
	remove bool
	// boost is set while the pod runs with its CPU start-up boost.
	boost *podBoost
	// deferral is the kubelet's hold on an in-place resize its node has
	// no room for (ResizeInPlace).
	deferral deferral
}

// deferral: a resize the node defers waits, at the old size, until room
// frees up (the kubelet retries it) or until resizeDeferredTimeout, when the
// updater falls back to replacing the pod.
type deferral struct {
	waiting bool
	since   float64 // seconds since start
}

// resizeDeferredTimeout is the updater's --resize-deferred-timeout default
// (seconds): how long a deferred resize waits before the pod is replaced.
const resizeDeferredTimeout = 300

// held reports whether the deferral still keeps the pod from being
// replaced at t.
func (d deferral) held(t float64) bool {
	return d.waiting && t-d.since < resizeDeferredTimeout
}

type node struct {
	alloc  workload.Resources
	demand float64 // CPU cores the node's pods and other tenants want this window
	shares float64 // sum of the app's running pods' CPU requests
	others float64 // CPU cores the other tenants request and use (Config.Tenants)
}

// latGroup is a set of pods with the same latency distribution.
type latGroup struct {
	shift, mean, weight float64
}

const (
	maxGroups = 8
	// rhoMax caps the utilisation in S/(1−ρ); beyond it the fluid backlog
	// carries the overload, so latency stays finite and continuous.
	rhoMax = 0.98
)

// Simulator runs one app on its own cluster. It is not safe for concurrent
// use; run one Simulator per goroutine.
type Simulator struct {
	cfg   Config
	app   App
	trace *Trace
	// Arrivals and per-pod noise draw from separate streams, so policies
	// run on the same seed see the same arrivals however many pods they run.
	arrivals *rand.Rand
	noise    *rand.Rand

	dt, timeout float64
	step        int
	nextID      int
	nodes       []node
	pods        []pod

	desired          int32
	tmplReq, tmplLim workload.Resources
	gen              uint32
	ratio            workload.Resources
	policy           workload.ContainerPolicy

	groups  [maxGroups]latGroup
	ngroups int
	// effective is the window's requests' worth as independent samples for
	// its percentiles (effectiveSamples, summed over the pods, with the
	// lost ones), and levels where its percentiles were read.
	effective float64
	levels    levels
	// sampling draws the windows' levels (Config.SampledLatency); a stream
	// of its own, so that no other draw depends on the setting.
	sampling *rand.Rand
	// measuring draws which of a window's arrivals the observed usage's
	// rate counts (Config.UsageResolution); a stream of its own, so that no
	// other draw depends on the setting.
	measuring *rand.Rand
	// measuredShare is UsageResolution's share of the window, in (0, 1),
	// or 0 when the observed usage is the window's.
	measuredShare float64
	// rate holds the last windows the observation pools (Config.RateWindow);
	// nil when each observation covers its own window.
	rate *rateRing

	obs        workload.Observation
	containers [1]workload.ContainerObservation
	samples    []workload.PodSample
	last       StepMetrics
	history    []StepMetrics
}

// New builds a simulator for app under trace; all randomness derives from
// seed. The trace is not copied and must not change while the simulator runs.
func New(cfg Config, app App, trace *Trace, seed uint64) (*Simulator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sim config: %w", err)
	}
	if err := app.Validate(); err != nil {
		return nil, err
	}
	if trace == nil {
		return nil, fmt.Errorf("app %q: nil trace", app.Name)
	}
	if trace.Step != 0 && trace.Step != cfg.Step {
		return nil, fmt.Errorf("trace %q has step %s, simulator %s", trace.Name, trace.Step, cfg.Step)
	}
	s := &Simulator{
		cfg:       cfg,
		app:       app,
		trace:     trace,
		arrivals:  rand.New(rand.NewPCG(seed, splitmix(seed))),
		noise:     rand.New(rand.NewPCG(seed, splitmix(seed^0x6e6f697365))),
		sampling:  rand.New(rand.NewPCG(seed, splitmix(seed^0x73616d706c65))),
		measuring: rand.New(rand.NewPCG(seed, splitmix(seed^0x6d6574726963))),
		dt:        cfg.Step.Seconds(),
		timeout:   cfg.Timeout.Seconds(),
		nodes:     make([]node, cfg.Nodes),
		desired:   app.Constraints.ClampReplicas(max(app.Replicas, 1)),
		tmplReq:   app.Requests,
		tmplLim:   app.Limits,
		ratio:     app.LimitRatio(),
		policy:    app.Constraints.ContainerPolicy(app.Container),
	}
	// The user's deployment already runs when the autoscaler takes over:
	// its pods are scheduled and Ready at step 0 (those that fit).
	s.reconcileReplicas(-app.StartupDelay.Seconds())
	s.schedule(-app.StartupDelay.Seconds())
	for i := range s.pods {
		if p := &s.pods[i]; p.phase == podStarting {
			p.phase, p.transition = podRunning, p.readyAt
		}
		if p := &s.pods[i]; p.boost != nil {
			s.endBoost(p) // started long ago: its boost is over
		}
	}
	s.obs.Containers = s.containers[:]
	s.containers[0].Name = app.Container
	s.obs.SLO = app.SLO
	s.obs.Window = cfg.Step
	if cfg.RateWindow > cfg.Step {
		s.rate = newRateRing(int(math.Ceil(float64(cfg.RateWindow) / float64(cfg.Step))))
		s.obs.RateWindow = cfg.RateWindow
	}
	if cfg.SampledUsage && cfg.UsageResolution > 0 && cfg.UsageResolution < cfg.Step {
		s.measuredShare = cfg.UsageResolution.Seconds() / s.dt
	}
	return s, nil
}

// App returns the simulated app.
func (s *Simulator) App() App { return s.app }

// Config returns the effective configuration.
func (s *Simulator) Config() Config { return s.cfg }

// StepIndex returns the number of windows simulated so far.
func (s *Simulator) StepIndex() int { return s.step }

// Observation returns what a policy sees after the last window. Its slices
// are reused by the next Step: a caller that keeps them must copy them.
func (s *Simulator) Observation() workload.Observation { return s.obs }

// History returns every window's metrics when Config.KeepHistory is set.
func (s *Simulator) History() []StepMetrics { return s.history }

// Apply hands a recommendation to the simulated updater. Replicas of zero and
// zero resource targets mean "no opinion". The pods are updated only when
// some controlled resource's request lies outside [LowerBound, UpperBound]
// (if both are set) and differs from its target; then, as the updater
// (updater/logic) and VPA's updater do, every controlled resource takes its
// target, those within their bounds too. Limits follow requests at the
// app's limit/request ratio unless the container policy says RequestsOnly.
// The change takes effect from the next Step.
func (s *Simulator) Apply(rec workload.Recommendation) (Actions, error) {
	var a Actions
	if err := rec.Validate(); err != nil {
		return a, fmt.Errorf("app %q: invalid recommendation: %w", s.app.Name, err)
	}
	if rec.Replicas > 0 {
		if n := s.app.Constraints.ClampReplicas(rec.Replicas); n != s.desired {
			s.desired = n
			a.Horizontal = true
		}
	}
	cr, ok := rec.Container(s.app.Container)
	if !ok {
		return a, nil
	}
	req, lim := s.tmplReq, s.tmplLim
	update := false
	for _, r := range [...]workload.Resource{workload.CPU, workload.Memory} {
		update = update || s.policy.Controls(r) && cr.Changes(r, req.Get(r))
	}
	for _, r := range [...]workload.Resource{workload.CPU, workload.Memory} {
		target := cr.Target.Get(r)
		if !update || !s.policy.Controls(r) || !(target > 0) {
			continue
		}
		req = req.With(r, target)
		if s.policy.ControlledValues != workload.RequestsOnly && s.ratio.Get(r) > 0 {
			lim = lim.With(r, target*s.ratio.Get(r))
		} else if l := lim.Get(r); l > 0 && l < target {
			lim = lim.With(r, target) // the API server rejects limit < request
		}
	}
	if req != s.tmplReq || lim != s.tmplLim {
		s.tmplReq, s.tmplLim = req, lim
		s.gen++
		a.Vertical = true
	}
	return a, nil
}

// Step simulates one window and returns its metrics; Observation then holds
// what a policy sees.
func (s *Simulator) Step() StepMetrics {
	t := float64(s.step) * s.dt
	m := StepMetrics{Step: s.step, SLO: s.app.SLO, Requests: s.tmplReq, Limits: s.tmplLim}
	m.Restarts += s.rollout(t)
	s.reconcileReplicas(t)
	s.schedule(t)

	var ready int
	for i := range s.pods {
		p := &s.pods[i]
		if p.phase == podStarting && p.readyAt <= t+1e-9 {
			p.phase, p.transition = podRunning, p.readyAt
		}
		if p.phase == podRunning {
			ready++
		}
	}
	s.endBoosts(t)

	m.Rate = s.trace.Rate(s.step)
	m.Arrivals = poisson(s.arrivals, m.Rate*s.dt)
	// Each Ready pod is offered an even share of the window's rate (the
	// queue's state follows it) and of its realised arrivals (the counts).
	var lam, arrived float64
	if ready == 0 {
		m.Failed += m.Arrivals
	} else {
		lam = m.Rate / float64(ready)
		arrived = m.Arrivals / float64(ready)
	}
	cpuSec := s.app.CPUSeconds
	for i := range s.nodes {
		// The other tenants request and use their share of what the app's
		// pods did not request.
		n := &s.nodes[i]
		n.others = s.cfg.Tenants * max(s.cfg.NodeCapacity.CPU-n.alloc.CPU, 0)
		n.demand, n.shares = n.others, 0
	}
	for i := range s.pods {
		p := &s.pods[i]
		if p.phase != podRunning {
			continue
		}
		n := &s.nodes[p.node]
		n.demand += min(s.app.BaseCPU+(lam+p.backlog/s.dt)*cpuSec, s.cpuCap(p))
		n.shares += max(p.req.CPU, 1e-6)
	}

	s.ngroups, s.effective = 0, 0
	var latSum float64
	nodeCPU := s.cfg.NodeCapacity.CPU
	for i := range s.pods {
		p := &s.pods[i]
		p.usage, p.peak, p.pressure = workload.Resources{}, workload.Resources{}, 0
		switch p.phase {
		case podPending:
			m.Pending++
			continue
		case podStarting:
			p.usage.Memory = s.app.BaseMemory
			p.peak.Memory = s.app.BaseMemory
			m.Allocated = m.Allocated.Add(p.req)
			m.Used = m.Used.Add(p.usage)
			continue
		}
		m.Allocated = m.Allocated.Add(p.req)
		c := s.cpuCap(p)
		if n := &s.nodes[p.node]; n.demand > nodeCPU {
			// CFS shares: an oversubscribed node divides its CPU by requests.
			// The other tenants use no more than they request, so the app's
			// pods share what they leave.
			want := min(s.app.BaseCPU+(lam+p.backlog/s.dt)*cpuSec, c)
			c = min(c, (nodeCPU-n.others)*max(p.req.CPU, 1e-6)/n.shares)
			if want > c {
				p.pressure = 1 - c/want
			}
		}
		w := s.app.ServePod(PodInput{
			Rate: lam, Arrived: arrived, Backlog: p.backlog,
			CPU: c, Cores: s.cfg.NodeCores, MemoryLimit: p.lim.Memory, Z: s.noise.NormFloat64(),
			SampledUsage: s.cfg.SampledUsage, MeasuredShare: s.measuredShare, ZMeasured: s.measuredDraw(),
		}, s.dt, s.timeout)
		p.usage, p.peak = w.Usage, w.Peak
		if w.OOMKilled {
			// OOM kill at the end of the window: the requests it holds fail.
			m.Failed += w.Failed
			p.phase = podStarting
			p.started = t + s.dt
			p.transition = t + s.dt
			p.readyAt = t + s.dt + s.startDelay(p)
			m.OOMKills++
			m.Restarts++
		}
		p.backlog = w.Backlog
		m.TimedOut += w.TimedOut
		m.Completed += w.Completed
		m.Used = m.Used.Add(p.usage)
		done, qdelay, stat := w.Completed, w.QueueDelay, w.Stationary
		shift := s.app.IOWait + w.Own + qdelay
		latSum += done * (shift + stat)
		s.addGroup(shift, stat, done)
		if c > 0 {
			s.effective += effectiveSamples(done, p.usage.CPU/c)
		}
		// From here on the pod's usage is what its metrics show; the
		// window's went into the cost above.
		p.usage.CPU = w.MeasuredCPU
	}
	if m.Completed > 0 {
		m.MeanLatency = latSum / m.Completed
	}
	s.effective += m.Failed + m.TimedOut
	s.levels = modelLevels
	if s.cfg.SampledLatency {
		s.levels = sampledLevels(s.effective, s.sampling.Float64())
	}
	m.Latency = latencyAt(s.groups[:s.ngroups], m.Failed+m.TimedOut, s.timeout, s.levels)
	m.Replicas = s.desired
	s.observe(t+s.dt, &m)
	s.step++
	s.last = m
	if s.cfg.KeepHistory {
		s.history = append(s.history, m)
	}
	return m
}

// measuredDraw is the standard normal draw that thins a pod's arrivals to
// those its observed usage counts (Config.UsageResolution), or 0 with no
// draw when the observed usage is the window's.
func (s *Simulator) measuredDraw() float64 {
	if s.measuredShare == 0 {
		return 0
	}
	return s.measuring.NormFloat64()
}

func (s *Simulator) cpuCap(p *pod) float64 {
	if p.lim.CPU > 0 {
		return min(p.lim.CPU, s.cfg.NodeCapacity.CPU)
	}
	return s.cfg.NodeCapacity.CPU
}

func (s *Simulator) addGroup(shift, mean, w float64) {
	if w <= 0 {
		return
	}
	for i := range s.ngroups {
		g := &s.groups[i]
		if g.shift == shift && g.mean == mean {
			g.weight += w
			return
		}
	}
	if s.ngroups == maxGroups {
		// Rare (pods in many different states): fold into the last group,
		// keeping the mass and the weighted mean.
		g := &s.groups[maxGroups-1]
		tw := g.weight + w
		g.shift = (g.shift*g.weight + shift*w) / tw
		g.mean = (g.mean*g.weight + mean*w) / tw
		g.weight = tw
		return
	}
	s.groups[s.ngroups] = latGroup{shift, mean, w}
	s.ngroups++
}

// quantile is the q-quantile of a mixture of shifted exponentials (the
// groups, by weight) plus a point mass of lost requests at timeout.
func quantile(groups []latGroup, q, lost, timeout float64) float64 {
	var served float64
	lo := timeout
	for i := range groups {
		served += groups[i].weight
		lo = min(lo, groups[i].shift)
	}
	total := served + lost
	if total <= 0 {
		return 0
	}
	if lost == 0 && len(groups) == 1 {
		g := groups[0]
		return min(g.shift-g.mean*math.Log(1-q), timeout)
	}
	target := q * total
	if served < target {
		return timeout
	}
	cdf := func(x float64) float64 {
		var f float64
		for i := range groups {
			g := &groups[i]
			if x > g.shift {
				f += g.weight * (1 - math.Exp(-(x-g.shift)/g.mean))
			}
		}
		return f
	}
	hi := timeout
	if cdf(hi) < target {
		return timeout
	}
	for range 40 {
		mid := (lo + hi) / 2
		if cdf(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// rollout brings pods to the current template generation and returns the
// number of restarts it caused.
func (s *Simulator) rollout(t float64) int {
	var outdated, unavailable int
	for i := range s.pods {
		p := &s.pods[i]
		if p.phase != podRunning {
			unavailable++
		}
		if p.gen == s.gen {
			continue
		}
		switch {
		case p.phase == podPending:
			p.req, p.lim, p.gen = s.tmplReq, s.tmplLim, s.gen
			s.admitBoost(p)
		case p.boost != nil:
			// The updater leaves a boosted pod alone until its boost ends.
			continue
		case s.cfg.Resize == ResizeInPlace && s.fitsResize(p):
			n := &s.nodes[p.node]
			n.alloc = n.alloc.Add(s.tmplReq).Add(p.req.Scale(-1))
			p.req, p.lim, p.gen = s.tmplReq, s.tmplLim, s.gen
			p.deferral = deferral{}
		case s.cfg.Resize == ResizeInPlace && (!p.deferral.waiting || p.deferral.held(t)):
			// Deferred: the pod keeps its size and is retried each step.
			if !p.deferral.waiting {
				p.deferral = deferral{waiting: true, since: t}
			}
		default:
			outdated++
		}
	}
	if outdated == 0 {
		return 0
	}
	budget := max(1, int(s.cfg.MaxUnavailable*float64(s.desired))) - unavailable
	var restarts int
	for i := range s.pods {
		p := &s.pods[i]
		// A deferral still waiting is not replaced with the pods whose
		// deferral timed out.
		if p.gen == s.gen || p.deferral.held(t) {
			continue
		}
		// A pod that is not Ready costs no availability to replace.
		if p.phase == podRunning {
			if budget <= 0 {
				continue
			}
			budget--
		}
		s.unbind(p, t)
		p.req, p.lim, p.gen = s.tmplReq, s.tmplLim, s.gen
		s.admitBoost(p)
		restarts++
	}
	return restarts
}

func (s *Simulator) fitsResize(p *pod) bool {
	n := &s.nodes[p.node]
	after := n.alloc.Add(s.tmplReq).Add(p.req.Scale(-1))
	return after.CPU <= s.cfg.NodeCapacity.CPU+1e-9 && after.Memory <= s.cfg.NodeCapacity.Memory+1e-3
}

// unbind returns a pod to Pending (evicted, recreated by its controller).
func (s *Simulator) unbind(p *pod, t float64) {
	if p.phase != podPending {
		n := &s.nodes[p.node]
		n.alloc = n.alloc.Add(p.req.Scale(-1))
	}
	if p.phase == podRunning {
		p.transition = t
	}
	p.phase, p.node, p.backlog = podPending, -1, 0
	p.deferral = deferral{}
}

// reconcileReplicas creates or deletes pods to match the desired count,
// deleting Pending, then not-Ready, then the newest pods first, as a
// ReplicaSet does.
func (s *Simulator) reconcileReplicas(t float64) {
	n := int(s.desired)
	for len(s.pods) < n {
		s.pods = append(s.pods, pod{
			name: s.app.Name + "-" + strconv.Itoa(s.nextID),
			node: -1, phase: podPending, gen: s.gen, req: s.tmplReq, lim: s.tmplLim, transition: t,
		})
		s.admitBoost(&s.pods[len(s.pods)-1])
		s.nextID++
	}
	surplus := len(s.pods) - n
	if surplus <= 0 {
		return
	}
	for _, ph := range [...]podPhase{podPending, podStarting, podRunning} {
		for i := len(s.pods) - 1; i >= 0 && surplus > 0; i-- {
			if p := &s.pods[i]; !p.remove && p.phase == ph {
				p.remove = true
				surplus--
			}
		}
	}
	k := 0
	for i := range s.pods {
		if s.pods[i].remove {
			s.unbind(&s.pods[i], t)
			continue
		}
		s.pods[k] = s.pods[i]
		k++
	}
	clear(s.pods[k:])
	s.pods = s.pods[:k]
}

// schedule binds Pending pods to the least-allocated node they fit on, like
// the default scheduler's spreading; a pod that fits nowhere stays Pending.
func (s *Simulator) schedule(t float64) {
	capa := s.cfg.NodeCapacity
	for i := range s.pods {
		p := &s.pods[i]
		if p.phase != podPending {
			continue
		}
		best, bestFree := -1, -1.0
		for j := range s.nodes {
			a := s.nodes[j].alloc
			if a.CPU+p.req.CPU > capa.CPU+1e-9 || a.Memory+p.req.Memory > capa.Memory+1e-3 {
				continue
			}
			if free := (capa.CPU-a.CPU)/capa.CPU + (capa.Memory-a.Memory)/capa.Memory; free > bestFree+1e-12 {
				best, bestFree = j, free
			}
		}
		if best < 0 {
			continue
		}
		s.nodes[best].alloc = s.nodes[best].alloc.Add(p.req)
		p.node = int32(best)
		p.phase = podStarting
		p.started = t
		p.readyAt = t + s.startDelay(p)
	}
}

// observe fills the reusable Observation from the window just simulated.
func (s *Simulator) observe(end float64, m *StepMetrics) {
	o := &s.obs
	o.Time = s.cfg.Start.Add(time.Duration(end * float64(time.Second)))
	o.Replicas = s.desired
	o.RequestRate = m.Arrivals / s.dt
	o.ErrorRate = (m.Failed + m.TimedOut) / s.dt
	o.Latency = m.Latency
	if s.rate != nil {
		s.rate.add(s.groups[:s.ngroups], s.effective, s.levels, m)
		o.RequestRate, o.ErrorRate, o.Latency = s.rate.pooled(s.dt, s.timeout)
	}
	c := &s.containers[0]
	c.Requests, c.Limits, c.OOMKills = s.tmplReq, s.tmplLim, m.OOMKills
	c.Usage, c.Peak, c.CPUPressure = workload.Resources{}, workload.Resources{}, 0
	s.samples = s.samples[:0]
	var ready int32
	var withMetrics int
	for i := range s.pods {
		p := &s.pods[i]
		has := p.phase != podPending
		if p.phase == podRunning {
			ready++
		}
		var started time.Time
		if has {
			withMetrics++
			started = s.cfg.Start.Add(time.Duration(p.started * float64(time.Second)))
			c.Usage = c.Usage.Add(p.usage)
			c.CPUPressure += p.pressure
			c.Peak.CPU = max(c.Peak.CPU, p.peak.CPU)
			c.Peak.Memory = max(c.Peak.Memory, p.peak.Memory)
		}
		var deferredSince time.Time
		if p.deferral.waiting {
			deferredSince = s.cfg.Start.Add(time.Duration(p.deferral.since * float64(time.Second)))
		}
		s.samples = append(s.samples, workload.PodSample{
			Name: p.name, Ready: p.phase == podRunning, HasMetrics: has, Started: started,
			ReadySince: s.cfg.Start.Add(time.Duration(p.transition * float64(time.Second))),
			Usage:      p.usage, Requests: p.req, ResizeDeferredSince: deferredSince,
		})
	}
	if withMetrics > 0 {
		c.Usage = c.Usage.Scale(1 / float64(withMetrics))
		c.CPUPressure /= float64(withMetrics)
	}
	m.Ready = ready
	o.ReadyReplicas = ready
	o.Samples = withMetrics
	o.Pods = s.samples
}

// poisson draws a Poisson variate: exact by multiplication for small means,
// normal approximation (error well under 1% of the spread) above 30.
func poisson(rng *rand.Rand, mean float64) float64 {
	if !(mean > 0) {
		return 0
	}
	if mean < 30 {
		l := math.Exp(-mean)
		k, p := 0, rng.Float64()
		for p > l {
			k++
			p *= rng.Float64()
		}
		return float64(k)
	}
	return max(0, math.Round(mean+math.Sqrt(mean)*rng.NormFloat64()))
}

// RewardInputs returns the window's measurements as the reward takes them,
// so the evaluator and a learning agent score windows identically.
func (m *StepMetrics) RewardInputs() reward.Inputs {
	return reward.Inputs{
		CPUUsed: m.Used.CPU, CPUAllocated: m.Allocated.CPU,
		MemoryUsed: m.Used.Memory, MemoryAllocated: m.Allocated.Memory,
		P95: m.Latency.P95, SLO: m.SLO,
		Requests: m.Arrivals, Lost: m.Failed + m.TimedOut, OOMKills: m.OOMKills,
	}
}
