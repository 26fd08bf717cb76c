package chart

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Line is one series of a panel: Y[i] at X[i]. A NaN or infinite Y is a
// gap, which breaks the line.
type Line struct {
	Name string
	X, Y []float64
	// Colour is the stroke (default "#333"); Width its width (default 1.3).
	Colour string
	Width  float64
}

// Panel is one plot of a TimeSeries, sharing its x axis with the others.
type Panel struct {
	Title, YLabel string
	Lines         []Line
	// Peak buckets a long line by its maximum rather than its mean, for
	// series whose spikes matter (latency).
	Peak bool
}

// LegendEntry names one colour.
type LegendEntry struct{ Name, Colour string }

// TimeSeries stacks panels of lines over one x axis, in the style of the
// evaluator's timeseries.svg (pkg/lab/eval): 900 px wide, a 150 px panel
// each, light grid, legend on the right.
type TimeSeries struct {
	XLabel string
	Panels []Panel
	Legend []LegendEntry
}

// TimeSeriesColour is the i-th colour of the evaluator's palette, so that a
// policy has the colour it has in the demo's plots when given its index.
func TimeSeriesColour(i int) string {
	p := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}
	return p[i%len(p)]
}

// maxVertices bounds the vertices of one line; longer lines are bucketed.
const maxVertices = 600

// WriteSVG writes the chart. An error when there is no panel, a line's X
// and Y differ in length, or an X is not finite.
func (t TimeSeries) WriteSVG(out io.Writer) error {
	if len(t.Panels) == 0 {
		return errors.New("time series: no panels")
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, p := range t.Panels {
		for _, l := range p.Lines {
			if len(l.X) != len(l.Y) {
				return fmt.Errorf("time series: line %q has %d x and %d y", l.Name, len(l.X), len(l.Y))
			}
			for _, x := range l.X {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return fmt.Errorf("time series: line %q has x %g", l.Name, x)
				}
				xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			}
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax = 0, 1
	}
	if !(xmax > xmin) {
		xmax = xmin + 1
	}
	const width, panelH, gap = 900, 150, 60
	height := len(t.Panels)*(panelH+gap) + 20
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintln(w, `<rect width="100%" height="100%" fill="white"/>`)
	for pi, p := range t.Panels {
		f := tsFrame{x: 80, y: 30 + float64(pi)*(panelH+gap), w: 640, h: panelH, xmin: xmin, xmax: xmax}
		for _, l := range p.Lines {
			for _, y := range l.Y {
				if !math.IsNaN(y) && !math.IsInf(y, 0) {
					f.ymax = math.Max(f.ymax, y)
				}
			}
		}
		f.ymax = math.Max(f.ymax*1.05, 1e-9)
		xl := ""
		if pi == len(t.Panels)-1 {
			xl = t.XLabel
		}
		f.axes(w, p.Title, xl, p.YLabel)
		for _, l := range p.Lines {
			f.line(w, l, p.Peak)
		}
	}
	for i, e := range t.Legend {
		y := 60 + float64(i)*18
		fmt.Fprintf(w, `<rect x="740" y="%s" width="12" height="12" fill="%s"/><text x="758" y="%s" font-size="12">`, tsNum(y), e.Colour, tsNum(y+11))
		_ = xml.EscapeText(w, []byte(e.Name)) // a bufio.Writer's error surfaces at Flush
		fmt.Fprintln(w, `</text>`)
	}
	fmt.Fprintln(w, "</svg>")
	return w.Flush()
}

func tsNum(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

type tsFrame struct {
	x, y, w, h             float64
	xmin, xmax, ymin, ymax float64
}

func (f tsFrame) px(v float64) float64 { return f.x + (v-f.xmin)/(f.xmax-f.xmin)*f.w }

func (f tsFrame) py(v float64) float64 {
	v = math.Max(f.ymin, math.Min(f.ymax, v))
	return f.y + f.h - (v-f.ymin)/(f.ymax-f.ymin)*f.h
}

// ticks returns about n round values covering [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

func (f tsFrame) axes(w *bufio.Writer, title, xlabel, ylabel string) {
	text := func(x, y float64, size int, extra, s string) {
		fmt.Fprintf(w, `<text x="%s" y="%s" font-size="%d"%s>`, tsNum(x), tsNum(y), size, extra)
		_ = xml.EscapeText(w, []byte(s))
		fmt.Fprintln(w, `</text>`)
	}
	fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#444"/>`+"\n", tsNum(f.x), tsNum(f.y), tsNum(f.w), tsNum(f.h))
	for _, t := range ticks(f.xmin, f.xmax, 6) {
		x := f.px(t)
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", tsNum(x), tsNum(f.y), tsNum(x), tsNum(f.y+f.h))
		text(x, f.y+f.h+14, 11, ` text-anchor="middle"`, strconv.FormatFloat(t, 'g', 4, 64))
	}
	for _, t := range ticks(f.ymin, f.ymax, 4) {
		y := f.py(t)
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", tsNum(f.x), tsNum(y), tsNum(f.x+f.w), tsNum(y))
		text(f.x-4, y+4, 11, ` text-anchor="end"`, strconv.FormatFloat(t, 'g', 4, 64))
	}
	text(f.x, f.y-6, 13, ` font-weight="bold"`, title)
	if xlabel != "" {
		text(f.x+f.w/2, f.y+f.h+30, 12, ` text-anchor="middle"`, xlabel)
	}
	fmt.Fprintf(w, `<text transform="translate(%s,%s) rotate(-90)" font-size="12" text-anchor="middle">`, tsNum(f.x-44), tsNum(f.y+f.h/2))
	_ = xml.EscapeText(w, []byte(ylabel))
	fmt.Fprintln(w, `</text>`)
}

// line draws l as polylines, bucketed to at most maxVertices vertices; a
// bucket without a finite value ends the polyline (a gap in the history).
func (f tsFrame) line(w *bufio.Writer, l Line, peak bool) {
	colour, width := l.Colour, l.Width
	if colour == "" {
		colour = "#333"
	}
	if width <= 0 {
		width = 1.3
	}
	bucket := max(1, (len(l.Y)+maxVertices-1)/maxVertices)
	open := false
	for i := 0; i < len(l.Y); i += bucket {
		end := min(i+bucket, len(l.Y))
		var v float64
		n := 0
		for _, y := range l.Y[i:end] {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			if peak {
				v = math.Max(v, y)
			} else {
				v += y
			}
			n++
		}
		if n == 0 {
			if open {
				fmt.Fprintln(w, `"/>`)
				open = false
			}
			continue
		}
		if !peak {
			v /= float64(n)
		}
		if !open {
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="%s" points="`, colour, tsNum(width))
			open = true
		}
		fmt.Fprintf(w, "%s,%s ", tsNum(f.px(l.X[end-1])), tsNum(f.py(v)))
	}
	if open {
		fmt.Fprintln(w, `"/>`)
	}
}
