package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/demo"
)

// demoOptions are the flags of `rl-agent demo`.
type demoOptions struct {
	demo.Options
	noProgress bool
}

func newDemoOptions() *demoOptions {
	return &demoOptions{Options: demo.DefaultOptions()}
}

// AddFlags registers the demo flags on fs.
func (o *demoOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Apps, "apps", o.Apps, "number of held-out generated apps to evaluate")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for apps, traces and arrivals; equal seeds give identical results")
	fs.IntVar(&o.Steps, "steps", o.Steps, "windows simulated per app")
	fs.DurationVar(&o.Step, "step", o.Step, "window length (the policies' decision interval)")
	fs.StringSliceVar(&o.Traces, "traces", o.Traces, "trace kinds; every app runs under each")
	fs.StringSliceVar(&o.Policies, "policies", o.Policies, "policies to compare, in table order")
	fs.StringVar(&o.AzureCSV, "azure-csv", o.AzureCSV, "Azure Functions 2019 invocations file; each app also runs under one of its functions")
	fs.StringVar(&o.OutDir, "out", o.OutDir, "folder for report.json and the plots (default a fresh ./aware-demo-<seed>)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "parallel simulations (0 = GOMAXPROCS)")
	fs.StringVar(&o.Resize, "resize", o.Resize, "how vertical changes reach pods: Restart or InPlace")
	fs.IntVar(&o.SeriesApp, "series-app", o.SeriesApp, "index of the evaluated app whose time series is plotted")
	fs.StringVar(&o.SeriesTrace, "series-trace", o.SeriesTrace, "trace kind of the plotted time series")
	fs.BoolVar(&o.noProgress, "no-progress", o.noProgress, "do not draw the progress bar on stderr")
}

// Validate rejects flag combinations that cannot run.
func (o *demoOptions) Validate() error {
	o.Progress = !o.noProgress
	return o.Options.Validate()
}

func newDemoCommand() *cobra.Command {
	o := newDemoOptions()
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Compare the default policies and the oracle on the built-in simulator",
		Long: `demo evaluates HPA alone, VPA alone, naive HPA+VPA, the fused default and the
oracle (the cheapest allocation that meets each SLO, knowing the future load)
on held-out generated apps under steady, diurnal, bursty, ramp, flash-crowd
and step-change load. It prints a comparison table and writes report.json,
a cost vs SLO-violation scatter and one app's time series (SVG) to a folder
it names. With no flags it uses about 100 s of CPU: roughly a minute on two
idle cores.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return demo.Run(cmd.Context(), o.Options, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
