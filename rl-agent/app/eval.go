package app

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/lab/demo"
)

// evalOptions are the flags of `rl-agent eval`: the demo's evaluation, with
// the agent loaded from a checkpoint.
type evalOptions struct {
	demo.Options
	checkpoints []string
	quorums     []int
	noProgress  bool
	config      experimentConfig
}

// evalSpec is the spec of an Eval experiment file: demo.Options' fields,
// the checkpoints and the ensembles' quorums.
type evalSpec struct {
	*demo.Options
	Checkpoints *[]string `json:"checkpoints"`
	Quorums     *[]int    `json:"ensembleQuorum"`
}

func newEvalOptions() *evalOptions {
	o := &evalOptions{Options: demo.DefaultOptions(), quorums: demo.DefaultQuorums()}
	o.Name = "eval"
	o.Agent = nil
	o.config = experimentConfig{kind: kindEval, spec: &evalSpec{Options: &o.Options, Checkpoints: &o.checkpoints, Quorums: &o.quorums}}
	return o
}

// AddFlags registers the eval flags on fs.
func (o *evalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.checkpoints, "checkpoint", o.checkpoints, "trained policy to evaluate, as written by rl-agent train (required); repeat (or separate with commas) for several, e.g. one per training seed: each gets a row, and their runs are also paired with the default's together")
	fs.IntSliceVar(&o.quorums, "ensemble-quorum", o.quorums, ensembleQuorumHelp)
	fs.IntVar(&o.Apps, "apps", o.Apps, "number of held-out generated apps to evaluate")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for apps, traces and arrivals; equal seeds give identical results")
	fs.IntVar(&o.Steps, "steps", o.Steps, "windows simulated per app")
	fs.DurationVar(&o.Step, "step", o.Step, "window length (the policies' decision interval)")
	fs.StringSliceVar(&o.Traces, "traces", o.Traces, "trace kinds; every app runs under each (may be empty, --traces=, with --azure-csv or --trace-csv)")
	fs.StringSliceVar(&o.Policies, "policies", o.Policies, "default policies and oracle to compare the agent with, in table order (any of demo's, e.g. qlearn, hpa:best-target or faasrm)")
	addAzureFlags(fs, &o.Azure, &o.AzureRate, "each evaluated app also runs under one of its functions")
	addSeriesFlags(fs, &o.Series, "each evaluated app also runs under it")
	fs.StringVar(&o.OutDir, "out", o.OutDir, "folder for report.json and the plots (default a fresh ./aware-eval-<seed>)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "parallel simulations (0 = GOMAXPROCS)")
	fs.StringVar(&o.Resize, "resize", o.Resize, "how vertical changes reach pods: Restart or InPlace")
	fs.DurationVar(&o.FaaSRMTimeout, "faasrm-timeout", o.FaaSRMTimeout, "with --policies faasrm: an invocation not completed this long after its arrival times out (0: never)")
	fs.Float64Var(&o.Tenants, "tenants", o.Tenants, "fraction of each node's CPU beyond the app's requests on it that other workloads request and use, in [0, 1] (0: the app runs alone; 1: packed, busy nodes, where a pod gets no CPU beyond its request)")
	fs.IntVar(&o.SeriesApp, "series-app", o.SeriesApp, "index of the evaluated app whose time series is plotted")
	fs.StringVar(&o.SeriesTrace, "series-trace", o.SeriesTrace, "trace kind of the plotted time series (default flash-crowd if among --traces, else the first of them)")
	fs.BoolVar(&o.noProgress, "no-progress", o.noProgress, "do not draw the progress bar on stderr")
	o.config.AddFlags(fs)
}

// Validate rejects flag combinations that cannot run.
func (o *evalOptions) Validate() error {
	o.Progress = !o.noProgress
	var errs []error
	if len(o.checkpoints) == 0 {
		errs = append(errs, errors.New("--checkpoint is required"))
	} else {
		o.Agent = &demo.AgentOptions{Checkpoints: o.checkpoints}
		o.Agent.Quorums = o.Agent.SingleAgentQuorums(o.quorums)
	}
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ensembleQuorumHelp documents --ensemble-quorum of demo and eval.
const ensembleQuorumHelp = "with several agents, also judge them as one ensemble that deviates from the fused default in a dimension only as far as at least this many of them deviate the same way (0: all of them; with a majority, their median); repeat for several ensembles, or set it empty (--ensemble-quorum=) for none"

func newEvalCommand() *cobra.Command {
	o := newEvalOptions()
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Evaluate a trained agent against the defaults and the oracle on the simulator",
		Long: `eval loads a policy trained by rl-agent train and evaluates it, greedy and
with the safeguard on, as the row "aware" beside HPA alone, VPA alone, naive
HPA+VPA, the fused default and the oracle, on held-out generated apps (never
trained on) under every trace kind. It prints the comparison table and writes
report.json, a cost vs SLO-violation scatter and one app's time series (SVG)
to a folder it names.`,
		Args: cobra.NoArgs,
		RunE: o.config.wrapRunE(func(cmd *cobra.Command) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return demo.Run(cmd.Context(), o.Options, cmd.OutOrStdout(), cmd.ErrOrStderr())
		}),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
