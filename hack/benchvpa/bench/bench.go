// Package bench holds the pure parts of the side-by-side benchmark against
// the Vertical Pod Autoscaler (make bench-vpa): percentiles of latency
// samples, process accounting read from /proc text, the ratio table and the
// cost-against-scale plot. It does no I/O of its own beyond the writers it is
// given, so all of it is unit-tested; the harness that drives a control plane
// is hack/benchvpa (build tag benchvpa).
package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrNoSamples is returned for a percentile of an empty sample.
var ErrNoSamples = errors.New("no samples")

// Percentiles returns, for each p in ps (0 < p ≤ 100), the nearest-rank
// percentile of xs: the smallest sample such that at least p% of the samples
// are ≤ it. xs is not modified. Nearest rank never interpolates, so a p999 of
// fewer than 1000 samples is the maximum, which is what a tail of a small
// sample honestly is.
func Percentiles(xs []float64, ps ...float64) ([]float64, error) {
	if len(xs) == 0 {
		return nil, ErrNoSamples
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	out := make([]float64, len(ps))
	for i, p := range ps {
		if !(p > 0 && p <= 100) {
			return nil, fmt.Errorf("percentile %v outside (0, 100]", p)
		}
		rank := int(math.Ceil(p / 100 * float64(len(sorted))))
		out[i] = sorted[max(rank, 1)-1]
	}
	return out, nil
}

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; 100
// on every Linux architecture Go supports.
const ClockTicks = 100

// ParseProcStat returns the CPU time (user + system, in seconds) from the
// text of /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func ParseProcStat(text string) (float64, error) {
	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return 0, errors.New("/proc stat: no ')' after the command name")
	}
	f := strings.Fields(text[end+1:])
	// After the name: state(3) ... utime(14) stime(15), i.e. f[11], f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: cpu time %q: %w", s, err)
		}
		ticks += float64(v)
	}
	return ticks / ClockTicks, nil
}

// ParseSchedstat returns the time on CPU, in seconds, and the number of
// times the thread was put on a CPU (timeslices: each wake-up from sleep
// and each return after preemption), from the text of
// /proc/PID/task/TID/schedstat (its first and third fields). Summed over a
// process's threads the first measures CPU with nanosecond resolution
// where /proc/PID/stat counts 10 ms ticks.
func ParseSchedstat(text string) (cpu float64, slices uint64, err error) {
	f := strings.Fields(text)
	if len(f) != 3 {
		return 0, 0, fmt.Errorf("schedstat: %d fields, want 3", len(f))
	}
	ns, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("schedstat: %w", err)
	}
	if slices, err = strconv.ParseUint(f[2], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("schedstat: %w", err)
	}
	return float64(ns) / 1e9, slices, nil
}

// ParseProcStatus returns VmRSS and VmHWM (peak RSS), in bytes, from the text
// of /proc/PID/status.
func ParseProcStatus(text string) (rss, peak float64, err error) {
	found := 0
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc status: %s: %q is not \"N kB\"", k, strings.TrimSpace(v))
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc status: %s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = float64(n) * 1024
		} else {
			peak = float64(n) * 1024
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("/proc status: VmRSS or VmHWM missing")
	}
	return rss, peak, nil
}
