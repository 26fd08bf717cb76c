// Package app wires the recommender binary: its cobra command, options and
// run loop.
package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aware-k8s/aware/pkg/cli"
)

// NewCommand returns the recommender root command.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	logging := cli.NewLogging()
	cmd := &cobra.Command{
		Use:   "recommender",
		Short: "Computes MultidimPodAutoscaler recommendations",
		Long: `The recommender watches MultidimPodAutoscaler objects, reads usage and
latency metrics, computes the fused HPA+VPA default recommendation, asks the
RL agent when spec.rl enables it, and writes the result into each object's
status.`,
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
	return fmt.Errorf("recommender: %w (tracked in issue 5)", cli.ErrNotImplemented)
}
