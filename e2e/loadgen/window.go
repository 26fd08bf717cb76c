package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Outcome is what became of one request.
type Outcome int

const (
	// OK: a response with status below 400.
	OK Outcome = iota
	// Error: a response with status >= 400, or a failure to connect or read.
	Error
	// Timeout: no complete response within the timeout.
	Timeout
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Timeout:
		return "timeout"
	default:
		return "error"
	}
}

// Record is one window's JSON line: the requests sent in [Start, End)
// seconds from the start of the run, whenever they completed. Lost counts
// errors and timeouts. The percentiles (seconds) are exact, over the
// requests that got a response below 400 or timed out (at the latency the
// client measured, at least the timeout); they are absent when there is
// none. Refused connections and error statuses have no latency worth
// counting: they are lost, not fast.
type Record struct {
	Window   int      `json:"window"`
	Start    float64  `json:"start"`
	End      float64  `json:"end"`
	Expected float64  `json:"expected"`
	Sent     int      `json:"sent"`
	OK       int      `json:"ok"`
	Errors   int      `json:"errors"`
	Timeouts int      `json:"timeouts"`
	Lost     int      `json:"lost"`
	P50      *float64 `json:"p50,omitempty"`
	P95      *float64 `json:"p95,omitempty"`
	P99      *float64 `json:"p99,omitempty"`
}

// windows bins results by the time they were sent and writes each window
// once no more of its requests can be in flight.
type windows struct {
	width   time.Duration
	last    int           // the run's last window: it also takes requests sent just past the end
	settle  time.Duration // timeout plus a grace: a window is final this long after its end
	series  Series
	enc     *json.Encoder
	open    map[int]*bin
	written int // windows below this are written
	late    int
}

type bin struct {
	sent, ok, errs, timeouts int
	samples                  []float64
}

func newWindows(width, duration, settle time.Duration, s Series, w io.Writer) *windows {
	return &windows{width: width, last: int((duration+width-1)/width) - 1, settle: settle, series: s,
		enc: json.NewEncoder(w), open: map[int]*bin{}}
}

// add counts a request sent at offset sent that took latency.
func (w *windows) add(sent time.Duration, o Outcome, latency time.Duration) {
	// A request due before the end may leave a little after it (a late
	// timer): it belongs to the last window.
	i := min(int(max(sent, 0)/w.width), w.last)
	if i < w.written {
		// A straggler past the settle time: counted in the totals, but its
		// window is already written.
		w.late++
		return
	}
	b := w.open[i]
	if b == nil {
		b = &bin{}
		w.open[i] = b
	}
	b.sent++
	switch o {
	case OK:
		b.ok++
		b.samples = append(b.samples, latency.Seconds())
	case Timeout:
		b.timeouts++
		b.samples = append(b.samples, latency.Seconds())
	default:
		b.errs++
	}
}

// settleUntil writes every window that ended at least settle before now.
func (w *windows) settleUntil(now time.Duration) error {
	return w.writeUpTo(int((now - w.settle) / w.width))
}

// writeUpTo writes the windows below n (at most the last), empty ones
// included, in order.
func (w *windows) writeUpTo(n int) error {
	n = min(n, w.last+1)
	for ; w.written < n; w.written++ {
		i := w.written
		b := w.open[i]
		delete(w.open, i)
		if b == nil {
			b = &bin{}
		}
		start, end := time.Duration(i)*w.width, time.Duration(i+1)*w.width
		r := Record{Window: i, Start: start.Seconds(), End: end.Seconds(), Expected: w.series.Expected(start, end),
			Sent: b.sent, OK: b.ok, Errors: b.errs, Timeouts: b.timeouts, Lost: b.errs + b.timeouts}
		if len(b.samples) > 0 {
			slices.Sort(b.samples)
			r.P50, r.P95, r.P99 = quantile(b.samples, 0.50), quantile(b.samples, 0.95), quantile(b.samples, 0.99)
		}
		if err := w.enc.Encode(r); err != nil {
			return fmt.Errorf("window record %d: %w", i, err)
		}
	}
	return nil
}

// quantile is the nearest-rank q-quantile of sorted (not empty).
func quantile(sorted []float64, q float64) *float64 {
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	v := sorted[min(max(k, 0), len(sorted)-1)]
	return &v
}
