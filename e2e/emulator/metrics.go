package emulator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// LatencyBuckets are the request-duration histogram's upper bounds (seconds).
var LatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Metric names served on /metrics; every series has the labels namespace
// and pod (the pod's name), so Prometheus joins them with the kubelet's.
const (
	RequestsMetric        = "aware_emulator_requests_total"
	RequestRateMetric     = "aware_emulator_request_rate"
	FailedRequestsMetric  = "aware_emulator_failed_requests_total"
	RequestDurationMetric = "aware_emulator_request_duration_seconds"
	OOMKillsMetric        = "aware_emulator_oom_kills_total"
	UsageCPUMetric        = "aware_emulator_usage_cpu_cores"
	UsageMemoryMetric     = "aware_emulator_usage_memory_bytes"
	InFlightMetric        = "aware_emulator_requests_in_flight"
)

var (
	labelNames   = []string{"namespace", "pod"}
	descRequests = prometheus.NewDesc(RequestsMetric, "Requests that arrived at the pod.", labelNames, nil)
	descRate     = prometheus.NewDesc(RequestRateMetric, "Requests per second the pod receives in the current window.", labelNames, nil)
	descFailed   = prometheus.NewDesc(FailedRequestsMetric, "Requests that failed, by reason (timeout: gave up queueing; oom: lost to an OOM kill).", append(labelNames, "reason"), nil)
	descDuration = prometheus.NewDesc(RequestDurationMetric, "Response time of requests that completed or timed out (the latter at the timeout).", labelNames, nil)
	descOOM      = prometheus.NewDesc(OOMKillsMetric, "Pods the emulator deleted because the modelled working set exceeded the memory limit.", labelNames, nil)
	descUsageCPU = prometheus.NewDesc(UsageCPUMetric, "Modelled CPU usage of the serving container (cores).", labelNames, nil)
	descUsageMem = prometheus.NewDesc(UsageMemoryMetric, "Modelled working set of the serving container (bytes).", labelNames, nil)
	descInFlight = prometheus.NewDesc(InFlightMetric, "Modelled requests in flight in the pod in the current window: its throughput times its mean response time (Little's law), as an app's own in-flight gauge counts them.", labelNames, nil)
	allDescs     = []*prometheus.Desc{descRequests, descRate, descFailed, descDuration, descOOM, descUsageCPU, descUsageMem, descInFlight}
)

// Describe implements prometheus.Collector.
func (e *Emulator) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one series per live pod, and the
// OOM kill count of every pod killed so far.
func (e *Emulator) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ns := e.cfg.Namespace
	for _, st := range e.pods {
		lv := []string{ns, st.name}
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, math.Round(st.arrivals), lv...)
		ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, st.rate, lv...)
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, math.Round(st.timedOut), ns, st.name, "timeout")
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, math.Round(st.failed), ns, st.name, "oom")
		ch <- prometheus.MustNewConstMetric(descUsageCPU, prometheus.GaugeValue, st.usage[0], lv...)
		ch <- prometheus.MustNewConstMetric(descUsageMem, prometheus.GaugeValue, st.usage[1], lv...)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, st.inFlight, lv...)
		buckets := make(map[float64]uint64, len(LatencyBuckets))
		for i, b := range LatencyBuckets {
			buckets[b] = uint64(math.Round(st.buckets[i]))
		}
		count := uint64(math.Round(st.completed + st.timedOut))
		ch <- prometheus.MustNewConstHistogram(descDuration, count, st.latencySum, buckets, lv...)
	}
	for name, n := range e.ooms {
		ch <- prometheus.MustNewConstMetric(descOOM, prometheus.CounterValue, n, ns, name)
	}
}

// Serve serves /metrics of the collectors on addr, which must be a loopback
// address, until ctx ends. It returns once the listener is bound, with a
// channel that yields Serve's final error.
func Serve(ctx context.Context, addr string, collectors ...prometheus.Collector) (<-chan error, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("emulator: %s is not a loopback address", addr)
	}
	reg := prometheus.NewRegistry()
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return done, nil
}
