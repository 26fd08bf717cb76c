// Package serve runs a component's operational HTTP endpoints: Prometheus
// metrics from an injected registry, /healthz (the process is alive) and
// /readyz (it can do its job, e.g. caches synced, leadership acquired or
// standing by). It shuts down gracefully when the context ends.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Check reports nil when healthy, or why not.
type Check func() error

// Endpoints holds the checks and the registry behind the HTTP handlers.
type Endpoints struct {
	mu        sync.RWMutex
	readiness map[string]Check
	liveness  map[string]Check
	gatherer  prometheus.Gatherer
}

// New returns endpoints serving metrics from g.
func New(g prometheus.Gatherer) *Endpoints {
	return &Endpoints{readiness: map[string]Check{}, liveness: map[string]Check{}, gatherer: g}
}

// AddReadyCheck registers a readiness check under name.
func (e *Endpoints) AddReadyCheck(name string, c Check) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.readiness[name] = c
}

// AddHealthCheck registers a liveness check under name.
func (e *Endpoints) AddHealthCheck(name string, c Check) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.liveness[name] = c
}

// Handler returns a mux with /metrics, /healthz and /readyz.
func (e *Endpoints) Handler() http.Handler { return e.mux(false) }

// ProfilingHandler is Handler with Go's runtime profiles under
// /debug/pprof/ (net/http/pprof), for the metrics address of a component
// run with --profiling: a CPU profile of the running process is how to
// find what a loop costs outside its own code (decoding, watches, TLS, GC).
func (e *Endpoints) ProfilingHandler() http.Handler { return e.mux(true) }

func (e *Endpoints) mux(profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", e.checkHandler(func() map[string]Check { return e.liveness }))
	mux.HandleFunc("/readyz", e.checkHandler(func() map[string]Check { return e.readiness }))
	if profiling {
		// pprof.Index serves every named profile (heap, goroutine, ...)
		// under the prefix; the others need their own routes.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (e *Endpoints) checkHandler(checks func() map[string]Check) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		e.mu.RLock()
		var failed []error
		for name, c := range checks() {
			if err := c(); err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", name, err))
			}
		}
		e.mu.RUnlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := errors.Join(failed...); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}

// Run serves h on addr until ctx ends, then drains connections for up to
// grace. It returns once the listener is closed; a listen error is returned
// at once. Use Listen+Serve when the caller needs the bound address.
func Run(ctx context.Context, addr string, h http.Handler, grace time.Duration) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, h, grace)
}

// Listen opens a TCP listener on addr.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	logger := klog.FromContext(ctx).WithValues("address", ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("Serving HTTP")
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown of %s: %w", ln.Addr(), err)
	}
	logger.Info("Stopped serving HTTP")
	return nil
}

// NewRegistry returns a registry with the Go runtime and process
// collectors, the base every component registers its own metrics on.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
