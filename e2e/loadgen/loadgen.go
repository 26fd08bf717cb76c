package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/e2e/testapp"
)

// Bounds on one run's traffic.
const (
	// MaxDuration is the longest run.
	MaxDuration = 2 * time.Hour
	// settleGrace is added to the timeout before a window is final.
	settleGrace = time.Second
)

// Config is one run.
type Config struct {
	// Target is the URL every request GETs; loopback only (CheckTarget).
	Target string
	// Series is the arrival rate over the run.
	Series Series
	// Duration bounds the run; at most MaxDuration.
	Duration time.Duration
	// MaxRequests bounds the number of requests sent.
	MaxRequests uint64
	// MaxRate bounds the series' peak rate (requests/s): a series above it
	// is refused, not clipped.
	MaxRate float64
	// Timeout is how long a request may take before it is lost.
	Timeout time.Duration
	// Seed fixes the arrival times.
	Seed uint64
	// Window is the width of a Record.
	Window time.Duration
	// RequestsPerConn closes a connection after about this many requests
	// (0: never): every RequestsPerConn-th request carries "Connection:
	// close".
	RequestsPerConn uint64
}

// Validate reports every bad field at once.
func (c Config) Validate() error {
	var errs []error
	if _, err := CheckTarget(c.Target); err != nil {
		errs = append(errs, err)
	}
	if c.Duration <= 0 || c.Duration > MaxDuration {
		errs = append(errs, fmt.Errorf("duration %s must be in (0, %s]", c.Duration, MaxDuration))
	}
	if c.MaxRequests == 0 {
		errs = append(errs, errors.New("the maximum request count must be > 0"))
	}
	if !(c.MaxRate > 0) || math.IsInf(c.MaxRate, 0) {
		errs = append(errs, fmt.Errorf("the maximum rate %g must be a finite number > 0", c.MaxRate))
	}
	if c.Timeout <= 0 || c.Window <= 0 {
		errs = append(errs, fmt.Errorf("timeout %s and window %s must be > 0", c.Timeout, c.Window))
	}
	if err := c.Series.Validate(); err != nil {
		errs = append(errs, err)
	} else if p := c.Series.Peak(c.Duration); p > c.MaxRate {
		errs = append(errs, fmt.Errorf("the rate series peaks at %g requests/s, above the maximum rate %g", p, c.MaxRate))
	}
	return errors.Join(errs...)
}

// Summary totals a run.
type Summary struct {
	Sent, OK, Errors, Timeouts int
	// Late counts requests that completed after their window was written
	// (they are in the totals, not in a Record).
	Late int
	// Windows is the number of Records written.
	Windows int
}

// Run sends the configured traffic until the series ends, the duration or
// the request count is reached, or ctx ends, and waits for the requests in
// flight (at most the timeout). It writes one Record per window to records
// and registers its metrics on reg.
func Run(ctx context.Context, cfg Config, reg prometheus.Registerer, records io.Writer) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return Summary{}, err
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second, Control: dialLoopbackOnly}
	client := &http.Client{
		Timeout: cfg.Timeout,
		Transport: &http.Transport{
			Proxy:               nil, // loopback targets only: never through a proxy
			DialContext:         dialer.DialContext,
			MaxIdleConnsPerHost: 10000,
			IdleConnTimeout:     5 * time.Second,
			DisableCompression:  true,
		},
		// A redirect is the target's answer, not a new target.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	// Enough workers that every request in flight has one (at most
	// MaxRate·Timeout, since each ends by the timeout): vegeta blocks the
	// arrivals only when all workers are busy.
	maxWorkers := uint64(math.Ceil(cfg.MaxRate*cfg.Timeout.Seconds())) + 100
	// Idle connections are closed at the end, so a server shutting down
	// does not wait for them.
	defer client.CloseIdleConnections()
	atk := vegeta.NewAttacker(vegeta.Client(client), vegeta.Workers(10), vegeta.MaxWorkers(maxWorkers), vegeta.MaxBody(64<<10))
	pacer := NewPoissonPacer(cfg.Series, cfg.Seed, cfg.Duration, cfg.MaxRequests)

	var sent atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		n := sent.Add(1)
		t.Method, t.URL = http.MethodGet, cfg.Target
		if cfg.RequestsPerConn > 0 && n%cfg.RequestsPerConn == 0 {
			t.Header = http.Header{"Connection": []string{"close"}}
		}
		m.requests.WithLabelValues("sent").Inc()
		m.inFlight.Inc()
		return nil
	}

	bw := bufio.NewWriter(records)
	win := newWindows(cfg.Window, cfg.Duration, cfg.Timeout+settleGrace, cfg.Series, bw)
	start := time.Now()
	rateGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: TargetRateMetric,
		Help: "The rate series' current arrival rate, requests per second."},
		func() float64 { return cfg.Series.Rate(time.Since(start)) })
	if err := reg.Register(rateGauge); err != nil {
		return Summary{}, fmt.Errorf("loadgen metrics: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	klog.InfoS("Attack", "target", cfg.Target, "duration", cfg.Duration, "maxRequests", cfg.MaxRequests,
		"peakRate", cfg.Series.Peak(cfg.Duration), "timeout", cfg.Timeout, "seed", cfg.Seed)

	var sum Summary
	var werr error
	for res := range atk.Attack(vegeta.Targeter(targeter), pacer, cfg.Duration, "loadgen") {
		o := classify(res)
		m.inFlight.Dec()
		m.requests.WithLabelValues(o.String()).Inc()
		if o != Error {
			m.latency.Observe(res.Latency.Seconds())
		}
		sum.Sent++
		switch o {
		case OK:
			sum.OK++
		case Timeout:
			sum.Timeouts++
		default:
			sum.Errors++
			klog.V(4).InfoS("Request failed", "seq", res.Seq, "code", res.Code, "error", res.Error)
		}
		win.add(res.Timestamp.Sub(start), o, res.Latency)
		if werr == nil {
			werr = win.settleUntil(res.End().Sub(start))
			if werr == nil && win.written > sum.Windows {
				sum.Windows = win.written
				werr = bw.Flush()
			}
		}
	}
	if werr == nil {
		// Every window the run reached, the empty ones included.
		ran := min(time.Since(start), cfg.Duration)
		werr = win.writeUpTo(int((ran + cfg.Window - 1) / cfg.Window))
	}
	if werr == nil {
		werr = bw.Flush()
	}
	sum.Windows, sum.Late = win.written, win.late
	klog.InfoS("Attack done", "sent", sum.Sent, "ok", sum.OK, "errors", sum.Errors, "timeouts", sum.Timeouts, "late", sum.Late)
	return sum, werr
}

// classify sorts a vegeta result into an Outcome.
func classify(r *vegeta.Result) Outcome {
	switch {
	case r.Error == "" && r.Code > 0 && r.Code < 400:
		return OK
	case isTimeout(r.Error):
		return Timeout
	default:
		return Error
	}
}

// isTimeout recognises the errors of net/http's client timeout, which
// vegeta reports as text only.
func isTimeout(msg string) bool {
	for _, s := range []string{"Client.Timeout", "context deadline exceeded", "i/o timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Metric names.
const (
	RequestsMetric   = "aware_loadgen_requests_total"
	LatencyMetric    = "aware_loadgen_request_duration_seconds"
	InFlightMetric   = "aware_loadgen_requests_in_flight"
	TargetRateMetric = "aware_loadgen_target_requests_per_second"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  prometheus.Histogram
	inFlight prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestsMetric,
			Help: "Requests by result: sent (when sent), then ok, error or timeout (when done)."}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: LatencyMetric,
			Help: "Client-side latency of requests that succeeded or timed out, in seconds.", Buckets: testapp.DurationBuckets}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: InFlightMetric, Help: "Requests sent and not yet done."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("loadgen metrics: %w", err)
		}
	}
	return m, nil
}
