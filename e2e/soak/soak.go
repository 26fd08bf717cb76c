// Package soak holds the pure parts of the soak test (make soak,
// e2e/soak_test.go, build tags e2e and soak): the judgement of each
// sampled series (the slope of its settled level from one segment between
// restarts to the next, or of the levels the agent's state directory falls
// back to at its compactions, with a Student-t interval) against a
// tolerance; the within-segment slope shown beside it; the scan of a
// component's log for panics; the report, as Markdown, JSON and an SVG
// plot; and the re-judgement of a recorded report (Rejudge, and the
// command cmd/soakjudge). It does no I/O beyond the readers and writers it
// is given, so all of it is table-tested; the harness that drives the
// testbed is in e2e/.
package soak

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// Point is one sample: T in seconds since the soak started, V in the
// series' unit.
type Point struct {
	T float64 `json:"t"`
	V float64 `json:"v"`
}

// The series the harness samples for each component.
const (
	// MetricRSS is the resident set (VmRSS), in bytes.
	MetricRSS = "rss_bytes"
	// MetricGoroutines is go_goroutines from the component's /metrics.
	MetricGoroutines = "goroutines"
	// MetricFDs counts the entries of /proc/PID/fd.
	MetricFDs = "open_fds"
	// MetricStateDir is the size of the agent's state directory, in bytes.
	MetricStateDir = "state_dir_bytes"
	// MetricAPIRequests is the API server's count of the component's
	// requests (a counter); MetricAPIRate is its rate, derived by Rates.
	MetricAPIRequests = "api_requests_total"
	MetricAPIRate     = "api_requests_per_second"
	// MetricHeapInuse is go_memstats_heap_inuse_bytes from the
	// component's /metrics: the heap's spans in use. Shown beside the
	// resident set, not judged (DefaultShown): a resident set that grows
	// while the heap in use does not is the runtime's (pages not yet
	// returned, fragmentation), one that grows with it is the program's.
	MetricHeapInuse = "heap_inuse_bytes"
)

// Segments splits points, ordered by time, at cuts (Split) and drops, in
// each segment, the points less than warmup seconds after its start: a
// restarted process, or one whose API server restarted, rebuilds its
// caches and connections, which is growth that ends, not a leak. Segments
// left empty are left out.
//
// It feeds the within-segment fit (FitSlope), which the report shows
// beside the judgement but does not judge by: it reads a climb that
// outlasts the warm-up as growth (Report.Judge says why).
func Segments(points []Point, cuts []float64, warmup float64) [][]Point {
	return afterWarmup(Split(points, cuts), warmup)
}

// afterWarmup is each segment's points at least warmup seconds after its
// start, leaving out the segments left empty.
func afterWarmup(segs []Segment, warmup float64) [][]Point {
	var out [][]Point
	for _, s := range segs {
		var kept []Point
		for _, p := range s.Points {
			if p.T-s.Start >= warmup {
				kept = append(kept, p)
			}
		}
		if len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

// Rates turns samples of a counter, ordered by time and within one
// segment, into per-second rates, one for each pair of consecutive samples
// at the later one's time. A pair in which the counter fell (a reset the
// caller did not cut at) or time did not advance gives none.
func Rates(points []Point) []Point {
	var out []Point
	for i := 1; i < len(points); i++ {
		a, b := points[i-1], points[i]
		if dt := b.T - a.T; dt > 0 && b.V >= a.V {
			out = append(out, Point{T: b.T, V: (b.V - a.V) / dt})
		}
	}
	return out
}

// ErrTooFew is returned by FitSlope when the segments leave no degree of
// freedom for the residuals.
var ErrTooFew = errors.New("too few samples for a slope with an interval")

// Fit is a slope fitted by FitSlope. Slopes are per hour, in the series'
// unit.
type Fit struct {
	// N is the number of points fitted, Segments the segments they came in
	// (each with at least two points), DF the residual degrees of freedom
	// (N − Segments − 1).
	N        int `json:"n"`
	Segments int `json:"segments"`
	DF       int `json:"df"`
	// Mean is the mean of the fitted points: the level a relative
	// tolerance is taken of.
	Mean float64 `json:"mean"`
	// Slope is the least-squares slope per hour, and [Lo, Hi] its
	// two-sided interval at the level asked for.
	Slope float64 `json:"slope"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}

// FitSlope fits y = a_s + b·t by least squares over segs, with an
// intercept a_s per segment and one slope b (the within-segment, or
// fixed-effects, estimator), and returns b per hour with its Student-t
// interval at level (e.g. 0.95) on N − S − 1 degrees of freedom.
// Segments of fewer than two points say nothing about a slope and are
// left out.
//
// Given one segment, it is the ordinary least-squares line (N − 2
// degrees of freedom): Report.Judge fits the settled levels, or the
// troughs, so.
//
// The interval assumes independent residuals. Samples of a process taken
// seconds apart are not (a heap grows and is collected over minutes), so
// fitted to raw samples the interval is narrower than the truth; settled
// levels, 20 minutes apart and each a mean of minutes of samples, are
// much nearer independent. That is also why Judge does not fail a series
// whose interval excludes 0 as long as its top stays within the tolerance
// it is given.
func FitSlope(segs [][]Point, level float64) (Fit, error) {
	if !(level > 0 && level < 1) {
		return Fit{}, fmt.Errorf("confidence level must be in (0, 1), got %g", level)
	}
	var f Fit
	var sxx, sxy, sum float64
	type moments struct{ tbar, ybar float64 }
	used := make([][]Point, 0, len(segs))
	ms := make([]moments, 0, len(segs))
	for _, s := range segs {
		if len(s) < 2 {
			continue
		}
		var tbar, ybar float64
		for _, p := range s {
			if math.IsNaN(p.V) || math.IsInf(p.V, 0) || math.IsNaN(p.T) || math.IsInf(p.T, 0) {
				return Fit{}, fmt.Errorf("sample (%g, %g) is not finite", p.T, p.V)
			}
			tbar += p.T / 3600
			ybar += p.V
		}
		tbar /= float64(len(s))
		ybar /= float64(len(s))
		for _, p := range s {
			dt := p.T/3600 - tbar
			sxx += dt * dt
			sxy += dt * (p.V - ybar)
			sum += p.V
		}
		used = append(used, s)
		ms = append(ms, moments{tbar, ybar})
		f.N += len(s)
	}
	f.Segments = len(used)
	f.DF = f.N - f.Segments - 1
	if f.DF < 1 || sxx == 0 {
		return Fit{N: f.N, Segments: f.Segments}, fmt.Errorf("%w: %d points in %d segments", ErrTooFew, f.N, f.Segments)
	}
	f.Mean = sum / float64(f.N)
	f.Slope = sxy / sxx
	var sse float64
	for i, s := range used {
		for _, p := range s {
			r := p.V - ms[i].ybar - f.Slope*(p.T/3600-ms[i].tbar)
			sse += r * r
		}
	}
	se := math.Sqrt(sse / float64(f.DF) / sxx)
	half := stats.TQuantile(0.5+level/2, float64(f.DF)) * se
	f.Lo, f.Hi = f.Slope-half, f.Slope+half
	return f, nil
}

// Tolerance is how much growth per hour a series may show and still pass
// when its interval excludes 0: the larger of Relative times its mean
// level and Absolute, in its unit.
type Tolerance struct {
	Relative float64 `json:"relative"`
	Absolute float64 `json:"absolute"`
}

// Allowed is the growth per hour tol allows a series of mean level mean.
func (tol Tolerance) Allowed(mean float64) float64 {
	return math.Max(tol.Relative*math.Abs(mean), tol.Absolute)
}

// DefaultTolerances are the tolerances of the judged series. 5% of the
// level per hour is a tenth of the level over a 2-hour soak: a leak that
// small would take a day to matter, and a slope that large is what a
// leak of one object per loop at 1,000 autoscalers looks like. The
// absolute floors keep a small count (a dozen descriptors) from failing on
// one more. The agent's state directory grows between compactions of its
// experience log (at most about four times the records kept, then cut
// back: rl-agent/server/journal.go), so over a soak its level saws up and
// down; its tolerance applies to the levels it falls back to (Troughs)
// once the run spans enough compactions, and to its settled levels
// before that.
var DefaultTolerances = map[string]Tolerance{
	MetricRSS:        {Relative: 0.05, Absolute: 1 << 20},
	MetricGoroutines: {Relative: 0.05, Absolute: 2},
	MetricFDs:        {Relative: 0.05, Absolute: 2},
	MetricStateDir:   {Relative: 0.05, Absolute: 1 << 20},
	MetricAPIRate:    {Relative: 0.10, Absolute: 0.05},
}

// Outcome names what a slope's interval says.
type Outcome string

const (
	// Flat: the interval includes 0.
	Flat Outcome = "flat"
	// Falls: the whole interval is below 0; nothing grows.
	Falls Outcome = "falls"
	// Bounded: the interval is above 0 but its top is within the
	// tolerance.
	Bounded Outcome = "bounded"
	// Grows: the interval is above 0 and reaches beyond the tolerance: a
	// leak until shown otherwise.
	Grows Outcome = "grows"
)

// Verdict is the judgement of one fitted series.
type Verdict struct {
	Outcome Outcome `json:"outcome"`
	Pass    bool    `json:"pass"`
	// Allowed is the growth per hour the tolerance allowed.
	Allowed float64 `json:"allowed"`
	// Wide marks a Flat interval whose top is past Allowed: it includes
	// 0, so the series passes, but it does not exclude a leak the
	// tolerance would fail either. Few segments (or troughs) make wide
	// intervals; the report says so rather than reading it as "no leak".
	Wide bool `json:"wide,omitempty"`
}

// Judge passes a series whose slope interval includes 0, lies below 0, or
// lies above 0 with its top within tol; it fails one whose interval is
// above 0 and reaches beyond tol.
func Judge(f Fit, tol Tolerance) Verdict {
	v := Verdict{Allowed: tol.Allowed(f.Mean)}
	switch {
	case f.Lo <= 0 && f.Hi >= 0:
		v.Outcome, v.Pass, v.Wide = Flat, true, f.Hi > v.Allowed
	case f.Hi < 0:
		v.Outcome, v.Pass = Falls, true
	case f.Hi <= v.Allowed:
		v.Outcome, v.Pass = Bounded, true
	default:
		v.Outcome = Grows
	}
	return v
}

// Panics returns the lines of a component's log that show a panic: the
// runtime's "panic: " and "fatal error: " lines and the header of a
// running goroutine's stack dump, and apimachinery's "Observed a panic"
// (a panic recovered in a handler, logged and survived: still a bug).
func Panics(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "panic: "), strings.HasPrefix(l, "fatal error: "),
			strings.HasPrefix(l, "goroutine ") && strings.HasSuffix(l, "[running]:"),
			strings.Contains(l, "Observed a panic"):
			out = append(out, l)
		}
	}
	return out
}
