package soak

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
)

// Line is one component's samples of one metric in a panel.
type Line struct {
	Name   string
	Color  string
	Points []Point
}

// Panel is one metric's plot: a line per component, against time.
type Panel struct {
	Title string
	// Metric names the series (its unit and scale come from Scaled).
	Metric string
	Lines  []Line
}

// Colors of the components' lines, by component name; others get grey.
var Colors = map[string]string{
	"recommender":          "#1f77b4",
	"updater":              "#2ca02c",
	"admission-controller": "#9467bd",
	"rl-agent":             "#d62728",
}

const (
	svgW, panelH                       = 760, 170
	svgMarginL, svgMarginR, svgMarginT = 70, 150, 46
	panelGap, svgMarginB               = 34, 40
)

// Plot builds the soak's panels from samples (component → metric →
// points): resident memory, goroutines, open descriptors, API request rate
// (from the request counter, per segment between restarts) and the
// agent's state directory, in that order, each with the components that
// have it.
func Plot(samples map[string]map[string][]Point, restarts []Restart) []Panel {
	cuts := make([]float64, 0, len(restarts))
	for _, r := range restarts {
		cuts = append(cuts, r.At)
	}
	var panels []Panel
	for _, p := range []struct{ title, metric string }{
		{"Resident memory (MiB)", MetricRSS},
		{"Heap in use (MiB)", MetricHeapInuse},
		{"Goroutines", MetricGoroutines},
		{"Open file descriptors", MetricFDs},
		{"API requests per second", MetricAPIRate},
		{"Agent state directory (MiB)", MetricStateDir},
	} {
		panel := Panel{Title: p.title, Metric: p.metric}
		for _, comp := range sortedKeys(samples) {
			var pts []Point
			if p.metric == MetricAPIRate {
				for _, s := range Segments(samples[comp][MetricAPIRequests], cuts, 0) {
					pts = append(pts, Rates(s)...)
				}
			} else {
				pts = samples[comp][p.metric]
			}
			if len(pts) > 0 {
				panel.Lines = append(panel.Lines, Line{Name: comp, Color: Colors[comp], Points: pts})
			}
		}
		if len(panel.Lines) > 0 {
			panels = append(panels, panel)
		}
	}
	return panels
}

// WriteSVG draws the panels one above the other against minutes since the
// soak started (0 to span seconds), each with a linear axis from 0, every
// line broken at the restarts, and a dashed vertical line at each restart
// labelled with the component restarted. The SVG is written by hand (no
// plotting dependency) and is a pure function of its inputs.
func WriteSVG(w io.Writer, title string, panels []Panel, restarts []Restart, span float64) error {
	if len(panels) == 0 {
		return errors.New("no panels to plot")
	}
	if !(span > 0) {
		return fmt.Errorf("span %g: want a positive duration", span)
	}
	cuts := make([]float64, 0, len(restarts))
	for _, r := range restarts {
		cuts = append(cuts, r.At)
	}
	height := svgMarginT + len(panels)*(panelH+panelGap) + svgMarginB
	plotW := float64(svgW - svgMarginL - svgMarginR)
	px := func(t float64) float64 { return svgMarginL + math.Max(0, math.Min(t, span))/span*plotW }

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", svgW, height, svgW, height)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, height)
	fmt.Fprintf(bw, `<text x="%s" y="18" text-anchor="middle" font-size="14">%s</text>`+"\n", f1(svgMarginL+plotW/2), html.EscapeString(title))
	bottom := float64(svgMarginT + len(panels)*(panelH+panelGap) - panelGap)
	for _, r := range restarts {
		x := px(r.At)
		fmt.Fprintf(bw, `<line x1="%s" y1="%d" x2="%s" y2="%s" stroke="#888" stroke-dasharray="4 3"/>`+"\n", f1(x), svgMarginT-8, f1(x), f1(bottom))
		fmt.Fprintf(bw, `<text x="%s" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", f1(x), svgMarginT-12, html.EscapeString(r.Component))
	}
	for i, p := range panels {
		top := float64(svgMarginT + i*(panelH+panelGap))
		ymax := 0.0
		for _, l := range p.Lines {
			for _, pt := range l.Points {
				if math.IsNaN(pt.V) || math.IsInf(pt.V, 0) {
					return fmt.Errorf("panel %q, line %q: sample %g is not finite", p.Title, l.Name, pt.V)
				}
				v, _ := Scaled(p.Metric, pt.V)
				ymax = math.Max(ymax, v)
			}
		}
		ymax = niceCeil(ymax)
		py := func(v float64) float64 { return top + panelH - v/ymax*panelH }
		fmt.Fprintf(bw, `<text x="%d" y="%s" font-size="12">%s</text>`+"\n", svgMarginL, f1(top-5), html.EscapeString(p.Title))
		for k := 0; k <= 4; k++ {
			v := ymax * float64(k) / 4
			fmt.Fprintf(bw, `<line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#eee"/>`+"\n", svgMarginL, f1(py(v)), f1(svgMarginL+plotW), f1(py(v)))
			fmt.Fprintf(bw, `<text x="%d" y="%s" text-anchor="end">%s</text>`+"\n", svgMarginL-5, f1(py(v)+4), strconv.FormatFloat(v, 'g', 4, 64))
		}
		fmt.Fprintf(bw, `<rect x="%d" y="%s" width="%s" height="%d" fill="none" stroke="black"/>`+"\n", svgMarginL, f1(top), f1(plotW), panelH)
		for j, l := range p.Lines {
			c := l.Color
			if c == "" {
				c = "#7f7f7f"
			}
			for _, seg := range Segments(l.Points, cuts, 0) {
				fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="`, html.EscapeString(c))
				for k, pt := range seg {
					if k > 0 {
						bw.WriteByte(' ')
					}
					v, _ := Scaled(p.Metric, pt.V)
					fmt.Fprintf(bw, "%s,%s", f1(px(pt.T)), f1(py(v)))
				}
				bw.WriteString(`"/>` + "\n")
			}
			ly := top + 14 + float64(j)*15
			fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`+"\n", f1(svgMarginL+plotW+10), f1(ly-4), f1(svgMarginL+plotW+28), f1(ly-4), html.EscapeString(c))
			fmt.Fprintf(bw, `<text x="%s" y="%s">%s</text>`+"\n", f1(svgMarginL+plotW+32), f1(ly), html.EscapeString(l.Name))
		}
	}
	for k := 0; k <= 6; k++ {
		t := span * float64(k) / 6
		fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f1(px(t)), f1(bottom+14), strconv.FormatFloat(math.Round(t/6)/10, 'f', -1, 64))
	}
	fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="middle">minutes into the soak</text>`+"\n", f1(svgMarginL+plotW/2), f1(bottom+30))
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v ≤ 0), so
// the axis' quarter ticks read well.
func niceCeil(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// f1 formats a pixel coordinate with one decimal, deterministically.
func f1(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }
