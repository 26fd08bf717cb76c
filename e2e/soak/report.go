package soak

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Restart is one restart the soak made: of which component, when (seconds
// since the soak started) and how long until it was ready again.
type Restart struct {
	At        float64 `json:"at"`
	Component string  `json:"component"`
	Took      float64 `json:"took"`
	// Err is why the restart failed, if it did.
	Err string `json:"err,omitempty"`
}

// Result is one judged series.
type Result struct {
	Component string `json:"component"`
	Metric    string `json:"metric"`
	// Method is what Fit was fitted to: MethodSettled or MethodTroughs.
	Method string `json:"method"`
	// Fit is the judged slope: of the settled levels, one per segment, or
	// of the troughs, one per compaction (Fit.N counts them).
	Fit     Fit     `json:"fit"`
	Verdict Verdict `json:"verdict"`
	// Compactions is how many falls Troughs found in the agent's state
	// directory (fewer than MinTroughs: judged on its settled levels).
	Compactions int `json:"compactions,omitempty"`
	// Within is the slope fitted within the segments after the warm-up,
	// shown beside the judgement and not judged: a climb to a plateau
	// that outlasts the warm-up reads as growth in it. Nil when too few
	// samples.
	Within *Fit `json:"within,omitempty"`
	// Err is why no slope could be fitted (too few samples): a failure,
	// since nothing was shown.
	Err string `json:"err,omitempty"`
}

// What a Result's judged slope was fitted to.
const (
	// MethodSettled: each segment's settled level (Segment.Settled).
	MethodSettled = "settled"
	// MethodTroughs: the levels a sawtooth fell back to (Troughs).
	MethodTroughs = "troughs"
)

// Pass reports whether the series passed.
func (r Result) Pass() bool { return r.Err == "" && r.Verdict.Pass }

// Check is one check of the final state, or of the run (panics, exits).
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Figure is a number of the run worth reporting beside the verdicts, e.g.
// the set-up time or a component's CPU share.
type Figure struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Report is the soak's outcome.
type Report struct {
	// Title says what ran, e.g. "Soak: 1000 autoscalers, 2h, a restart
	// every 20m".
	Title    string    `json:"title"`
	Figures  []Figure  `json:"figures"`
	Restarts []Restart `json:"restarts"`
	Results  []Result  `json:"results"`
	// Levels are the settled levels of the judged and the shown series,
	// in component, then metric, order, for the reader to set a
	// rise beside what changed in it (a restart, the load, the API
	// request rate).
	Levels []Levels `json:"levels,omitempty"`
	Checks []Check  `json:"checks"`
	// Level is the confidence level of the intervals (0.95).
	Level float64 `json:"level"`
	// Judgement is how the results were judged.
	Judgement Judgement `json:"judgement"`
	Pass      bool      `json:"pass"`
}

// Judgement is how Report.Judge judges the series.
type Judgement struct {
	// Settle is the share of each segment between restarts, at its end,
	// whose mean is the segment's settled level (DefaultSettle).
	Settle float64 `json:"settle"`
	// Warmup is the seconds dropped after the start and after each
	// restart for the within-segment fit, which is shown, not judged.
	Warmup float64 `json:"warmupSeconds"`
	// Tolerances are the judged series' tolerances, by metric; a series
	// without one is not judged.
	Tolerances map[string]Tolerance `json:"tolerances"`
	// Shown are metrics without a tolerance whose settled levels the
	// report shows beside the judged series' (DefaultShown).
	Shown []string `json:"shown,omitempty"`
}

// DefaultShown are the metrics shown and not judged: the heap in use,
// which tells the program's growth from the runtime's in a resident set
// that grows.
var DefaultShown = []string{MetricHeapInuse}

// Levels are one series' settled levels, segment by segment (Judge).
type Levels struct {
	Component string `json:"component"`
	Metric    string `json:"metric"`
	// Judged is false for a series that is only shown
	// (Judgement.Shown).
	Judged bool `json:"judged"`
	// Segments holds the segments with enough settled samples, in time
	// order: T is the segment's start (0 or a restart's time), V its
	// settled level.
	Segments []Point `json:"segments"`
}

// DefaultSettle is the share of each segment whose mean is its settled
// level: the last third, 6⅔ minutes of a 20-minute segment, 13 samples
// at 30 s, enough to average over the heap's GC cycles, and at least 13
// minutes after the restart that opened the segment, most of the
// 25-minute climb seen in the soak of record. What is left of a climb at
// a segment's end lowers that segment's level: in the first segment
// (every component just started) that tilts the slope up, towards
// failing; after a restart late in the run, down; mid-run, neither. The
// soak's rotation puts restarts early, mid-run and late, so such dips
// mostly widen the interval, which Verdict.Wide then reports.
const DefaultSettle = 1.0 / 3

// DefaultJudgement is the judgement with the default settled share and
// tolerances, and warmup seconds of warm-up for the within-segment fit.
func DefaultJudgement(warmup float64) Judgement {
	return Judgement{Settle: DefaultSettle, Warmup: warmup, Tolerances: DefaultTolerances, Shown: DefaultShown}
}

// Judge judges every series of samples (keyed by component and metric;
// MetricAPIRequests counters are turned into MetricAPIRate within each
// segment) that j has a tolerance for, and sets r.Results, r.Judgement
// and r.Pass. Series are judged in component, then metric, order; a
// series without enough samples for an interval fails.
//
// The judged slope is that of the series' settled levels across the
// segments between restarts (Segment.Settled, fitted by FitSlope as one
// line on S − 2 degrees of freedom): a leak raises every segment's level,
// whichever component restarted, while a climb to a plateau after a
// (re)start, which a within-segment fit reads as growth, leaves the
// levels where they were. What this does not see is a leak that every
// restart resets in full; in the soak a restart resets one component, and
// the updater and the admission controller are never restarted, so a
// leak in any of them raises the levels of several segments in a row.
// The agent's state directory is a sawtooth, growing between compactions
// by design; with at least MinTroughs compactions it is judged by the
// levels it falls back to (Troughs), with fewer by its settled levels.
func (r *Report) Judge(samples map[string]map[string][]Point, j Judgement) {
	r.Judgement = j
	cuts := make([]float64, 0, len(r.Restarts))
	for _, rs := range r.Restarts {
		cuts = append(cuts, rs.At)
	}
	r.Results, r.Levels = nil, nil
	for _, comp := range sortedKeys(samples) {
		for _, metric := range sortedKeys(samples[comp]) {
			pts := samples[comp][metric]
			segs := Split(pts, cuts)
			name := metric
			if metric == MetricAPIRequests {
				name = MetricAPIRate
				for i := range segs {
					segs[i].Points = Rates(segs[i].Points)
				}
			}
			tol, ok := j.Tolerances[name]
			if ok || slices.Contains(j.Shown, name) {
				r.Levels = append(r.Levels, segmentLevels(comp, name, ok, segs, j.Settle))
			}
			if !ok {
				continue
			}
			res := Result{Component: comp, Metric: name, Method: MethodSettled}
			judged := SettledLevels(segs, j.Settle)
			if name == MetricStateDir {
				tr := Troughs(pts, CompactionDrop)
				res.Compactions = len(tr)
				if len(tr) >= MinTroughs {
					res.Method, judged = MethodTroughs, tr
				}
			}
			f, err := FitSlope([][]Point{judged}, r.Level)
			if err != nil {
				res.Fit, res.Err = f, err.Error()
			} else {
				res.Fit, res.Verdict = f, Judge(f, tol)
			}
			if w, err := FitSlope(afterWarmup(segs, j.Warmup), r.Level); err == nil {
				res.Within = &w
			}
			r.Results = append(r.Results, res)
		}
	}
	r.Pass = len(r.Results) > 0
	for _, res := range r.Results {
		r.Pass = r.Pass && res.Pass()
	}
	for _, c := range r.Checks {
		r.Pass = r.Pass && c.Pass
	}
}

// segmentLevels is the settled level of each of segs that has one.
func segmentLevels(comp, metric string, judged bool, segs []Segment, settle float64) Levels {
	l := Levels{Component: comp, Metric: metric, Judged: judged}
	for _, sg := range segs {
		if v, _, ok := sg.Settled(settle); ok {
			l.Segments = append(l.Segments, Point{T: sg.Start, V: v.V})
		}
	}
	return l
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// units gives each metric's unit in the report and the factor its values
// are divided by to be shown in it.
var units = map[string]struct {
	unit  string
	scale float64
}{
	MetricRSS:        {"MiB", 1 << 20},
	MetricStateDir:   {"MiB", 1 << 20},
	MetricGoroutines: {"", 1},
	MetricFDs:        {"", 1},
	MetricAPIRate:    {"req/s", 1},
	MetricHeapInuse:  {"MiB", 1 << 20},
}

// Scaled returns v in metric's reporting unit, and the unit.
func Scaled(metric string, v float64) (float64, string) {
	u, ok := units[metric]
	if !ok {
		return v, ""
	}
	return v / u.scale, u.unit
}

// WriteMarkdown writes the report: the verdict, the figures, the restarts,
// one row per judged series (what it was judged on, its level, the slope
// per hour with its interval, the tolerance, the outcome and the
// within-segment slope) and the checks.
func WriteMarkdown(w io.Writer, r Report) error {
	if r.Level == 0 {
		return errors.New("report has no confidence level")
	}
	bw := bufio.NewWriter(w)
	verdict := "FAIL"
	if r.Pass {
		verdict = "PASS"
	}
	fmt.Fprintf(bw, "## %s: %s\n\n", r.Title, verdict)
	if len(r.Figures) > 0 {
		bw.WriteString("| Figure | Value |\n|---|---|\n")
		for _, f := range r.Figures {
			fmt.Fprintf(bw, "| %s | %s |\n", cell(f.Name), cell(f.Value))
		}
		bw.WriteString("\n")
	}
	if len(r.Restarts) > 0 {
		bw.WriteString("Restarts (minutes into the soak, component, seconds until ready): ")
		parts := make([]string, len(r.Restarts))
		for i, rs := range r.Restarts {
			parts[i] = fmt.Sprintf("%.1f %s %.0fs", rs.At/60, rs.Component, rs.Took)
			if rs.Err != "" {
				parts[i] += " (failed: " + rs.Err + ")"
			}
		}
		bw.WriteString(strings.Join(parts, "; ") + ".\n\n")
	}
	fmt.Fprintf(bw, "Each series is judged by the slope per hour, with its %.0f%% interval, of its settled level across the segments between restarts "+
		"(the mean of each segment's last %.0f%%); the agent's state directory, once it has %d compactions or more, by the levels it falls back to at them. "+
		"\"Wide\": the interval includes 0 and also growth past the allowed. "+
		"The slope within the segments (after a warm-up of %s each) is shown, not judged.\n\n",
		r.Level*100, r.Judgement.Settle*100, MinTroughs, minutes(r.Judgement.Warmup))
	bw.WriteString("| Component | Series | Judged on | Level | Slope per hour [interval] | Allowed | Outcome | Within segments (not judged) |\n|---|---|---|---:|---|---:|---|---|\n")
	for _, res := range r.Results {
		mean, unit := Scaled(res.Metric, res.Fit.Mean)
		name := res.Metric
		if unit != "" {
			name += " (" + unit + ")"
		}
		on := judgedOn(res)
		within := "—"
		if w := res.Within; w != nil {
			within = interval(res.Metric, *w)
		}
		if res.Err != "" {
			fmt.Fprintf(bw, "| %s | %s | %s | %s | — | — | FAIL: %s | %s |\n", res.Component, name, on, num(mean), cell(res.Err), within)
			continue
		}
		allowed, _ := Scaled(res.Metric, res.Verdict.Allowed)
		outcome := string(res.Verdict.Outcome)
		switch {
		case !res.Verdict.Pass:
			outcome = "FAIL: " + outcome
		case res.Verdict.Wide:
			outcome += " (wide)"
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", res.Component, name, on, num(mean),
			interval(res.Metric, res.Fit), num(allowed), outcome, within)
	}
	writeLevels(bw, r)
	if len(r.Checks) > 0 {
		bw.WriteString("\n| Check | Result | Detail |\n|---|---|---|\n")
		for _, c := range r.Checks {
			res := "pass"
			if !c.Pass {
				res = "FAIL"
			}
			fmt.Fprintf(bw, "| %s | %s | %s |\n", cell(c.Name), res, cell(c.Detail))
		}
	}
	return bw.Flush()
}

// writeLevels writes the settled level of every judged and shown series,
// one column per segment between restarts.
func writeLevels(bw *bufio.Writer, r Report) {
	if len(r.Levels) == 0 {
		return
	}
	starts := []float64{0}
	for _, rs := range r.Restarts {
		starts = append(starts, rs.At)
	}
	slices.Sort(starts)
	fmt.Fprintf(bw, "\nThe settled level of each segment (the mean of its last %.0f%%), by the minute the segment starts at; a series marked \"shown\" is not judged.\n\n", r.Judgement.Settle*100)
	bw.WriteString("| Component | Series |")
	for _, s := range starts {
		fmt.Fprintf(bw, " %s |", strconv.FormatFloat(s/60, 'f', 0, 64))
	}
	bw.WriteString("\n|---|---|" + strings.Repeat("---:|", len(starts)) + "\n")
	for _, l := range r.Levels {
		name := l.Metric
		if _, unit := Scaled(l.Metric, 0); unit != "" {
			name += " (" + unit + ")"
		}
		if !l.Judged {
			name += ", shown"
		}
		fmt.Fprintf(bw, "| %s | %s |", l.Component, name)
		for _, s := range starts {
			v := "—"
			for _, p := range l.Segments {
				if p.T == s {
					scaled, _ := Scaled(l.Metric, p.V)
					v = num(scaled)
				}
			}
			fmt.Fprintf(bw, " %s |", v)
		}
		bw.WriteString("\n")
	}
}

// judgedOn says what a result's slope was fitted to.
func judgedOn(res Result) string {
	var s string
	if res.Method == MethodTroughs {
		s = fmt.Sprintf("%d troughs", res.Fit.N)
	} else {
		s = fmt.Sprintf("%d segments", res.Fit.N)
	}
	if res.Metric == MetricStateDir && res.Method != MethodTroughs {
		s += fmt.Sprintf(" (%d compactions)", res.Compactions)
	}
	return s
}

// interval formats a fit's slope and interval in metric's unit.
func interval(metric string, f Fit) string {
	s, _ := Scaled(metric, f.Slope)
	lo, _ := Scaled(metric, f.Lo)
	hi, _ := Scaled(metric, f.Hi)
	return fmt.Sprintf("%s [%s, %s]", signed(s), signed(lo), signed(hi))
}

// minutes formats seconds as minutes, e.g. "5 min" or "2.5 min".
func minutes(sec float64) string {
	return strconv.FormatFloat(sec/60, 'g', 3, 64) + " min"
}

// cell keeps a table cell on one line and its pipes literal.
func cell(s string) string {
	return strings.NewReplacer("\n", " ", "|", `\|`).Replace(s)
}

// num formats a level with three significant digits.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func signed(v float64) string {
	if v >= 0 {
		return "+" + num(v)
	}
	return num(v)
}
