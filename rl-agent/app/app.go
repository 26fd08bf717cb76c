// Package app wires the rl-agent binary: the root cobra command and its
// subcommands serve, train, eval, evidence, demo and whatif-replay.
package app

import (
	"github.com/spf13/cobra"

	"github.com/aware-k8s/aware/pkg/kube/cli"
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
oracle on generated applications and writes plots. The simulator's
subcommands (train, eval, demo, evidence) also read their options from a
YAML experiment file (--config; --print-config writes one to start from).`,
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
		newTrainCommand(),
		newEvalCommand(),
		newEvidenceCommand(),
		newWhatifReplayCommand(),
	)
	return cmd
}
