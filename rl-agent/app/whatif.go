package app

// whatif-replay adds trained agents to a what-if replay. The what-if
// itself is `recommender whatif`, which reads the cluster's Prometheus; the
// recommender does not link Gorgonia (the neural networks), and must not
// for an agent row, so the agents are replayed here, from the history the
// recommender wrote into whatif.json.

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/lab/demo"
	"github.com/aware-k8s/aware/pkg/lab/progress"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

type whatifReplayOptions struct {
	from        string
	checkpoints []string
	quorums     []int
	out         string
	workers     int
	noProgress  bool
}

func newWhatifReplayOptions() *whatifReplayOptions {
	return &whatifReplayOptions{quorums: demo.DefaultQuorums(), out: "aware-whatif-agent"}
}

// AddFlags registers the flags on fs.
func (o *whatifReplayOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.from, "from", o.from, "whatif.json written by `recommender whatif` (required): its history, fit options, policies and seeds are replayed again")
	fs.StringSliceVar(&o.checkpoints, "checkpoint", o.checkpoints, "trained policy to replay beside the defaults, as written by rl-agent train (required); repeat (or separate with commas) for several, each a row")
	fs.IntSliceVar(&o.quorums, "ensemble-quorum", o.quorums, ensembleQuorumHelp)
	fs.StringVar(&o.out, "out", o.out, "folder receiving whatif.json and the plots of this replay (not --from's folder: the recommender's files stay as they were)")
	fs.IntVar(&o.workers, "workers", o.workers, "parallel simulations (0 = GOMAXPROCS)")
	fs.BoolVar(&o.noProgress, "no-progress", o.noProgress, "do not draw the progress bar on stderr")
}

// Validate rejects flag combinations that cannot run.
func (o *whatifReplayOptions) Validate() error {
	var errs []error
	if o.from == "" {
		errs = append(errs, errors.New("--from is required"))
	}
	if len(o.checkpoints) == 0 {
		errs = append(errs, errors.New("--checkpoint is required"))
	}
	a := demo.AgentOptions{Checkpoints: o.checkpoints}
	o.quorums = a.SingleAgentQuorums(o.quorums)
	for _, q := range o.quorums {
		if len(o.checkpoints) < 2 {
			errs = append(errs, fmt.Errorf("an ensemble needs at least 2 agents, got %d", len(o.checkpoints)))
			break
		}
		if q < 0 || q > len(o.checkpoints) {
			errs = append(errs, fmt.Errorf("ensemble quorum must be in [0, %d] (0: all agents), got %d", len(o.checkpoints), q))
		}
	}
	if o.out == "" {
		errs = append(errs, errors.New("--out must name a folder"))
	}
	if o.workers < 0 {
		errs = append(errs, fmt.Errorf("--workers %d must not be negative", o.workers))
	}
	return errors.Join(errs...)
}

func newWhatifReplayCommand() *cobra.Command {
	o := newWhatifReplayOptions()
	cmd := &cobra.Command{
		Use:   "whatif-replay",
		Short: "Replay trained agents on the history of a `recommender whatif` run",
		Long: `whatif-replay reads the whatif.json that "recommender whatif" wrote, fits
each workload again from its recorded history (the same fit), and replays
what actually ran, the recommender's policies and the trained agents of
--checkpoint (and, with several, their ensembles) on the recorded request
rate, with the same seeds. It prints the what-if's report with the agents'
rows and writes whatif.json and one plot per workload to --out. See
docs/whatif.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return runWhatifReplay(cmd, o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runWhatifReplay(cmd *cobra.Command, o *whatifReplayOptions) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	f, err := os.Open(o.from)
	if err != nil {
		return err
	}
	prev, err := whatif.ReadResult(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", o.from, err)
	}
	ws, err := prev.Refit()
	if err != nil {
		return fmt.Errorf("%s: %w", o.from, err)
	}
	agents, err := demo.CheckpointContenders(o.checkpoints, o.quorums, stdout)
	if err != nil {
		return err
	}
	for _, a := range agents {
		if slices.Contains(prev.Policies, a.Name) {
			return fmt.Errorf("agent %q has the name of a replayed policy", a.Name)
		}
	}
	ro := whatif.ReplayOptions{
		Seeds: prev.Seeds, Seed: prev.Seed, Policies: prev.Policies, Extra: agents, Plot: true, Workers: o.workers,
		Config: prev.Cluster(), InstallAfter: prev.InstallAfter,
	}
	if !o.noProgress {
		ro.Progress = progress.NewBar(stderr)
	}
	res, err := whatif.Replay(cmd.Context(), ws, ro)
	if res != nil {
		res.FitOptions = prev.FitOptions
		if werr := res.WriteText(stdout); werr != nil {
			return werr
		}
	}
	if err != nil {
		return err
	}
	files, err := res.WriteFiles(o.out)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	for _, f := range files {
		fmt.Fprintf(stdout, "Wrote %s\n", f)
	}
	return nil
}
