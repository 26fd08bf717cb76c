package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/lab/demo"
	"github.com/aware-k8s/aware/pkg/lab/train"
)

// evidenceOptions are the flags of `rl-agent evidence`.
type evidenceOptions struct {
	train.EvidenceOptions
	experiment string
	out        string
	pretrained string
	config     experimentConfig
}

// evidenceSpec is the spec of an Evidence experiment file:
// train.EvidenceOptions' fields (its base section train.Options'), the
// experiment, the output folder and the pre-trained checkpoints.
type evidenceSpec struct {
	*train.EvidenceOptions
	Experiment *string `json:"experiment"`
	Out        *string `json:"out"`
	Pretrained *string `json:"pretrained"`
}

func newEvidenceOptions() *evidenceOptions {
	o := &evidenceOptions{EvidenceOptions: train.DefaultEvidenceOptions(), experiment: "all", out: "aware-evidence"}
	o.config = experimentConfig{kind: kindEvidence, spec: &evidenceSpec{EvidenceOptions: &o.EvidenceOptions, Experiment: &o.experiment, Out: &o.out, Pretrained: &o.pretrained}}
	return o
}

// AddFlags registers the evidence flags on fs.
func (o *evidenceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.experiment, "experiment", o.experiment, "experiment to run: bootstrap, adapt, after, retrain, embedding or all")
	fs.StringVar(&o.out, "out", o.out, "folder for <experiment>.json and the pre-trained checkpoints")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "first seed of training and evidence apps, traces, arrivals and weights; equal seeds give equal numbers")
	fs.IntVar(&o.Seeds, "seeds", o.Seeds, "seeds to run: --seed .. --seed+N-1, each with its own pre-training, evidence apps and traces; every measure is summarised over the (app, seed) pairs with 95% confidence intervals")
	fs.StringVar(&o.Base.ActionSpace, "action-space", o.Base.ActionSpace, "action space of the agents, PPO and Meta-PPO alike: paper (the AWARE paper's seven one-step actions) or residual (one choice per dimension relative to the fused default)")
	fs.IntVar(&o.Apps, "apps", o.Apps, "held-out evidence apps per seed (generated from a seed derived from the seed, never trained on before the experiment)")
	fs.IntVar(&o.Base.EpisodeSteps, "episode-steps", o.Base.EpisodeSteps, "decisions (windows) per episode")
	fs.IntVar(&o.Base.Workers, "workers", o.Base.Workers, "parallel rollouts (0 = GOMAXPROCS)")
	fs.StringVar(&o.pretrained, "pretrained", o.pretrained, "folder of an earlier run's --out: each seed's pretrained-ppo.ckpt and pretrained-meta-ppo.ckpt are read from its seed-<N> subfolder (or, with one seed, from the folder itself) instead of pre-training")
	fs.IntVar(&o.PretrainApps, "pretrain-apps", o.PretrainApps, "training apps the pre-trained PPO and Meta-PPO (adapt, after, retrain) learn on")
	fs.Float64Var(&o.PretrainParamSpread, "pretrain-param-spread", o.PretrainParamSpread, "above 1: each pre-training app's CPU time per request, memory per request and pod start-up delay are multiplied by factors log-uniform in [1, N] (as --adapt-*-factor shift a new app: after sizing), PPO and Meta-PPO on the same apps, so that shifted new apps lie inside what pre-training covered; 0 or 1: the apps as generated. Needs pre-training (not --pretrained)")
	fs.StringVar(&o.MetaGuard, "meta-guard", o.MetaGuard, "residual action space: fit the pre-trained Meta-PPO's embedding guard on its embeddings of the pre-training apps (a greedy episode per app and pre-training trace kind): box, their per-dimension range widened by 10% of its width each side, or mahalanobis, that box and the ellipsoid of their mean and covariance holding 99% of them, radius widened by 10%; outside it Meta-PPO follows the default. Stored in its checkpoint; with --pretrained, fitted on load (pass the --pretrain-param-spread the checkpoints were pre-trained with). Empty: none")
	fs.IntVar(&o.PretrainEpisodes, "pretrain-episodes", o.PretrainEpisodes, "episodes of each pre-training")
	fs.BoolVar(&o.Base.MetaBlind, "meta-blind", o.Base.MetaBlind, "ablation: Meta-PPO's encoder is given no trajectory, in pre-training and in every experiment's episodes (its embedding is 0 throughout), so that it is PPO with Meta-PPO's network and training; with --pretrained checkpoints of a Meta-PPO that could see, it is blinded from the new app's first episode on. Not with --experiment=embedding or --meta-guard")
	fs.IntVar(&o.Base.Window, "meta-window", o.Base.Window, "recent steps Meta-PPO's encoder reads")
	fs.BoolVar(&o.Base.MetaSignature, "meta-signature", o.Base.MetaSignature, "Meta-PPO's encoder also reads each step's workload signature (CPU time per request, memory and requests in flight per pod, the pods' start-up delay), which the state leaves out; in pre-training (--pretrained checkpoints keep what they were trained with)")
	fs.Float64Var(&o.Base.AuxWeight, "meta-aux-weight", o.Base.AuxWeight, "weight of Meta-PPO's auxiliary loss in pre-training: a linear head predicts each training app's hidden parameters (log CPU time and memory per request, start-up delay, I/O share) from the embedding; 0: none. Never applied on the evidence apps, whose parameters are unknown")
	fs.IntVar(&o.BootstrapEpisodes, "bootstrap-k", o.BootstrapEpisodes, "bootstrap: first training episodes on the evidence apps whose SLO violations are counted")
	fs.IntVar(&o.BootstrapCap, "bootstrap-cap", o.BootstrapCap, "bootstrap: most bootstrapping episodes per app (the lifecycle gate may end it sooner)")
	fs.IntVar(&o.BootstrapBatch, "bootstrap-batch", o.BootstrapBatch, "bootstrap: episodes per PPO update")
	fs.IntVar(&o.AdaptApps, "adapt-apps", o.AdaptApps, "adapt: evidence apps each arm learns")
	fs.IntVar(&o.AdaptEpisodes, "adapt-episodes", o.AdaptEpisodes, "adapt: episodes per app and arm")
	fs.IntVar(&o.AdaptBatch, "adapt-batch", o.AdaptBatch, "adapt: episodes per PPO update")
	fs.StringSliceVar(&o.AdaptTraces, "adapt-traces", o.AdaptTraces, "adapt: trace kinds the episodes cycle through")
	fs.Float64SliceVar(&o.AdaptThresholds, "adapt-thresholds", o.AdaptThresholds, "adapt: fractions of the converged reward whose first episode is reported besides 90%")
	fs.Float64Var(&o.AdaptCPUFactor, "adapt-cpu-factor", o.AdaptCPUFactor, "adapt: factor on the new apps' CPU time per request, to move them further from the training apps")
	fs.Float64Var(&o.AdaptMemoryFactor, "adapt-memory-factor", o.AdaptMemoryFactor, "adapt: factor on the new apps' memory per request")
	fs.Float64Var(&o.AdaptStartupFactor, "adapt-startup-factor", o.AdaptStartupFactor, "adapt: factor on the new apps' pod start-up delay")
	fs.IntVar(&o.EvalSteps, "eval-steps", o.EvalSteps, "after: windows per app and trace")
	fs.StringSliceVar(&o.EvalTraces, "eval-traces", o.EvalTraces, "after: trace kinds every evidence app runs under")
	fs.IntVar(&o.RetrainApps, "retrain-apps", o.RetrainApps, "retrain: evidence apps per seed, each followed through the change on its own")
	fs.IntVar(&o.RetrainBefore, "retrain-before", o.RetrainBefore, "retrain: episodes served before the workload changes")
	fs.IntVar(&o.RetrainAfter, "retrain-after", o.RetrainAfter, "retrain: episodes after the change")
	fs.Float64Var(&o.CPUFactor, "cpu-factor", o.CPUFactor, "retrain: factor on the app's CPU time per request at the change")
	fs.Float64Var(&o.RateFactor, "rate-factor", o.RateFactor, "retrain: factor on the app's arrival rate at the change")
	fs.Float64Var(&o.RetrainMargin, "retrain-margin", o.RetrainMargin, "retrain: the detector fires when the mean episode reward falls this far below the serving baseline measured before the change")
	fs.IntVar(&o.RetrainBatch, "retrain-batch", o.RetrainBatch, "retrain: episodes per PPO update (and behaviour-cloning round while Retraining) in the stages that learn")
	fs.IntVar(&o.RetrainMin, "retrain-min", o.RetrainMin, "retrain: fewest episodes of each stay in Retraining before the promotion gate may return the app to the agent (0: no minimum)")
	fs.IntVar(&o.RetrainCap, "retrain-cap", o.RetrainCap, "retrain: most episodes of each stay in Retraining, after which the agent acts again in OnlineTraining whatever the promotion gate says (0: no cap)")
	fs.IntVar(&o.RetrainReference, "retrain-reference", o.RetrainReference, "retrain: episodes a copy of the pre-trained PPO is fine-tuned on the changed app, offline, as the reference of what is attainable after the change (0: no reference)")
	fs.IntVar(&o.RetrainReferenceBatch, "retrain-reference-batch", o.RetrainReferenceBatch, "retrain: episodes per PPO update of the reference fine-tuning")
	fs.StringSliceVar(&o.RetrainTraces, "retrain-traces", o.RetrainTraces, "retrain: trace kinds the episodes cycle through")
	o.config.AddFlags(fs)
}

// Validate rejects flag combinations that cannot run.
func (o *evidenceOptions) Validate() error {
	var errs []error
	if o.experiment != "all" && !slices.Contains(train.Experiments, o.experiment) {
		errs = append(errs, fmt.Errorf("--experiment must be one of %v or all, got %q", train.Experiments, o.experiment))
	} else if o.experiment != "all" {
		if err := o.ValidateExperiment(o.experiment); err != nil {
			errs = append(errs, err)
		}
	}
	if o.pretrained != "" && o.PretrainParamSpread > 1 && o.MetaGuard == "" {
		errs = append(errs, errors.New("--pretrain-param-spread shapes the pre-training, which --pretrained skips: pass it to the run that pre-trained (with --pretrained it only names the apps --meta-guard is fitted on)"))
	}
	if o.out == "" {
		errs = append(errs, errors.New("--out is required"))
	}
	if err := o.EvidenceOptions.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func newEvidenceCommand() *cobra.Command {
	o := newEvidenceOptions()
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Measure the paper's claims on the simulator, on apps the agent never trained on",
		Long: `evidence runs the experiments behind AWARE's claims on the built-in simulator,
on held-out apps generated from a seed derived from the seed (never training
apps), for each of --seeds seeds from --seed on, prints one table per
experiment and seed, then each experiment over all (app, seed) pairs with
95% confidence intervals, and writes that summary, per-seed results
included, to <experiment>.json in --out:

  bootstrap  SLO violations during the first --bootstrap-k training episodes
             on the new apps (all apps together), bootstrapped (the
             defaults act until the lifecycle gate or --bootstrap-cap) vs
             from scratch, per (app, seed): the paired difference and the
             ratio of means (bootstrap interval).
  adapt      episodes until the reward reaches 90% (and --adapt-thresholds)
             of the converged reward on a new app, and the shortfall below
             it, for Meta-PPO and PPO pre-trained on training apps
             (transfer learning: fine-tuning without the embedding) and a
             fresh PPO (scratch), with the fused default as the floor;
             zero-shot (first-episode) and final reward; paired
             differences and speed-ups with intervals.
             --adapt-cpu-factor, --adapt-memory-factor and
             --adapt-startup-factor move the new apps further from the
             training ones; --pretrain-param-spread spreads the
             pre-training apps the same way, so that pre-training covers
             them; --meta-guard makes Meta-PPO follow the default where
             its embedding leaves the range seen in pre-training
             (residual space). Every arm acts in --action-space.
  after      the pre-trained agents against the fused HPA+VPA default and
             the oracle (pkg/lab/eval), paired per (app, trace, seed).
  retrain    a pre-trained agent serving each of --retrain-apps new apps,
             one at a time, whose CPU cost per request changes: when the
             detector fires, the fused default acts while the agent
             relearns from it (a stay bounded by --retrain-min and
             --retrain-cap), then the agent acts again; the online
             degradation relative to the reward before the change, and to
             what is attainable after it (the agent fine-tuned offline on
             the changed app unless --retrain-reference=0, the oracle, the
             default).
  embedding  whether Meta-PPO's embedding identifies the workload: each
             held-out app is served for one greedy episode by the
             pre-trained Meta-PPO and embedded (the mean embedding of the
             episode's full windows); Spearman's rho between the embedding
             cosine similarity of every two apps and their similarity in
             the hidden parameters (minus the distance of the standardised
             log CPU time per request, log memory per request, start-up
             delay and I/O share), with a bootstrap interval over the apps,
             the same with the mean state instead of the embedding (the
             control) and per parameter; writes embedding-seed-<N>.svg to
             --out: the embeddings on their first two principal
             components, coloured by the app's dominant segment class.

adapt, after, retrain and embedding share one pre-training of PPO and Meta-PPO per
seed, whose checkpoints are written to --out/seed-<N> (reuse them with
--pretrained, which must act in --action-space). --action-space sets the
action space of PPO and Meta-PPO alike (paper by default).
With the default options each experiment takes at most about ten minutes
on two cores; the flags make them larger. Equal flags give equal numbers.`,
		Args: cobra.NoArgs,
		RunE: o.config.wrapRunE(func(cmd *cobra.Command) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return runEvidence(cmd.Context(), o, cmd.OutOrStdout())
		}),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// tabler is an experiment's result.
type tabler interface {
	WriteTable(io.Writer) error
}

// plotter is a result with a plot of its own.
type plotter interface {
	WriteSVG(io.Writer) error
}

var _ plotter = (*train.EmbeddingResult)(nil)

// writeSVG writes p's plot to path.
func writeSVG(path string, p plotter) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := p.WriteSVG(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// experiments returns the experiments to run, and those "all" leaves out
// in this action space.
func (o *evidenceOptions) experiments() (run, skipped []string) {
	if o.experiment != "all" {
		return []string{o.experiment}, nil
	}
	for _, x := range train.Experiments {
		if o.ValidateExperiment(x) != nil {
			skipped = append(skipped, x)
		} else {
			run = append(run, x)
		}
	}
	return run, skipped
}

// seedDir is the folder of one seed's checkpoints.
func seedDir(root string, seed uint64) string {
	return filepath.Join(root, fmt.Sprintf("seed-%d", seed))
}

// reportGuard says how wide the Meta-PPO's embedding guard is, if one was
// fitted (took: the fitting's wall time, 0 when part of pre-training).
func reportGuard(stdout io.Writer, e *train.EvidenceOptions, pre *train.Pretrained, took time.Duration) {
	if pre.Guard == nil {
		return
	}
	fmt.Fprintf(stdout, "Seed %d: Meta-PPO embedding guard fitted on the %d pre-training apps", e.Seed, e.PretrainApps)
	if took > 0 {
		fmt.Fprintf(stdout, " (%s)", took.Round(time.Second))
	}
	fmt.Fprintf(stdout, ": lo %.3f, hi %.3f", pre.Guard.Lo, pre.Guard.Hi)
	if pre.Guard.Radius > 0 {
		fmt.Fprintf(stdout, ", Mahalanobis radius %.3f", pre.Guard.Radius)
	}
	fmt.Fprintln(stdout, ".")
}

// loadPretrained reads one seed's checkpoints from dir's seed-<N>
// subfolder or, when only one seed runs and there is none, from dir.
func loadPretrained(dir string, seed uint64, seeds int) (*train.Pretrained, string, error) {
	from := seedDir(dir, seed)
	if _, err := os.Stat(from); err != nil {
		if seeds > 1 {
			return nil, "", fmt.Errorf("--pretrained %s: no checkpoints for seed %d: %w", dir, seed, err)
		}
		from = dir
	}
	pre := &train.Pretrained{}
	for _, x := range []struct {
		file string
		dst  *train.Learner
	}{{"pretrained-ppo.ckpt", &pre.PPO}, {"pretrained-meta-ppo.ckpt", &pre.Meta}} {
		l, err := train.LoadCheckpoint(filepath.Join(from, x.file))
		if err != nil {
			return nil, "", err
		}
		*x.dst = l
	}
	if pre.PPO.Kind() != train.PolicyPPO || pre.Meta.Kind() != train.PolicyMetaPPO {
		return nil, "", fmt.Errorf("--pretrained %s: want a ppo and a meta-ppo checkpoint, got %s and %s", from, pre.PPO.Kind(), pre.Meta.Kind())
	}
	return pre, from, nil
}

func runEvidence(ctx context.Context, o *evidenceOptions, stdout io.Writer) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	exps, skipped := o.experiments()
	for _, x := range skipped {
		fmt.Fprintf(stdout, "Skipping %s: %v.\n", x, o.ValidateExperiment(x))
	}
	seeds := o.SeedList()
	results := map[string][]tabler{}
	for _, seed := range seeds {
		e := o.EvidenceOptions
		e.Seed = seed
		var pre *train.Pretrained
		pretrain := func() error {
			if pre != nil {
				return nil
			}
			if o.pretrained != "" {
				var from string
				var err error
				if pre, from, err = loadPretrained(o.pretrained, seed, len(seeds)); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "Seed %d: pre-trained PPO and Meta-PPO loaded from %s.\n", seed, from)
				if e.MetaGuard != "" {
					t0 := time.Now()
					if _, err := e.GuardPretrained(ctx, pre); err != nil {
						return err
					}
					reportGuard(stdout, &e, pre, time.Since(t0))
				}
				return nil
			}
			cpu0, wall0 := demo.CPUTime(), time.Now()
			var err error
			if pre, err = train.Pretrain(ctx, e); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "Seed %d: pre-trained PPO (%.0f s) and Meta-PPO (%.0f s) on %d training apps for %d episodes each: %s wall, %.0f s CPU.\n",
				seed, pre.PPOSeconds, pre.MetaSeconds, e.PretrainApps, e.PretrainEpisodes, time.Since(wall0).Round(time.Second), (demo.CPUTime() - cpu0).Seconds())
			reportGuard(stdout, &e, pre, 0)
			if e.PretrainParamSpread > 1 {
				fmt.Fprintf(stdout, "Seed %d: the training apps' CPU time, memory per request and start-up delay spread by factors log-uniform in [1, %g].\n", seed, e.PretrainParamSpread)
			}
			dir := seedDir(o.out, seed)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for name, l := range map[string]train.Learner{"pretrained-ppo.ckpt": pre.PPO, "pretrained-meta-ppo.ckpt": pre.Meta} {
				if err := train.WriteCheckpoint(filepath.Join(dir, name), l); err != nil {
					return err
				}
			}
			return nil
		}
		for _, x := range exps {
			cpu0, wall0 := demo.CPUTime(), time.Now()
			var res tabler
			var err error
			switch x {
			case train.ExperimentBootstrap:
				res, err = train.RunBootstrap(ctx, e)
			default:
				if err = pretrain(); err != nil {
					return err
				}
				cpu0, wall0 = demo.CPUTime(), time.Now()
				switch x {
				case train.ExperimentAdapt:
					res, err = train.RunAdapt(ctx, e, pre)
				case train.ExperimentAfter:
					res, err = train.RunAfter(ctx, e, pre)
				case train.ExperimentRetrain:
					res, err = train.RunRetrain(ctx, e, pre)
				case train.ExperimentEmbedding:
					res, err = train.RunEmbedding(ctx, e, pre)
				}
			}
			if err != nil {
				return fmt.Errorf("seed %d: %w", seed, err)
			}
			fmt.Fprintf(stdout, "\n== %s (seed %d, %s action space): %s wall, %.0f s CPU\n", x, seed, e.Base.Space(), time.Since(wall0).Round(time.Second), (demo.CPUTime() - cpu0).Seconds())
			if err := res.WriteTable(stdout); err != nil {
				return err
			}
			results[x] = append(results[x], res)
			if p, ok := res.(plotter); ok {
				path := filepath.Join(o.out, fmt.Sprintf("%s-seed-%d.svg", x, seed))
				if err := writeSVG(path, p); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "Plot: %s\n", path)
			}
		}
	}
	for _, x := range exps {
		st, err := study(x, results[x], seeds)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\n== %s over seeds %v (%s action space)\n", x, seeds, o.Base.Space())
		if err := st.WriteTable(stdout); err != nil {
			return err
		}
		path := filepath.Join(o.out, x+".json")
		if err := writeJSON(path, st); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Data: %s\n", path)
	}
	return nil
}

// study summarises one experiment's per-seed results.
func study(x string, rs []tabler, seeds []uint64) (tabler, error) {
	switch x {
	case train.ExperimentBootstrap:
		return train.StudyBootstrap(as[*train.BootstrapResult](rs), seeds)
	case train.ExperimentAdapt:
		return train.StudyAdapt(as[*train.AdaptResult](rs), seeds)
	case train.ExperimentAfter:
		return train.StudyAfter(as[*train.AfterResult](rs), seeds)
	case train.ExperimentRetrain:
		return train.StudyRetrain(as[*train.RetrainSet](rs), seeds)
	case train.ExperimentEmbedding:
		return train.StudyEmbedding(as[*train.EmbeddingResult](rs), seeds)
	}
	return nil, fmt.Errorf("unknown experiment %q", x)
}

func as[T tabler](rs []tabler) []T {
	out := make([]T, len(rs))
	for i, r := range rs {
		out[i] = r.(T)
	}
	return out
}
