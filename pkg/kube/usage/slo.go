package usage

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Why a value is absent from a reading (besides the Drop* reasons).
const (
	// NoData: the query returned no sample, e.g. the metric does not
	// exist or has no series matching the selector.
	NoData = "empty"
)

// SLOQuery names a latency histogram (spec.rl.slo).
type SLOQuery struct {
	Namespace string
	// Metric is the histogram's base name (without _bucket/_count).
	Metric   string
	Selector *metav1.LabelSelector
	// Percentile is the SLO percentile (50, 90, 95 or 99).
	Percentile int32
}

// Reading is one value read from Prometheus: OK with Value, or not OK with
// Problem saying why (NoData or a Drop* reason).
type Reading struct {
	Value   float64
	OK      bool
	Problem string
}

// SLOReading is what Prometheus says about a workload's requests.
type SLOReading struct {
	// RequestRate is requests per second over the window.
	RequestRate Reading
	// ErrorRate is failed requests per second over the window.
	ErrorRate Reading
	// Latency holds the latency in seconds at percentiles 50, 99 and the
	// SLO's percentile.
	Latency map[int32]Reading
	// Dropped counts NaN, infinite and negative samples that were
	// discarded.
	Dropped Drops
	// Window is the range the rates and latencies average over: the
	// source's window, which the queries read as {{.Window}}.
	Window time.Duration
}

// SLO reads the request rate, the error rate and the p50, p99 and
// SLO-percentile latency of the histogram q names, over the source's
// window. A histogram_quantile
// over a window without requests is NaN: it is dropped and counted, and
// the Reading says so. The error is non-nil only when Prometheus could not
// be asked or did not answer (then nothing was read).
func (p *Prometheus) SLO(ctx context.Context, q SLOQuery) (SLOReading, error) {
	r := SLOReading{Latency: map[int32]Reading{}, Dropped: Drops{}, Window: p.window}
	if err := validNamespace(q.Namespace); err != nil {
		return r, err
	}
	if err := ValidMetricName(q.Metric); err != nil {
		return r, fmt.Errorf("slo metric: %w", err)
	}
	if q.Percentile <= 0 || q.Percentile >= 100 {
		return r, fmt.Errorf("slo percentile %d is not in (0, 100)", q.Percentile)
	}
	sel, err := Matchers(q.Selector)
	if err != nil {
		return r, fmt.Errorf("slo metric selector: %w", err)
	}
	d := QueryData{Namespace: q.Namespace, Metric: q.Metric, Selector: sel, Window: Window(p.window)}
	rq, err := p.Render(qRequestRate, d)
	if err != nil {
		return r, err
	}
	vec, err := p.instant(ctx, qRequestRate, rq)
	if err != nil {
		return r, err
	}
	r.RequestRate = aggregate(vec, sum, r.Dropped)
	eq, err := p.Render(qErrorRate, d)
	if err != nil {
		return r, err
	}
	if vec, err = p.instant(ctx, qErrorRate, eq); err != nil {
		return r, err
	}
	r.ErrorRate = aggregate(vec, sum, r.Dropped)
	for _, pc := range percentiles(q.Percentile) {
		d.Percentile, d.Quantile = float64(pc), float64(pc)/100
		lq, err := p.Render(qLatency, d)
		if err != nil {
			return r, err
		}
		vec, err := p.instant(ctx, qLatency, lq)
		if err != nil {
			return r, err
		}
		// Several series (a template without "sum by (le)") are read
		// conservatively: the slowest.
		r.Latency[pc] = aggregate(vec, maximum, r.Dropped)
	}
	return r, nil
}

// percentiles are the latency percentiles read for an SLO percentile.
func percentiles(slo int32) []int32 {
	out := []int32{50, 99}
	if !slices.Contains(out, slo) {
		out = append(out, slo)
	}
	return out
}

func sum(a, b float64) float64     { return a + b }
func maximum(a, b float64) float64 { return max(a, b) }

// aggregate folds the valid samples of vec with f, counting invalid ones.
func aggregate(vec model.Vector, f func(a, b float64) float64, dropped Drops) Reading {
	r := Reading{Problem: NoData}
	for _, s := range vec {
		x := float64(s.Value)
		if pr := problem(x); pr != "" {
			dropped[pr]++
			if !r.OK {
				r.Problem = pr
			}
			continue
		}
		if !r.OK {
			r = Reading{Value: x, OK: true}
			continue
		}
		r.Value = f(r.Value, x)
	}
	return r
}
