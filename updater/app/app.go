// Package app wires the updater binary: its cobra command, options and
// run loop.
package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aware-k8s/aware/pkg/cli"
)

// NewCommand returns the updater root command.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	logging := cli.NewLogging()
	cmd := &cobra.Command{
		Use:   "updater",
		Short: "Applies MultidimPodAutoscaler recommendations to running workloads",
		Long: `The updater applies horizontal changes through the target's scale
subresource and vertical changes by in-place resize or eviction, within the
constraints, rate limits and disruption budgets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			return run(cmd.Context(), opts)
		},
	}
	cli.Prepare(cmd)
	opts.AddFlags(cmd.Flags())
	logging.Install(cmd)
	return cmd
}

func run(_ context.Context, _ *Options) error {
	return fmt.Errorf("updater: %w (tracked in issue 6)", cli.ErrNotImplemented)
}
