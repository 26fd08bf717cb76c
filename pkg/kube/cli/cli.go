// Package cli runs a component's cobra command the same way for every AWARE
// binary: Kubernetes-style logging flags (text or JSON, -v, --vmodule), a
// --version flag, and a context cancelled on SIGINT or SIGTERM so the
// component shuts down gracefully. A second signal exits at once.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // enables --logging-format=json
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/version"
)

// Logging holds the logging flags shared by every binary.
type Logging struct {
	config *logsapi.LoggingConfiguration
}

// NewLogging returns logging options with Kubernetes defaults.
func NewLogging() *Logging {
	return &Logging{config: logsapi.NewLoggingConfiguration()}
}

// Install adds the logging flags to cmd's persistent flags and applies them
// before the command (or any subcommand) runs.
func (l *Logging) Install(cmd *cobra.Command) {
	logsapi.AddFlags(l.config, cmd.PersistentFlags())
	prev := cmd.PersistentPreRunE
	cmd.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if err := logsapi.ValidateAndApply(l.config, nil); err != nil {
			return fmt.Errorf("invalid logging flags: %w", err)
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}

// Prepare sets the behaviour every root command shares: --version, errors
// printed once by Run rather than by cobra, and usage shown only for flag
// errors.
func Prepare(cmd *cobra.Command) {
	cmd.Version = version.String()
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		c.PrintErrln(c.UsageString())
		return err
	})
}

// Run executes cmd with a signal-aware context and returns the process exit
// code: 0 on success, 1 on error. Only main calls os.Exit with it.
func Run(cmd *cobra.Command) int {
	return RunWithArgs(cmd, os.Args[1:], os.Stderr)
}

// RunWithArgs is Run with explicit arguments and error output, for tests.
func RunWithArgs(cmd *cobra.Command, args []string, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal cancels ctx, restore default handling so a
		// second signal kills a process stuck in shutdown.
		<-ctx.Done()
		stop()
	}()
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	klog.Flush()
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}
