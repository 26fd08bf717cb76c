package soak

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
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
	Component string  `json:"component"`
	Metric    string  `json:"metric"`
	Fit       Fit     `json:"fit"`
	Verdict   Verdict `json:"verdict"`
	// Err is why no slope could be fitted (too few samples): a failure,
	// since nothing was shown.
	Err string `json:"err,omitempty"`
}

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
	Checks   []Check   `json:"checks"`
	// Level is the confidence level of the intervals (0.95).
	Level float64 `json:"level"`
	Pass  bool    `json:"pass"`
}

// Judge fits and judges every series of samples (keyed by component and
// metric; MetricAPIRequests counters are turned into MetricAPIRate) that
// tolerances has a tolerance for, cut at the restarts and with warmup
// seconds dropped after each, and sets r.Results and r.Pass. A series
// without enough samples for an interval fails. Series are judged in
// component, then metric, order.
func (r *Report) Judge(samples map[string]map[string][]Point, warmup float64, tolerances map[string]Tolerance) {
	cuts := make([]float64, 0, len(r.Restarts))
	for _, rs := range r.Restarts {
		cuts = append(cuts, rs.At)
	}
	r.Results = nil
	for _, comp := range sortedKeys(samples) {
		for _, metric := range sortedKeys(samples[comp]) {
			pts := samples[comp][metric]
			segs := Segments(pts, cuts, warmup)
			name := metric
			if metric == MetricAPIRequests {
				name = MetricAPIRate
				for i, s := range segs {
					segs[i] = Rates(s)
				}
			}
			tol, ok := tolerances[name]
			if !ok {
				continue
			}
			res := Result{Component: comp, Metric: name}
			f, err := FitSlope(segs, r.Level)
			if err != nil {
				res.Fit, res.Err = f, err.Error()
			} else {
				res.Fit, res.Verdict = f, Judge(f, tol)
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
// one row per judged series (level, slope per hour with its interval, the
// tolerance, the outcome) and the checks.
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
	fmt.Fprintf(bw, "Slopes per hour with their %.0f%% intervals, fitted within the segments between restarts:\n\n", r.Level*100)
	bw.WriteString("| Component | Series | Mean | Slope per hour [interval] | Allowed | Points (segments) | Outcome |\n|---|---|---:|---|---:|---:|---|\n")
	for _, res := range r.Results {
		mean, unit := Scaled(res.Metric, res.Fit.Mean)
		name := res.Metric
		if unit != "" {
			name += " (" + unit + ")"
		}
		if res.Err != "" {
			fmt.Fprintf(bw, "| %s | %s | %s | — | — | %d (%d) | FAIL: %s |\n", res.Component, name, num(mean), res.Fit.N, res.Fit.Segments, cell(res.Err))
			continue
		}
		s, _ := Scaled(res.Metric, res.Fit.Slope)
		lo, _ := Scaled(res.Metric, res.Fit.Lo)
		hi, _ := Scaled(res.Metric, res.Fit.Hi)
		allowed, _ := Scaled(res.Metric, res.Verdict.Allowed)
		outcome := string(res.Verdict.Outcome)
		if !res.Verdict.Pass {
			outcome = "FAIL: " + outcome
		}
		fmt.Fprintf(bw, "| %s | %s | %s | %s [%s, %s] | %s | %d (%d) | %s |\n", res.Component, name, num(mean),
			signed(s), signed(lo), signed(hi), num(allowed), res.Fit.N, res.Fit.Segments, outcome)
	}
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
