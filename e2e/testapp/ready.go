package testapp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// Replicas in the host's network share one port, so a kubelet's HTTP
// probe of that port reaches whichever replica the kernel picks, not the
// pod it probes: a new replica was marked Ready by its elders' /readyz,
// and served work before its own start-up delay had passed. With
// --ready-file a replica says it is ready by a file only its own
// container sees (an emptyDir), which an exec probe (`testapp probe`)
// reads; with --listen-when-ready it opens the shared port only once
// ready, as a Service sends a pod traffic only once it is Ready.

// readyFile is a replica's readiness as a file: present from mark until
// unmark, never again after unmark. Safe for concurrent use.
type readyFile struct {
	mu      sync.Mutex
	path    string
	unready bool
}

// newReadyFile removes a file a previous run of the container left (an
// emptyDir outlives a container's restart), so that the new run is not
// ready before it says so.
func newReadyFile(path string) (*readyFile, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ready file: %w", err)
	}
	return &readyFile{path: path}, nil
}

// mark writes the file, unless unmark came first.
func (r *readyFile) mark() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unready {
		return nil
	}
	if err := os.WriteFile(r.path, []byte("ready\n"), 0o644); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// unmark removes the file for good.
func (r *readyFile) unmark() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unready = true
	if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// ReadyIn is how long until the start-up delay has passed (0 once it has).
func (s *Server) ReadyIn() time.Duration {
	return max(0, s.cfg.StartupDelay-s.clock.Since(s.started))
}

// waitReady waits out the server's start-up delay; false if ctx ended first.
func waitReady(ctx context.Context, s *Server) bool {
	t := time.NewTimer(s.ReadyIn())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// NewProbeCommand is `testapp probe`: it exits 0 when the replica's
// --ready-file exists, and 1 with the reason otherwise; an exec readiness
// probe runs it in the replica's container.
func NewProbeCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Exit 0 when this replica is ready (its --ready-file exists), for an exec readiness probe",
		Args:  cobra.NoArgs,
		// It logs nothing: the app's logging set-up, a persistent pre-run
		// of the root command, is not applied.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(*cobra.Command, []string) error {
			if path == "" {
				return errors.New("--ready-file is required")
			}
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "ready-file", "", "the file the replica's --ready-file names")
	cmd.SilenceUsage = true
	return cmd
}
