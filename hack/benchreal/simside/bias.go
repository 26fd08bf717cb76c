package simside

import (
	"math"
	"slices"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// SmallPodCPU divides BiasBySize's pods: HPA+VPA's run at 0.16–0.20 core,
// the default's floor at 0.66–0.77.
const SmallPodCPU = 0.4

// BiasBySize is a model's median ln(real/model) for small and large pods.
type BiasBySize struct {
	Small        float64 `json:"small"`
	Large        float64 `json:"large"`
	SmallWindows int     `json:"smallWindows"`
	LargeWindows int     `json:"largeWindows"`
	// SmallByMachineCPU and LargeByMachineCPU are each size's error run
	// by run against the CPU the whole machine used (machineContention).
	SmallByMachineCPU MachineContention `json:"smallByMachineCpu"`
	LargeByMachineCPU MachineContention `json:"largeByMachineCpu"`
}

// biasBySize is the median ln(y/model) of the windows ws below and above
// SmallPodCPU of CPU requested per Ready pod.
func biasBySize(ws []result.Window, ys, model []float64) BiasBySize {
	var small, large []float64
	for i, w := range ws {
		l := math.Log(ys[i] / model[i])
		if w.CPURequested/float64(w.Ready) < SmallPodCPU {
			small = append(small, l)
		} else {
			large = append(large, l)
		}
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0 // JSON has no NaN; the count says there was none
		}
		return median(v, "").Value
	}
	return BiasBySize{Small: med(small), Large: med(large), SmallWindows: len(small), LargeWindows: len(large)}
}

// The burst model gives a request a whole core while its pod's quota
// lasts, as if nothing else ran on the node. On the real node the control
// plane, the components and the load generator share its two cores, and
// at the floor's pod of about 0.7 core, where the quota seldom binds, the
// real p95 is above the model's (BiasBySize.Large). MachineContention sets
// that error, run by run, beside the CPU the whole machine used during
// the run: if the rest of the node slows the large pod's requests, the
// error grows with it. The small pods' error is set beside it the same
// way: where the quota binds, the cause may be another.

// MinContentionWindows is the fewest calm windows of one large pod a run
// needs for its median error to count.
const MinContentionWindows = 5

// MachineContention is the least-squares line of the burst model's median
// ln(real/model p95) in a run's calm windows of one pod of one size (at
// least SmallPodCPU, or below), against the machine's CPU over the run
// (cores, the app's own included: result.CPUShare.Machine over its wall
// time).
type MachineContention struct {
	// Runs is how many runs had MinContentionWindows such windows; with
	// fewer than 3, or no spread in the machine's CPU, nothing else is
	// set.
	Runs int `json:"runs"`
	// Slope is the error's rise per core of the machine's CPU, with its
	// 95% Student-t interval; Intercept the error at none; R the Pearson
	// correlation; MachineLo and MachineHi the range of the machine's CPU
	// the runs spanned.
	Slope     stats.Interval `json:"slope"`
	Intercept float64        `json:"intercept"`
	R         float64        `json:"r"`
	MachineLo float64        `json:"machineLo"`
	MachineHi float64        `json:"machineHi"`
	// WithinSessions is the slope within sessions (runs that started
	// within SessionGap of the one before: one invocation of bench-real,
	// or several in a row, on one machine), each session's runs centred
	// on its means, so that a slower machine that also used more CPU
	// does not make the line. Sessions is how many held two runs or more;
	// N is 0 without two such runs more than sessions.
	WithinSessions stats.Interval `json:"withinSessions"`
	Sessions       int            `json:"sessions"`
}

// SessionGap separates MachineContention's sessions: a run that started
// more than this after the one before it starts another. The committed
// rounds' runs start 10–20 min apart within an invocation, and 22 min or
// more apart between invocations, whose machines may differ.
const SessionGap = 20 * time.Minute

// machineContention fits MachineContention over runs, for the pods of at
// least SmallPodCPU (large) or below, with the burst model (its requests'
// CPU time at a coefficient of variation cv) on node, and with
// background each run's own (RunBackground), else none. Each run's model
// takes the run's own CPU used over requests answered and no idle CPU (as
// --sim-cpu-ratio does), where it was recorded, so that runs of machines
// whose speed differs (their CPU per request by up to 20% between rounds)
// compare; else the app's cpu. Runs recorded without the machine's CPU
// are left out. With the background the line says what the model leaves
// of the machine's part in the error.
func machineContention(runs []result.Run, cpu sim.Demand, cv float64, node SimNode, background, large bool) MachineContention {
	type point struct {
		x, y  float64
		start time.Time
	}
	var ps []point
	for _, r := range runs {
		if !(r.CPU.Wall > 0 && r.CPU.Machine > 0) {
			continue
		}
		cpu := cpu
		if r.CPUSecondsPerRequest > 0 {
			cpu = sim.Demand{CPUSeconds: r.CPUSecondsPerRequest}
		}
		bg := 0.0
		if background {
			bg, _ = RunBackground(r)
		}
		var errs []float64
		ws, _ := calmWindows([]result.Run{r}, cpu)
		for _, w := range ws {
			perPod := w.CPURequested / float64(w.Ready)
			if w.Ready != 1 || (perPod >= SmallPodCPU) != large || !(w.P95 > 0) {
				continue
			}
			m := QuotaP95(cpu, cv, perPod, w.Expected/(w.End-w.Start), node.Quota(bg))
			errs = append(errs, math.Log(w.P95/m))
		}
		if len(errs) < MinContentionWindows {
			continue
		}
		start, _ := time.Parse(time.RFC3339, r.Start) // zero when not recorded: a session of its own
		ps = append(ps, point{r.CPU.Machine / r.CPU.Wall, median(errs, "").Value, start})
	}
	c := MachineContention{Runs: len(ps)}
	xs, ys := make([]float64, len(ps)), make([]float64, len(ps))
	for i, p := range ps {
		xs[i], ys[i] = p.x, p.y
	}
	l, ok := fitLine(xs, ys, 1)
	if !ok {
		return c
	}
	c.Slope, c.Intercept, c.R = l.slope, l.intercept, l.r
	c.MachineLo, c.MachineHi = slices.Min(xs), slices.Max(xs)

	// Within sessions: each session's runs centred on their means; a
	// session of one run says nothing of the slope and is left out.
	slices.SortStableFunc(ps, func(a, b point) int { return a.start.Compare(b.start) })
	var cx, cy []float64
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && !ps[j].start.IsZero() && !ps[i].start.IsZero() && ps[j].start.Sub(ps[j-1].start) <= SessionGap {
			j++
		}
		if j-i >= 2 {
			var mx, my float64
			for _, p := range ps[i:j] {
				mx += p.x / float64(j-i)
				my += p.y / float64(j-i)
			}
			for _, p := range ps[i:j] {
				cx, cy = append(cx, p.x-mx), append(cy, p.y-my)
			}
			c.Sessions++
		}
		i = j
	}
	if w, ok := fitLine(cx, cy, c.Sessions); ok {
		c.WithinSessions = w.slope
	}
	return c
}

// line is a least-squares line y = intercept + slope·x.
type line struct {
	slope        stats.Interval
	intercept, r float64
}

// fitLine fits the line through xs and ys, from which means means were
// taken (1: the line's own intercept; one a group where each group was
// centred on its own). ok is false without 2 points more than means, or
// without spread in xs.
func fitLine(xs, ys []float64, means int) (l line, ok bool) {
	n := float64(len(xs))
	df := n - 1 - float64(means)
	if df < 1 {
		return l, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i] / n
		my += ys[i] / n
	}
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return l, false
	}
	b := sxy / sxx
	// The slope's standard error from the residuals.
	se := math.Sqrt(math.Max(syy-b*sxy, 0) / df / sxx)
	h := stats.TQuantile(0.975, df) * se
	l.slope = stats.Interval{N: len(xs), Mean: b, Lo: b - h, Hi: b + h}
	l.intercept = my - b*mx
	if syy > 0 {
		l.r = sxy / math.Sqrt(sxx*syy)
	}
	return l, true
}

// RunBackground is the CPU the machine used beside the app's pods during
// run r (result.CPUShare.Machine and Steal, less the pods' usage
// integrated over the windows), over the run's wall time, in cores: the
// control plane, the components, the load generator and whatever else ran
// on the node's cores. ok is false when the run did not record the
// machine's CPU.
func RunBackground(r result.Run) (cores float64, ok bool) {
	if !(r.CPU.Wall > 0 && r.CPU.Machine > 0) {
		return 0, false
	}
	return math.Max(r.CPU.Machine+r.CPU.Steal-r.CPUUsedSeconds(), 0) / r.CPU.Wall, true
}

// MeasureBackground is the median of RunBackground over the runs that
// recorded it.
func MeasureBackground(runs []result.Run) Estimate {
	var bg []float64
	for _, r := range runs {
		if v, ok := RunBackground(r); ok {
			bg = append(bg, v)
		}
	}
	if len(bg) == 0 {
		return Estimate{Method: "no run recorded the machine's CPU"}
	}
	return median(bg, "median over the runs of the machine's CPU and steal less the app's pods' (metrics.k8s.io, integrated over the windows), over the wall time")
}
