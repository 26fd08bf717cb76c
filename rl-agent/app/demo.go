package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/lab/demo"
)

// demoOptions are the flags of `rl-agent demo`.
type demoOptions struct {
	demo.Options
	noProgress bool
	// agent is where the agent comes from; noAgent leaves it out.
	agent   demo.AgentOptions
	noAgent bool
	// writeAgents, when set, trains the agents into this folder (as
	// `make agents` ships them) instead of running the demo.
	writeAgents string
	// shippedAgents, when set, is a folder --write-agents wrote, used
	// instead of the agents shipped with the demo.
	shippedAgents string
	config        experimentConfig
}

// demoSpec is the spec of a Demo experiment file: demo.Options' fields,
// and the agents' section (whose train section is train.Options').
type demoSpec struct {
	*demo.Options
	Agent   *demo.AgentOptions `json:"agent"`
	NoAgent *bool              `json:"noAgent"`
}

func newDemoOptions() *demoOptions {
	o := &demoOptions{Options: demo.DefaultOptions()}
	o.agent = *o.Agent
	o.config = experimentConfig{kind: kindDemo, spec: &demoSpec{Options: &o.Options, Agent: &o.agent, NoAgent: &o.noAgent}}
	return o
}

// AddFlags registers the demo flags on fs.
func (o *demoOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Apps, "apps", o.Apps, "number of held-out generated apps to evaluate")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for apps, traces and arrivals; equal seeds give identical results")
	fs.IntVar(&o.Steps, "steps", o.Steps, "windows simulated per app")
	fs.DurationVar(&o.Step, "step", o.Step, "window length (the policies' decision interval)")
	fs.StringSliceVar(&o.Traces, "traces", o.Traces, "trace kinds; every app runs under each (may be empty, --traces=, with --azure-csv or --trace-csv)")
	fs.StringSliceVar(&o.Policies, "policies", o.Policies, "policies to compare, in table order: hpa, vpa, hpa+vpa, fused, oracle, fused-paper (the fused default through the paper's one-step actions), oracle-residual (the fused default steered within the residual action space towards the oracle's allocation: what that space allows a policy that knew the future), residual:SPEC (the fused default with a constant residual, e.g. residual:replicas=+1/memory=x0.85), fused:SPEC (a variant of the fused default, SPEC as the recommender's --default-variant reads it: "+fusion.VariantHelp+"), oracle-requests (the oracle planning every pod within its requests), qlearn (tabular Q-learning of the HPA's target, learning on each run from Knative's default 70%), qlearn:no-learning (qlearn's replica rule at 70%, learning nothing), hpa:target=T (the HPA alone at target T), hpa:best-target (the HPA alone at the fixed target with the best reward on each run, known with hindsight), or faasrm (FaaSRM's harvesting rule against fixed allocation over --apps functions × 3 seeds packed on full nodes: its own table, docs/serverless.md)")
	addAzureFlags(fs, &o.Azure, &o.AzureRate, "each evaluated app also runs under one of its functions")
	addSeriesFlags(fs, &o.Series, "each evaluated app also runs under it")
	fs.StringVar(&o.OutDir, "out", o.OutDir, "folder for report.json and the plots (default a fresh ./aware-demo-<seed>)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "parallel simulations (0 = GOMAXPROCS)")
	fs.StringVar(&o.Resize, "resize", o.Resize, "how vertical changes reach pods: Restart or InPlace")
	fs.DurationVar(&o.FaaSRMTimeout, "faasrm-timeout", o.FaaSRMTimeout, "with --policies faasrm: an invocation not completed this long after its arrival times out (0: never)")
	fs.Float64Var(&o.Tenants, "tenants", o.Tenants, "fraction of each node's CPU beyond the app's requests on it that other workloads request and use, in [0, 1] (0: the app runs alone; 1: packed, busy nodes, where a pod gets no CPU beyond its request)")
	fs.Float64Var(&o.StartupBoost.Factor, "startup-boost", o.StartupBoost.Factor, "give every evaluated app a CPU start-up boost of this factor (startupBoost.cpu.factor: new pods request this many times their CPU until Ready); 0: none")
	fs.Float64Var(&o.StartupBoost.CPUShare, "startup-cpu-share", o.StartupBoost.CPUShare, "share, in [0, 1], of each evaluated app's start-up delay that is CPU-bound and shrinks with --startup-boost (0: the boost only costs)")
	fs.IntVar(&o.SeriesApp, "series-app", o.SeriesApp, "index of the evaluated app whose time series is plotted")
	fs.StringVar(&o.SeriesTrace, "series-trace", o.SeriesTrace, "trace kind of the plotted time series (default flash-crowd if among --traces, else the first of them)")
	fs.BoolVar(&o.noProgress, "no-progress", o.noProgress, "do not draw the progress bar on stderr")
	fs.BoolVar(&o.noAgent, "no-agent", o.noAgent, "leave the trained agent out of the comparison")
	fs.StringSliceVar(&o.agent.Checkpoints, "agent-checkpoint", o.agent.Checkpoints, "load the agent from this checkpoint (rl-agent train) instead of training it; repeat for several agents, judged one by one and pooled")
	fs.BoolVar(&o.agent.Fresh, "train", o.agent.Fresh, "train the agents afresh even when the demo ships agents trained with the same options (make agents); without it those are loaded and only agents of other options are trained")
	fs.StringVar(&o.writeAgents, "write-agents", o.writeAgents, "train the agents as the demo would and write their checkpoints and "+demo.ManifestFile+" to this folder, replacing it, instead of running the demo (make agents writes "+demo.ShippedDir+" so)")
	fs.StringVar(&o.shippedAgents, "shipped-agents", o.shippedAgents, "take the agents from this folder, written by --write-agents, instead of those shipped with the demo (each only where its options match, as those)")
	fs.IntVar(&o.agent.Seeds, "agent-seeds", o.agent.Seeds, "train this many agents, with training seeds --seed, --seed+1, ..., judged one by one and pooled (the comparison then spans the training seed)")
	fs.IntSliceVar(&o.agent.Quorums, "ensemble-quorum", o.agent.Quorums, ensembleQuorumHelp)
	addTrainingFlags(fs, &o.agent.Train, "train-")
	addValidationFlags(fs, &o.agent.Validation, "train-")
	o.config.AddFlags(fs)
}

// Validate rejects flag combinations that cannot run.
func (o *demoOptions) Validate() error {
	o.Progress = !o.noProgress
	o.Agent = nil
	if o.writeAgents != "" && o.noAgent {
		return fmt.Errorf("--write-agents trains the agents, which --no-agent leaves out")
	}
	o.agent.Shipped = nil
	if o.shippedAgents != "" {
		o.agent.Shipped = os.DirFS(o.shippedAgents)
	}
	if !o.noAgent {
		o.agent.Quorums = o.agent.SingleAgentQuorums(o.agent.Quorums)
		o.Agent = &o.agent
	}
	return o.Options.Validate()
}

func newDemoCommand() *cobra.Command {
	o := newDemoOptions()
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Compare the trained agents with the default policies and the oracle on the built-in simulator",
		Long: `demo takes three small AWARE agents trained on generated training apps,
with training seeds --seed, --seed+1 and --seed+2 (--agent-seeds): those
shipped with the demo (make agents trained them as the demo would) when
the options match, or trains them (--train: always; --agent-checkpoint
loads others), then evaluates HPA alone, VPA alone, naive
HPA+VPA, the fused default, the oracle (the cheapest allocation that meets
each SLO, knowing the future load), each agent ("aware-1", ...) and the
agents as one ensemble that deviates from the default only as far as all
of them agree ("aware (3 of 3 agree)"; --ensemble-quorum), on held-out
generated apps, which the agents never trained on, under steady, diurnal,
bursty, ramp, flash-crowd and step-change load. It prints a comparison
table and every policy's paired difference from the fused default with
95% confidence intervals, the agents' also pooled, and writes
report.json, a cost vs SLO-violation scatter, one app's time series, the
agents' checkpoints and the reward curves of those it trained to a folder
it names. The training flags (--train-*) are rl-agent train's; training
options other than the shipped agents' train them afresh.`,
		Args: cobra.NoArgs,
		RunE: o.config.wrapRunE(func(cmd *cobra.Command) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			if o.writeAgents != "" {
				return demo.WriteAgents(cmd.Context(), o.Options, o.writeAgents, "make agents", cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return demo.Run(cmd.Context(), o.Options, cmd.OutOrStdout(), cmd.ErrOrStderr())
		}),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
