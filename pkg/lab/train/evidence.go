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

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/oracle"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// The paper's evidence, measured on the simulator: five experiments on
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

// Experiments lists every experiment. ExperimentEmbedding
// (evidence_embed.go) runs last in "all": it is the cheapest, and reads the
// Meta-PPO the others pre-trained.
var Experiments = []string{ExperimentBootstrap, ExperimentAdapt, ExperimentAfter, ExperimentRetrain, ExperimentEmbedding}

// EvidenceOptions size the experiments. Start from DefaultEvidenceOptions,
// sized to take at most about ten minutes each on two shared cores.
type EvidenceOptions struct {
	// Seed derives the training apps, the evidence apps, traces, arrivals
	// and weights.
	Seed uint64
	// Seeds is how many seeds a study runs: Seed, Seed+1, ...,
	// Seed+Seeds-1, each with its own pre-training, evidence apps, traces
	// and weights (Study). The experiments themselves run one seed.
	Seeds int
	// Apps is the number of evidence apps.
	Apps int
	// Base holds the training options every run starts from (network,
	// optimiser, episode length, gates, workers, action space); the
	// experiments set the apps, episodes, seed and stages. Base.AuxWeight
	// applies to the Meta-PPO pre-training only (on training apps, whose
	// parameters the simulator knows). Meta-PPO acts in the action space
	// PPO acts in under Base (PPOSpace), so that the adapt experiment's
	// arms are compared like for like.
	Base Options

	// PretrainApps and PretrainEpisodes size the training, on training
	// apps, of the policies the adapt, after and retrain experiments
	// start from: one PPO and one Meta-PPO.
	PretrainApps, PretrainEpisodes int
	// PretrainParamSpread, above 1, spreads the training apps of that
	// pre-training (SpreadApps): each app's CPU time per request, memory
	// per request and pod start-up delay are multiplied by factors
	// log-uniform in [1, PretrainParamSpread], so that new apps shifted by
	// the adapt factors lie inside what pre-training covered. PPO and
	// Meta-PPO learn on the same spread apps. 0 or 1: the apps as generated.
	PretrainParamSpread float64
	// MetaGuard, GuardBox or GuardMahalanobis, fits the pre-trained
	// Meta-PPO's embedding guard of that kind (FitGuard) on the
	// pre-training apps: in the adapt experiment, outside the range of
	// embeddings seen there it follows the default. Residual action space
	// only. "": no guard.
	MetaGuard string

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
	// AdaptCPUFactor, AdaptMemoryFactor and AdaptStartupFactor multiply
	// the new apps' CPU time per request, memory per request and pod
	// start-up delay in the adapt experiment, to move them further from
	// the training distribution (1: the held-out apps as generated).
	AdaptCPUFactor, AdaptMemoryFactor, AdaptStartupFactor float64

	// EvalSteps windows of every EvalTraces kind per evidence app.
	EvalSteps  int
	EvalTraces []string

	// The retrain experiment serves the pre-trained PPO on each of the
	// first RetrainApps evidence apps, one at a time, for RetrainBefore episodes of RetrainTraces, then multiplies the
	// app's CPU time per request by CPUFactor and its arrival rate by
	// RateFactor, and runs RetrainAfter more episodes, with a PPO update
	// every RetrainBatch episodes of the stages that learn.
	RetrainApps, RetrainBefore, RetrainAfter, RetrainBatch int
	CPUFactor, RateFactor                                  float64
	RetrainTraces                                          []string
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
	// 0 skips the reference (its columns are then NaN in the table and
	// null in the JSON). RetrainReferenceBatch is the reference
	// fine-tuning's episodes per PPO update.
	RetrainReferenceBatch int
}

// DefaultEvidenceOptions returns the options of `rl-agent evidence`
// without flags.
func DefaultEvidenceOptions() EvidenceOptions {
	base := PaperOptions()
	base.Window = 8 // half the GRU unroll of the default: Meta-PPO updates cost half
	base.BCRounds = 1
	// The experiments evaluate on traces of EvalSteps (two hours), so
	// training traces are generated at their episode's length (one hour)
	// rather than cut from a day: the rates of change training sees are
	// the evaluation's.
	base.TraceSteps = 0
	return EvidenceOptions{
		Seed:                  1,
		Seeds:                 1,
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
		AdaptStartupFactor:    1,
		EvalSteps:             480,
		EvalTraces:            slices.Clone(base.Traces),
		RetrainApps:           1,
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
	pos("seeds", e.Seeds)
	pos("retrain apps", e.RetrainApps)
	pos("pretrain apps", e.PretrainApps)
	pos("pretrain episodes", e.PretrainEpisodes)
	switch {
	case e.MetaGuard != "" && e.MetaGuard != GuardBox && e.MetaGuard != GuardMahalanobis:
		bad("the Meta-PPO embedding guard must be %s, %s or empty (none), got %q", GuardBox, GuardMahalanobis, e.MetaGuard)
	case e.MetaGuard != "" && e.PPOSpace() != ActionSpaceResidual:
		bad("the Meta-PPO embedding guard needs the %s action space (its fallback follows the default), got %s", ActionSpaceResidual, e.PPOSpace())
	case e.MetaGuard != "" && e.Base.MetaBlind:
		bad("a blind Meta-PPO has no embedding to guard: --meta-guard and --meta-blind exclude each other")
	}
	if s := e.PretrainParamSpread; math.IsNaN(s) || math.IsInf(s, 0) || (s != 0 && s < 1) {
		bad("pretrain parameter spread must be 0 (off) or at least 1, got %v", s)
	}
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
	if e.RetrainReference < 0 {
		bad("reference fine-tuning episodes must be >= 0 (0: no reference), got %d", e.RetrainReference)
	}
	pos("reference fine-tuning batch", e.RetrainReferenceBatch)
	if err := (lifecycle.RetrainingBounds{Min: e.RetrainMin, Max: e.RetrainCap}).Validate(); err != nil {
		bad("%w", err)
	}
	if e.AdaptApps > e.Apps {
		bad("adapt apps (%d) must not exceed apps (%d)", e.AdaptApps, e.Apps)
	}
	if e.RetrainApps > e.Apps {
		bad("retrain apps (%d) must not exceed apps (%d)", e.RetrainApps, e.Apps)
	}
	if e.AdaptEpisodes < e.ConvergedWindow || e.AdaptEpisodes < e.SmoothEpisodes {
		bad("adapt episodes (%d) must be at least the converged window (%d) and the smoothing (%d)", e.AdaptEpisodes, e.ConvergedWindow, e.SmoothEpisodes)
	}
	for _, f := range e.AdaptThresholds {
		if !(f > 0 && f <= 1) {
			bad("adapt thresholds must be in (0, 1], got %v", f)
		}
	}
	for _, f := range []float64{e.AdaptCPUFactor, e.AdaptMemoryFactor, e.AdaptStartupFactor} {
		if !(f > 0) || math.IsInf(f, 0) {
			bad("adapt CPU, memory and start-up factors must be finite and > 0, got %v, %v and %v", e.AdaptCPUFactor, e.AdaptMemoryFactor, e.AdaptStartupFactor)
			break
		}
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

// ValidateExperiment reports whether experiment x can run with e.
func (e *EvidenceOptions) ValidateExperiment(x string) error {
	if !slices.Contains(Experiments, x) {
		return fmt.Errorf("unknown experiment %q (known: %v)", x, Experiments)
	}
	if x == ExperimentEmbedding && e.Base.MetaBlind {
		return fmt.Errorf("the %s experiment measures Meta-PPO's embedding, which a blind Meta-PPO does not have (its embedding is 0)", x)
	}
	return nil
}

// PPOSpace is the action space every learner of the experiments acts in:
// PPO's under Base. Meta-PPO is pre-trained in it too, so that the adapt
// experiment measures the embedding, not the action space.
func (e *EvidenceOptions) PPOSpace() string {
	b := e.Base
	b.Policy, b.Init = PolicyPPO, nil
	return b.Space()
}

// checkSpace reports whether the pre-trained learners act in PPOSpace
// (e.g. checkpoints of an earlier run read with --pretrained).
func (e *EvidenceOptions) checkSpace(pre *Pretrained) error {
	want := e.PPOSpace()
	for _, l := range []Learner{pre.PPO, pre.Meta} {
		sh, err := learn.ShapeOf(l.PolicyConfig())
		if err != nil {
			return fmt.Errorf("the pre-trained %s: %w", l.Kind(), err)
		}
		if sh.String() != want {
			return fmt.Errorf("the pre-trained %s acts in the %s action space, the experiment in the %s one", l.Kind(), sh, want)
		}
	}
	return nil
}

// SeedList is the seeds a study runs: Seed .. Seed+Seeds-1.
func (e *EvidenceOptions) SeedList() []uint64 {
	s := make([]uint64, max(e.Seeds, 1))
	for i := range s {
		s[i] = e.Seed + uint64(i)
	}
	return s
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
	// Base.AuxWeight is the Meta-PPO pre-training's alone (Pretrain): an
	// evidence app's hidden parameters are unknown, so no run on one
	// may train the auxiliary head with them.
	o.AuxWeight = 0
	mutate(&o)
	return Train(ctx, o)
}

// Pretrained are the policies trained on training apps that the adapt,
// after and retrain experiments start from.
type Pretrained struct {
	PPO, Meta Learner
	// Seconds of wall time each took.
	PPOSeconds, MetaSeconds float64
	// Guard is the Meta-PPO's embedding guard when one was fitted
	// (EvidenceOptions.MetaGuard, GuardPretrained).
	Guard *nn.EmbedGuard
}

// Pretrain trains one PPO and one Meta-PPO, both in PPOSpace, on
// e.PretrainApps training apps for e.PretrainEpisodes episodes each,
// bootstrapping as `rl-agent train`; with e.PretrainParamSpread both on
// the same spread apps.
func Pretrain(ctx context.Context, e EvidenceOptions) (*Pretrained, error) {
	p := &Pretrained{}
	space := e.PPOSpace()
	apps, err := e.PretrainAppList()
	if err != nil {
		return nil, fmt.Errorf("pre-training: %w", err)
	}
	for _, kind := range []string{PolicyPPO, PolicyMetaPPO} {
		t0 := time.Now()
		res, err := e.run(ctx, func(o *Options) {
			o.Policy, o.Apps, o.Episodes, o.ActionSpace = kind, e.PretrainApps, e.PretrainEpisodes, space
			o.AppList = slices.Clone(apps)
			if kind == PolicyMetaPPO {
				o.AuxWeight = e.Base.AuxWeight
			}
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
	if e.MetaGuard != "" {
		if _, err := e.GuardPretrained(ctx, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// GuardPretrained fits pre's Meta-PPO's embedding guard (FitGuard) on the
// apps Pretrain trained it on (PretrainAppList, or the seed's training
// apps), under Base's trace kinds, sets pre.Guard and returns it. It
// replaces any guard the learner had (e.g. from a checkpoint).
func (e *EvidenceOptions) GuardPretrained(ctx context.Context, pre *Pretrained) (*nn.EmbedGuard, error) {
	apps, err := e.PretrainAppList()
	if err == nil && apps == nil {
		apps, err = TrainingApps(e.Seed, e.PretrainApps)
	}
	if err != nil {
		return nil, fmt.Errorf("embedding guard: %w", err)
	}
	o := e.Base
	o.Seed, o.AuxWeight = e.Seed, 0
	if pre.Guard, err = FitGuard(ctx, pre.Meta, apps, o, mix(e.Seed, 0x6775617264), e.MetaGuard); err != nil {
		return nil, err
	}
	return pre.Guard, nil
}

// PretrainAppList returns the apps Pretrain trains on: nil (Train's own
// TrainingApps of the seed) without a parameter spread, else those apps
// spread by SpreadApps with a seed derived from e.Seed.
func (e *EvidenceOptions) PretrainAppList() ([]sim.App, error) {
	if e.PretrainParamSpread <= 1 {
		return nil, nil
	}
	apps, err := TrainingApps(e.Seed, e.PretrainApps)
	if err != nil {
		return nil, err
	}
	return SpreadApps(apps, mix(e.Seed, 0x7072657472616e), e.PretrainParamSpread)
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
// evidence apps under every e.EvalTraces kind, with pkg/lab/eval.
func RunAfter(ctx context.Context, e EvidenceOptions, pre *Pretrained) (*AfterResult, error) {
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	cfg := e.Base.SimConfig()
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
