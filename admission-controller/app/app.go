// Package app wires the admission-controller binary: its cobra command, options and
// run loop.
package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aware-k8s/aware/pkg/cli"
)

// NewCommand returns the admission-controller root command.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	logging := cli.NewLogging()
	cmd := &cobra.Command{
		Use:   "admission-controller",
		Short: "Mutating webhook that sets pod resources at creation",
		Long: `The admission controller is a mutating webhook on pod CREATE: it sets each
container's requests and limits from the matching MultidimPodAutoscaler's
recommendation, within its resource policy. It fails open.`,
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
	return fmt.Errorf("admission-controller: %w (tracked in issue 7)", cli.ErrNotImplemented)
}
