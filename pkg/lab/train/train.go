// Package train trains the AWARE agent on the built-in simulator: episodes
// over generated training apps (never the held-out ones, sim.HeldOut), each
// app moving through the lifecycle of pkg/core/lifecycle as a workload does in
// the cluster. While an app is Bootstrapping the fused default acts and the
// learner clones its actions (mapped to the agent's action space with
// learn.NearestAction), then runs offline PPO updates on its transitions;
// the lifecycle's reward gate, or a cap on bootstrapping episodes, moves it
// to OnlineTraining, where the agent acts under masks from the constraints
// and the FaaSRM safeguard and learns by PPO (charged learn.ScalingCost for
// every replica it changes); then Serving (frozen, greedy; see
// Options.FreezeServing) and, when the detector fires, Retraining, where
// the fused default acts again and the learner relearns from it as while
// bootstrapping, for a stay bounded by Options.Retraining, after which the
// agent acts again in OnlineTraining.
//
// The learner is PPO or Meta-PPO (Options.Policy); the agent hands Meta-PPO
// the workload's recent trajectory, whose GRU embedding joins the state.
//
// The package is pure: no clock, no gRPC, no client-go. Everything derives
// from Options.Seed, rollouts run in parallel but are reduced in episode
// order, so equal options give bit-identical learners and checkpoints.
package train

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// Phase says who acted in an episode.
type Phase string

const (
	// PhaseBootstrap: the fused default acted (Bootstrapping or
	// Retraining).
	PhaseBootstrap Phase = "bootstrap"
	// PhaseOnline: the agent acted (sampling while it learns, greedy while
	// serving), with the safeguard on.
	PhaseOnline Phase = "online"
)

// Episode is one episode's outcome, a point of the reward curve.
type Episode struct {
	Index int   `json:"episode"`
	Phase Phase `json:"phase"`
	// Stage is the app's lifecycle stage the episode ran in.
	Stage string `json:"stage"`
	App   string `json:"app"`
	Trace string `json:"trace"`
	Steps int    `json:"steps"`
	// MeanReward is the mean reward of the windows after each decision,
	// scored like the evaluator's REWARD column.
	MeanReward float64 `json:"meanReward"`
	// MeanShaping is the mean charge per window the learner's reward also
	// carried (ScalingCost, VerticalCost, SLOCost): the learner was
	// trained on MeanReward − MeanShaping.
	MeanShaping   float64 `json:"meanShaping"`
	SLOViolations int     `json:"sloViolations"`
	OOMKills      int     `json:"oomKills"`
	// AgentDecisions counts decisions the agent's action was applied (not
	// the default's or the safeguard's).
	AgentDecisions int `json:"agentDecisions"`
	// GuardedDecisions counts decisions a Meta-PPO's embedding guard
	// turned into following the default (nn.EmbedGuard).
	GuardedDecisions int `json:"guardedDecisions,omitempty"`
}

// StageChange is one app's lifecycle transition.
type StageChange struct {
	App string `json:"app"`
	// Episode is the index of the episode whose reward triggered it.
	Episode int     `json:"episode"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Reason  string  `json:"reason"`
	Mean    float64 `json:"mean"`
	StdDev  float64 `json:"stdDev"`
}

// Result is a finished training run.
type Result struct {
	Learner  Learner
	Episodes []Episode
	// Changes are the apps' lifecycle transitions, in episode order.
	Changes []StageChange
	// BC holds each behaviour-cloning call's statistics; Updates each PPO
	// update's (offline and online, in order).
	BC      []nn.BCStats
	Updates []nn.Stats
	// Validations are Options.Validator's judgements, in order; Selected
	// indexes the one whose snapshot Learner is, or is -1 when none was
	// accepted (Learner then has the last weights) or there is no
	// validator.
	Validations []Validation
	Selected    int
}

// MeanReward returns the mean of the episodes' mean rewards in [from, to).
func (r *Result) MeanReward(from, to int) float64 {
	return r.mean(from, to, func(e *Episode) float64 { return e.MeanReward })
}

// MeanShaping returns the mean of the episodes' shaping charges in
// [from, to).
func (r *Result) MeanShaping(from, to int) float64 {
	return r.mean(from, to, func(e *Episode) float64 { return e.MeanShaping })
}

func (r *Result) mean(from, to int, f func(*Episode) float64) float64 {
	from, to = max(from, 0), min(to, len(r.Episodes))
	if to <= from {
		return math.NaN()
	}
	var s float64
	for i := range r.Episodes[from:to] {
		s += f(&r.Episodes[from+i])
	}
	return s / float64(to-from)
}

// BootstrapCount returns the number of episodes in which the default
// acted, and the index of the first episode after the last of them (0
// when none bootstrapped).
func (r *Result) BootstrapCount() (n, end int) {
	for i, e := range r.Episodes {
		if e.Phase == PhaseBootstrap {
			n, end = n+1, i+1
		}
	}
	return n, end
}

// TrainingApps returns the first n generated apps of seed that are not held
// out, in generation order.
func TrainingApps(seed uint64, n int) ([]sim.App, error) {
	if n <= 0 {
		return nil, fmt.Errorf("app count must be > 0, got %d", n)
	}
	all, err := sim.GenerateApps(seed, n+n/4+1)
	if err != nil {
		return nil, err
	}
	apps := make([]sim.App, 0, n)
	for i, a := range all {
		if !sim.HeldOut(i) && len(apps) < n {
			apps = append(apps, a)
		}
	}
	return apps, nil
}

// episodeTime is the lifecycle's clock: the simulated end of episode i.
func (o *Options) episodeTime(i int) time.Time {
	return time.Unix(0, 0).UTC().Add(time.Duration(i+1) * time.Duration(o.EpisodeSteps) * o.Step)
}

// Train runs the whole training and returns the learner and the reward
// curve. It stops when ctx is done.
func Train(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("train: invalid options: %w", err)
	}
	learner := o.Init
	if learner == nil {
		var err error
		if learner, err = NewLearner(o); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	apps := o.AppList
	if len(apps) == 0 {
		var err error
		if apps, err = TrainingApps(o.Seed, o.Apps); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	azure, err := sim.LoadAzure(o.Azure)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	series, err := o.Series.Load(o.Step)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	kinds := slices.Clone(o.Traces)
	if len(azure) > 0 {
		// An episode is a stretch of the file's minutes, never padded.
		if w := azure[0].Windows(o.Step); w < o.EpisodeSteps+1 {
			return nil, fmt.Errorf("train: %s: its %d minutes cover %d windows of %s, fewer than an episode's %d", o.Azure.Invocations, len(azure[0].Counts), w, o.Step, o.EpisodeSteps+1)
		}
		kinds = append(kinds, string(AzureTrace))
	}
	if series != nil {
		if len(series.Rates) < o.EpisodeSteps+1 {
			return nil, fmt.Errorf("train: %s: the series covers %d windows of %s, fewer than an episode's %d", o.Series.Path, len(series.Rates), o.Step, o.EpisodeSteps+1)
		}
		kinds = append(kinds, string(SeriesTrace))
	}
	// One lifecycle per app, as per workload in the cluster; from scratch
	// every app starts where the agent acts.
	machines := make([]*lifecycle.Machine, len(apps))
	first := lifecycle.Bootstrapping
	if o.BootstrapEpisodes == 0 {
		first = lifecycle.OnlineTraining
	}
	if o.StartStage != 0 {
		first = o.StartStage
	}
	for i := range machines {
		m, err := lifecycle.Restore(o.Gates, lifecycle.State{Stage: first, Since: o.episodeTime(-1)})
		if err == nil {
			err = m.SetRetrainingBounds(o.Retraining)
		}
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		machines[i] = m
	}
	booted := make([]int, len(apps))
	// pinned[a] is app a's weights while it is Serving: pinned when the
	// gate promoted it, as the rl-agent pins a workload's, so the shared
	// learner's later updates (other apps' episodes) cannot change how a
	// Serving app is served. An app that starts in Serving is pinned to
	// the initial weights.
	pinned := make([]Learner, len(apps))
	if first == lifecycle.Serving {
		for a := range pinned {
			pinned[a] = freeze(learner)
		}
	}
	simCfg := o.SimConfig()
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}

	res := &Result{Learner: learner, Selected: -1}
	if o.Progress != nil {
		o.Progress.Begin(o.Episodes)
		defer o.Progress.End()
	}
	updates := 0
	save := func(final bool) error {
		if o.Checkpoint == "" {
			return nil
		}
		if !final && (o.CheckpointEvery == 0 || updates%o.CheckpointEvery != 0) {
			return nil
		}
		if err := WriteCheckpoint(o.Checkpoint, learner); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		return nil
	}
	residual := o.Space() == ActionSpaceResidual
	var sel selection
	validated := -1
	check := func(episodes int, force bool) error {
		if o.Validator == nil || updates == validated || (!force && updates%o.ValidateEvery != 0) {
			return nil
		}
		validated = updates
		return sel.validate(ctx, o, learner, updates, episodes, res)
	}
	if err := check(0, true); err != nil {
		return nil, err
	}
	for e := 0; e < o.Episodes; {
		end := min(e+o.BatchEpisodes, o.Episodes)
		specs := make([]spec, 0, end-e)
		planned := make(map[int]int) // bootstrapping or retraining episodes per app in this batch
		for i := e; i < end; i++ {
			a := i % len(apps)
			app := apps[a]
			if o.Workload != nil {
				app = o.Workload(i, app)
			}
			stage := machines[a].Stage()
			if stage == lifecycle.Bootstrapping {
				// The cap is known in advance, unlike the gate: the
				// episodes past it act already (the machine is moved
				// when the last capped episode is recorded).
				if booted[a]+planned[a] >= o.BootstrapEpisodes {
					stage = lifecycle.OnlineTraining
				}
				planned[a]++
			}
			if limit := o.Retraining.Max; stage == lifecycle.Retraining && limit > 0 {
				// Likewise for the retraining cap, on the episodes the
				// machine recorded in this stay.
				if int(machines[a].StageEpisodes())+planned[a] >= limit {
					stage = lifecycle.OnlineTraining
				}
				planned[a]++
			}
			sp := spec{
				index: i, stage: stage, app: app, pinned: pinned[a],
				kind: sim.TraceKind(kinds[(a+i/len(apps))%len(kinds)]),
				seed: mix(o.Seed, uint64(i)),
			}
			switch sp.kind {
			case AzureTrace:
				sp.azure = &azure[a%len(azure)]
			case SeriesTrace:
				sp.series = series
			}
			specs = append(specs, sp)
		}
		// Promotions in this batch pin the weights its episodes acted
		// with, the ones the gate judged: before the batch's update.
		var frozenNow Learner
		pinNow := func() Learner {
			if frozenNow == nil {
				frozenNow = freeze(learner)
			}
			return frozenNow
		}
		outs := rolloutAll(ctx, learner, specs, simCfg, o, workers)
		var boot, online []nn.MetaTransition
		var demos []nn.MetaDemonstration
		for k, r := range outs {
			if r.err != nil {
				return nil, fmt.Errorf("train: episode %d: %w", r.ep.Index, r.err)
			}
			res.Episodes = append(res.Episodes, r.ep)
			if o.Progress != nil {
				o.Progress.Advance(fmt.Sprintf("%s r=%.3f", r.ep.Stage, r.ep.MeanReward), r.ep.App)
			}
			switch st := specs[k].stage; {
			case !st.Trains(residual):
			case !st.AgentActs():
				// Bootstrapping or Retraining: the default acted.
				boot = append(boot, r.transitions...)
				demos = append(demos, r.demos...)
			default:
				online = append(online, r.transitions...)
			}
			a := r.ep.Index % len(apps)
			now := o.episodeTime(r.ep.Index)
			var tr lifecycle.Transition
			var moved bool
			// Without FreezeServing an app that acts and learns stays
			// where it is: its gate would only freeze it.
			if o.FreezeServing || specs[k].stage != lifecycle.OnlineTraining {
				var err error
				if tr, moved, err = machines[a].RecordEpisode(r.ep.MeanReward, now); err != nil {
					return nil, fmt.Errorf("train: episode %d: %w", r.ep.Index, err)
				}
			}
			if specs[k].stage == lifecycle.Bootstrapping {
				booted[a]++
				if !moved && booted[a] >= o.BootstrapEpisodes {
					tr, moved = machines[a].EndBootstrap(now)
				}
			}
			if moved {
				switch {
				case tr.To == lifecycle.Serving:
					pinned[a] = pinNow()
				case tr.From == lifecycle.Serving:
					pinned[a] = nil
				}
				res.Changes = append(res.Changes, StageChange{
					App: apps[a].Name, Episode: r.ep.Index, From: tr.From.String(), To: tr.To.String(),
					Reason: tr.Reason, Mean: tr.Mean, StdDev: tr.StdDev,
				})
			}
		}
		e = end
		if err := scheduleRate(learner, o, e); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		if len(demos) > 0 {
			if err := bootstrap(learner, demos, boot, o, res); err != nil {
				return nil, err
			}
			updates++
			if err := save(false); err != nil {
				return nil, err
			}
			if err := check(e, false); err != nil {
				return nil, err
			}
		}
		if len(online) > 0 {
			st, err := learner.Update(online)
			if err != nil {
				return nil, fmt.Errorf("train: PPO update after episode %d: %w", e-1, err)
			}
			res.Updates = append(res.Updates, st)
			updates++
			if err := save(false); err != nil {
				return nil, err
			}
			if err := check(e, false); err != nil {
				return nil, err
			}
		}
	}
	if err := check(o.Episodes, true); err != nil {
		return nil, err
	}
	best, err := sel.selected()
	if err != nil {
		return nil, err
	}
	if best != nil {
		learner, res.Learner = best, best
	}
	if err := save(true); err != nil {
		return nil, err
	}
	return res, nil
}

// scheduleRate sets the learner's learning rate for the updates after the
// first done episodes (Options.LearningRateEnd).
func scheduleRate(l Learner, o Options, done int) error {
	if o.LearningRateEnd == 0 {
		return nil
	}
	start := l.PolicyConfig().LearningRate
	frac := float64(done) / float64(o.Episodes)
	return l.SetLearningRateScale((start + (o.LearningRateEnd-start)*frac) / start)
}

// bootstrap clones the default's demonstrations of one batch, then runs
// offline PPO updates on its transitions (which train the critic on the
// default's returns before the agent acts). In the residual action space
// there are none (lifecycle.Stage.Trains).
func bootstrap(l Learner, demos []nn.MetaDemonstration, trs []nn.MetaTransition, o Options, res *Result) error {
	for range o.BCRounds {
		st, err := l.BehaviourClone(demos)
		if err != nil {
			return fmt.Errorf("train: behaviour cloning: %w", err)
		}
		res.BC = append(res.BC, st)
	}
	for range o.OfflineUpdates {
		st, err := l.Update(trs)
		if err != nil {
			return fmt.Errorf("train: offline PPO update: %w", err)
		}
		res.Updates = append(res.Updates, st)
	}
	return nil
}
