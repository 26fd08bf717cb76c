package testapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Config is what every request costs and how the app starts.
type Config struct {
	// CPU is the CPU time each request burns (thread CPU time).
	CPU time.Duration
	// MemoryPerRequest is held by each request while it is in flight.
	MemoryPerRequest int64
	// BaseMemory is held from start to exit.
	BaseMemory int64
	// StartupDelay is how long after New /readyz stays unready.
	StartupDelay time.Duration
	// MaxCPU, MaxMemory and MaxSleep bound the per-request overrides
	// (?cpu=, ?mem=, ?sleep=), so one query cannot hog the app.
	MaxCPU    time.Duration
	MaxMemory int64
	MaxSleep  time.Duration
	// MaxRequestsPerConn closes a connection after this many requests
	// (0: never), so clients reconnect and reach new replicas.
	MaxRequestsPerConn int64
}

// Validate reports every bad field at once.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"cpu", int64(c.CPU)}, {"memory-per-request", c.MemoryPerRequest}, {"base-memory", c.BaseMemory},
		{"startup-delay", int64(c.StartupDelay)}, {"max-cpu", int64(c.MaxCPU)}, {"max-memory", c.MaxMemory},
		{"max-sleep", int64(c.MaxSleep)}, {"max-requests-per-connection", c.MaxRequestsPerConn},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("--%s must be >= 0", f.name))
		}
	}
	if c.CPU > c.MaxCPU {
		errs = append(errs, fmt.Errorf("--cpu %s is above --max-cpu %s", c.CPU, c.MaxCPU))
	}
	if c.MemoryPerRequest > c.MaxMemory {
		errs = append(errs, fmt.Errorf("--memory-per-request %d is above --max-memory %d", c.MemoryPerRequest, c.MaxMemory))
	}
	return errors.Join(errs...)
}

// Server is the app: its handler, readiness and metrics. Its methods are
// safe for concurrent use.
type Server struct {
	cfg      Config
	clock    clock.PassiveClock
	started  time.Time
	base     *Held
	draining atomic.Bool
	m        *metrics
}

// New allocates the base memory, starts the start-up delay on clk, and
// registers the metrics on reg.
func New(cfg Config, clk clock.PassiveClock, reg prometheus.Registerer) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	base, err := Hold(cfg.BaseMemory)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, clock: clk, started: clk.Now(), base: base, m: m}
	m.held.Set(float64(cfg.BaseMemory))
	return s, nil
}

// Ready reports whether the start-up delay has passed and the app is not
// shutting down.
func (s *Server) Ready() bool {
	return !s.draining.Load() && s.clock.Since(s.started) >= s.cfg.StartupDelay
}

// Drain makes /readyz fail from now on, for a graceful shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

// Handler serves the work on / and the probes on /healthz and /readyz;
// any other path is not found.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	// The work is on / alone, so a stray path (a scrape of /metrics on the
	// wrong port) is a 404, not a burn.
	mux.HandleFunc("/{$}", s.serveWork)
	return s.closeAfter(mux)
}

// connRequests is the ConnContext key of a connection's request counter.
type connRequests struct{}

// ConnContext gives each connection a request counter; set it as the
// http.Server's ConnContext for MaxRequestsPerConn to take effect.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connRequests{}, new(atomic.Int64))
}

// closeAfter asks the server to close the connection after its
// MaxRequestsPerConn-th request, by the Connection: close header.
func (s *Server) closeAfter(h http.Handler) http.Handler {
	if s.cfg.MaxRequestsPerConn <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := r.Context().Value(connRequests{}).(*atomic.Int64); ok && n.Add(1) >= s.cfg.MaxRequestsPerConn {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// Work is what one request asks for: the configuration's, or the query's
// overrides (?cpu=50ms&mem=4Mi&sleep=10ms).
type Work struct {
	CPU    time.Duration
	Memory int64
	Sleep  time.Duration
}

// ParseWork reads the overrides of query q over the configuration.
func (s *Server) ParseWork(q map[string][]string) (Work, error) {
	w := Work{CPU: s.cfg.CPU, Memory: s.cfg.MemoryPerRequest}
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	var errs []error
	dur := func(name string, max time.Duration, dst *time.Duration) {
		v := get(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		case d < 0 || d > max:
			errs = append(errs, fmt.Errorf("%s=%s: must be in [0, %s]", name, d, max))
		default:
			*dst = d
		}
	}
	dur("cpu", s.cfg.MaxCPU, &w.CPU)
	dur("sleep", s.cfg.MaxSleep, &w.Sleep)
	if v := get("mem"); v != "" {
		n, err := ParseBytes(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("mem=%q: %w", v, err))
		case n > s.cfg.MaxMemory:
			errs = append(errs, fmt.Errorf("mem=%s: above the maximum of %d bytes", v, s.cfg.MaxMemory))
		default:
			w.Memory = n
		}
	}
	return w, errors.Join(errs...)
}

// ParseBytes reads a byte count as a Kubernetes quantity (64Mi, 1G, 4096).
func ParseBytes(v string) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, err
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0, fmt.Errorf("%s is not a byte count in [0, 2^63)", v)
	}
	return n, nil
}

// Result is the body of a work response.
type Result struct {
	CPUSeconds  float64 `json:"cpuSeconds"`
	WallSeconds float64 `json:"wallSeconds"`
	MemoryBytes int64   `json:"memoryBytes"`
}

func (s *Server) serveWork(w http.ResponseWriter, r *http.Request) {
	// Latency is measured on the real clock: s.clock drives readiness only.
	start := time.Now()
	code := http.StatusOK
	s.m.inFlight.Inc()
	defer func() {
		s.m.inFlight.Dec()
		s.m.requests.WithLabelValues(strconv.Itoa(code)).Inc()
		if code >= 500 {
			s.m.failed.Inc()
		}
		s.m.duration.Observe(time.Since(start).Seconds())
	}()
	work, err := s.ParseWork(r.URL.Query())
	if err != nil {
		code = http.StatusBadRequest
		http.Error(w, err.Error(), code)
		return
	}
	res, err := s.Do(r.Context(), work)
	if err != nil {
		code = http.StatusInternalServerError
		klog.ErrorS(err, "Request failed")
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// Do performs one request's work: it holds work.Memory, burns work.CPU,
// sleeps work.Sleep (or until ctx ends), then releases the memory.
func (s *Server) Do(ctx context.Context, work Work) (Result, error) {
	buf, err := Hold(work.Memory)
	if err != nil {
		return Result{}, err
	}
	// The gauge counts the memory once it is resident, not when the request
	// arrives: under a tight CPU limit a request can be counted in flight
	// for seconds before it has mapped and touched its memory
	// (hack/memlag.sh; docs/real-node.md, "The app").
	s.m.held.Add(float64(work.Memory))
	defer func() {
		s.m.held.Sub(float64(work.Memory))
		buf.Release()
	}()
	used, wall, err := Burn(work.CPU)
	s.m.cpu.Add(used.Seconds())
	if err != nil {
		return Result{}, err
	}
	if work.Sleep > 0 {
		t := time.NewTimer(work.Sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return Result{CPUSeconds: used.Seconds(), WallSeconds: wall.Seconds(), MemoryBytes: work.Memory}, nil
}

// HeldBytes is the memory the app holds now: the base plus that of the
// requests in flight.
func (s *Server) HeldBytes() float64 { return gaugeValue(s.m.held) }

// InFlight is the number of requests in flight.
func (s *Server) InFlight() float64 { return gaugeValue(s.m.inFlight) }

// Close releases the base memory.
func (s *Server) Close() {
	s.base.Release()
	s.m.held.Sub(float64(s.cfg.BaseMemory))
}
