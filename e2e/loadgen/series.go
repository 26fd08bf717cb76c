package loadgen

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// Series is a piecewise-constant arrival rate: Rates[i] requests per second
// from Starts[i] until Starts[i+1], the last rate holding to the end. Before
// Starts[0] the rate is 0. Starts are strictly increasing and >= 0.
type Series struct {
	Starts []time.Duration
	Rates  []float64
}

// Rate returns the rate at offset t.
func (s Series) Rate(t time.Duration) float64 {
	i := sort.Search(len(s.Starts), func(i int) bool { return s.Starts[i] > t }) - 1
	if i < 0 {
		return 0
	}
	return s.Rates[i]
}

// Expected returns the expected number of arrivals in [from, to): the
// integral of the rate.
func (s Series) Expected(from, to time.Duration) float64 {
	var n float64
	for i := range s.Starts {
		lo, hi := s.Starts[i], time.Duration(math.MaxInt64)
		if i+1 < len(s.Starts) {
			hi = s.Starts[i+1]
		}
		lo, hi = max(lo, from), min(hi, to)
		if hi > lo {
			n += s.Rates[i] * (hi - lo).Seconds()
		}
	}
	return n
}

// Peak returns the highest rate in [0, d].
func (s Series) Peak(d time.Duration) float64 {
	var p float64
	for i, st := range s.Starts {
		if st <= d {
			p = max(p, s.Rates[i])
		}
	}
	return p
}

// Validate checks the invariants.
func (s Series) Validate() error {
	if len(s.Starts) == 0 || len(s.Starts) != len(s.Rates) {
		return fmt.Errorf("rate series has %d starts and %d rates, want as many and at least one", len(s.Starts), len(s.Rates))
	}
	for i, st := range s.Starts {
		if st < 0 || (i > 0 && st <= s.Starts[i-1]) {
			return fmt.Errorf("rate series: start %d (%s) is negative or not after the one before", i, st)
		}
		if r := s.Rates[i]; !(r >= 0) || math.IsInf(r, 0) {
			return fmt.Errorf("rate series: rate %d (%g) is not a finite number >= 0", i, r)
		}
	}
	return nil
}

// FromTrace is the series of a simulator trace: window i starts at i·Step.
func FromTrace(t sim.Trace) (Series, error) {
	if t.Step <= 0 || len(t.Rates) == 0 {
		return Series{}, fmt.Errorf("trace %q: step %s and %d rates, want a step > 0 and rates", t.Name, t.Step, len(t.Rates))
	}
	s := Series{Starts: make([]time.Duration, len(t.Rates)), Rates: append([]float64(nil), t.Rates...)}
	for i := range s.Starts {
		s.Starts[i] = time.Duration(i) * t.Step
	}
	return s, s.Validate()
}

// TraceSeries generates the simulator's trace kind long enough for d, in
// windows of step, and returns its series.
func TraceSeries(kind sim.TraceKind, mean float64, d, step time.Duration, seed uint64) (Series, error) {
	if step <= 0 || d <= 0 {
		return Series{}, fmt.Errorf("trace %s: duration %s and step %s must be > 0", kind, d, step)
	}
	steps := int((d + step - 1) / step)
	t, err := sim.GenerateTrace(kind, sim.TraceOptions{Mean: mean, Steps: steps, Step: step, Seed: seed})
	if err != nil {
		return Series{}, err
	}
	return FromTrace(t)
}

// ReadSeriesFile reads a rate series from a CSV file; see ReadSeries.
func ReadSeriesFile(path string) (Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return Series{}, err
	}
	defer f.Close()
	return ReadSeries(f, path)
}

// ReadSeries reads a rate series as CSV rows "time,rate": time is either
// seconds from the start (a number >= 0) or an RFC 3339 timestamp (offsets
// are then taken from the first row), the same form in every row; rate is
// requests per second from that time until the next row. Blank lines and
// lines starting with # are skipped, and so is a first row whose time is
// neither form (a header). Every error names name:line.
func ReadSeries(r io.Reader, name string) (Series, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	var (
		s      Series
		first  time.Time
		rfc    bool
		header = true
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Series{}, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != 2 {
			return Series{}, fmt.Errorf("%s:%d: %d fields, want 2 (time,rate)", name, line, len(rec))
		}
		ts, rs := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		secs, serr := strconv.ParseFloat(ts, 64)
		at, terr := time.Parse(time.RFC3339Nano, ts)
		isFirst := len(s.Starts) == 0
		if serr != nil && terr != nil {
			if isFirst && header {
				header = false
				continue
			}
			return Series{}, fmt.Errorf("%s:%d: time %q is neither seconds from the start nor an RFC 3339 time", name, line, ts)
		}
		header = false
		var off time.Duration
		switch {
		case isFirst:
			rfc = terr == nil
			if rfc {
				first = at
			}
		case rfc != (terr == nil):
			return Series{}, fmt.Errorf("%s:%d: time %q is in another form than the first row's", name, line, ts)
		}
		if rfc {
			off = at.Sub(first)
		} else {
			if !(secs >= 0) || secs > MaxDuration.Seconds() {
				return Series{}, fmt.Errorf("%s:%d: time %q must be in [0, %g] seconds", name, line, ts, MaxDuration.Seconds())
			}
			off = time.Duration(secs * float64(time.Second))
		}
		if !isFirst && off <= s.Starts[len(s.Starts)-1] {
			return Series{}, fmt.Errorf("%s:%d: time %q is not after the row before", name, line, ts)
		}
		rate, err := strconv.ParseFloat(rs, 64)
		if err != nil || !(rate >= 0) || math.IsInf(rate, 0) {
			return Series{}, fmt.Errorf("%s:%d: rate %q is not a finite number >= 0", name, line, rs)
		}
		s.Starts = append(s.Starts, off)
		s.Rates = append(s.Rates, rate)
	}
	if len(s.Starts) == 0 {
		return Series{}, fmt.Errorf("%s: no rows", name)
	}
	return s, nil
}
