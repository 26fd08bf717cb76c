package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

// Serve serves g on lis until ctx ends, then shuts down in the order that
// loses nothing: s drains (health NOT_SERVING, new calls Unavailable), g
// stops gracefully, or forcibly once grace has passed, and finally s
// closes, which persists its state. It returns the first error.
func Serve(ctx context.Context, g *grpc.Server, lis net.Listener, s *Server, grace time.Duration) error {
	logger := klog.FromContext(ctx).WithValues("address", lis.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	logger.Info("Serving gRPC")
	var serveErr error
	select {
	case err := <-errc:
		// The listener failed; still close s so its state is saved.
		serveErr = fmt.Errorf("serve gRPC on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	s.Drain()
	if serveErr == nil {
		if !GracefulStop(g, grace) {
			logger.Info("Graceful stop timed out; closed remaining connections", "grace", grace)
		}
		if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			serveErr = err
		}
	}
	closeErr := s.Close()
	logger.Info("Stopped serving gRPC")
	return errors.Join(serveErr, closeErr)
}

// GracefulStop stops g gracefully and forcibly after grace; it reports
// whether the graceful stop completed in time.
func GracefulStop(g *grpc.Server, grace time.Duration) bool {
	done := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		g.Stop()
		<-done
		return false
	}
}
