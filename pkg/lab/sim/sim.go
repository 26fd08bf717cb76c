package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// StepMetrics is what happened in one window, for the evaluator.
type StepMetrics struct {
	Step int
	// Rate is the offered load (arrivals per second) of the window.
	Rate float64
	// Arrivals, Completed, Failed and TimedOut count requests; Failed are
	// lost to OOM kills or to no Ready pod.
	Arrivals, Completed, Failed, TimedOut float64
	// InFlight sums the running pods' mean requests in flight (PodWork's),
	// what an app's in-flight gauge summed over its pods would show.
	InFlight float64
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

// Simulator runs one app on its own cluster. It is not safe for concurrent
// use; run one Simulator per goroutine.
type Simulator struct {
	cfg   Config
	app   App
	trace *Trace
	// dt and timeout are Step and Timeout in seconds; step counts the
	// windows simulated.
	dt, timeout float64
	step        int

	rng     streams
	spec    deploymentSpec
	cluster cluster
	lat     windowLatency
	out     observed
	// offered is each pod's part of the window (offers), by pod index;
	// joining the pods that become Ready within it. Scratch, reused.
	offered []offer
	joining []int
}

// streams are the simulator's random streams, all derived from the seed.
// Each serves one purpose, so that how many draws one makes never shifts
// another's sequence.
type streams struct {
	// Arrivals and per-pod noise draw from separate streams, so policies
	// run on the same seed see the same arrivals however many pods they run.
	arrivals *rand.Rand
	noise    *rand.Rand
	// sampling draws the windows' levels (Config.SampledLatency); a stream
	// of its own, so that no other draw depends on the setting.
	sampling *rand.Rand
	// measuring draws which of a window's arrivals the observed usage's
	// rate counts (Config.UsageResolution); a stream of its own, so that no
	// other draw depends on the setting.
	measuring *rand.Rand
	// measuredShare is UsageResolution's share of the window, in (0, 1),
	// or 0 when the observed usage is the window's (measuring then never
	// draws).
	measuredShare float64
}

// deploymentSpec is what Apply sets, as a Deployment's spec holds it: the
// desired replicas and the pod template, whose every change bumps gen so
// that the rollout can tell outdated pods.
type deploymentSpec struct {
	desired          int32
	tmplReq, tmplLim workload.Resources
	gen              uint32
	// ratio and policy are the app's and never change: how limits follow
	// requests, which resources a recommendation controls, the start-up
	// boost.
	ratio  workload.Resources
	policy workload.ContainerPolicy
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
		cfg:     cfg,
		app:     app,
		trace:   trace,
		dt:      cfg.Step.Seconds(),
		timeout: cfg.Timeout.Seconds(),
		rng: streams{
			arrivals:  rand.New(rand.NewPCG(seed, splitmix(seed))),
			noise:     rand.New(rand.NewPCG(seed, splitmix(seed^0x6e6f697365))),
			sampling:  rand.New(rand.NewPCG(seed, splitmix(seed^0x73616d706c65))),
			measuring: rand.New(rand.NewPCG(seed, splitmix(seed^0x6d6574726963))),
		},
		spec: deploymentSpec{
			desired: app.Constraints.ClampReplicas(max(app.Replicas, 1)),
			tmplReq: app.Requests,
			tmplLim: app.Limits,
			ratio:   app.LimitRatio(),
			policy:  app.Constraints.ContainerPolicy(app.Container),
		},
		cluster: cluster{nodes: make([]node, cfg.Nodes)},
	}
	// The user's deployment already runs when the autoscaler takes over:
	// its pods are scheduled and Ready at step 0 (those that fit).
	s.reconcileReplicas(-app.StartupDelay.Seconds())
	s.schedule(-app.StartupDelay.Seconds())
	for i := range s.cluster.pods {
		if p := &s.cluster.pods[i]; p.phase == podStarting {
			p.phase, p.transition = podRunning, p.readyAt
		}
		if p := &s.cluster.pods[i]; p.boost != nil {
			s.endBoost(p) // started long ago: its boost is over
		}
	}
	s.out.obs.Containers = s.out.containers[:]
	s.out.containers[0].Name = app.Container
	s.out.obs.SLO = app.SLO
	s.out.obs.Window = cfg.Step
	if cfg.RateWindow > cfg.Step {
		s.out.rate = newRateRing(int(math.Ceil(float64(cfg.RateWindow) / float64(cfg.Step))))
		s.out.obs.RateWindow = cfg.RateWindow
	}
	if cfg.SampledUsage && cfg.UsageResolution > 0 && cfg.UsageResolution < cfg.Step {
		s.rng.measuredShare = cfg.UsageResolution.Seconds() / s.dt
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
func (s *Simulator) Observation() workload.Observation { return s.out.obs }

// History returns every window's metrics when Config.KeepHistory is set.
func (s *Simulator) History() []StepMetrics { return s.out.history }

// Apply hands a recommendation to the simulated updater. Replicas of zero and
// zero resource targets mean "no opinion". The pods are updated only when
// some controlled resource's request lies outside [LowerBound, UpperBound]
// (if both are set) and differs from its target; then, as the updater
// (updater/logic) and VPA's updater do, every controlled resource takes its
// target, those within their bounds too. Limits follow requests at the
// app's limit/request ratio unless the container policy says RequestsOnly.
// The change takes effect from the next Step.
//
// The pods are checked one by one: a pod that Admit gave other requests
// than its peers is resized if its own are out of bounds, and the pods
// whose requests are within them keep them, as VPA's updater leaves them.
// Without Admit every pod that is up to date has the template's requests,
// and the pods are resized together.
func (s *Simulator) Apply(rec workload.Recommendation) (Actions, error) {
	var a Actions
	if err := rec.Validate(); err != nil {
		return a, fmt.Errorf("app %q: invalid recommendation: %w", s.app.Name, err)
	}
	if rec.Replicas > 0 {
		if n := s.app.Constraints.ClampReplicas(rec.Replicas); n != s.spec.desired {
			s.spec.desired = n
			a.Horizontal = true
		}
	}
	cr, ok := rec.Container(s.app.Container)
	if !ok {
		return a, nil
	}
	var podOut bool
	for i := range s.cluster.pods {
		if p := &s.cluster.pods[i]; s.upToDate(p) && s.changes(&cr, p.req) {
			podOut = true
		}
	}
	if !podOut && !s.changes(&cr, s.spec.tmplReq) {
		return a, nil
	}
	req, lim := s.targets(&cr)
	if req == s.spec.tmplReq && lim == s.spec.tmplLim && !podOut {
		return a, nil
	}
	s.spec.tmplReq, s.spec.tmplLim = req, lim
	s.spec.gen++
	a.Vertical = true
	for i := range s.cluster.pods {
		if p := &s.cluster.pods[i]; p.gen == s.spec.gen-1 && p.phase != podPending && p.boost == nil && !s.changes(&cr, p.req) {
			p.gen = s.spec.gen
		}
	}
	return a, nil
}

// Admit hands a recommendation to the simulated admission controller:
// the pods created from the next Step on take its container's targets,
// whatever its bounds, and the pods there keep theirs, as VPA's admission
// controller gives a new pod the recommender's latest target while its
// updater resizes a running pod only out of bounds (Apply). Replicas are
// not its business. It reports whether the new pods' requests changed.
func (s *Simulator) Admit(rec workload.Recommendation) (bool, error) {
	if err := rec.Validate(); err != nil {
		return false, fmt.Errorf("app %q: invalid recommendation: %w", s.app.Name, err)
	}
	cr, ok := rec.Container(s.app.Container)
	if !ok {
		return false, nil
	}
	req, lim := s.targets(&cr)
	if req == s.spec.tmplReq && lim == s.spec.tmplLim {
		return false, nil
	}
	s.spec.tmplReq, s.spec.tmplLim = req, lim
	s.spec.gen++
	// The pods created before keep their requests: they count as up to
	// date, and only those still Pending, admitted when they are placed,
	// take the new template (rollout).
	for i := range s.cluster.pods {
		if p := &s.cluster.pods[i]; p.phase != podPending && p.gen == s.spec.gen-1 {
			p.gen = s.spec.gen
		}
	}
	return true, nil
}

// upToDate reports whether p runs with the current template's generation
// and no start-up boost: the pod Apply checks on its own account.
func (s *Simulator) upToDate(p *pod) bool {
	return p.phase != podPending && p.gen == s.spec.gen && p.boost == nil
}

// changes reports whether cr changes some controlled resource of req.
func (s *Simulator) changes(cr *workload.ContainerRecommendation, req workload.Resources) bool {
	for _, r := range [...]workload.Resource{workload.CPU, workload.Memory} {
		if s.spec.policy.Controls(r) && cr.Changes(r, req.Get(r)) {
			return true
		}
	}
	return false
}

// targets is the template's requests and limits with cr's targets for the
// controlled resources: limits follow requests at the app's limit/request
// ratio unless the container policy says RequestsOnly.
func (s *Simulator) targets(cr *workload.ContainerRecommendation) (req, lim workload.Resources) {
	req, lim = s.spec.tmplReq, s.spec.tmplLim
	for _, r := range [...]workload.Resource{workload.CPU, workload.Memory} {
		target := cr.Target.Get(r)
		if !s.spec.policy.Controls(r) || !(target > 0) {
			continue
		}
		req = req.With(r, target)
		if s.spec.policy.ControlledValues != workload.RequestsOnly && s.spec.ratio.Get(r) > 0 {
			lim = lim.With(r, target*s.spec.ratio.Get(r))
		} else if l := lim.Get(r); l > 0 && l < target {
			lim = lim.With(r, target) // the API server rejects limit < request
		}
	}
	return req, lim
}

// Step simulates one window and returns its metrics; Observation then holds
// what a policy sees.
func (s *Simulator) Step() StepMetrics {
	t := float64(s.step) * s.dt
	m := StepMetrics{Step: s.step, SLO: s.app.SLO, Requests: s.spec.tmplReq, Limits: s.spec.tmplLim}
	m.Restarts += s.rollout(t)
	s.reconcileReplicas(t)
	s.schedule(t)

	s.readyBy(t)
	var ready int
	for i := range s.cluster.pods {
		if s.cluster.pods[i].phase == podRunning {
			ready++
		}
	}
	s.endBoosts(t)

	m.Rate = s.trace.Rate(s.step)
	m.Arrivals = poisson(s.rng.arrivals, m.Rate*s.dt)
	// Each serving pod is offered its share of the window's rate (the
	// queue's state follows it) and of its realised arrivals (the counts).
	if unserved := s.offers(t, ready, m.Rate, m.Arrivals); unserved > 0 {
		m.Failed += m.Arrivals * unserved
	}
	cpuSec := s.app.CPUSeconds
	for i := range s.cluster.nodes {
		// The other tenants request and use their share of what the app's
		// pods did not request.
		n := &s.cluster.nodes[i]
		n.others = s.cfg.Tenants * max(s.cfg.NodeCapacity.CPU-n.alloc.CPU, 0)
		n.demand, n.shares = n.others, 0
	}
	for i := range s.cluster.pods {
		p, o := &s.cluster.pods[i], s.offered[i]
		if !(o.dt > 0) {
			continue
		}
		n := &s.cluster.nodes[p.node]
		// A pod Ready within the window wants CPU for that part of it (f
		// is 1 for a pod that serves the whole window).
		f := o.dt / s.dt
		n.demand += f * min(s.app.BaseCPU+(o.rate+p.queued()/o.dt)*cpuSec, s.cpuCap(p))
		n.shares += f * max(p.req.CPU, 1e-6)
	}

	s.lat.ngroups, s.lat.effective = 0, 0
	var latSum float64
	nodeCPU := s.cfg.NodeCapacity.CPU
	for i := range s.cluster.pods {
		p, o := &s.cluster.pods[i], s.offered[i]
		p.usage, p.peak, p.pressure = workload.Resources{}, workload.Resources{}, 0
		switch {
		case p.phase == podPending:
			m.Pending++
			continue
		case p.phase == podStarting && !(o.dt > 0):
			p.usage.Memory = s.app.BaseMemory
			p.peak.Memory = s.app.BaseMemory
			m.Allocated = m.Allocated.Add(p.req)
			m.Used = m.Used.Add(p.usage)
			continue
		}
		m.Allocated = m.Allocated.Add(p.req)
		c := s.cpuCap(p)
		if n := &s.cluster.nodes[p.node]; n.demand > nodeCPU {
			// CFS shares: an oversubscribed node divides its CPU by requests.
			// The other tenants use no more than they request, so the app's
			// pods share what they leave.
			want := min(s.app.BaseCPU+(o.rate+p.queued()/o.dt)*cpuSec, c)
			c = min(c, (nodeCPU-n.others)*max(p.req.CPU, 1e-6)/n.shares)
			if want > c {
				p.pressure = 1 - c/want
			}
		}
		w := s.app.ServePod(PodInput{
			Rate: o.rate, Arrived: o.arrived, Backlog: p.backlog, Held: &p.held,
			CPU: c, Cores: s.cfg.NodeCores, Background: s.cfg.NodeBackground, Tick: s.cfg.NodeTick.Seconds(), MemoryLimit: p.lim.Memory, Z: s.rng.noise.NormFloat64(),
			SampledUsage: s.cfg.SampledUsage, MeasuredShare: s.rng.measuredShare, ZMeasured: s.rng.measuredDraw(),
		}, o.dt, s.timeout)
		// from is when the pod began serving: the window's start, or its
		// readyAt within it (Config.ReadyWithinWindow).
		from, busy := t, w.Usage.CPU/c
		if o.dt < s.dt {
			from = t + s.dt - o.dt
			// Over the window it idled at its base memory until then, and
			// its metrics' rate covers the part it served.
			f := o.dt / s.dt
			w.Usage = workload.Resources{CPU: f * w.Usage.CPU, Memory: f*w.Usage.Memory + (1-f)*s.app.BaseMemory}
			w.InFlight *= f
			res := s.dt
			if r := s.cfg.UsageResolution.Seconds(); r > 0 && r < s.dt {
				res = r
			}
			w.MeasuredCPU *= min(1, o.dt/res)
		}
		p.usage, p.peak = w.Usage, w.Peak
		if w.OOMKilled {
			// OOM kill: the requests it holds fail.
			m.Failed += w.Failed
			p.phase = podStarting
			// At the window's end, or within it in the held queue: a pod
			// killed early in a window may be Ready for the next.
			p.started = from + w.KilledAt
			p.transition = from + w.KilledAt
			p.readyAt = from + w.KilledAt + s.startDelay(p)
			m.OOMKills++
			m.Restarts++
		}
		p.backlog = w.Backlog
		m.TimedOut += w.TimedOut
		m.Completed += w.Completed
		m.InFlight += w.InFlight
		m.Used = m.Used.Add(p.usage)
		done, qdelay, stat := w.Completed, w.QueueDelay, w.Stationary
		shift := s.app.IOWait + w.Own + qdelay
		latSum += done * (shift + stat)
		s.lat.addGroup(shift, stat, done)
		if c > 0 {
			s.lat.effective += effectiveSamples(done, busy)
		}
		// From here on the pod's usage is what its metrics show; the
		// window's went into the cost above.
		p.usage.CPU = w.MeasuredCPU
	}
	if m.Completed > 0 {
		m.MeanLatency = latSum / m.Completed
	}
	s.lat.effective += m.Failed + m.TimedOut
	s.lat.levels = modelLevels
	if s.cfg.SampledLatency {
		s.lat.levels = sampledLevels(s.lat.effective, s.rng.sampling.Float64())
	}
	m.Latency = latencyAt(s.lat.groups[:s.lat.ngroups], m.Failed+m.TimedOut, s.timeout, s.lat.levels, workload.AllPercentiles)
	m.Replicas = s.spec.desired
	if s.cfg.ReadyWithinWindow {
		s.readyBy(t + s.dt)
	}
	s.observe(t+s.dt, &m)
	s.step++
	s.out.last = m
	if s.cfg.KeepHistory {
		s.out.history = append(s.out.history, m)
	}
	return m
}

// measuredDraw is the standard normal draw that thins a pod's arrivals to
// those its observed usage counts (Config.UsageResolution), or 0 with no
// draw when the observed usage is the window's.
func (r *streams) measuredDraw() float64 {
	if r.measuredShare == 0 {
		return 0
	}
	return r.measuring.NormFloat64()
}

func (s *Simulator) cpuCap(p *pod) float64 {
	if p.lim.CPU > 0 {
		return min(p.lim.CPU, s.cfg.NodeCapacity.CPU)
	}
	return s.cfg.NodeCapacity.CPU
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
