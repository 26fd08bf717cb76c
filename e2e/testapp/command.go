package testapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/aware-k8s/aware/pkg/kube/cli"
)

// Options are the command line of the testapp binary.
type Options struct {
	Address, MetricsAddress string
	ReusePort               bool
	CPU, StartupDelay       time.Duration
	Memory, BaseMemory      string
	MaxCPU, MaxSleep        time.Duration
	MaxMemory               string
	MaxRequestsPerConn      int64
	IdleTimeout             time.Duration
	ShutdownTimeout         time.Duration
	FileSD                  FileSD
	// ReadyFile and ListenWhenReady: ready.go.
	ReadyFile       string
	ListenWhenReady bool
}

// FileSD names this replica's Prometheus file_sd target: Dir/Pod.json,
// labelled namespace and pod.
type FileSD struct {
	Dir, Namespace, Pod string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Address: "127.0.0.1:8080", CPU: 20 * time.Millisecond, Memory: "1Mi", BaseMemory: "32Mi",
		MaxCPU: 10 * time.Second, MaxSleep: 10 * time.Second, MaxMemory: "512Mi",
		MaxRequestsPerConn: 100, IdleTimeout: 5 * time.Second, ShutdownTimeout: 30 * time.Second,
		FileSD: FileSD{Namespace: os.Getenv("POD_NAMESPACE"), Pod: os.Getenv("POD_NAME")},
	}
}

// AddFlags adds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "address", o.Address, "address to serve the work, /healthz and /readyz on (and /metrics when --metrics-address is empty)")
	fs.BoolVar(&o.ReusePort, "reuse-port", o.ReusePort, "open --address with SO_REUSEPORT, so replicas in the host network share one port")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "separate address for /metrics, e.g. 127.0.0.1:0 for a port of this replica's own (needed with --reuse-port)")
	fs.DurationVar(&o.CPU, "cpu", o.CPU, "thread CPU time each request burns (query override: ?cpu=50ms)")
	fs.StringVar(&o.Memory, "memory-per-request", o.Memory, "memory each request holds while in flight, a quantity (query override: ?mem=4Mi)")
	fs.StringVar(&o.BaseMemory, "base-memory", o.BaseMemory, "memory held from start to exit, a quantity")
	fs.DurationVar(&o.StartupDelay, "startup-delay", o.StartupDelay, "time after start before /readyz succeeds")
	fs.DurationVar(&o.MaxCPU, "max-cpu", o.MaxCPU, "largest ?cpu= a request may ask for")
	fs.DurationVar(&o.MaxSleep, "max-sleep", o.MaxSleep, "largest ?sleep= (wait after the burn) a request may ask for")
	fs.StringVar(&o.MaxMemory, "max-memory", o.MaxMemory, "largest ?mem= a request may ask for, a quantity")
	fs.Int64Var(&o.MaxRequestsPerConn, "max-requests-per-connection", o.MaxRequestsPerConn, "close a client connection after this many requests (0: never), so clients reach new replicas")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "close a keep-alive connection idle this long")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "on SIGTERM, how long to wait for requests in flight")
	fs.StringVar(&o.FileSD.Dir, "file-sd", o.FileSD.Dir, "directory to write this replica's Prometheus file_sd target (the --metrics-address, labels namespace and pod) into, removed on exit")
	fs.StringVar(&o.FileSD.Namespace, "namespace", o.FileSD.Namespace, "namespace label of the --file-sd target (default $POD_NAMESPACE)")
	fs.StringVar(&o.FileSD.Pod, "pod", o.FileSD.Pod, "pod label and file name of the --file-sd target (default $POD_NAME)")
	fs.StringVar(&o.ReadyFile, "ready-file", o.ReadyFile, "file to create once ready and remove when shutting down, for an exec readiness probe (`testapp probe`) that must reach this replica, not another on the shared port")
	fs.BoolVar(&o.ListenWhenReady, "listen-when-ready", o.ListenWhenReady, "open --address only once the start-up delay has passed, so that no work reaches a replica before it is ready (as a Service sends none to an unready pod)")
}

// Config converts and checks the options.
func (o *Options) Config() (Config, error) {
	var errs []error
	bytes := func(name, v string) int64 {
		n, err := ParseBytes(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", name, err))
		}
		return n
	}
	c := Config{
		CPU: o.CPU, StartupDelay: o.StartupDelay, MaxCPU: o.MaxCPU, MaxSleep: o.MaxSleep,
		MemoryPerRequest: bytes("memory-per-request", o.Memory), BaseMemory: bytes("base-memory", o.BaseMemory),
		MaxMemory: bytes("max-memory", o.MaxMemory), MaxRequestsPerConn: o.MaxRequestsPerConn,
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	return c, c.Validate()
}

// Validate checks the options.
func (o *Options) Validate() error {
	_, err := o.Config()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if o.Address == "" {
		errs = append(errs, errors.New("--address is empty"))
	}
	if o.IdleTimeout <= 0 || o.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--idle-timeout and --shutdown-timeout must be > 0"))
	}
	if o.FileSD.Dir != "" && (o.MetricsAddress == "" || o.FileSD.Pod == "") {
		errs = append(errs, errors.New("--file-sd needs --metrics-address and --pod (or $POD_NAME)"))
	}
	if o.FileSD.Pod != "" && (filepath.Base(o.FileSD.Pod) != o.FileSD.Pod || o.FileSD.Pod == "." || o.FileSD.Pod == "..") {
		errs = append(errs, fmt.Errorf("--pod %q must be a plain name (it names the --file-sd file)", o.FileSD.Pod))
	}
	return errors.Join(errs...)
}

// NewCommand is the testapp command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "testapp",
		Short: "An HTTP service that burns CPU time and holds memory per request, for scaling benchmarks",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	cli.Prepare(cmd)
	o.AddFlags(cmd.Flags())
	cli.NewLogging().Install(cmd)
	cmd.AddCommand(NewProbeCommand())
	return cmd
}

// Run serves until ctx ends, then shuts down gracefully: /readyz fails,
// the listeners close, and the requests in flight finish (up to
// ShutdownTimeout).
func (o *Options) Run(ctx context.Context) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	var rf *readyFile
	if o.ReadyFile != "" {
		if rf, err = newReadyFile(o.ReadyFile); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	app, err := New(cfg, clock.RealClock{}, reg)
	if err != nil {
		return err
	}
	defer app.Close()
	if o.ListenWhenReady && !waitReady(ctx, app) {
		return nil
	}
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	handler := app.Handler()
	if o.MetricsAddress == "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", metricsHandler)
		mux.Handle("/", handler)
		handler = mux
	}
	l, err := Listen(ctx, o.Address, o.ReusePort)
	if err != nil {
		return err
	}
	servers := []*Served{{Listener: l, Handler: handler}}
	if o.MetricsAddress != "" {
		ml, err := Listen(ctx, o.MetricsAddress, false)
		if err != nil {
			_ = l.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", metricsHandler)
		servers = append(servers, &Served{Listener: ml, Handler: mux})
		if o.FileSD.Dir != "" {
			path, err := writeFileSD(o.FileSD.Dir, o.FileSD.Pod, ml.Addr().String(), o.FileSD.Namespace)
			if err != nil {
				_ = l.Close()
				_ = ml.Close()
				return err
			}
			defer func() {
				if err := os.Remove(path); err != nil {
					klog.ErrorS(err, "Removing the file_sd target", "path", path)
				}
			}()
		}
	}
	klog.InfoS("Serving", "address", l.Addr().String(), "reusePort", o.ReusePort, "metricsAddress", servers[len(servers)-1].Listener.Addr().String(),
		"cpu", cfg.CPU, "memoryPerRequest", cfg.MemoryPerRequest, "baseMemory", cfg.BaseMemory, "startupDelay", cfg.StartupDelay,
		"readyFile", o.ReadyFile, "listenWhenReady", o.ListenWhenReady)
	if rf != nil {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		defer func() {
			if err := rf.unmark(); err != nil {
				klog.ErrorS(err, "Removing the ready file")
			}
		}()
		go func() {
			// Ready once the start-up delay has passed (at once with
			// --listen-when-ready), unready as the shutdown starts.
			if waitReady(sctx, app) {
				if err := rf.mark(); err != nil {
					klog.ErrorS(err, "Writing the ready file")
				}
			}
			<-sctx.Done()
			if err := rf.unmark(); err != nil {
				klog.ErrorS(err, "Removing the ready file")
			}
		}()
	}
	return ServeAll(ctx, app, o.IdleTimeout, o.ShutdownTimeout, servers...)
}

// Served is one listener and what it serves.
type Served struct {
	Listener net.Listener
	Handler  http.Handler
}

// ServeAll serves each listener until ctx ends or one fails, then drains
// app (if not nil) and shuts every server down gracefully: listeners close
// first, so no new connection reaches this process, and the requests in
// flight finish within shutdownTimeout.
func ServeAll(ctx context.Context, app *Server, idle, shutdownTimeout time.Duration, all ...*Served) error {
	errc := make(chan error, len(all))
	servers := make([]*http.Server, len(all))
	for i, s := range all {
		hs := &http.Server{Handler: s.Handler, IdleTimeout: idle, ReadHeaderTimeout: 10 * time.Second, ConnContext: ConnContext}
		servers[i] = hs
		go func() {
			if err := hs.Serve(s.Listener); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", s.Listener.Addr(), err)
				return
			}
			errc <- nil
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	if app != nil {
		app.Drain()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	errs := []error{first}
	for _, hs := range servers {
		if err := hs.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
	}
	klog.InfoS("Stopped serving")
	return errors.Join(errs...)
}

// fileSDTarget is one entry of a Prometheus file_sd_configs file.
type fileSDTarget struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// writeFileSD writes dir/pod.json naming addr as a scrape target, by a
// rename so Prometheus never reads half a file.
func writeFileSD(dir, pod, addr, namespace string) (string, error) {
	raw, err := json.Marshal([]fileSDTarget{{Targets: []string{addr}, Labels: map[string]string{"namespace": namespace, "pod": pod}}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, pod+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return "", fmt.Errorf("file_sd target: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("file_sd target: %w", err)
	}
	return path, nil
}
