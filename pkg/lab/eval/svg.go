package eval

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
)

// The plots are hand-written SVG: no plotting dependency, and output that is
// a pure function of the report (byte-identical for equal reports).

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}

func color(i int) string { return palette[i%len(palette)] }

// fnum formats a coordinate compactly and deterministically.
func fnum(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

// frame maps data coordinates into a pixel rectangle.
type frame struct {
	x, y, w, h             float64
	xmin, xmax, ymin, ymax float64
	// xlog puts x on a log10 scale (xmin must then be > 0).
	xlog bool
}

func (f frame) px(v float64) float64 {
	if f.xlog {
		v = math.Max(v, f.xmin)
		return f.x + math.Log10(v/f.xmin)/math.Log10(f.xmax/f.xmin)*f.w
	}
	return f.x + (v-f.xmin)/(f.xmax-f.xmin)*f.w
}

// logTicks returns 1-2-5 ticks per decade within [lo, hi].
func logTicks(lo, hi float64) []float64 {
	var ticks []float64
	for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)); d++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, d); v >= lo && v <= hi {
				ticks = append(ticks, v)
			}
		}
	}
	return ticks
}

func (f frame) py(v float64) float64 {
	v = math.Max(f.ymin, math.Min(f.ymax, v))
	return f.y + f.h - (v-f.ymin)/(f.ymax-f.ymin)*f.h
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, math.Round(v/step)*step)
	}
	return ticks
}

func label(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// axes draws the frame, grid, ticks and labels.
func (f frame) axes(w io.Writer, title, xlabel, ylabel string) {
	fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#444"/>`+"\n", fnum(f.x), fnum(f.y), fnum(f.w), fnum(f.h))
	xticks := niceTicks(f.xmin, f.xmax, 6)
	if f.xlog {
		xticks = logTicks(f.xmin, f.xmax)
	}
	for _, t := range xticks {
		x := f.px(t)
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", fnum(x), fnum(f.y), fnum(x), fnum(f.y+f.h))
		fmt.Fprintf(w, `<text x="%s" y="%s" font-size="11" text-anchor="middle">%s</text>`+"\n", fnum(x), fnum(f.y+f.h+14), label(t))
	}
	for _, t := range niceTicks(f.ymin, f.ymax, 4) {
		y := f.py(t)
		fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", fnum(f.x), fnum(y), fnum(f.x+f.w), fnum(y))
		fmt.Fprintf(w, `<text x="%s" y="%s" font-size="11" text-anchor="end">%s</text>`+"\n", fnum(f.x-4), fnum(y+4), label(t))
	}
	fmt.Fprintf(w, `<text x="%s" y="%s" font-size="13" font-weight="bold">%s</text>`+"\n", fnum(f.x), fnum(f.y-6), html.EscapeString(title))
	if xlabel != "" {
		fmt.Fprintf(w, `<text x="%s" y="%s" font-size="12" text-anchor="middle">%s</text>`+"\n", fnum(f.x+f.w/2), fnum(f.y+f.h+30), html.EscapeString(xlabel))
	}
	fmt.Fprintf(w, `<text transform="translate(%s,%s) rotate(-90)" font-size="12" text-anchor="middle">%s</text>`+"\n", fnum(f.x-44), fnum(f.y+f.h/2), html.EscapeString(ylabel))
}

func legend(w io.Writer, x, y float64, names []string) {
	for i, n := range names {
		fmt.Fprintf(w, `<rect x="%s" y="%s" width="12" height="12" fill="%s"/><text x="%s" y="%s" font-size="12">%s</text>`+"\n",
			fnum(x), fnum(y+float64(i)*18), color(i), fnum(x+18), fnum(y+float64(i)*18+11), html.EscapeString(n))
	}
}

func header(w io.Writer, width, height int) {
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
}

// WriteScatterSVG plots, per policy, each run's cost against its SLO
// violation rate (small dots) and the policy's mean over runs (large disc).
func (r *Report) WriteScatterSVG(out io.Writer) error {
	w := bufio.NewWriter(out)
	header(w, 760, 480)
	// Costs span orders of magnitude across apps: plot them on a log scale.
	f := frame{x: 70, y: 40, w: 520, h: 380, xlog: true, xmin: math.Inf(1)}
	idx := map[string]int{}
	var names []string
	for i, s := range r.Summaries {
		idx[s.Policy] = i
		names = append(names, s.Policy)
	}
	for _, x := range r.Results {
		if x.Cost > 0 {
			f.xmin = math.Min(f.xmin, x.Cost)
		}
		f.xmax = math.Max(f.xmax, x.Cost)
		f.ymax = math.Max(f.ymax, 100*x.SLOViolationRate)
	}
	if math.IsInf(f.xmin, 1) {
		f.xmin = 1e-3
	}
	f.xmin /= 1.2
	f.xmax = math.Max(f.xmax*1.2, f.xmin*10)
	f.ymax = math.Max(f.ymax*1.05, 1)
	f.axes(w, "Cost vs SLO violations (dot = one app and trace, disc = policy mean)", "cost per run, log scale (core-hour equivalents)", "SLO violation rate (% of windows)")
	for _, x := range r.Results {
		fmt.Fprintf(w, `<circle cx="%s" cy="%s" r="2.5" fill="%s" fill-opacity="0.35"/>`+"\n", fnum(f.px(x.Cost)), fnum(f.py(100*x.SLOViolationRate)), color(idx[x.Policy]))
	}
	for i, s := range r.Summaries {
		if s.Runs == 0 {
			continue
		}
		fmt.Fprintf(w, `<circle cx="%s" cy="%s" r="7" fill="%s" stroke="black"/>`+"\n", fnum(f.px(s.Cost/float64(s.Runs))), fnum(f.py(100*s.SLOViolationRate)), color(i))
	}
	legend(w, 610, 50, names)
	fmt.Fprintln(w, "</svg>")
	return w.Flush()
}

// maxPoints bounds the vertices of one line; longer series are bucketed.
const maxPoints = 600

// WriteTimeSeriesSVG plots the kept run: load, replicas, CPU request per pod
// and p95 latency against the SLO, one line per policy.
func (r *Report) WriteTimeSeriesSVG(out io.Writer) error {
	if r.Series == nil || len(r.Series.Series) == 0 {
		return fmt.Errorf("report has no time series")
	}
	w := bufio.NewWriter(out)
	ss := r.Series
	const width, panelH, gap = 900, 150, 60
	header(w, width, 4*(panelH+gap)+20)
	var names []string
	var tmax float64
	for _, s := range ss.Series {
		names = append(names, s.Policy)
		if n := len(s.Points); n > 0 {
			tmax = math.Max(tmax, s.Points[n-1].Seconds/3600)
		}
	}
	type panel struct {
		title, ylabel string
		value         func(Point) float64
		peak          bool // bucket by max rather than mean
		single        bool // same for every policy: draw once
	}
	panels := []panel{
		{"Offered load — " + ss.App + " / " + ss.Trace, "requests/s", func(p Point) float64 { return p.Rate }, false, true},
		{"Replicas (desired)", "replicas", func(p Point) float64 { return float64(p.Replicas) }, false, false},
		{"CPU request per pod", "cores", func(p Point) float64 { return p.CPU }, false, false},
		{fmt.Sprintf("p95 latency (dashed: SLO %.3gs)", ss.SLO), "seconds", func(p Point) float64 { return p.P95 }, true, false},
	}
	for pi, pn := range panels {
		f := frame{x: 80, y: 30 + float64(pi)*(panelH+gap), w: 640, h: panelH, xmax: math.Max(tmax, 1e-6)}
		for _, s := range ss.Series {
			for _, p := range s.Points {
				f.ymax = math.Max(f.ymax, pn.value(p))
			}
		}
		if pi == 3 {
			// Timeouts would flatten everything else: clip at 4×SLO.
			f.ymax = math.Min(f.ymax, 4*ss.SLO)
			f.ymax = math.Max(f.ymax, 1.2*ss.SLO)
		}
		f.ymax = math.Max(f.ymax*1.05, 1e-9)
		xl := ""
		if pi == len(panels)-1 {
			xl = "hours"
		}
		f.axes(w, pn.title, xl, pn.ylabel)
		for si, s := range ss.Series {
			c := color(si)
			if pn.single {
				c = "#333"
			}
			polyline(w, f, s.Points, pn.value, pn.peak, c)
			if pn.single {
				break
			}
		}
		if pi == 3 {
			y := fnum(f.py(ss.SLO))
			fmt.Fprintf(w, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="black" stroke-dasharray="6,4"/>`+"\n", fnum(f.x), y, fnum(f.x+f.w), y)
		}
	}
	legend(w, 740, 60, names)
	fmt.Fprintln(w, "</svg>")
	return w.Flush()
}

func polyline(w io.Writer, f frame, pts []Point, value func(Point) float64, peak bool, c string) {
	if len(pts) == 0 {
		return
	}
	bucket := (len(pts) + maxPoints - 1) / maxPoints
	fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.3" points="`, c)
	for i := 0; i < len(pts); i += bucket {
		end := min(i+bucket, len(pts))
		var v float64
		for _, p := range pts[i:end] {
			if peak {
				v = math.Max(v, value(p))
			} else {
				v += value(p) / float64(end-i)
			}
		}
		fmt.Fprintf(w, "%s,%s ", fnum(f.px(pts[end-1].Seconds/3600)), fnum(f.py(v)))
	}
	fmt.Fprintln(w, `"/>`)
}
