package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Row is one measure taken of both sides in the same minutes.
type Row struct {
	// Measure names what was measured, e.g. "webhook p99 at 1000 req/s".
	Measure string
	// Unit of Ours and VPA, e.g. "ms", "MiB".
	Unit string
	// Ours and VPA are the two sides' values; lower is better.
	Ours, VPA float64
	// Goal is the largest Ours/VPA ratio that meets the goal; 0
	// means the measure has no goal.
	Goal float64
	// Load is the machine's 1-minute load average while it was measured.
	Load float64
}

// Ratio is Ours/VPA, NaN when VPA's value is 0 (nothing to compare with).
func (r Row) Ratio() float64 {
	if r.VPA == 0 {
		return math.NaN()
	}
	return r.Ours / r.VPA
}

// Verdict says whether the row meets its goal: "met", "NOT met", or "" when
// it has no goal; "n/a" when the ratio is undefined.
func (r Row) Verdict() string {
	switch {
	case r.Goal == 0:
		return ""
	case math.IsNaN(r.Ratio()):
		return "n/a"
	case r.Ratio() <= r.Goal:
		return "met"
	default:
		return "NOT met"
	}
}

// Num formats a measured value with three significant digits, without an
// exponent for the magnitudes a benchmark reports.
func Num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v == 0:
		return "0"
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if digits < 0 {
		digits = 0
	}
	return strconv.FormatFloat(v, 'f', digits, 64)
}

// WriteTable writes rows as a Markdown table: measure, both values, the
// ratio, the goal and whether it was met, and the load while measured.
func WriteTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| Measure | AWARE | VPA | AWARE/VPA | Goal | Met | Load (1 min) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|\n")
	for _, r := range rows {
		goal := ""
		if r.Goal > 0 {
			goal = "≤ " + strconv.FormatFloat(r.Goal, 'g', -1, 64) + "×"
		}
		ratio := "–"
		if !math.IsNaN(r.Ratio()) {
			ratio = strconv.FormatFloat(r.Ratio(), 'f', 2, 64) + "×"
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s %s | %s | %s | %s | %s |\n",
			escape(r.Measure), Num(r.Ours), r.Unit, Num(r.VPA), r.Unit, ratio, goal, r.Verdict(), strconv.FormatFloat(r.Load, 'f', 2, 64))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// escape keeps a cell's text from ending the cell.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
