// Package app wires the rl-agent binary: the root cobra command and its
// subcommands serve, train, eval and demo.
package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aware-k8s/aware/pkg/cli"
)

// NewCommand returns the rl-agent root command.
func NewCommand() *cobra.Command {
	logging := cli.NewLogging()
	cmd := &cobra.Command{
		Use:   "rl-agent",
		Short: "AWARE reinforcement-learning agent and simulator",
		Long: `rl-agent serves the AWARE learning agent over gRPC to the recommender, and
trains, evaluates and demonstrates policies on the built-in workload
simulator, without a cluster.

Start with the demo: it compares the default autoscaling policies and the
oracle on generated applications and writes plots.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cli.Prepare(cmd)
	logging.Install(cmd)
	cmd.AddCommand(
		newDemoCommand(),
		newServeCommand(),
		notImplemented("train", "Train a policy on the simulator"),
		notImplemented("eval", "Evaluate a trained policy on the simulator"),
	)
	return cmd
}

// notImplemented is a subcommand whose issue (4) has not landed: it fails
// plainly instead of pretending to work.
func notImplemented(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short + " (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("rl-agent %s: %w (tracked in issue 4)", use, cli.ErrNotImplemented)
		},
	}
}
