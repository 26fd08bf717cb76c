package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// TLSConfig returns the server TLS configuration: TLS 1.2 or later, with
// the certificate from getCert on every handshake so a renewed certificate
// is used without a restart.
func TLSConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert}
}

// Serve serves h over TLS on ln until ctx ends, then drains in-flight
// requests for up to grace. The timeouts bound what a slow or malicious
// client can hold: the API server sends one small request per connection
// at a time and keeps connections alive between them.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, cfg *tls.Config, grace time.Duration) error {
	logger := klog.FromContext(ctx).WithValues("address", ln.Addr().String())
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// TLS handshake errors from probes and scanners are noise at the
		// default level; keep them for -v=4.
		ErrorLog: log.New(klogWriter{logger}, "", 0),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	logger.Info("Serving admission webhook over TLS")
	select {
	case err := <-errc:
		return fmt.Errorf("serve webhook on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown of webhook on %s: %w", ln.Addr(), err)
	}
	logger.Info("Stopped serving admission webhook")
	return nil
}

type klogWriter struct{ logger klog.Logger }

func (w klogWriter) Write(p []byte) (int, error) {
	w.logger.V(4).Info("HTTP server", "msg", string(p))
	return len(p), nil
}

// Mux routes path to the handler, wrapped so panics answer "allowed".
func Mux(path string, h http.Handler, m *Metrics) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(path, Recover(h, m))
	return mux
}
