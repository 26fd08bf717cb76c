package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// Options are the command line of the loadgen binary.
type Options struct {
	Target          string
	RatesFile       string
	Trace           string
	Mean            float64
	TraceStep       time.Duration
	Seed            uint64
	Duration        time.Duration
	MaxRequests     uint64
	MaxRate         float64
	Timeout         time.Duration
	Window          time.Duration
	RequestsPerConn uint64
	Records         string
	MetricsAddress  string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{Mean: 10, TraceStep: 15 * time.Second, Seed: 1, MaxRequests: 2_000_000, MaxRate: 500,
		Timeout: 10 * time.Second, Window: 15 * time.Second, RequestsPerConn: 100}
}

// AddFlags adds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	kinds := make([]string, 0, len(sim.TraceKinds()))
	for _, k := range sim.TraceKinds() {
		kinds = append(kinds, string(k))
	}
	fs.StringVar(&o.Target, "target", o.Target, "URL to GET, loopback only (localhost, 127.0.0.0/8, ::1), e.g. http://127.0.0.1:8080/?cpu=20ms")
	fs.StringVar(&o.RatesFile, "rates", o.RatesFile, "CSV rate series, rows time,rate (time: seconds from the start or RFC 3339; rate: requests/s until the next row)")
	fs.StringVar(&o.Trace, "trace", o.Trace, "simulator trace kind instead of --rates: "+strings.Join(kinds, ", "))
	fs.Float64Var(&o.Mean, "mean", o.Mean, "mean rate of --trace, requests/s")
	fs.DurationVar(&o.TraceStep, "trace-step", o.TraceStep, "window of --trace: its rate changes at most this often")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of --trace and of the Poisson arrival times")
	fs.DurationVar(&o.Duration, "duration", o.Duration, fmt.Sprintf("length of the run, required, at most %s", MaxDuration))
	fs.Uint64Var(&o.MaxRequests, "max-requests", o.MaxRequests, "stop after this many requests")
	fs.Float64Var(&o.MaxRate, "max-rate", o.MaxRate, "refuse a rate series that peaks above this many requests/s")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "a request without a complete response by then is lost (a timeout)")
	fs.DurationVar(&o.Window, "window", o.Window, "width of a per-window record")
	fs.Uint64Var(&o.RequestsPerConn, "requests-per-connection", o.RequestsPerConn, "close a connection every this many requests (0: keep them), so new replicas behind SO_REUSEPORT get traffic")
	fs.StringVar(&o.Records, "records", o.Records, "file to write one JSON line per window into (- for stdout; empty: none)")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "loopback address to serve /metrics on (empty: none)")
}

// Validate checks what can be checked without reading files.
func (o *Options) Validate() error {
	var errs []error
	if o.Target == "" {
		errs = append(errs, errors.New("--target is required"))
	} else if _, err := CheckTarget(o.Target); err != nil {
		errs = append(errs, fmt.Errorf("--target: %w", err))
	}
	if (o.RatesFile == "") == (o.Trace == "") {
		errs = append(errs, errors.New("give exactly one of --rates and --trace"))
	}
	if o.Trace != "" && !slices.Contains(sim.TraceKinds(), sim.TraceKind(o.Trace)) {
		errs = append(errs, fmt.Errorf("--trace %q is not one of %v", o.Trace, sim.TraceKinds()))
	}
	if o.Duration <= 0 || o.Duration > MaxDuration {
		errs = append(errs, fmt.Errorf("--duration is required, in (0, %s]", MaxDuration))
	}
	if o.MetricsAddress != "" {
		if err := CheckListenAddress(o.MetricsAddress); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-address: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Config reads the rate series and builds the run's configuration.
func (o *Options) Config() (Config, error) {
	var (
		s   Series
		err error
	)
	if o.RatesFile != "" {
		s, err = ReadSeriesFile(o.RatesFile)
	} else {
		s, err = TraceSeries(sim.TraceKind(o.Trace), o.Mean, o.Duration, o.TraceStep, o.Seed)
	}
	if err != nil {
		return Config{}, err
	}
	c := Config{Target: o.Target, Series: s, Duration: o.Duration, MaxRequests: o.MaxRequests, MaxRate: o.MaxRate,
		Timeout: o.Timeout, Seed: o.Seed, Window: o.Window, RequestsPerConn: o.RequestsPerConn}
	return c, c.Validate()
}

// NewCommand is the loadgen command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Replay a rate series as open-loop Poisson HTTP requests to a loopback target",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			_, err := o.Run(c.Context(), c.OutOrStdout())
			return err
		},
	}
	cli.Prepare(cmd)
	o.AddFlags(cmd.Flags())
	cli.NewLogging().Install(cmd)
	return cmd
}

// Run runs the load; stdout receives the records when --records is -.
func (o *Options) Run(ctx context.Context, stdout io.Writer) (Summary, error) {
	cfg, err := o.Config()
	if err != nil {
		return Summary{}, err
	}
	records := io.Discard
	switch o.Records {
	case "":
	case "-":
		records = stdout
	default:
		f, err := os.Create(o.Records)
		if err != nil {
			return Summary{}, err
		}
		defer f.Close()
		records = f
	}
	reg := prometheus.NewRegistry()
	if o.MetricsAddress != "" {
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.MetricsAddress)
		if err != nil {
			return Summary{}, fmt.Errorf("--metrics-address: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Serving /metrics")
			}
		}()
		defer func() { _ = srv.Close() }()
		klog.InfoS("Serving /metrics", "address", l.Addr().String())
	}
	sum, err := Run(ctx, cfg, reg, records)
	if err != nil {
		return sum, err
	}
	if f, ok := records.(*os.File); ok && f != os.Stdout {
		if err := f.Sync(); err != nil {
			return sum, fmt.Errorf("--records: %w", err)
		}
	}
	return sum, nil
}
