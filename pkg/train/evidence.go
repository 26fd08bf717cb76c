package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/aware-k8s/aware/pkg/eval"
	"github.com/aware-k8s/aware/pkg/fusion"
	"github.com/aware-k8s/aware/pkg/lifecycle"
	"github.com/aware-k8s/aware/pkg/oracle"
	"github.com/aware-k8s/aware/pkg/reward"
	"github.com/aware-k8s/aware/pkg/sim"
	"github.com/aware-k8s/aware/pkg/workload"
)

// The paper's evidence, measured on the simulator: four experiments on
// held-out apps the agent never trained on. The evidence apps are the
// held-out apps (sim.HeldOut) of a seed derived from, and different from,
// the training seed, so they are neither training apps nor the demo's
// held-out apps. Everything derives from EvidenceOptions.Seed: equal
// options give equal numbers.

// Experiments, in the order "all" runs them.
const (
	ExperimentBootstrap = "bootstrap"
	ExperimentAdapt     = "adapt"
	ExperimentAfter     = "after"
	ExperimentRetrain   = "retrain"
)

// Experiments lists every experiment.
var Experiments = []string{ExperimentBootstrap, ExperimentAdapt, ExperimentAfter, ExperimentRetrain}

// EvidenceOptions size the experiments. Start from DefaultEvidenceOptions,
// sized to take at most about ten minutes each on two shared cores.
type EvidenceOptions struct {
	// Seed derives the training apps, the evidence apps, traces, arrivals
	// and weights.
	Seed uint64
	// Apps is the number of evidence apps.
	Apps int
	// Base holds the training options every run starts from (network,
	// optimiser, episode length, gates, workers); the experiments set the
	// apps, episodes, seed and stages.
	Base Options

	// PretrainApps and PretrainEpisodes size the training, on training
	// apps, of the policies the adapt, after and retrain experiments
	// start from: one PPO and one Meta-PPO.
	PretrainApps, PretrainEpisodes int

	// BootstrapEpisodes is K, the training episodes over the evidence apps
	// whose SLO violations are counted; BootstrapCap caps each app's
	// bootstrapping (the lifecycle gate may end it sooner); BootstrapBatch
	// is the episodes per update, smaller than pre-training's so that both
	// arms learn within K episodes.
	BootstrapEpisodes, BootstrapCap, BootstrapBatch int

	// AdaptApps evidence apps are each learnt for AdaptEpisodes episodes
	// of AdaptTraces, with a PPO update every AdaptBatch episodes, by
	// every arm; ConvergedWindow is how many final episodes define the
	// converged reward, SmoothEpisodes the moving average compared with 90%
	// of it.
	AdaptApps, AdaptEpisodes, AdaptBatch, ConvergedWindow, SmoothEpisodes int
	AdaptTraces                                                           []string
	// AdaptThresholds are the fractions of the converged reward whose
	// first episode is reported besides 90% (which "episodes to 90%"
	// keeps): a pre-trained arm that starts above 90% can still be told
	// apart at 95% or 98%.
	AdaptThresholds []float64
	// AdaptCPUFactor and AdaptMemoryFactor multiply the new apps' CPU time
	// and memory per request in the adapt experiment, to move them further
	// from the training distribution (1: the held-out apps as generated).
	AdaptCPUFactor, AdaptMemoryFactor float64

	// EvalSteps windows of every EvalTraces kind per evidence app.
	EvalSteps  int
	EvalTraces []string

	// The retrain experiment serves the pre-trained PPO on one evidence
	// app for RetrainBefore episodes of RetrainTraces, then multiplies the
	// app's CPU time per request by CPUFactor and its arrival rate by
	// RateFactor, and runs RetrainAfter more episodes, with a PPO update
	// every RetrainBatch episodes of the stages that learn.
	RetrainBefore, RetrainAfter, RetrainBatch int
	CPUFactor, RateFactor                     float64
	RetrainTraces                             []string
	// RetrainMargin sets the app's gates as an operator would from its
	// serving baseline (the mean episode reward before the change): the
	// detector fires below baseline - RetrainMargin, and the agent is
	// promoted again at or above it. The std gates are Base.Gates'.
	RetrainMargin float64
	// RetrainMin and RetrainCap bound each stay in Retraining
	// (Options.Retraining): the promotion gate cannot return the app to
	// the agent before RetrainMin episodes, and after RetrainCap it returns
	// whatever the gate says. 0 disables each.
	RetrainMin, RetrainCap int
	// RetrainReference is how many episodes the reference agent is
	// fine-tuned for, offline, on the changed app (from the pre-trained
	// PPO, bootstrapping first as a new app would, never frozen, on
	// episodes of another seed than the measured ones): its greedy reward
	// on the measured episodes after the change is what the learner can
	// attain on the changed workload.
	RetrainReference int
	// RetrainReferenceBatch is the reference fine-tuning's episodes per
	// PPO update.
	RetrainReferenceBatch int
}

// DefaultEvidenceOptions returns the options of `rl-agent evidence`
// without flags.
func DefaultEvidenceOptions() EvidenceOptions {
	base := DefaultOptions()
	base.Window = 8 // half the GRU unroll of the default: Meta-PPO updates cost half
	base.BCRounds = 1
	// The experiments evaluate on traces of EvalSteps (two hours), so
	// training traces are generated at their episode's length (one hour)
	// rather than cut from a day: the rates of change training sees are
	// the evaluation's.
	base.TraceSteps = 0
	return EvidenceOptions{
		Seed:                  1,
		Apps:                  4,
		Base:                  base,
		PretrainApps:          DefaultApps,
		PretrainEpisodes:      DefaultEpisodes,
		BootstrapEpisodes:     100,
		BootstrapCap:          20,
		BootstrapBatch:        8,
		AdaptApps:             4,
		AdaptEpisodes:         100,
		AdaptBatch:            4,
		ConvergedWindow:       10,
		SmoothEpisodes:        3,
		AdaptTraces:           []string{string(sim.Steady)},
		AdaptThresholds:       []float64{0.95, 0.98},
		AdaptCPUFactor:        1,
		AdaptMemoryFactor:     1,
		EvalSteps:             480,
		EvalTraces:            slices.Clone(base.Traces),
		RetrainBefore:         20,
		RetrainAfter:          100,
		RetrainBatch:          2,
		CPUFactor:             4,
		RateFactor:            1,
		RetrainMargin:         0.05,
		RetrainTraces:         []string{string(sim.Steady)},
		RetrainMin:            base.Retraining.Min,
		RetrainCap:            base.Retraining.Max,
		RetrainReference:      1000,
		RetrainReferenceBatch: 8,
	}
}

// Validate reports every problem at once.
func (e *EvidenceOptions) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	pos := func(name string, v int) {
		if v <= 0 {
			bad("%s must be > 0, got %d", name, v)
		}
	}
	pos("apps", e.Apps)
	pos("pretrain apps", e.PretrainApps)
	pos("pretrain episodes", e.PretrainEpisodes)
	pos("bootstrap episodes", e.BootstrapEpisodes)
	pos("bootstrap cap", e.BootstrapCap)
	pos("bootstrap batch", e.BootstrapBatch)
	pos("adapt apps", e.AdaptApps)
	pos("adapt batch", e.AdaptBatch)
	pos("converged window", e.ConvergedWindow)
	pos("smoothing episodes", e.SmoothEpisodes)
	pos("eval steps", e.EvalSteps)
	pos("retrain batch", e.RetrainBatch)
	pos("episodes before the change", e.RetrainBefore)
	pos("episodes after the change", e.RetrainAfter)
	pos("reference fine-tuning episodes", e.RetrainReference)
	pos("reference fine-tuning batch", e.RetrainReferenceBatch)
	if err := (lifecycle.RetrainingBounds{Min: e.RetrainMin, Max: e.RetrainCap}).Validate(); err != nil {
		bad("%w", err)
	}
	if e.AdaptApps > e.Apps {
		bad("adapt apps (%d) must not exceed apps (%d)", e.AdaptApps, e.Apps)
	}
	if e.AdaptEpisodes < e.ConvergedWindow || e.AdaptEpisodes < e.SmoothEpisodes {
		bad("adapt episodes (%d) must be at least the converged window (%d) and the smoothing (%d)", e.AdaptEpisodes, e.ConvergedWindow, e.SmoothEpisodes)
	}
	for _, f := range e.AdaptThresholds {
		if !(f > 0 && f <= 1) {
			bad("adapt thresholds must be in (0, 1], got %v", f)
		}
	}
	if !(e.AdaptCPUFactor > 0) || !(e.AdaptMemoryFactor > 0) || math.IsInf(e.AdaptCPUFactor, 0) || math.IsInf(e.AdaptMemoryFactor, 0) {
		bad("adapt CPU and memory factors must be finite and > 0, got %v and %v", e.AdaptCPUFactor, e.AdaptMemoryFactor)
	}
	if !(e.RetrainMargin > 0 && e.RetrainMargin < 1) {
		bad("retrain margin must be in (0, 1), got %v", e.RetrainMargin)
	}
	if !(e.CPUFactor > 0) || !(e.RateFactor > 0) || math.IsInf(e.CPUFactor, 0) || math.IsInf(e.RateFactor, 0) {
		bad("CPU and rate factors must be finite and > 0, got %v and %v", e.CPUFactor, e.RateFactor)
	}
	for name, ts := range map[string][]string{"adapt": e.AdaptTraces, "eval": e.EvalTraces, "retrain": e.RetrainTraces} {
		if len(ts) == 0 {
			bad("%s traces: at least one trace kind is needed", name)
		}
		for _, t := range ts {
			if !slices.Contains(sim.TraceKinds(), sim.TraceKind(t)) {
				bad("%s traces: unknown trace kind %q", name, t)
			}
		}
	}
	b := e.Base
	b.Apps, b.Episodes = max(b.Apps, 1), max(b.Episodes, 1)
	if err := b.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("training options: %w", err))
	}
	return errors.Join(errs...)
}

// EvidenceApps returns n held-out apps of a seed derived from seed: never
// the training apps of seed (TrainingApps), nor the demo's held-out apps.
func EvidenceApps(seed uint64, n int) ([]sim.App, error) {
	if n <= 0 {
		return nil, fmt.Errorf("app count must be > 0, got %d", n)
	}
	all, err := sim.GenerateApps(mix(seed, 0x65766964656e6365), 5*n)
	if err != nil {
		return nil, err
	}
	apps := make([]sim.App, 0, n)
	for i, a := range all {
		if sim.HeldOut(i) {
			a.Name = "new-" + a.Name
			apps = append(apps, a)
		}
	}
	return apps[:n], nil
}

// run is one training run of an experiment.
func (e *EvidenceOptions) run(ctx context.Context, mutate func(*Options)) (*Result, error) {
	o := e.Base
	o.Seed, o.Checkpoint, o.Progress = e.Seed, "", nil
	mutate(&o)
	return Train(ctx, o)
}

// Pretrained are the policies trained on training apps that the adapt,
// after and retrain experiments start from.
type Pretrained struct {
	PPO, Meta Learner
	// Seconds of wall time each took.
	PPOSeconds, MetaSeconds float64
}

// Pretrain trains one PPO and one Meta-PPO on e.PretrainApps training apps
// for e.PretrainEpisodes episodes each, bootstrapping as `rl-agent train`.
func Pretrain(ctx context.Context, e EvidenceOptions) (*Pretrained, error) {
	p := &Pretrained{}
	for _, kind := range []string{PolicyPPO, PolicyMetaPPO} {
		t0 := time.Now()
		res, err := e.run(ctx, func(o *Options) {
			o.Policy, o.Apps, o.Episodes = kind, e.PretrainApps, e.PretrainEpisodes
		})
		if err != nil {
			return nil, fmt.Errorf("pre-training %s: %w", kind, err)
		}
		if kind == PolicyPPO {
			p.PPO, p.PPOSeconds = res.Learner, time.Since(t0).Seconds()
		} else {
			p.Meta, p.MetaSeconds = res.Learner, time.Since(t0).Seconds()
		}
	}
	return p, nil
}

// BootstrapArm is one arm of the bootstrap experiment.
type BootstrapArm struct {
	Name string `json:"name"`
	// Episodes, Windows: what was counted.
	Episodes int `json:"episodes"`
	Windows  int `json:"windows"`
	// BootstrapEpisodes is how many of them the default acted in.
	BootstrapEpisodes int     `json:"bootstrapEpisodes"`
	SLOViolations     int     `json:"sloViolations"`
	SLOViolationRate  float64 `json:"sloViolationRate"`
	OOMKills          int     `json:"oomKills"`
	MeanReward        float64 `json:"meanReward"`
	// Curve is the per-episode outcome.
	Curve []Episode `json:"curve"`
}

// BootstrapResult compares the first K training episodes on new apps with
// and without bootstrapping.
type BootstrapResult struct {
	Apps []string       `json:"apps"`
	Arms []BootstrapArm `json:"arms"`
	// Ratio is the scratch arm's SLO violations over the bootstrapped
	// arm's; nil when the bootstrapped arm had none.
	Ratio *float64 `json:"ratio"`
}

// RunBootstrap trains a fresh PPO on the evidence apps for K episodes,
// once bootstrapping (the defaults act until the gate or the cap) and once
// from scratch (the agent acts from the first episode), and counts the SLO
// violations of each. Both arms see the same traces and arrivals.
func RunBootstrap(ctx context.Context, e EvidenceOptions) (*BootstrapResult, error) {
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	out := &BootstrapResult{}
	for _, a := range apps {
		out.Apps = append(out.Apps, a.Name)
	}
	for _, arm := range []struct {
		name string
		cap  int
	}{{"bootstrapped", e.BootstrapCap}, {"scratch", 0}} {
		res, err := e.run(ctx, func(o *Options) {
			o.Policy, o.AppList, o.Episodes, o.BootstrapEpisodes = PolicyPPO, apps, e.BootstrapEpisodes, arm.cap
			o.BatchEpisodes = e.BootstrapBatch
		})
		if err != nil {
			return nil, fmt.Errorf("bootstrap experiment, %s: %w", arm.name, err)
		}
		a := BootstrapArm{Name: arm.name, Episodes: len(res.Episodes), Curve: res.Episodes, MeanReward: res.MeanReward(0, len(res.Episodes))}
		a.BootstrapEpisodes, _ = res.BootstrapCount()
		for _, ep := range res.Episodes {
			a.Windows += ep.Steps
			a.SLOViolations += ep.SLOViolations
			a.OOMKills += ep.OOMKills
		}
		a.SLOViolationRate = ratio(float64(a.SLOViolations), float64(a.Windows))
		out.Arms = append(out.Arms, a)
	}
	if b := out.Arms[0].SLOViolations; b > 0 {
		r := float64(out.Arms[1].SLOViolations) / float64(b)
		out.Ratio = &r
	}
	return out, nil
}

// WriteTable prints the comparison.
func (r *BootstrapResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ARM\tEPISODES\tDEFAULT ACTED\tSLO VIOL WINDOWS\tSLO VIOL\tOOM\tREWARD\t")
	for _, a := range r.Arms {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f%%\t%d\t%.3f\t\n", a.Name, a.Episodes, a.BootstrapEpisodes, a.SLOViolations, 100*a.SLOViolationRate, a.OOMKills, a.MeanReward)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Ratio == nil {
		_, err := fmt.Fprintf(w, "Bootstrapping had no SLO violations; scratch had %d (paper: 16.9x fewer with bootstrapping).\n", r.Arms[1].SLOViolations)
		return err
	}
	_, err := fmt.Fprintf(w, "Scratch has %.1fx the SLO violations of bootstrapping (paper: 16.9x).\n", *r.Ratio)
	return err
}

// AdaptRun is one arm learning one new app.
type AdaptRun struct {
	Arm string `json:"arm"`
	App string `json:"app"`
	// Rewards are the episodes' mean rewards, in order.
	Rewards []float64 `json:"rewards"`
	// Final is the mean of the last ConvergedWindow episodes.
	Final float64 `json:"final"`
	// EpisodesTo90 is the first episode (1-based) at which the moving
	// average of SmoothEpisodes episodes reached 90% of the app's
	// converged reward; Reached is false when it never did (EpisodesTo90
	// is then the number of episodes run, a lower bound).
	EpisodesTo90 int  `json:"episodesTo90"`
	Reached      bool `json:"reached"`
	// To holds the same for each of AdaptThresholds.
	To []Reach `json:"to"`
	// Shortfall is the mean, over the episodes, of the gap below the
	// converged reward relative to its magnitude (max(0, converged - r) /
	// |converged|): the area between the curve and the converged reward,
	// a regret that counts every episode, not only the first one past a
	// threshold.
	Shortfall float64 `json:"shortfall"`
}

// Reach is when a run first reached a fraction of the converged reward.
type Reach struct {
	Fraction float64 `json:"fraction"`
	// Episodes and Reached as EpisodesTo90 and Reached.
	Episodes int  `json:"episodes"`
	Reached  bool `json:"reached"`
}

// AdaptArm summarises one arm over the apps.
type AdaptArm struct {
	Name string `json:"name"`
	// MeanEpisodesTo90 averages EpisodesTo90 over the apps (censored runs
	// count with their lower bound).
	MeanEpisodesTo90 float64 `json:"meanEpisodesTo90"`
	Reached          int     `json:"reached"`
	MeanFinal        float64 `json:"meanFinal"`
	// MeanEpisodesTo and ReachedTo are the same for each of
	// AdaptThresholds; MeanShortfall averages the runs' Shortfall.
	MeanEpisodesTo []float64 `json:"meanEpisodesTo"`
	ReachedTo      []int     `json:"reachedTo"`
	MeanShortfall  float64   `json:"meanShortfall"`
}

// AdaptResult compares how fast each arm learns a new app.
type AdaptResult struct {
	// Converged is, per app, the best arm's final reward: the reward the
	// app converges to; the target is 90% of it.
	Converged map[string]float64 `json:"converged"`
	Runs      []AdaptRun         `json:"runs"`
	Arms      []AdaptArm         `json:"arms"`
	// SpeedupVsTransfer and SpeedupVsScratch are the mean episodes to 90%
	// of transfer (and scratch) over Meta-PPO's.
	SpeedupVsTransfer float64 `json:"speedupVsTransfer"`
	SpeedupVsScratch  float64 `json:"speedupVsScratch"`
	PretrainSeconds   float64 `json:"pretrainSeconds"`
	// Thresholds are EvidenceOptions.AdaptThresholds; SpeedupsVsTransfer
	// the transfer arm's mean episodes to each over Meta-PPO's.
	Thresholds         []float64 `json:"thresholds"`
	SpeedupsVsTransfer []float64 `json:"speedupsVsTransfer"`
	// ShortfallVsTransfer is the transfer arm's mean shortfall over
	// Meta-PPO's: above 1, Meta-PPO lost less reward while adapting.
	ShortfallVsTransfer float64 `json:"shortfallVsTransfer"`
	// CPUFactor and MemoryFactor are the factors applied to the new apps.
	CPUFactor    float64 `json:"cpuFactor"`
	MemoryFactor float64 `json:"memoryFactor"`
}

// Adaptation arms.
const (
	ArmMeta     = "meta-ppo"
	ArmTransfer = "transfer"
	ArmScratch  = "scratch"
)

// RunAdapt lets three learners learn each of e.AdaptApps new apps, the
// agent acting from the first episode: Meta-PPO pre-trained on the
// training apps (fine-tuned, its embedding reading the new app's
// trajectory), PPO pre-trained on the same apps and fine-tuned (transfer
// learning, no embedding), and a fresh PPO (scratch).
func RunAdapt(ctx context.Context, e EvidenceOptions, pre *Pretrained) (*AdaptResult, error) {
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	apps = apps[:e.AdaptApps]
	for i := range apps {
		apps[i].CPUSeconds *= e.AdaptCPUFactor
		apps[i].MemoryPerRequest *= e.AdaptMemoryFactor
	}
	out := &AdaptResult{
		Converged: map[string]float64{}, PretrainSeconds: pre.PPOSeconds + pre.MetaSeconds,
		Thresholds: slices.Clone(e.AdaptThresholds), CPUFactor: e.AdaptCPUFactor, MemoryFactor: e.AdaptMemoryFactor,
	}
	arms := []string{ArmMeta, ArmTransfer, ArmScratch}
	for _, app := range apps {
		var runs []AdaptRun
		for _, arm := range arms {
			var init Learner
			switch arm {
			case ArmMeta:
				init, err = CloneLearner(pre.Meta)
			case ArmTransfer:
				init, err = CloneLearner(pre.PPO)
			}
			if err != nil {
				return nil, err
			}
			res, err := e.run(ctx, func(o *Options) {
				o.Policy, o.Init, o.AppList, o.Traces = PolicyPPO, init, []sim.App{app}, e.AdaptTraces
				o.Episodes, o.BatchEpisodes, o.BootstrapEpisodes = e.AdaptEpisodes, e.AdaptBatch, 0
			})
			if err != nil {
				return nil, fmt.Errorf("adapt experiment, %s on %s: %w", arm, app.Name, err)
			}
			r := AdaptRun{Arm: arm, App: app.Name}
			for _, ep := range res.Episodes {
				r.Rewards = append(r.Rewards, ep.MeanReward)
			}
			r.Final = mean(r.Rewards[len(r.Rewards)-e.ConvergedWindow:])
			runs = append(runs, r)
		}
		conv := math.Inf(-1)
		for _, r := range runs {
			conv = math.Max(conv, r.Final)
		}
		out.Converged[app.Name] = conv
		// 90% of the converged reward; rewards may be negative, so the
		// gap is taken on its magnitude.
		target := func(f float64) float64 { return conv - (1-f)*math.Abs(conv) }
		for i := range runs {
			runs[i].EpisodesTo90, runs[i].Reached = episodesTo(runs[i].Rewards, target(0.9), e.SmoothEpisodes)
			for _, f := range e.AdaptThresholds {
				n, ok := episodesTo(runs[i].Rewards, target(f), e.SmoothEpisodes)
				runs[i].To = append(runs[i].To, Reach{Fraction: f, Episodes: n, Reached: ok})
			}
			runs[i].Shortfall = shortfall(runs[i].Rewards, conv)
		}
		out.Runs = append(out.Runs, runs...)
	}
	for _, arm := range arms {
		a := AdaptArm{Name: arm, MeanEpisodesTo: make([]float64, len(e.AdaptThresholds)), ReachedTo: make([]int, len(e.AdaptThresholds))}
		var n int
		for _, r := range out.Runs {
			if r.Arm != arm {
				continue
			}
			n++
			a.MeanEpisodesTo90 += float64(r.EpisodesTo90)
			a.MeanFinal += r.Final
			a.MeanShortfall += r.Shortfall
			if r.Reached {
				a.Reached++
			}
			for k, to := range r.To {
				a.MeanEpisodesTo[k] += float64(to.Episodes)
				if to.Reached {
					a.ReachedTo[k]++
				}
			}
		}
		a.MeanEpisodesTo90 /= float64(n)
		a.MeanFinal /= float64(n)
		a.MeanShortfall /= float64(n)
		for k := range a.MeanEpisodesTo {
			a.MeanEpisodesTo[k] /= float64(n)
		}
		out.Arms = append(out.Arms, a)
	}
	meta, transfer := out.Arms[0], out.Arms[1]
	out.SpeedupVsTransfer = transfer.MeanEpisodesTo90 / meta.MeanEpisodesTo90
	out.SpeedupVsScratch = out.Arms[2].MeanEpisodesTo90 / meta.MeanEpisodesTo90
	for k := range e.AdaptThresholds {
		out.SpeedupsVsTransfer = append(out.SpeedupsVsTransfer, transfer.MeanEpisodesTo[k]/meta.MeanEpisodesTo[k])
	}
	out.ShortfallVsTransfer = ratio(transfer.MeanShortfall, meta.MeanShortfall)
	return out, nil
}

// shortfall returns the mean of max(0, conv - r) / |conv| over rs: the
// reward lost below conv, per episode, relative to conv (0 when conv is
// 0, where no relative gap is defined).
func shortfall(rs []float64, conv float64) float64 {
	if conv == 0 || len(rs) == 0 {
		return 0
	}
	var s float64
	for _, r := range rs {
		s += max(0, conv-r)
	}
	return s / float64(len(rs)) / math.Abs(conv)
}

// episodesTo returns the first 1-based episode at which the moving average
// of the last k rewards reaches target, or len(rs) and false.
func episodesTo(rs []float64, target float64, k int) (int, bool) {
	var sum float64
	for i, r := range rs {
		sum += r
		if i >= k {
			sum -= rs[i-k]
		}
		if sum/float64(min(i+1, k)) >= target {
			return i + 1, true
		}
	}
	return len(rs), false
}

// WriteTable prints one line per app and arm, then the summary.
func (r *AdaptResult) WriteTable(w io.Writer) error {
	if r.CPUFactor != 1 || r.MemoryFactor != 1 {
		if _, err := fmt.Fprintf(w, "New apps shifted: CPU time per request x%.2f, memory per request x%.2f.\n", r.CPUFactor, r.MemoryFactor); err != nil {
			return err
		}
	}
	pct := func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "APP\tARM\tFIRST EP\tFINAL\tCONVERGED\tEPISODES TO 90%\t")
	for _, f := range r.Thresholds {
		fmt.Fprintf(tw, "TO %s\t", pct(f))
	}
	fmt.Fprintln(tw, "SHORTFALL\t")
	reach := func(n int, ok bool) string {
		if !ok {
			return fmt.Sprintf(">%d", n)
		}
		return fmt.Sprint(n)
	}
	for _, x := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.3f\t%s\t", x.App, x.Arm, x.Rewards[0], x.Final, r.Converged[x.App], reach(x.EpisodesTo90, x.Reached))
		for _, to := range x.To {
			fmt.Fprintf(tw, "%s\t", reach(to.Episodes, to.Reached))
		}
		fmt.Fprintf(tw, "%.2f%%\t\n", 100*x.Shortfall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "ARM\tMEAN EPISODES TO 90%\tREACHED\t")
	for _, f := range r.Thresholds {
		fmt.Fprintf(tw, "MEAN TO %s\tREACHED\t", pct(f))
	}
	fmt.Fprintln(tw, "MEAN SHORTFALL\tMEAN FINAL\t")
	for _, a := range r.Arms {
		n := len(r.Converged)
		fmt.Fprintf(tw, "%s\t%.1f\t%d/%d\t", a.Name, a.MeanEpisodesTo90, a.Reached, n)
		for k := range a.MeanEpisodesTo {
			fmt.Fprintf(tw, "%.1f\t%d/%d\t", a.MeanEpisodesTo[k], a.ReachedTo[k], n)
		}
		fmt.Fprintf(tw, "%.2f%%\t%.3f\t\n", 100*a.MeanShortfall, a.MeanFinal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "Meta-PPO reaches 90%% of the converged reward %.2fx faster than transfer learning and %.2fx faster than scratch (paper: 5.5x vs transfer).\n",
		r.SpeedupVsTransfer, r.SpeedupVsScratch); err != nil {
		return err
	}
	for k, f := range r.Thresholds {
		if _, err := fmt.Fprintf(w, "To %s of it: Meta-PPO %.2fx faster than transfer.\n", pct(f), r.SpeedupsVsTransfer[k]); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "Shortfall below the converged reward while adapting: transfer loses %.2fx what Meta-PPO loses.\n", r.ShortfallVsTransfer)
	return err
}

// AfterResult is the evaluation of the pre-trained agents.
type AfterResult struct {
	Report *eval.Report `json:"report"`
}

// Names of the pre-trained agents in the after experiment.
const (
	AfterPPO  = "aware-ppo"
	AfterMeta = "aware-meta"
)

// RunAfter evaluates the pre-trained PPO and Meta-PPO agents (greedy, with
// the safeguard on) against the fused HPA+VPA default and the oracle on the
// evidence apps under every e.EvalTraces kind, with pkg/eval.
func RunAfter(ctx context.Context, e EvidenceOptions, pre *Pretrained) (*AfterResult, error) {
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	cfg := sim.DefaultConfig()
	cfg.Step, cfg.Resize = e.Base.Step, sim.ResizeMode(e.Base.Resize)
	var runs []eval.Run
	for i, a := range apps {
		for k, kind := range e.EvalTraces {
			seed := mix(e.Seed, uint64(1000+16*i+k))
			tr, err := sim.GenerateTrace(sim.TraceKind(kind), sim.TraceOptions{Mean: a.BaseRate, Steps: e.EvalSteps, Step: cfg.Step, Period: 24 * time.Hour, Seed: seed})
			if err != nil {
				return nil, err
			}
			runs = append(runs, eval.Run{App: a, Trace: &tr, Seed: seed})
		}
	}
	alpha := e.Base.Alpha
	ao := AgentOptions{Alpha: &alpha}
	contenders := []eval.Contender{
		eval.FromFactory("fused", fusion.NewPolicyFactory(fusion.Options{})),
		{Name: "oracle", New: func(r eval.Run, cfg sim.Config) (workload.Policy, error) {
			return oracle.New(r.App, r.Trace, cfg, oracle.Options{})
		}},
		eval.FromFactory(AfterPPO, Factory(pre.PPO, ao)),
		eval.FromFactory(AfterMeta, Factory(pre.Meta, ao)),
	}
	rep, err := eval.Evaluate(ctx, runs, contenders, eval.Options{
		Config: cfg, Workers: e.Base.Workers, SeriesRun: -1, Reward: reward.Options{Alpha: &alpha},
	})
	if err != nil {
		return nil, fmt.Errorf("after experiment: %w", err)
	}
	return &AfterResult{Report: rep}, nil
}

// WriteTable prints the evaluator's table.
func (r *AfterResult) WriteTable(w io.Writer) error { return r.Report.WriteTable(w) }

// RetrainResult follows an agent serving an app through a workload change.
type RetrainResult struct {
	App       string  `json:"app"`
	CPUFactor float64 `json:"cpuFactor"`
	// RateFactor multiplies the arrival rate from the change on.
	RateFactor float64 `json:"rateFactor"`
	// Baseline is the mean episode reward served before the change, from
	// which Gates were set (RetrainMargin below it).
	Baseline float64         `json:"baseline"`
	Gates    lifecycle.Gates `json:"gates"`
	// ChangeEpisode is the first episode under the changed workload.
	ChangeEpisode int           `json:"changeEpisode"`
	Curve         []Episode     `json:"curve"`
	Changes       []StageChange `json:"changes"`
	// Detected is the episode whose reward made the detector fire after
	// the change (Serving → Retraining), -1 if it did not; FalseAlarms
	// counts detections before the change.
	Detected    int `json:"detectedEpisode"`
	FalseAlarms int `json:"falseAlarms"`
	// Recovered is the first episode after the gate promoted the app back
	// to Serving, -1 if it did not get back.
	Recovered int `json:"recoveredEpisode"`
	// Before is the agent's mean reward over the last Gates.Window
	// episodes before the change; During over the episodes from the
	// change until it served again (or the end); After over the last
	// Gates.Window episodes.
	Before float64 `json:"before"`
	During float64 `json:"during"`
	After  float64 `json:"after"`
	// Degradation is (Before - During) / |Before|: the online cost of
	// the change and of retraining, relative to before it.
	Degradation float64 `json:"degradation"`
	// DefaultBefore and DefaultAfter are the fused default's mean episode
	// rewards on the same episodes before and after the change: how much
	// the change costs a policy that does not learn.
	DefaultBefore float64 `json:"defaultBefore"`
	DefaultAfter  float64 `json:"defaultAfter"`

	// Retraining bounds each stay in Retraining (zero: unbounded).
	Retraining lifecycle.RetrainingBounds `json:"retraining"`
	// Returned is the first episode after the detection in which the
	// agent acted again (OnlineTraining), -1 if it never did.
	Returned int `json:"returnedEpisode"`
	// StageEpisodes counts the episodes from the change on by stage.
	StageEpisodes map[string]int `json:"stageEpisodes"`
	// AgentActed is the mean reward of the episodes from Returned on in
	// which the agent acted (nil if it never returned).
	AgentActed *float64 `json:"agentActed"`

	// The references, on the episodes During averages (from the change
	// until the app served again, or the end), say what is attainable on
	// the changed app, which Before cannot: Reference is the greedy
	// reward of a copy of the pre-trained PPO fine-tuned offline on the
	// changed app for ReferenceEpisodes episodes (EvidenceOptions.
	// RetrainReference); Oracle the oracle's, which knows the trace and the
	// changed app; DefaultDuring the fused default's.
	ReferenceEpisodes int     `json:"referenceEpisodes"`
	Reference         float64 `json:"reference"`
	Oracle            float64 `json:"oracle"`
	DefaultDuring     float64 `json:"defaultDuring"`
	// DegradationVsReference is (Reference - During) / |Reference|: the
	// online cost of retraining alone, relative to what the learner
	// attains on the changed workload; DegradationVsOracle the same
	// against the oracle. Negative: the online run did better.
	DegradationVsReference float64 `json:"degradationVsReference"`
	DegradationVsOracle    float64 `json:"degradationVsOracle"`
}

// RunRetrain deploys the pre-trained PPO on a new app in Serving, changes
// the app's CPU time per request (and arrival rate) after RetrainBefore
// episodes, and follows the lifecycle: the detector should fire (Serving →
// Retraining), the fused default acts while the agent relearns from it,
// and the gate returns the app to the agent.
func RunRetrain(ctx context.Context, e EvidenceOptions, pre *Pretrained) (*RetrainResult, error) {
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	app := apps[0]
	changed := app
	changed.CPUSeconds *= e.CPUFactor
	changed.BaseRate *= e.RateFactor
	change := func(i int, a sim.App) sim.App {
		if i >= e.RetrainBefore {
			return changed
		}
		return a
	}
	serve := func(o *Options, init Learner, episodes int, gates lifecycle.Gates) {
		o.Init, o.AppList, o.Traces, o.StartStage, o.Workload = init, []sim.App{app}, e.RetrainTraces, lifecycle.Serving, change
		o.Episodes, o.BatchEpisodes, o.Gates = episodes, e.RetrainBatch, gates
		o.FreezeServing = true // the lifecycle as in the cluster
	}
	// The baseline: the episodes before the change, served with frozen
	// weights and gates that cannot fire, so that the run below repeats
	// them exactly.
	quiet := e.Base.Gates
	quiet.RetrainBelowMean, quiet.RetrainAboveStdDev = -1, 2
	quiet.PromoteMinMean, quiet.PromoteMaxStdDev = max(quiet.PromoteMinMean, -1), min(quiet.PromoteMaxStdDev, 2)
	base, err := e.run(ctx, func(o *Options) { serve(o, pre.PPO, e.RetrainBefore, quiet) })
	if err != nil {
		return nil, fmt.Errorf("retrain experiment, baseline: %w", err)
	}
	baseline := base.MeanReward(0, len(base.Episodes))
	gates := e.Base.Gates
	gates.RetrainBelowMean = math.Max(-1, baseline-e.RetrainMargin)
	gates.PromoteMinMean = gates.RetrainBelowMean
	init, err := CloneLearner(pre.PPO)
	if err != nil {
		return nil, err
	}
	res, err := e.run(ctx, func(o *Options) {
		serve(o, init, e.RetrainBefore+e.RetrainAfter, gates)
		o.Retraining = lifecycle.RetrainingBounds{Min: e.RetrainMin, Max: e.RetrainCap}
	})
	if err != nil {
		return nil, fmt.Errorf("retrain experiment: %w", err)
	}
	out := &RetrainResult{
		Baseline: baseline, Gates: gates, Retraining: lifecycle.RetrainingBounds{Min: e.RetrainMin, Max: e.RetrainCap},
		App: app.Name, CPUFactor: e.CPUFactor, RateFactor: e.RateFactor, ChangeEpisode: e.RetrainBefore,
		Curve: res.Episodes, Changes: res.Changes, Detected: -1, Recovered: -1, Returned: -1,
		StageEpisodes: map[string]int{}, ReferenceEpisodes: e.RetrainReference,
	}
	for _, c := range res.Changes {
		if c.To != lifecycle.Retraining.String() {
			continue
		}
		if c.Episode < e.RetrainBefore {
			out.FalseAlarms++
		} else if out.Detected < 0 {
			out.Detected = c.Episode
		}
	}
	if out.Detected >= 0 {
		for _, c := range res.Changes {
			if c.To == lifecycle.Serving.String() && c.Episode > out.Detected {
				out.Recovered = c.Episode + 1
				break
			}
		}
	}
	rs := make([]float64, len(res.Episodes))
	var acted []float64
	for i, ep := range res.Episodes {
		rs[i] = ep.MeanReward
		if i >= e.RetrainBefore {
			out.StageEpisodes[ep.Stage]++
		}
		// Episodes planned as Serving before the detection was recorded
		// (the rest of its batch) do not count as a return.
		if out.Detected >= 0 && i > out.Detected && out.Returned < 0 && ep.Stage == lifecycle.OnlineTraining.String() {
			out.Returned = i
		}
		if out.Returned >= 0 && ep.Phase == PhaseOnline {
			acted = append(acted, ep.MeanReward)
		}
	}
	if len(acted) > 0 {
		m := mean(acted)
		out.AgentActed = &m
	}
	w := e.Base.Gates.Window
	out.Before = mean(rs[max(0, e.RetrainBefore-w):e.RetrainBefore])
	end := len(rs)
	if out.Recovered >= 0 {
		end = min(out.Recovered, len(rs))
	}
	out.During = mean(rs[e.RetrainBefore:end])
	out.After = mean(rs[max(e.RetrainBefore, len(rs)-w):])
	out.Degradation = (out.Before - out.During) / math.Abs(out.Before)

	// The fused default on the same episodes (apps, traces, seeds).
	def, err := e.run(ctx, func(o *Options) {
		o.AppList, o.Traces, o.Workload = []sim.App{app}, e.RetrainTraces, change
		o.Episodes, o.BatchEpisodes = e.RetrainBefore+e.RetrainAfter, e.RetrainBatch
		// Bootstrapping for ever: the default acts in every episode.
		o.BootstrapEpisodes, o.BCRounds, o.OfflineUpdates = o.Episodes, 0, 0
		o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 1, 0
		o.Gates.RetrainBelowMean, o.Gates.RetrainAboveStdDev = -1, 2
	})
	if err != nil {
		return nil, fmt.Errorf("retrain experiment, default: %w", err)
	}
	var before, after []float64
	for i, ep := range def.Episodes {
		if i < e.RetrainBefore {
			before = append(before, ep.MeanReward)
		} else {
			after = append(after, ep.MeanReward)
		}
	}
	out.DefaultBefore, out.DefaultAfter = mean(before), mean(after)
	out.DefaultDuring = mean(after[:end-e.RetrainBefore])

	if out.Reference, err = retrainReference(ctx, e, pre, changed, change, end); err != nil {
		return nil, err
	}
	if out.Oracle, err = oracleReward(ctx, e, changed, e.RetrainBefore, end); err != nil {
		return nil, err
	}
	out.DegradationVsReference = (out.Reference - out.During) / math.Abs(out.Reference)
	out.DegradationVsOracle = (out.Oracle - out.During) / math.Abs(out.Oracle)
	return out, nil
}

// retrainReference fine-tunes a copy of the pre-trained PPO offline on the
// changed app, as a new app is trained (the default bootstraps, then the
// agent acts and learns; never frozen), on episodes of another seed than
// the measured ones, and returns its greedy mean reward on the measured
// episodes [RetrainBefore, end) of the changed app.
func retrainReference(ctx context.Context, e EvidenceOptions, pre *Pretrained, changed sim.App, change func(int, sim.App) sim.App, end int) (float64, error) {
	ref, err := CloneLearner(pre.PPO)
	if err != nil {
		return 0, err
	}
	if _, err := e.run(ctx, func(o *Options) {
		o.Init, o.AppList, o.Traces = ref, []sim.App{changed}, e.RetrainTraces
		o.Episodes, o.BatchEpisodes, o.FreezeServing = e.RetrainReference, e.RetrainReferenceBatch, false
		o.Seed = mix(e.Seed, 0x7265666572656e63) // not the measured episodes
	}); err != nil {
		return 0, fmt.Errorf("retrain experiment, reference fine-tuning: %w", err)
	}
	quiet := e.Base.Gates
	quiet.PromoteMinMean, quiet.PromoteMaxStdDev, quiet.RetrainBelowMean, quiet.RetrainAboveStdDev = 1, 0, -1, 2
	served, err := e.run(ctx, func(o *Options) {
		o.Init, o.AppList, o.Traces, o.StartStage, o.Workload = ref, []sim.App{changed}, e.RetrainTraces, lifecycle.Serving, change
		o.Episodes, o.BatchEpisodes, o.Gates = end, e.RetrainBatch, quiet
	})
	if err != nil {
		return 0, fmt.Errorf("retrain experiment, reference: %w", err)
	}
	return served.MeanReward(e.RetrainBefore, end), nil
}

// oracleReward returns the oracle's mean episode reward on the retrain
// experiment's episodes [from, to) of app, each episode the trace and
// arrivals the trainer gives it (runEpisode) and scored as it scores them.
func oracleReward(ctx context.Context, e EvidenceOptions, app sim.App, from, to int) (float64, error) {
	cfg := sim.DefaultConfig()
	cfg.Step, cfg.Resize = e.Base.Step, sim.ResizeMode(e.Base.Resize)
	alpha := e.Base.Alpha
	var rs []float64
	for i := from; i < to; i++ {
		seed := mix(e.Seed, uint64(i))
		kind := sim.TraceKind(e.RetrainTraces[i%len(e.RetrainTraces)])
		r, err := policyEpisode(ctx, app, kind, seed, cfg, &e.Base, alpha, func(tr *sim.Trace) (workload.Policy, error) {
			return oracle.New(app, tr, cfg, oracle.Options{})
		})
		if err != nil {
			return 0, fmt.Errorf("retrain experiment, oracle episode %d: %w", i, err)
		}
		rs = append(rs, r)
	}
	return mean(rs), nil
}

// policyEpisode runs one episode of a policy that does not learn exactly
// as runEpisode runs the agent's (the trace episodeTrace gives, the first
// window observed, then o.EpisodeSteps decisions each scored on the window
// after it) and returns its mean reward.
func policyEpisode(ctx context.Context, app sim.App, kind sim.TraceKind, seed uint64, cfg sim.Config, o *Options, alpha float64,
	newPolicy func(*sim.Trace) (workload.Policy, error)) (float64, error) {
	steps := o.EpisodeSteps
	tr, err := episodeTrace(&spec{kind: kind, app: app, seed: seed}, *o)
	if err != nil {
		return 0, err
	}
	s, err := sim.New(cfg, app, &tr, seed)
	if err != nil {
		return 0, err
	}
	p, err := newPolicy(&tr)
	if err != nil {
		return 0, err
	}
	ropts := reward.Options{Alpha: &alpha}
	var sum float64
	s.Step()
	for t := range steps {
		rec, err := p.Recommend(ctx, s.Observation())
		if err != nil {
			return 0, fmt.Errorf("window %d: %w", t, err)
		}
		if _, err := s.Apply(rec); err != nil {
			return 0, fmt.Errorf("window %d: %w", t, err)
		}
		m := s.Step()
		terms, err := reward.Compute(m.RewardInputs(), ropts)
		if err != nil {
			return 0, fmt.Errorf("window %d: %w", t, err)
		}
		sum += terms.Reward
	}
	return sum / float64(steps), nil
}

// WriteTable prints the timeline and the summary.
func (r *RetrainResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "App %s: from episode %d its CPU time per request is x%.2f and its arrival rate x%.2f.\n", r.App, r.ChangeEpisode, r.CPUFactor, r.RateFactor)
	fmt.Fprintf(w, "Serving baseline %.3f: the detector fires below %.3f (or above std %.2f); promotion needs a mean of at least %.3f and std at most %.2f over %d episodes.\n",
		r.Baseline, r.Gates.RetrainBelowMean, r.Gates.RetrainAboveStdDev, r.Gates.PromoteMinMean, r.Gates.PromoteMaxStdDev, r.Gates.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "EPISODE\tFROM\tTO\tREASON\tWINDOW MEAN\tWINDOW STD\t")
	for _, c := range r.Changes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.3f\t%.3f\t\n", c.Episode, c.From, c.To, c.Reason, c.Mean, c.StdDev)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	detected, recovered := "did not fire", "did not serve again"
	if r.Detected >= 0 {
		detected = fmt.Sprintf("fired at episode %d (%d after the change)", r.Detected, r.Detected-r.ChangeEpisode+1)
	}
	if r.Recovered >= 0 {
		recovered = fmt.Sprintf("served again from episode %d", r.Recovered)
	}
	returned := "the agent did not act again"
	if r.Returned >= 0 {
		returned = fmt.Sprintf("the agent acted again from episode %d", r.Returned)
		if r.AgentActed != nil {
			returned += fmt.Sprintf(" (mean reward %.3f in the episodes it acted)", *r.AgentActed)
		}
	}
	capped := "Retraining unbounded"
	switch b := r.Retraining; {
	case b.Min > 0 && b.Max > 0:
		capped = fmt.Sprintf("Retraining bounded to %d..%d episodes", b.Min, b.Max)
	case b.Max > 0:
		capped = fmt.Sprintf("Retraining capped at %d episodes", b.Max)
	case b.Min > 0:
		capped = fmt.Sprintf("Retraining at least %d episodes", b.Min)
	}
	if _, err := fmt.Fprintf(w, `Detector: %s, %d false alarms before the change; %s.
Episodes from the change on by stage: Serving %d, Retraining %d, OnlineTraining %d (%s); %s.
Agent reward: %.3f before the change, %.3f from the change until it served again, %.3f in the last episodes.
Fused default on the same episodes: %.3f before, %.3f after the change.
Online degradation while retraining (the change's episodes until served again), against:
`, detected, r.FalseAlarms, recovered,
		r.StageEpisodes[lifecycle.Serving.String()], r.StageEpisodes[lifecycle.Retraining.String()], r.StageEpisodes[lifecycle.OnlineTraining.String()], capped, returned,
		r.Before, r.During, r.After, r.DefaultBefore, r.DefaultAfter); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "REFERENCE\tREWARD\tDEGRADATION\t")
	deg := func(ref float64) float64 { return 100 * (ref - r.During) / math.Abs(ref) }
	fmt.Fprintf(tw, "agent before the change (paper's measure: < 3.6%%)\t%.3f\t%.1f%%\t\n", r.Before, 100*r.Degradation)
	fmt.Fprintf(tw, "agent fine-tuned %d episodes on the changed app\t%.3f\t%.1f%%\t\n", r.ReferenceEpisodes, r.Reference, 100*r.DegradationVsReference)
	fmt.Fprintf(tw, "oracle on the changed app\t%.3f\t%.1f%%\t\n", r.Oracle, 100*r.DegradationVsOracle)
	fmt.Fprintf(tw, "fused default on the changed app\t%.3f\t%.1f%%\t\n", r.DefaultDuring, deg(r.DefaultDuring))
	return tw.Flush()
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
