package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/lab/demo"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/lab/train"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// addTrainingFlags registers the training options on fs, each flag name
// prefixed with prefix (the demo uses "train-").
func addTrainingFlags(fs *pflag.FlagSet, o *train.Options, prefix string) {
	fs.StringVar(&o.Policy, prefix+"policy", o.Policy, "learner: ppo, or meta-ppo (a GRU encoder reads the workload's recent trajectory; its embedding joins the state)")
	fs.StringVar(&o.ActionSpace, prefix+"action-space", o.ActionSpace, "actions: residual (one choice per dimension relative to the fused default's recommendation: follow, hold, offsets and factors; an untrained agent follows the default; ppo or meta-ppo) or paper (the AWARE paper's no-op, ±1 replica, ±10% CPU, ±10% memory); empty: residual for ppo, paper for meta-ppo")
	fs.StringVar(&o.Anchor, prefix+"anchor", o.Anchor, "the variant of the fused default the learner acts beside (its recommendation is in the state, residual actions are relative to it, it bootstraps; the checkpoint records it): "+fusion.VariantHelp)
	fs.Float64Var(&o.FollowBias, prefix+"follow-bias", o.FollowBias, "residual: initial output bias of each head's follow-the-default choice (0 = 3: greedy follows, sampling follows in about half the windows)")
	fs.Float64Var(&o.EntropyCoef, prefix+"entropy-coef", o.EntropyCoef, "weight of PPO's entropy bonus")
	fs.IntVar(&o.Window, prefix+"meta-window", o.Window, "meta-ppo: recent steps the encoder reads")
	fs.IntVar(&o.EmbedDim, prefix+"meta-embed-dim", o.EmbedDim, "meta-ppo: size of the trajectory embedding")
	fs.BoolVar(&o.MetaSignature, prefix+"meta-signature", o.MetaSignature, "meta-ppo: the encoder also reads each step's workload signature (CPU time per request, memory and requests in flight per pod, the pods' start-up delay), which the state leaves out")
	fs.Float64Var(&o.AuxWeight, prefix+"meta-aux-weight", o.AuxWeight, "meta-ppo: weight of an auxiliary loss in which a linear head predicts each training app's hidden parameters (log CPU time and memory per request, start-up delay, I/O share) from the embedding; 0: none")
	fs.IntVar(&o.Apps, prefix+"apps", o.Apps, "number of generated training apps (never the held-out ones)")
	fs.IntVar(&o.Episodes, prefix+"episodes", o.Episodes, "training episodes in all, bootstrapping included")
	fs.IntVar(&o.BootstrapEpisodes, prefix+"bootstrap-episodes", o.BootstrapEpisodes, "most episodes each app bootstraps (the fused default acts; in the paper's action space the agent clones it, then runs offline PPO; in the residual space, where its every choice is \"follow\", nothing trains) before the agent acts, if the reward gate has not ended bootstrapping earlier; 0 trains from scratch")
	fs.IntVar(&o.Gates.Window, prefix+"gate-window", o.Gates.Window, "episodes the lifecycle gates look at (spec.rl.gates.window)")
	fs.Float64Var(&o.Gates.PromoteMinMean, prefix+"promote-min-mean", o.Gates.PromoteMinMean, "an app leaves bootstrapping (and training) when its mean episode reward over the gate window is at least this")
	fs.Float64Var(&o.Gates.PromoteMaxStdDev, prefix+"promote-max-stddev", o.Gates.PromoteMaxStdDev, "... and their standard deviation at most this")
	fs.Float64Var(&o.Gates.RetrainBelowMean, prefix+"retrain-below-mean", o.Gates.RetrainBelowMean, "a serving app retrains when its mean episode reward falls below this")
	fs.Float64Var(&o.Gates.RetrainAboveStdDev, prefix+"retrain-above-stddev", o.Gates.RetrainAboveStdDev, "... or their standard deviation rises above this")
	fs.IntVar(&o.Retraining.Min, prefix+"retrain-min-episodes", o.Retraining.Min, "fewest episodes an app retrains (the fused default acts; the agent relearns from it) before the reward gate may return it to the agent; 0: no minimum")
	fs.IntVar(&o.Retraining.Max, prefix+"retrain-max-episodes", o.Retraining.Max, "most episodes an app retrains before the agent acts again in OnlineTraining whatever the reward gate says; 0: no cap")
	fs.IntVar(&o.EpisodeSteps, prefix+"episode-steps", o.EpisodeSteps, "decisions (windows) per episode")
	fs.IntVar(&o.BatchEpisodes, prefix+"batch-episodes", o.BatchEpisodes, "episodes rolled out in parallel per PPO update")
	fs.IntSliceVar(&o.Hidden, prefix+"hidden", o.Hidden, "widths of the actor's and critic's hidden layers")
	fs.Float64Var(&o.LearningRate, prefix+"learning-rate", o.LearningRate, "Adam step size")
	fs.Float64Var(&o.LearningRateEnd, prefix+"learning-rate-end", o.LearningRateEnd, "decay the Adam step size linearly over the run, from --learning-rate at the first episode to this after the last; 0 keeps it constant")
	fs.BoolVar(&o.FreezeServing, prefix+"freeze-serving", o.FreezeServing, "freeze an app's learning once the lifecycle gate promotes it to Serving, as in the cluster; false keeps every app exploring and training the shared policy after bootstrapping")
	fs.Float64Var(&o.VerticalCost, prefix+"vertical-cost", o.VerticalCost, "reward the learner is charged per decision that changes the pods' requests (the reported reward and the gates are unchanged); 0 charges nothing")
	fs.Float64Var(&o.ScalingCost, prefix+"scaling-cost", o.ScalingCost, "reward the learner is charged per replica added or removed (the reported reward and the gates are unchanged); 0 charges nothing")
	fs.Float64Var(&o.SLOCost, prefix+"slo-cost", o.SLOCost, "reward the learner is charged per window whose p95 latency is above the SLO (the reported reward and the gates are unchanged); 0 charges nothing")
	fs.IntVar(&o.TraceSteps, prefix+"trace-steps", o.TraceSteps, "length in windows of the synthetic trace each episode is cut from at a random offset (5760: a day, as demo and eval run); 0 generates each trace as long as its episode")
	fs.Var((*featuresFlag)(&o.FeaturesOff), prefix+"features", "optional state features the learner sees, for ablations: all, none, or a list of trend (the rate against its mean over 4 and 20 windows) and peak (the recent peak-to-mean rate); the checkpoint records them")
}

// featuresFlag sets the features a learner does not see from the list of
// those it sees.
type featuresFlag learn.Features

func (f *featuresFlag) String() string { return (learn.AllFeatures &^ learn.Features(*f)).String() }
func (f *featuresFlag) Type() string   { return "features" }
func (f *featuresFlag) Set(s string) error {
	on, err := learn.ParseFeatures(s)
	if err != nil {
		return err
	}
	*f = featuresFlag(learn.AllFeatures &^ on)
	return nil
}

// addAzureFlags registers the three Azure Functions 2019 trace files and
// the rate mode; use says what the invocations file does for the command.
func addAzureFlags(fs *pflag.FlagSet, f *sim.AzureFiles, rate *sim.AzureRate, use string) {
	fs.StringVar(&f.Invocations, "azure-csv", f.Invocations, "Azure Functions 2019 invocations file (invocations_per_function_md.anon.dNN.csv, or a sample of some of its minutes, e.g. 480..959, as the header numbers them): "+use+", as --azure-rate says; a run is at most as long as the file's minutes")
	fs.StringVar(&f.Durations, "azure-durations-csv", f.Durations, "Azure Functions 2019 durations file (function_durations_percentiles.anon.dNN.csv; columns found by name): such an app takes its function's mean execution time as its time per request (needs --azure-csv)")
	fs.StringVar(&f.Memory, "azure-memory-csv", f.Memory, "Azure Functions 2019 memory file (app_memory_percentiles.anon.dNN.csv; columns found by name, others such as a HashFunction ignored): such an app takes its memory from the function's app, idle at the 1st percentile and at the mean load at the 50th (needs --azure-csv)")
	fs.StringVar((*string)(rate), "azure-rate", string(*rate), "how a function's invocations become its app's load: scaled (the default: the counts times one factor, to the app's mean rate, but never so far that the busiest minute asks more than the app's most replicas serve, each at the load an initial pod carries at the app's mean rate; a sparse function keeps its shape at a lower mean instead of becoming a burst no deployment could take), recorded (the function's own counts per minute, the arrivals Poisson within each minute, with the app deployed for the function's mean rate: named for what it replays, the counts as the trace recorded them), or mean (scaled to the app's mean rate whatever the busiest minute becomes; a function invoked once in hours then sends the run's whole traffic in one minute)")
}

// addSeriesFlags registers a rate series file and its app's demand; use
// says what the series does for the command.
func addSeriesFlags(fs *pflag.FlagSet, f *sim.SeriesFile, use string) {
	fs.StringVar(&f.Path, "trace-csv", f.Path, "rate series CSV, rows of time,rate (requests/s) or, under a header naming the second column count, requests or invocations, time,count per interval; the time is RFC 3339, YYYY-MM-DD HH:MM:SS (UTC) or seconds from the start, the rows evenly spaced (their spacing is the interval; uneven rows are refused), each value holding until the next row: "+use+", resampled to --step, at its recorded rates, with the app deployed for its mean rate; a run is at most as long as the series")
	fs.Float64Var(&f.CPUSeconds, "trace-csv-cpu", f.CPUSeconds, "CPU time of one request of the --trace-csv app, in core-seconds (0: the generated app's)")
	fs.Float64Var(&f.IOWait, "trace-csv-io-wait", f.IOWait, "time one request of the --trace-csv app waits without CPU, in seconds (0: the generated app's)")
	fs.Var((*mibFlag)(&f.BaseMemory), "trace-csv-memory", "memory an idle pod of the --trace-csv app holds, in MiB (0: the generated app's)")
	fs.Var((*mibFlag)(&f.MemoryPerRequest), "trace-csv-request-memory", "memory each request in flight of the --trace-csv app holds, in MiB (0: the generated app's)")
}

// mibFlag is an amount of bytes set in MiB.
type mibFlag float64

func (m *mibFlag) String() string { return strconv.FormatFloat(float64(*m)/(1<<20), 'g', -1, 64) }
func (m *mibFlag) Type() string   { return "MiB" }
func (m *mibFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 0) {
		return fmt.Errorf("%q is not a finite non-negative number of MiB", s)
	}
	*m = mibFlag(v * (1 << 20))
	return nil
}

// trainOptions are the flags of `rl-agent train`.
type trainOptions struct {
	train.Options
	validation demo.ValidationOptions
	curve      string
	noProgress bool
	config     experimentConfig
}

// trainSpec is the spec of a Train experiment file: train.Options' fields
// and sections, and the validation section.
type trainSpec struct {
	*train.Options
	Validation *demo.ValidationOptions `json:"validation"`
}

func newTrainOptions() *trainOptions {
	o := &trainOptions{Options: train.DefaultOptions(), validation: demo.DefaultValidationOptions()}
	o.Checkpoint = "aware-agent.ckpt"
	o.config = experimentConfig{kind: kindTrain, spec: &trainSpec{Options: &o.Options, Validation: &o.validation}}
	return o
}

// AddFlags registers the train flags on fs.
func (o *trainOptions) AddFlags(fs *pflag.FlagSet) {
	addTrainingFlags(fs, &o.Options, "")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for apps, traces, arrivals, initial weights and exploration; equal seeds give identical checkpoints")
	fs.StringSliceVar(&o.Traces, "traces", o.Traces, "trace kinds episodes cycle through")
	addAzureFlags(fs, &o.Azure, &o.AzureRate, `episodes also cycle through the kind "azure": a training app under one of its functions`)
	addSeriesFlags(fs, &o.Series, `episodes also cycle through the kind "csv": a training app under a seed-chosen stretch of it`)
	fs.DurationVar(&o.Step, "step", o.Step, "window length (the agent's decision interval)")
	fs.StringVar(&o.Resize, "resize", o.Resize, "how vertical changes reach pods: Restart or InPlace")
	fs.Float64Var(&o.Tenants, "tenants", o.Tenants, "fraction of each node's CPU beyond the app's requests on it that other workloads request and use, in [0, 1] (0: the app runs alone; 1: packed, busy nodes, where a pod gets no CPU beyond its request)")
	fs.StringVar(&o.Checkpoint, "checkpoint", o.Checkpoint, "file the trained policy is written to (atomically, also during training)")
	fs.IntVar(&o.CheckpointEvery, "checkpoint-every", o.CheckpointEvery, "write the checkpoint every this many PPO updates (0: only at the end)")
	fs.StringVar(&o.curve, "curve", o.curve, "reward-curve plot (SVG); its data goes beside it as JSON (default <checkpoint>-reward.svg)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "parallel rollouts (0 = GOMAXPROCS)")
	fs.BoolVar(&o.noProgress, "no-progress", o.noProgress, "do not draw the progress bar on stderr")
	addValidationFlags(fs, &o.validation, "")
	o.config.AddFlags(fs)
}

// addValidationFlags registers the options of checkpoint selection on fs,
// each flag name prefixed with prefix.
func addValidationFlags(fs *pflag.FlagSet, v *demo.ValidationOptions, prefix string) {
	fs.IntVar(&v.Apps, prefix+"validate-apps", v.Apps, "judge the policy before training and every --"+prefix+"validate-every PPO updates on this many validation apps (held-out apps of --"+prefix+"validate-seed, under every trace kind), greedy, against --"+prefix+"validate-baseline, and end with the best accepted snapshot (highest mean paired reward difference among those with no more SLO-violating windows on average and at most --"+prefix+"validate-max-worse of runs worse by a point) instead of the last weights; 0: no validation")
	fs.Uint64Var(&v.Seed, prefix+"validate-seed", v.Seed, "seed of the validation apps and traces; keep it apart from the training seed and the seeds of the held-out sets judged later")
	fs.IntVar(&v.Steps, prefix+"validate-steps", v.Steps, "windows per validation run")
	fs.IntVar(&v.Every, prefix+"validate-every", v.Every, "PPO updates between validations")
	fs.StringVar(&v.Baseline, prefix+"validate-baseline", v.Baseline, "built-in policy the validation runs are paired with (e.g. fused, or fused:SPEC)")
	fs.Float64Var(&v.MaxWorse, prefix+"validate-max-worse", v.MaxWorse, "largest fraction of validation runs in which an accepted snapshot violates the SLO in more than one point more of the windows than the baseline")
}

// Validate rejects flag combinations that cannot run.
func (o *trainOptions) Validate() error {
	var errs []error
	if o.Checkpoint == "" {
		errs = append(errs, errors.New("--checkpoint is required"))
	}
	if o.curve == "" && o.Checkpoint != "" {
		o.curve = strings.TrimSuffix(o.Checkpoint, ".ckpt") + "-reward.svg"
	}
	if err := o.validation.Apply(&o.Options); err != nil {
		errs = append(errs, err)
	}
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func newTrainCommand() *cobra.Command {
	o := newTrainOptions()
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train the agent on the built-in simulator",
		Long: `train trains the AWARE agent on generated training apps under the
simulator's load traces; the held-out apps that demo and eval use are never
trained on. By default (--action-space=residual) the agent is a PPO
actor-critic that acts relative to the fused HPA+VPA default's
recommendation of the same window, one choice per dimension (replicas:
follow, hold, -2..+2, x0.8, x1.25; CPU and memory requests: follow, hold,
x0.7..x1.3); untrained, it follows the default. --action-space=paper is the
AWARE paper's agent (no-op, ±1 replica, ±CPU step, ±memory step), and
--policy=meta-ppo adds a GRU encoder of each workload's recent trajectory
(paper actions only). Each episode is an hour cut from a day-long trace
(--trace-steps), as long as demo and eval run. Each app goes through the
agent's lifecycle: it bootstraps first (the default acts; in the paper's
space the agent clones it), until the reward gate (the mean and spread of
the app's last --gate-window episode rewards) passes or
--bootstrap-episodes is reached; then the agent acts, sampling, with the
FaaSRM safeguard on, and learns by PPO. With --freeze-serving an app the
gate promotes is served greedily with frozen weights, as in the cluster,
and retrains if its reward drops. The learner is charged --scaling-cost per
replica it adds or removes, --vertical-cost per request change and
--slo-cost per SLO-violating window; the reported rewards are the paper's.
The policy is checkpointed to --checkpoint during and after training, and
the reward curve (with each episode's stage) is plotted. Equal flags give
identical checkpoints.`,
		Args: cobra.NoArgs,
		RunE: o.config.wrapRunE(func(cmd *cobra.Command) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return runTrain(cmd, o)
		}),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runTrain(cmd *cobra.Command, o *trainOptions) error {
	stdout := cmd.OutOrStdout()
	if !o.noProgress {
		o.Progress = demo.NewProgressBar(cmd.ErrOrStderr())
	}
	fmt.Fprintf(stdout, "Training %s (%s actions) on %d apps for %d episodes of %d windows (each app bootstrapping for at most %d), seed %d\n",
		o.Policy, o.Space(), o.Apps, o.Episodes, o.EpisodeSteps, o.BootstrapEpisodes, o.Seed)
	cpu0, wall0 := demo.CPUTime(), time.Now()
	res, err := train.Train(cmd.Context(), o.Options)
	if err != nil {
		return err
	}
	cpu, wall := demo.CPUTime()-cpu0, time.Since(wall0)
	if err := writeCurve(o.curve, o.BatchEpisodes, res.Episodes); err != nil {
		return err
	}
	data := strings.TrimSuffix(o.curve, ".svg") + ".json"
	if err := writeJSON(data, res.Episodes); err != nil {
		return err
	}
	windows := 0
	for _, e := range res.Episodes {
		windows += e.Steps
	}
	fmt.Fprintf(stdout, "Trained in %s (%.0f s CPU): %.0f simulated windows per second of wall time.\n",
		wall.Round(time.Second), cpu.Seconds(), float64(windows)/max(wall.Seconds(), 1e-9))
	boots, end := res.BootstrapCount()
	if n := len(res.BC); n > 0 {
		fmt.Fprintf(stdout, "Behaviour cloning: accuracy %.1f%% in the last round, on the default's demonstrations of %d bootstrapping episodes\n", 100*res.BC[n-1].Accuracy, boots)
	}
	stages := map[string]int{}
	for _, e := range res.Episodes {
		stages[e.Stage]++
	}
	fmt.Fprintf(stdout, "Episodes per stage: Bootstrapping %d, OnlineTraining %d, Serving %d, Retraining %d (%d stage changes)\n",
		stages["Bootstrapping"], stages["OnlineTraining"], stages["Serving"], stages["Retraining"], len(res.Changes))
	if k := min(o.BatchEpisodes, len(res.Episodes)-end); k > 0 {
		n := len(res.Episodes)
		fmt.Fprintf(stdout, "Mean episode reward: default %.3f while bootstrapping; agent %.3f in the first %d episodes after, %.3f in the last %d\n",
			meanBootstrap(res), res.MeanReward(end, end+k), k, res.MeanReward(n-k, n), k)
	}
	if n := len(res.Episodes) - end; n >= 4 {
		// How the curve flattens: the reward, and the learner's shaped
		// reward, per quarter of the episodes after bootstrapping.
		var parts []string
		for q := range 4 {
			from, to := end+q*n/4, end+(q+1)*n/4
			parts = append(parts, fmt.Sprintf("%.3f (shaped %.3f)", res.MeanReward(from, to), res.MeanReward(from, to)-res.MeanShaping(from, to)))
		}
		fmt.Fprintf(stdout, "Mean episode reward per quarter after bootstrapping: %s\n", strings.Join(parts, ", "))
	}
	demo.WriteValidations(stdout, res)
	fmt.Fprintf(stdout, "Checkpoint: %s\nReward curve: %s (data %s)\n", o.Checkpoint, o.curve, data)
	return nil
}

// meanBootstrap is the mean episode reward of the default while it acted.
func meanBootstrap(res *train.Result) float64 {
	var s float64
	var n int
	for _, e := range res.Episodes {
		if e.Phase == train.PhaseBootstrap {
			s += e.MeanReward
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

func writeCurve(path string, window int, eps []train.Episode) error {
	return writeFile(path, func(w io.Writer) error { return train.WriteCurveSVG(w, eps, window) })
}

func writeJSON(path string, v any) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

func writeFile(path string, f func(io.Writer) error) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f(out); err != nil {
		out.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
