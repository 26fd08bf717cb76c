// Package chart draws small SVG charts for the project's reports without a
// plotting library: the output is plain SVG text, a pure function of the
// input, so equal data give byte-identical files.
package chart

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// Point is one marker of a scatter plot.
type Point struct {
	X, Y float64
	// Group picks the colour (one per distinct group, in the order of
	// Scatter.Groups); Label is the point's tooltip.
	Group, Label string
}

// Scatter is a scatter plot of points coloured by group.
type Scatter struct {
	Title, XLabel, YLabel string
	// Groups orders the legend and the colours; a point's group must be
	// one of them. Empty: the groups in the order they first appear.
	Groups []string
	Points []Point
}

// palette is colour-blind safe (Okabe–Ito); groups past its end reuse it.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// WriteSVG writes the plot: one circle per point (with its label as a
// tooltip), axes scaled to the points, and a legend of the groups. An
// error when there are no points, a coordinate is not finite, or a
// point's group is not in Groups.
func (s Scatter) WriteSVG(out io.Writer) error {
	if len(s.Points) == 0 {
		return errors.New("scatter: no points")
	}
	groups := slices.Clone(s.Groups)
	if len(groups) == 0 {
		for _, p := range s.Points {
			if !slices.Contains(groups, p.Group) {
				groups = append(groups, p.Group)
			}
		}
	}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i, p := range s.Points {
		if math.IsNaN(p.X) || math.IsInf(p.X, 0) || math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
			return fmt.Errorf("scatter: point %d (%s) is (%g, %g)", i, p.Label, p.X, p.Y)
		}
		if !slices.Contains(groups, p.Group) {
			return fmt.Errorf("scatter: point %d (%s) has group %q, not one of %v", i, p.Label, p.Group, groups)
		}
		xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
		ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
	}
	// A margin of 5% keeps markers off the frame; a flat axis gets a unit
	// span so that the scale is defined.
	pad := func(lo, hi float64) (float64, float64) {
		if hi <= lo {
			return lo - 0.5, hi + 0.5
		}
		m := (hi - lo) * 0.05
		return lo - m, hi + m
	}
	xmin, xmax = pad(xmin, xmax)
	ymin, ymax = pad(ymin, ymax)
	const width, height = 760, 460
	const x0, y0, pw, ph = 90.0, 40.0, 480.0, 360.0
	px := func(x float64) float64 { return x0 + (x-xmin)/(xmax-xmin)*pw }
	py := func(y float64) float64 { return y0 + ph - (y-ymin)/(ymax-ymin)*ph }
	f := func(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }

	w := bufio.NewWriter(out)
	text := func(x, y float64, size int, anchor, extra, s string) {
		fmt.Fprintf(w, `<text x="%s" y="%s" font-size="%d" text-anchor="%s"%s>`, f(x), f(y), size, anchor, extra)
		_ = xml.EscapeText(w, []byte(s)) // a bufio.Writer's error surfaces at Flush
		fmt.Fprintln(w, `</text>`)
	}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintln(w, `<rect width="100%" height="100%" fill="white"/>`)
	fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#444"/>`+"\n", f(x0), f(y0), f(pw), f(ph))
	for k := 0; k <= 4; k++ {
		x := xmin + (xmax-xmin)*float64(k)/4
		y := ymin + (ymax-ymin)*float64(k)/4
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>`+"\n", f(px(x)), f(y0), f(px(x)), f(y0+ph))
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/>`+"\n", f(x0), f(py(y)), f(x0+pw), f(py(y)))
		text(px(x), y0+ph+14, 11, "middle", "", num(x))
		text(x0-4, py(y)+4, 11, "end", "", num(y))
	}
	text(x0, 28, 13, "start", ` font-weight="bold"`, s.Title)
	text(x0+pw/2, y0+ph+32, 12, "middle", "", s.XLabel)
	text(16, y0+ph/2, 12, "middle", fmt.Sprintf(` transform="rotate(-90 16 %s)"`, f(y0+ph/2)), s.YLabel)
	colour := func(g string) string { return palette[slices.Index(groups, g)%len(palette)] }
	for _, p := range s.Points {
		fmt.Fprintf(w, `<circle cx="%s" cy="%s" r="5" fill="%s" fill-opacity="0.8" stroke="#222" stroke-width="0.5"><title>`, f(px(p.X)), f(py(p.Y)), colour(p.Group))
		_ = xml.EscapeText(w, []byte(p.Label+" ("+p.Group+")"))
		fmt.Fprintln(w, `</title></circle>`)
	}
	for k, g := range groups {
		y := y0 + 10 + 20*float64(k)
		fmt.Fprintf(w, `<rect x="%s" y="%s" width="10" height="10" fill="%s"/>`+"\n", f(x0+pw+20), f(y), colour(g))
		text(x0+pw+36, y+9, 12, "start", "", g)
	}
	fmt.Fprintln(w, `</svg>`)
	return w.Flush()
}
