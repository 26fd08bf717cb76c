package bench

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
)

// Point is one measurement of a cost at a scale.
type Point struct{ X, Y float64 }

// Series is one side's cost at each measured scale.
type Series struct {
	Name   string
	Color  string
	Points []Point
}

// Plot is a log-log line plot of cost against scale. The SVG is written by
// hand (no plotting dependency) and is a pure function of the Plot.
type Plot struct {
	Title, XLabel, YLabel string
	Series                []Series
}

const (
	plotW, plotH                       = 640, 400
	marginL, marginR, marginT, marginB = 70, 20, 40, 50
)

// WriteSVG writes the plot. Both axes are log10, so every value must be > 0.
func (p Plot) WriteSVG(out io.Writer) error {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	n := 0
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if !(pt.X > 0 && pt.Y > 0) || math.IsInf(pt.X, 0) || math.IsInf(pt.Y, 0) {
				return fmt.Errorf("series %q: point (%v, %v) cannot be drawn on log axes", s.Name, pt.X, pt.Y)
			}
			xmin, xmax = math.Min(xmin, pt.X), math.Max(xmax, pt.X)
			ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
			n++
		}
	}
	if n == 0 {
		return errors.New("plot has no points")
	}
	// Whole decades around the data.
	xmin, xmax = math.Pow(10, math.Floor(math.Log10(xmin))), math.Pow(10, math.Ceil(math.Log10(xmax)))
	ymin, ymax = math.Pow(10, math.Floor(math.Log10(ymin))), math.Pow(10, math.Ceil(math.Log10(ymax)))
	if xmax == xmin {
		xmax *= 10
	}
	if ymax == ymin {
		ymax *= 10
	}
	x0, y0 := float64(marginL), float64(marginT)
	w, h := float64(plotW-marginL-marginR), float64(plotH-marginT-marginB)
	px := func(v float64) float64 { return x0 + math.Log10(v/xmin)/math.Log10(xmax/xmin)*w }
	py := func(v float64) float64 { return y0 + h - math.Log10(v/ymin)/math.Log10(ymax/ymin)*h }

	bw := bufio.NewWriter(out)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(bw, `<text x="%s" y="20" text-anchor="middle" font-size="14">%s</text>`+"\n", f1(x0+w/2), html.EscapeString(p.Title))
	for _, t := range decades(xmin, xmax) {
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", f1(px(t)), f1(y0), f1(px(t)), f1(y0+h))
		fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", f1(px(t)), f1(y0+h+16), tick(t))
	}
	for _, t := range decades(ymin, ymax) {
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", f1(x0), f1(py(t)), f1(x0+w), f1(py(t)))
		fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", f1(x0-6), f1(py(t)+4), tick(t))
	}
	fmt.Fprintf(bw, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="black"/>`+"\n", f1(x0), f1(y0), f1(w), f1(h))
	fmt.Fprintf(bw, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", f1(x0+w/2), plotH-10, html.EscapeString(p.XLabel))
	fmt.Fprintf(bw, `<text transform="translate(16 %s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", f1(y0+h/2), html.EscapeString(p.YLabel))
	for i, s := range p.Series {
		c := s.Color
		if c == "" {
			c = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}[i%4]
		}
		fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, html.EscapeString(c))
		for j, pt := range s.Points {
			if j > 0 {
				bw.WriteByte(' ')
			}
			fmt.Fprintf(bw, "%s,%s", f1(px(pt.X)), f1(py(pt.Y)))
		}
		bw.WriteString(`"/>` + "\n")
		for _, pt := range s.Points {
			fmt.Fprintf(bw, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", f1(px(pt.X)), f1(py(pt.Y)), html.EscapeString(c))
		}
		ly := y0 + 16 + float64(i)*18
		fmt.Fprintf(bw, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`+"\n", f1(x0+10), f1(ly-4), f1(x0+30), f1(ly-4), html.EscapeString(c))
		fmt.Fprintf(bw, `<text x="%s" y="%s">%s</text>`+"\n", f1(x0+36), f1(ly), html.EscapeString(s.Name))
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// decades returns the powers of ten in [lo, hi].
func decades(lo, hi float64) []float64 {
	var out []float64
	for d := math.Round(math.Log10(lo)); d <= math.Round(math.Log10(hi)); d++ {
		out = append(out, math.Pow(10, d))
	}
	return out
}

// tick labels a power of ten compactly: 0.001 … 1000, then 10k, 100k.
func tick(v float64) string {
	switch {
	case v >= 1e4 && v < 1e6:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// f1 formats a pixel coordinate with one decimal, deterministically.
func f1(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }
