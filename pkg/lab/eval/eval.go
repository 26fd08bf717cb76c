// Package eval runs policies over simulated apps and traces and reports how
// they compare: SLO violations, utilisation, cost, OOM kills, scaling
// actions and the AWARE reward.
//
// Every (run, policy) pair is an independent job executed by a pool of
// GOMAXPROCS workers; results land in a slot fixed by the job's index and
// are reduced in that order, so a parallel evaluation equals a serial one
// bit for bit. All policies of a run share the run's seed, so they face the
// same arrivals (common random numbers).
package eval

import (
	"context"
	"fmt"
	"math"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// Run is one app under one trace.
type Run struct {
	App   sim.App
	Trace *sim.Trace
	Seed  uint64
	// Nodes, when positive, sizes this run's simulated cluster instead of
	// Options.Config.Nodes: the what-if sizes each workload's cluster from
	// its own history, so that its replay does not depend on which other
	// workloads were replayed with it.
	Nodes int
}

// Contender is a policy under evaluation. New makes a fresh Policy for each
// run; most contenders wrap a workload.PolicyFactory (FromFactory), while
// ones that need the run itself (the oracle) read it.
type Contender struct {
	Name string
	New  func(r Run, cfg sim.Config) (workload.Policy, error)
}

// FromFactory adapts a PolicyFactory: the policy sees only the app's
// constraints, as it would in a cluster.
func FromFactory(name string, f workload.PolicyFactory) Contender {
	return Contender{Name: name, New: func(r Run, _ sim.Config) (workload.Policy, error) {
		return f(r.App.Constraints)
	}}
}

// Progress hears about finished jobs. Advance is called from worker
// goroutines and must be safe for concurrent use.
type Progress interface {
	Begin(total int)
	Advance(policy, app string)
	End()
}

// Options configure an evaluation.
type Options struct {
	Config sim.Config
	// Workers defaults to GOMAXPROCS.
	Workers int
	Reward  reward.Options
	// Prices default to sim.DefaultPrices.
	Prices sim.Prices
	// SeriesRun is the index of the run whose per-window time series is
	// kept for every policy; negative keeps none.
	SeriesRun int
	// KeepSeries, when set, also keeps the time series of every run it
	// returns true for, in Report.RunSeries: a caller that plots several
	// runs gets them from the evaluation that counts them, instead of
	// simulating them again.
	KeepSeries func(run int) bool
	Progress   Progress
}

// RunResult is one policy on one run.
type RunResult struct {
	Policy string `json:"policy"`
	App    string `json:"app"`
	Trace  string `json:"trace"`
	// Seed is the run's seed: a (app, trace, seed) triple identifies the
	// run that policies are paired on.
	Seed  uint64 `json:"seed"`
	Steps int    `json:"steps"`
	// SLOViolations counts windows with p95 above the SLO.
	SLOViolations    int     `json:"sloViolations"`
	SLOViolationRate float64 `json:"sloViolationRate"`
	CPUUtilization   float64 `json:"cpuUtilization"`
	MemUtilization   float64 `json:"memoryUtilization"`
	CoreHours        float64 `json:"coreHours"`
	GiBHours         float64 `json:"gibHours"`
	Cost             float64 `json:"cost"`
	Requests         float64 `json:"requests"`
	LostRequests     float64 `json:"lostRequests"`
	OOMKills         int     `json:"oomKills"`
	HorizontalScales int     `json:"horizontalActions"`
	VerticalScales   int     `json:"verticalActions"`
	PolicyErrors     int     `json:"policyErrors"`
	MeanReward       float64 `json:"meanReward"`

	cpuUsed, cpuAlloc, memUsed, memAlloc, rewardSum float64
}

// Summary aggregates one policy over all runs.
type Summary struct {
	Policy           string  `json:"policy"`
	Runs             int     `json:"runs"`
	Steps            int     `json:"steps"`
	SLOViolations    int     `json:"sloViolations"`
	SLOViolationRate float64 `json:"sloViolationRate"`
	// Utilisations are total used over total allocated across all runs.
	CPUUtilization float64 `json:"cpuUtilization"`
	MemUtilization float64 `json:"memoryUtilization"`
	CoreHours      float64 `json:"coreHours"`
	GiBHours       float64 `json:"gibHours"`
	Cost           float64 `json:"cost"`
	// LostRate is the fraction of requests that failed or timed out.
	LostRate         float64 `json:"lostRate"`
	OOMKills         int     `json:"oomKills"`
	ScalingActions   int     `json:"scalingActions"`
	HorizontalScales int     `json:"horizontalActions"`
	VerticalScales   int     `json:"verticalActions"`
	PolicyErrors     int     `json:"policyErrors"`
	MeanReward       float64 `json:"meanReward"`
}

// Point is one window of the kept time series.
type Point struct {
	Seconds  float64 `json:"t"`
	Rate     float64 `json:"rate"`
	Replicas int32   `json:"replicas"`
	Ready    int32   `json:"ready"`
	CPU      float64 `json:"cpuRequest"`
	Memory   float64 `json:"memoryRequest"`
	P95      float64 `json:"p95"`
}

// Series is the time series of one policy on the kept run.
type Series struct {
	Policy string  `json:"policy"`
	Points []Point `json:"points"`
}

// SeriesSet is the kept run.
type SeriesSet struct {
	App    string   `json:"app"`
	Trace  string   `json:"trace"`
	SLO    float64  `json:"slo"`
	Series []Series `json:"series"`
}

// Report is the outcome of an evaluation.
type Report struct {
	Runs        int         `json:"runs"`
	StepSeconds float64     `json:"stepSeconds"`
	Summaries   []Summary   `json:"summaries"`
	Results     []RunResult `json:"results"`
	Series      *SeriesSet  `json:"series,omitempty"`
	// RunSeries are the runs Options.KeepSeries kept, by run index; not
	// written to JSON (a run of a week at one minute is 10,080 points a
	// policy).
	RunSeries map[int]*SeriesSet `json:"-"`
	// Comparisons pair policies with a baseline (Compare), when the
	// caller asked for them.
	Comparisons []Comparison `json:"comparisons,omitempty"`
	Prices      sim.Prices   `json:"prices"`
	Config      reportConfig `json:"config"`
}

type reportConfig struct {
	Nodes          int     `json:"nodes"`
	NodeCPU        float64 `json:"nodeCPU"`
	NodeMemory     float64 `json:"nodeMemory"`
	Resize         string  `json:"resize"`
	Tenants        float64 `json:"tenants,omitempty"`
	MaxUnavailable float64 `json:"maxUnavailable"`
	TimeoutSeconds float64 `json:"timeoutSeconds"`
}

// reduce sums the results in the order of jobs; runs holds the runs by
// the keys jobs name them by.
func reduce(runs map[int]Run, contenders []Contender, jobs []job, results []jobResult, cfg sim.Config, o Options) *Report {
	rep := &Report{
		Runs:        len(runs),
		StepSeconds: cfg.Step.Seconds(),
		Prices:      o.Prices,
		Config: reportConfig{
			Nodes: cfg.Nodes, NodeCPU: cfg.NodeCapacity.CPU, NodeMemory: cfg.NodeCapacity.Memory,
			Resize: string(cfg.Resize), Tenants: cfg.Tenants, MaxUnavailable: cfg.MaxUnavailable, TimeoutSeconds: cfg.Timeout.Seconds(),
		},
	}
	type acc struct {
		s                                 Summary
		cpuU, cpuA, memU, memA, req, lost float64
		rewardSum                         float64
	}
	accs := make([]acc, len(contenders))
	for i, c := range contenders {
		accs[i].s.Policy = c.Name
	}
	for j, r := range results {
		a := &accs[jobs[j].contender]
		x := r.res
		rep.Results = append(rep.Results, x)
		a.s.Runs++
		a.s.Steps += x.Steps
		a.s.SLOViolations += x.SLOViolations
		a.s.CoreHours += x.CoreHours
		a.s.GiBHours += x.GiBHours
		a.s.Cost += x.Cost
		a.s.OOMKills += x.OOMKills
		a.s.HorizontalScales += x.HorizontalScales
		a.s.VerticalScales += x.VerticalScales
		a.s.PolicyErrors += x.PolicyErrors
		a.cpuU += x.cpuUsed
		a.cpuA += x.cpuAlloc
		a.memU += x.memUsed
		a.memA += x.memAlloc
		a.req += x.Requests
		a.lost += x.LostRequests
		a.rewardSum += x.rewardSum
		if r.series != nil {
			ri := jobs[j].run
			add := func(set **SeriesSet) {
				if *set == nil {
					run := runs[ri]
					*set = &SeriesSet{App: run.App.Name, Trace: run.Trace.Name, SLO: run.App.SLO}
				}
				(*set).Series = append((*set).Series, Series{Policy: x.Policy, Points: r.series})
			}
			if ri == o.SeriesRun {
				add(&rep.Series)
			}
			if o.KeepSeries != nil && o.KeepSeries(ri) {
				if rep.RunSeries == nil {
					rep.RunSeries = map[int]*SeriesSet{}
				}
				set := rep.RunSeries[ri]
				add(&set)
				rep.RunSeries[ri] = set
			}
		}
	}
	for _, a := range accs {
		s := a.s
		s.SLOViolationRate = ratio(float64(s.SLOViolations), float64(s.Steps))
		s.CPUUtilization = ratio(a.cpuU, a.cpuA)
		s.MemUtilization = ratio(a.memU, a.memA)
		s.LostRate = ratio(a.lost, a.req)
		s.ScalingActions = s.HorizontalScales + s.VerticalScales
		s.MeanReward = ratio(a.rewardSum, float64(s.Steps))
		rep.Summaries = append(rep.Summaries, s)
	}
	return rep
}

// keeps reports whether run's time series is kept (SeriesRun or
// KeepSeries).
func (o Options) keeps(run int) bool {
	return run == o.SeriesRun || (o.KeepSeries != nil && o.KeepSeries(run))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// runOne simulates one contender on one run.
func runOne(ctx context.Context, run Run, c Contender, cfg sim.Config, o Options, keepSeries bool) (RunResult, []Point, error) {
	res := RunResult{Policy: c.Name, App: run.App.Name, Trace: run.Trace.Name, Seed: run.Seed}
	p, err := c.New(run, cfg)
	if err != nil {
		return res, nil, fmt.Errorf("creating policy: %w", err)
	}
	// The simulator computes only the latency percentiles the policy says
	// it reads (all three unless it declares), whatever Options.Config
	// held: with a rate window they are most of a replay's CPU.
	cfg.Unread = workload.Unread(p)
	s, err := sim.New(cfg, run.App, run.Trace, run.Seed)
	if err != nil {
		return res, nil, err
	}
	steps := len(run.Trace.Rates)
	var series []Point
	if keepSeries {
		series = make([]Point, 0, steps)
	}
	dt := cfg.Step.Seconds()
	for i := range steps {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return res, nil, err
			}
		}
		m := s.Step()
		res.Steps++
		if m.SLO > 0 && m.Latency.P95 > m.SLO {
			res.SLOViolations++
		}
		res.cpuUsed += m.Used.CPU
		res.cpuAlloc += m.Allocated.CPU
		res.memUsed += m.Used.Memory
		res.memAlloc += m.Allocated.Memory
		res.CoreHours += m.Allocated.CPU * dt / 3600
		res.GiBHours += m.Allocated.Memory / sim.GiB * dt / 3600
		res.Cost += o.Prices.Cost(m.Allocated.CPU, m.Allocated.Memory, dt)
		res.Requests += m.Arrivals
		res.LostRequests += m.Failed + m.TimedOut
		res.OOMKills += m.OOMKills
		terms, err := reward.Compute(m.RewardInputs(), o.Reward)
		if err != nil {
			return res, nil, fmt.Errorf("window %d: %w", i, err)
		}
		res.rewardSum += terms.Reward
		if keepSeries {
			series = append(series, Point{
				Seconds: float64(i+1) * dt, Rate: m.Rate, Replicas: m.Replicas, Ready: m.Ready,
				CPU: m.Requests.CPU, Memory: m.Requests.Memory, P95: m.Latency.P95,
			})
		}
		rec, err := p.Recommend(ctx, s.Observation())
		if err != nil {
			// A policy that cannot decide leaves the workload as it is, as
			// the recommender falls back to "no change".
			res.PolicyErrors++
			continue
		}
		a, err := s.Apply(rec)
		if err != nil {
			res.PolicyErrors++
			continue
		}
		if a.Horizontal {
			res.HorizontalScales++
		}
		if a.Vertical {
			res.VerticalScales++
		}
	}
	res.SLOViolationRate = ratio(float64(res.SLOViolations), float64(res.Steps))
	res.CPUUtilization = ratio(res.cpuUsed, res.cpuAlloc)
	res.MemUtilization = ratio(res.memUsed, res.memAlloc)
	res.MeanReward = ratio(res.rewardSum, float64(res.Steps))
	for _, v := range [...]float64{res.CoreHours, res.GiBHours, res.Cost, res.MeanReward} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return res, nil, fmt.Errorf("non-finite result %+v", res)
		}
	}
	return res, series, nil
}
