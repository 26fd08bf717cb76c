package train

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// Options configure a training run. Start from DefaultOptions.
//
// The options come in sections, each a struct embedded here (its fields
// are promoted, so o.Apps is o.AppOptions.Apps), which the experiment file
// of rl-agent's lab commands mirrors under the JSON name of the section.
// Fields that cannot come from a file (functions, learners, the app list)
// are tagged "-".
type Options struct {
	// Seed derives the apps, traces, arrivals, initial weights, minibatch
	// shuffling and exploration.
	Seed uint64 `json:"seed"`
	// Episodes is the total number of episodes, bootstrapping included.
	Episodes int `json:"episodes"`
	// Workers defaults to GOMAXPROCS.
	Workers int `json:"workers"`
	// Init, when set, is the learner training continues from (fine-tuning
	// a pre-trained policy); Policy and the architecture options are then
	// ignored. It is trained in place.
	Init Learner `json:"-"`

	LearnerOptions   `json:"learner"`
	MetaOptions      `json:"metaPPO"`
	AppOptions       `json:"apps"`
	SimOptions       `json:"simulation"`
	RewardOptions    `json:"reward"`
	LifecycleOptions `json:"lifecycle"`
	OutputOptions    `json:"output"`
	ValidationHook   `json:"-"`
}

// LearnerOptions are the learner and its PPO hyper-parameters (Options).
type LearnerOptions struct {
	// Policy is the learner: PolicyPPO (default) or PolicyMetaPPO.
	Policy string `json:"policy"`

	// ActionSpace is ActionSpaceResidual (one choice per dimension
	// relative to the fused default's recommendation) or ActionSpacePaper
	// (the AWARE paper's one-step actions); empty, the default, is
	// residual for PPO and paper for Meta-PPO, as Meta-PPO was measured
	// before it had residual heads (Space). With Init set it must be empty
	// or Init's.
	ActionSpace string `json:"actionSpace"`

	// FollowBias is the residual space's initial bias towards following
	// the default (ResidualConfig); 0 means DefaultFollowBias.
	FollowBias float64 `json:"followBias"`

	// Anchor is the variant of the fused default (fusion.ParseVariant) the
	// learner is trained beside: its recommendation is part of the state,
	// the residual actions are relative to it, and it bootstraps. The
	// checkpoint records it (nn.Config.Anchor), so that eval, the demo
	// and serve anchor the agent on the same one. Empty: the fused default.
	Anchor string `json:"anchor"`

	// FeaturesOff are the optional state features the learner never sees
	// (learn.Features, for ablations); the checkpoint records the rest.
	FeaturesOff learn.Features `json:"featuresOff"`

	// Hidden, LearningRate, Epochs and MinibatchSize override the PPO
	// defaults (nn.DefaultConfig).
	Hidden       []int   `json:"hidden"`
	LearningRate float64 `json:"learningRate"`

	// LearningRateEnd, when not 0, decays the learning rate linearly over
	// the run: each update (bootstrap and online) uses the rate at the
	// fraction of episodes rolled out so far, from LearningRate at the
	// first to LearningRateEnd after the last. 0 keeps it constant.
	LearningRateEnd float64 `json:"learningRateEnd"`
	Epochs          int     `json:"epochs"`
	MinibatchSize   int     `json:"minibatchSize"`

	// EntropyCoef weighs the entropy bonus.
	EntropyCoef float64 `json:"entropyCoef"`

	// BCRounds is how many BehaviourClone calls (of Epochs passes each)
	// each batch's bootstrap demonstrations get (paper action space only).
	BCRounds int `json:"bcRounds"`

	// OfflineUpdates is how many PPO updates each batch's bootstrap
	// transitions get after cloning (paper action space only).
	OfflineUpdates int `json:"offlineUpdates"`

	// BatchEpisodes is the number of episodes (rolled out in parallel with
	// the same weights) per PPO update.
	BatchEpisodes int `json:"batchEpisodes"`
}

// MetaOptions configure Meta-PPO's encoder (Options.Policy PolicyMetaPPO).
type MetaOptions struct {
	// Window and EmbedDim configure Meta-PPO's encoder: the number of
	// recent steps it reads and the size of the embedding.
	Window   int `json:"window"`
	EmbedDim int `json:"embedDim"`

	// AuxWeight, when > 0, gives a new Meta-PPO an auxiliary head that
	// predicts the app's hidden parameters (AuxTarget) from the embedding,
	// trained jointly with the PPO loss with this weight on its mean
	// squared error; every transition of a training episode then carries
	// its app's target. 0: no targets (a learner with a head then trains
	// it no further, e.g. while adapting to a new app, whose parameters
	// are unknown).
	AuxWeight float64 `json:"auxWeight"`

	// MetaBlind is an ablation: the Meta-PPO's encoder is given no
	// trajectory, in acting and in training alike (every window is
	// empty), so its embedding is 0 throughout and it is PPO with the
	// Meta-PPO's network and training. Whatever Meta-PPO does better than
	// with MetaBlind is what its embedding of the workload contributes.
	MetaBlind bool `json:"metaBlind"`

	// MetaSignature gives a new Meta-PPO's encoder the workload's
	// signature (learn.Signature: its CPU time per request, memory and
	// requests in flight per pod, and its pods' start-up delay) in every
	// step, besides the state, action and reward.
	MetaSignature bool `json:"metaSignature"`
}

// AppOptions are the training apps and the load they run under (Options).
type AppOptions struct {
	// Apps is the number of training apps: the first Apps generated apps
	// that are not held out.
	Apps int `json:"apps"`

	// AppList, when set, replaces the generated training apps (Apps is
	// then ignored), e.g. to train on apps of the evidence's own seed.
	AppList []sim.App `json:"-"`

	// Traces are the trace kinds episodes cycle through.
	Traces []string `json:"traces"`

	// TraceSteps, when larger than EpisodeSteps+1, is the length of the
	// synthetic trace an episode is cut from, at a random offset: with the
	// evaluation's length (a day) training sees the same ramps, flash
	// crowds and step changes, at the same rates of change, as the
	// evaluation. 0 generates each trace as long as its episode.
	TraceSteps int `json:"traceSteps"`

	// Azure, when its invocations file is set, adds the kind "azure" to
	// the cycle: such an episode runs its app with the measured demand of
	// one of the trace's usable functions (app i takes function i, round
	// robin; sim.LoadAzure) under a seed-chosen stretch of its invocations,
	// scaled as AzureRate says (empty: sim.AzureRateScaled).
	Azure     sim.AzureFiles `json:"azure"`
	AzureRate sim.AzureRate  `json:"azureRate"`

	// Series, when its Path is set, adds the kind "csv" to the cycle: a
	// training app under a seed-chosen stretch of the rate series, with
	// the file's demand (sim.SeriesWorkload.Run).
	Series sim.SeriesFile `json:"series"`

	// Workload, when set, may change an app before an episode (its
	// 0-based index) runs, e.g. its CPU cost per request, to study how the
	// agent copes with a workload that changes under it.
	Workload func(episode int, app sim.App) sim.App `json:"-"`
}

// SimOptions are the simulated cluster an episode runs in (Options).
type SimOptions struct {
	// Step is the window length.
	Step time.Duration `json:"step"`

	// EpisodeSteps is the number of decisions (windows) per episode.
	EpisodeSteps int `json:"episodeSteps"`

	// Resize is how vertical changes reach pods (Restart or InPlace).
	Resize string `json:"resize"`

	// Tenants is the fraction of each node's CPU beyond the app's requests
	// that other workloads use (sim.Config.Tenants).
	Tenants float64 `json:"tenants"`
}

// RewardOptions are the reward and the charges the learner is trained on
// (Options).
type RewardOptions struct {
	// Alpha weighs utilisation against SLO preservation in the reward.
	Alpha float64 `json:"alpha"`

	// ScalingCost is charged, in reward units, for every replica a
	// decision adds or removes, in the reward the learner is trained on
	// (learn.ScalingCost); the episode rewards, the lifecycle gates and
	// the evaluator still score the paper's reward. 0 charges nothing.
	ScalingCost float64 `json:"scalingCost"`

	// VerticalCost is charged, like ScalingCost, for every decision that
	// changes the pods' requests (each such change restarts or resizes
	// every pod). It keeps a learned residual from flapping between
	// choices whose bounds do not overlap. 0 charges nothing.
	VerticalCost float64 `json:"verticalCost"`

	// SLOCost is charged, like ScalingCost, for every window whose p95
	// latency is above the SLO. The paper's reward scores a violation by
	// SLO/p95 only, so a p95 10% over the objective costs SP 0.09; this
	// steers the learner towards the default's SLO record. 0 charges
	// nothing.
	SLOCost float64 `json:"sloCost"`
}

// LifecycleOptions are each app's lifecycle: bootstrapping, the gates,
// Serving and Retraining (Options).
type LifecycleOptions struct {
	// Gates are the lifecycle's thresholds (spec.rl.gates); an app leaves
	// Bootstrapping when the mean of its last Window episode rewards is at
	// least PromoteMinMean and their std at most PromoteMaxStdDev.
	Gates lifecycle.Gates `json:"gates"`

	// BootstrapEpisodes caps the bootstrapping episodes of each app: after
	// that many the app moves to OnlineTraining whatever the gate says. 0
	// trains from scratch: every app starts in OnlineTraining and the
	// agent acts from the first episode.
	BootstrapEpisodes int `json:"bootstrapEpisodes"`

	// Retraining bounds each app's stays in Retraining, in episodes
	// (lifecycle.RetrainingBounds): the promotion gate cannot return the
	// app to the agent before Min episodes, and Max returns it to
	// OnlineTraining whatever the gate says, so that an app whose
	// attainable reward fell below the gate for good is not left on the
	// default for ever. The zero value leaves the return to the gate alone.
	Retraining lifecycle.RetrainingBounds `json:"retraining"`

	// StartStage, when set, is the stage every app starts in instead of
	// Bootstrapping (or OnlineTraining from scratch), e.g. Serving to
	// deploy a trained policy on apps it has not seen.
	StartStage lifecycle.Stage `json:"-"`

	// FreezeServing runs the whole lifecycle as in the cluster (the
	// default): once the gate promotes an app from OnlineTraining to
	// Serving its episodes are greedy and no longer train the learner,
	// until the detector fires. Off, the gate still ends bootstrapping but
	// an app then stays in OnlineTraining, so every app keeps exploring
	// and feeding the shared policy. An app started in Serving
	// (StartStage) is served frozen either way.
	//
	// Frozen is the default because it was measured the better trade
	// (docs/results/evidence.md): with the defaults about 3000 of the 4000
	// episodes are served frozen, so later updates see only the apps the
	// policy is worst at, and learning from every app instead raised the
	// held-out reward and lowered cost, but also raised the SLO-violation
	// rate and took about five times the training time.
	FreezeServing bool `json:"freezeServing"`
}

// OutputOptions are where the learner and the progress go (Options).
type OutputOptions struct {
	// Checkpoint, when set, is the file the learner is written to (atomically)
	// every CheckpointEvery updates and at the end.
	Checkpoint      string `json:"checkpoint"`
	CheckpointEvery int    `json:"checkpointEvery"`

	// Progress hears about every episode, in order.
	Progress eval.Progress `json:"-"`
}

// ValidationHook selects the checkpoint by a validator (Options); it is
// set in code (demo.ValidationOptions.Apply), never from a file.
type ValidationHook struct {
	// Validator, when set, judges a greedy snapshot of the learner before
	// training and every ValidateEvery PPO updates (and after the last),
	// and training ends with the accepted snapshot of the highest score
	// (Result.Selected), not with the last weights: the runs of a seed
	// drift in and out of safety as they train (docs/results/evidence-slo.md).
	Validator     Validator `json:"-"`
	ValidateEvery int       `json:"validateEvery"`
}

// Defaults: 4000 hour-long episodes over 32 apps, each app bootstrapping
// for at most 5 episodes (the gate may end it sooner), sized so that the
// demo's agent trains in about a minute on two cores.
const (
	DefaultApps         = 32
	DefaultEpisodes     = 4000
	DefaultBootstrap    = 5
	DefaultEpisodeSteps = 240 // one hour of 15-second windows
	// DefaultTraceSteps is the length of the synthetic trace an episode is
	// cut from: a day of 15-second windows, as demo and eval run, so that
	// training sees the ramps, flash crowds and step changes the evaluation
	// scores, at the same rates of change. Measured (docs/results/evidence-residual.md
	// "Residual actions"): on hour-long traces the learned residual made
	// 15–37× the default's vertical changes; cut from a day, 1.6–3.2×.
	DefaultTraceSteps = 5760
	// DefaultVerticalCost and DefaultSLOCost are the residual learner's
	// charges per request change and per SLO-violating window (Options).
	// Measured on 64 held-out apps × 6 traces, paired with the fused
	// default (docs/results/evidence-residual.md "Residual actions"): an SLO charge of 0.2
	// bought 9% lower cost with 0.3–0.5 points more SLO-violating windows,
	// 1 bought the default's SLO record at up to 10% higher cost, and 0.5
	// sat between, with at most 2% of runs worse than the default by more
	// than a point.
	DefaultVerticalCost = learn.DefaultVerticalCost
	DefaultSLOCost      = learn.DefaultSLOCost
	// DefaultRetrainEpisodes is each stay in Retraining, in episodes:
	// lifecycle.DefaultRetrainEpisodes, as the rl-agent uses.
	DefaultRetrainEpisodes = lifecycle.DefaultRetrainEpisodes
	// DefaultScalingCost is learn.DefaultScalingCost, the charge per
	// replica changed that the serving agent's online updates use too.
	DefaultScalingCost = learn.DefaultScalingCost
)

// DefaultOptions returns the options of `rl-agent train` without flags.
func DefaultOptions() Options {
	kinds := make([]string, 0, 6)
	for _, k := range sim.TraceKinds() {
		kinds = append(kinds, string(k))
	}
	meta := nn.DefaultMetaConfig(learn.StateDim, int(learn.NumActions))
	o := Options{Seed: 1, Episodes: DefaultEpisodes}
	o.LearnerOptions = LearnerOptions{
		Policy:         PolicyPPO,
		ActionSpace:    "",
		Hidden:         []int{32, 32},
		LearningRate:   1e-3,
		Epochs:         4,
		MinibatchSize:  256,
		EntropyCoef:    0.003,
		BCRounds:       3,
		OfflineUpdates: 1,
		BatchEpisodes:  32,
	}
	o.MetaOptions = MetaOptions{Window: meta.Window, EmbedDim: meta.EmbedDim}
	o.AppOptions = AppOptions{Apps: DefaultApps, Traces: kinds, TraceSteps: DefaultTraceSteps}
	o.SimOptions = SimOptions{Step: 15 * time.Second, EpisodeSteps: DefaultEpisodeSteps, Resize: string(sim.ResizeRestart)}
	o.RewardOptions = RewardOptions{
		Alpha:        0.5,
		ScalingCost:  DefaultScalingCost,
		VerticalCost: DefaultVerticalCost,
		SLOCost:      DefaultSLOCost,
	}
	o.LifecycleOptions = LifecycleOptions{
		Gates:             lifecycle.DefaultGates(),
		BootstrapEpisodes: DefaultBootstrap,
		Retraining:        lifecycle.DefaultRetrainingBounds(),
		FreezeServing:     false,
	}
	o.OutputOptions = OutputOptions{CheckpointEvery: 5}
	return o
}

// PaperOptions are the AWARE paper's training as it stood before the
// residual action space became the default: its seven one-step actions,
// behaviour cloning while bootstrapping, Serving apps frozen, no charge
// for vertical changes or SLO violations. The evidence experiments, which
// measure the paper's claims, start from them.
func PaperOptions() Options {
	o := DefaultOptions()
	o.ActionSpace, o.FreezeServing, o.VerticalCost, o.SLOCost = ActionSpacePaper, true, 0, 0
	return o
}

// SimConfig is the simulator configuration of o's window, resize mode and
// tenants.
func (o Options) SimConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Step, cfg.Resize, cfg.Tenants = o.Step, sim.ResizeMode(o.Resize), o.Tenants
	return cfg
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Apps <= 0 && len(o.AppList) == 0 {
		bad("apps must be > 0, got %d", o.Apps)
	}
	for i := range o.AppList {
		if err := o.AppList[i].Validate(); err != nil {
			bad("app %d: %w", i, err)
		}
	}
	if o.Episodes <= 0 {
		bad("episodes must be > 0, got %d", o.Episodes)
	}
	if o.BootstrapEpisodes < 0 {
		bad("bootstrap episodes must be >= 0, got %d", o.BootstrapEpisodes)
	}
	if err := o.Retraining.Validate(); err != nil {
		bad("%w", err)
	}
	if err := o.Gates.Validate(); err != nil {
		bad("gates: %w", err)
	}
	if !(o.AuxWeight >= 0) || math.IsInf(o.AuxWeight, 0) {
		bad("meta-ppo auxiliary weight must be finite and >= 0, got %v", o.AuxWeight)
	}
	if o.EpisodeSteps < 2 {
		bad("episode steps must be >= 2, got %d", o.EpisodeSteps)
	}
	if _, err := fusion.ParseVariant(o.Anchor); err != nil {
		bad("anchor: %w", err)
	}
	if o.Step <= 0 {
		bad("step must be > 0, got %s", o.Step)
	}
	if len(o.Traces) == 0 {
		bad("at least one trace kind is needed")
	}
	for _, t := range o.Traces {
		if !slices.Contains(sim.TraceKinds(), sim.TraceKind(t)) {
			bad("unknown trace kind %q (known: %v)", t, sim.TraceKinds())
		}
	}
	if !(o.Alpha >= 0 && o.Alpha <= 1) {
		bad("alpha must be in [0, 1], got %v", o.Alpha)
	}
	switch o.ActionSpace {
	case "", ActionSpacePaper:
	case ActionSpaceResidual:
	default:
		bad("action space must be %s or %s, got %q", ActionSpacePaper, ActionSpaceResidual, o.ActionSpace)
	}
	if o.Init != nil {
		sh, err := learn.ShapeOf(o.Init.PolicyConfig())
		switch {
		case err != nil:
			bad("the initial learner: %w", err)
		case o.ActionSpace != "" && sh.String() != o.ActionSpace:
			bad("the initial learner acts in the %s action space, the action space is %s", sh, o.ActionSpace)
		}
	}
	if !(o.FollowBias >= 0) || math.IsInf(o.FollowBias, 0) {
		bad("follow bias must be finite and >= 0, got %v", o.FollowBias)
	}
	if !o.Azure.Empty() && (o.Step <= 0 || o.Step > time.Minute || time.Minute%o.Step != 0) {
		bad("azure traces need a step that divides one minute, got %s", o.Step)
	}
	if _, err := sim.ParseAzureRate(string(o.AzureRate)); err != nil {
		bad("%w", err)
	}
	if err := o.Series.Validate(); err != nil {
		bad("%w", err)
	}
	if o.Resize != string(sim.ResizeRestart) && o.Resize != string(sim.ResizeInPlace) {
		bad("resize must be %s or %s, got %q", sim.ResizeRestart, sim.ResizeInPlace, o.Resize)
	}
	if !(o.Tenants >= 0 && o.Tenants <= 1) {
		bad("tenants must be in [0, 1], got %g", o.Tenants)
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"scaling", o.ScalingCost}, {"vertical", o.VerticalCost}, {"slo", o.SLOCost}} {
		if !(c.v >= 0) || math.IsInf(c.v, 0) {
			bad("%s cost must be finite and >= 0, got %v", c.name, c.v)
		}
	}
	if !(o.LearningRateEnd >= 0) || math.IsInf(o.LearningRateEnd, 0) {
		bad("final learning rate must be finite and >= 0 (0: constant), got %v", o.LearningRateEnd)
	} else if cfg, err := o.policyConfig(); o.Init == nil && err == nil && o.LearningRateEnd > cfg.LearningRate {
		bad("final learning rate %v must not exceed the learning rate %v", o.LearningRateEnd, cfg.LearningRate)
	}
	if o.TraceSteps < 0 {
		bad("trace steps must be >= 0, got %d", o.TraceSteps)
	}
	if o.FeaturesOff&^learn.AllFeatures != 0 {
		bad("unknown state features %#x", uint8(o.FeaturesOff))
	}
	if o.BCRounds < 0 || o.OfflineUpdates < 0 {
		bad("bc rounds and offline updates must be >= 0")
	}
	if o.BatchEpisodes <= 0 {
		bad("batch episodes must be > 0, got %d", o.BatchEpisodes)
	}
	if o.Workers < 0 {
		bad("workers must be >= 0, got %d", o.Workers)
	}
	if o.Validator != nil && o.ValidateEvery <= 0 {
		bad("validation interval must be > 0 PPO updates, got %d", o.ValidateEvery)
	}
	if o.Checkpoint != "" && o.CheckpointEvery < 0 {
		bad("checkpoint interval must be >= 0 (0: only at the end), got %d", o.CheckpointEvery)
	}
	if o.Init == nil {
		switch o.Policy {
		case "", PolicyPPO:
			if _, err := o.policyConfig(); err != nil {
				errs = append(errs, err)
			}
		case PolicyMetaPPO:
			cfg, _ := o.policyConfig()
			if err := o.metaConfig(cfg).Validate(); err != nil {
				errs = append(errs, err)
			}
		default:
			bad("unknown policy %q (known: %s, %s)", o.Policy, PolicyPPO, PolicyMetaPPO)
		}
	}
	return errors.Join(errs...)
}

// Action spaces (Options.ActionSpace).
const (
	ActionSpacePaper    = "paper"
	ActionSpaceResidual = "residual"
)

// Space is the action space the learner acts in: Init's when it is set,
// else ActionSpace, or when that is empty residual for PPO and paper for
// Meta-PPO.
func (o *Options) Space() string {
	if o.Init != nil {
		if sh, err := learn.ShapeOf(o.Init.PolicyConfig()); err == nil {
			return sh.String()
		}
	}
	switch {
	case o.ActionSpace != "":
		return o.ActionSpace
	case o.Policy == PolicyMetaPPO:
		return ActionSpacePaper
	}
	return ActionSpaceResidual
}

// DefaultFollowBias is learn.DefaultFollowBias.
const DefaultFollowBias = learn.DefaultFollowBias

// policyConfig is the learner's configuration.
func (o *Options) policyConfig() (nn.Config, error) {
	c := nn.DefaultConfig(learn.StateDim, int(learn.NumActions))
	if o.Space() == ActionSpaceResidual {
		bias := o.FollowBias
		if bias == 0 {
			bias = DefaultFollowBias
		}
		c = learn.ResidualConfig(bias)
	}
	c.Seed = o.Seed
	if o.FeaturesOff != 0 {
		c.StateFeatures = (learn.AllFeatures &^ o.FeaturesOff).String()
	}
	c.Anchor = o.Anchor
	if len(o.Hidden) > 0 {
		c.Hidden = slices.Clone(o.Hidden)
	}
	if o.LearningRate != 0 {
		c.LearningRate = o.LearningRate
	}
	if o.Epochs != 0 {
		c.Epochs = o.Epochs
	}
	if o.MinibatchSize != 0 {
		c.MinibatchSize = o.MinibatchSize
	}
	c.EntropyCoef = o.EntropyCoef
	return c, c.Validate()
}

// metaConfig is Meta-PPO's configuration around the PPO one.
func (o *Options) metaConfig(c nn.Config) nn.MetaConfig {
	m := nn.MetaConfig{Config: c, Window: o.Window, EmbedDim: o.EmbedDim}
	if o.AuxWeight > 0 {
		m.AuxDim, m.AuxWeight = len(HiddenParamNames), o.AuxWeight
	}
	if o.MetaSignature {
		m.SignatureDim = learn.SignatureDim
	}
	return m
}
