package simside

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/aware-k8s/aware/hack/benchreal/result"
)

// The plot is hand-written SVG like the demo's (pkg/lab/eval/svg.go): no
// plotting dependency, and output that is a pure function of the runs.

const (
	colourReal  = "#0072B2" // Okabe–Ito blue, as pkg/lab/chart
	colourSim   = "#D55E00" // vermillion
	colourTrace = "#777777"
)

// series is one line of a panel.
type series struct {
	name, colour, dash string
	t, v               []float64
}

// panel is one of the plot's stacked charts.
type panel struct {
	title, unit string
	lines       []series
	// slo draws a dashed horizontal line (0: none).
	slo float64
}

// WriteSVG plots one real run and its simulated twin side by side, on one
// time axis (minutes from the start of the load): the rate (the trace's,
// and the requests each answered), the desired replicas, the requested
// CPU, and the p95 latency against the SLO (dashed).
func WriteSVG(out io.Writer, real, simulated result.Run) error {
	if len(real.Windows) == 0 || len(simulated.Windows) == 0 {
		return errors.New("svg: a run has no windows")
	}
	line := func(name, colour, dash string, r result.Run, f func(result.Window) float64) series {
		s := series{name: name, colour: colour, dash: dash}
		for _, w := range r.Windows {
			s.t = append(s.t, w.End/60)
			s.v = append(s.v, f(w))
		}
		return s
	}
	pair := func(f func(result.Window) float64) []series {
		return []series{line("real", colourReal, "", real, f), line("simulated", colourSim, "", simulated, f)}
	}
	rate := func(w result.Window) float64 { return float64(w.OK) / (w.End - w.Start) }
	panels := []panel{
		{title: "Requests answered per second (grey: the trace)", unit: "requests/s",
			lines: append([]series{line("trace", colourTrace, "4,3", real, func(w result.Window) float64 { return w.Expected / (w.End - w.Start) })}, pair(rate)...)},
		{title: "Replicas (desired)", unit: "replicas", lines: pair(func(w result.Window) float64 { return float64(w.Replicas) })},
		{title: "Requested CPU, all pods", unit: "cores", lines: pair(func(w result.Window) float64 { return w.CPURequested })},
		{title: fmt.Sprintf("p95 latency (dashed: SLO %.3g s; clipped at 4× SLO)", real.SLO), unit: "seconds", slo: real.SLO,
			lines: pair(func(w result.Window) float64 { return w.P95 })},
	}
	const width, panelH, gap, x0, pw = 900, 140, 60, 80.0, 660.0
	var tmax float64
	for _, p := range panels {
		for _, s := range p.lines {
			for i, v := range s.v {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("svg: %s of %s at window %d is %g", p.title, s.name, i, v)
				}
				tmax = math.Max(tmax, s.t[i])
			}
		}
	}
	w := bufio.NewWriter(out)
	height := len(panels)*(panelH+gap) + 40
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintln(w, `<rect width="100%" height="100%" fill="white"/>`)
	text(w, x0, 20, 14, "start", ` font-weight="bold"`, fmt.Sprintf("%s, repetition %d: real node against simulator", real.Policy, real.Rep))
	for pi, p := range panels {
		y0 := 50 + float64(pi)*(panelH+gap)
		var ymax float64
		for _, s := range p.lines {
			for _, v := range s.v {
				ymax = math.Max(ymax, v)
			}
		}
		if p.slo > 0 {
			// Timeouts would flatten everything else.
			ymax = math.Max(math.Min(ymax, 4*p.slo), 1.2*p.slo)
		}
		ymax = math.Max(ymax*1.05, 1e-9)
		px := func(t float64) float64 { return x0 + t/math.Max(tmax, 1e-9)*pw }
		py := func(v float64) float64 { return y0 + panelH - math.Min(math.Max(v, 0), ymax)/ymax*panelH }
		fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%d" fill="none" stroke="#444"/>`+"\n", num(x0), num(y0), num(pw), panelH)
		for k := 0; k <= 4; k++ {
			v := ymax * float64(k) / 4
			fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", num(x0), num(py(v)), num(x0+pw), num(py(v)))
			text(w, x0-4, py(v)+4, 11, "end", "", strconv.FormatFloat(v, 'g', 3, 64))
			t := tmax * float64(k) / 4
			text(w, px(t), y0+panelH+14, 11, "middle", "", strconv.FormatFloat(t, 'f', 1, 64))
		}
		text(w, x0, y0-6, 13, "start", ` font-weight="bold"`, p.title)
		text(w, x0-50, y0+panelH/2, 12, "middle", fmt.Sprintf(` transform="rotate(-90 %s %s)"`, num(x0-50), num(y0+panelH/2)), p.unit)
		for _, s := range p.lines {
			dash := ""
			if s.dash != "" {
				dash = ` stroke-dasharray="` + s.dash + `"`
			}
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.4"%s points="`, s.colour, dash)
			for i := range s.v {
				fmt.Fprintf(w, "%s,%s ", num(px(s.t[i])), num(py(s.v[i])))
			}
			fmt.Fprintln(w, `"/>`)
		}
		if p.slo > 0 {
			fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="black" stroke-dasharray="6,4"/>`+"\n", num(x0), num(py(p.slo)), num(x0+pw), num(py(p.slo)))
		}
		if pi == len(panels)-1 {
			text(w, x0+pw/2, y0+panelH+32, 12, "middle", "", "minutes from the start of the load")
		}
	}
	for i, s := range []struct{ name, colour string }{{"real node", colourReal}, {"simulator", colourSim}, {"trace", colourTrace}} {
		y := 60 + 20*float64(i)
		fmt.Fprintf(w, `<rect x="%s" y="%s" width="12" height="12" fill="%s"/>`+"\n", num(x0+pw+20), num(y), s.colour)
		text(w, x0+pw+38, y+11, 12, "start", "", s.name)
	}
	fmt.Fprintln(w, `</svg>`)
	return w.Flush()
}

func num(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

func text(w *bufio.Writer, x, y float64, size int, anchor, extra, s string) {
	fmt.Fprintf(w, `<text x="%s" y="%s" font-size="%d" text-anchor="%s"%s>`, num(x), num(y), size, anchor, extra)
	_ = xml.EscapeText(w, []byte(s)) // a bufio.Writer's error surfaces at Flush
	fmt.Fprintln(w, `</text>`)
}
