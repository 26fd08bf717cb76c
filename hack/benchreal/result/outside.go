package result

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// DefaultMaxOutsideCores is the CPU (cores, averaged over a run) that
// processes outside the benchmark may take before the run counts as
// disturbed. Measured on the 2-core machine: quiet runs show 0.01–0.2
// cores outside; runs beside other work (compiles, tests at nice 19 in the
// same cgroup) show 0.6–1.65, and there a 1-core pod at 55% utilisation
// answered in 0.5–1.5 s at p95 instead of 30 ms.
const DefaultMaxOutsideCores = 0.25

// OutsideCores is the mean CPU (cores) the machine spent on anything but the
// benchmark's parts during the run: the machine's total less the control
// plane, the node, the pods, the load generator and VPA's processes. NaN
// without a measurement.
func (c CPUShare) OutsideCores() float64 {
	if !(c.Wall > 0) || !(c.Machine > 0) {
		return math.NaN()
	}
	return max(0, c.Machine-c.ControlPlane-c.Node-c.Components-c.LoadGen-c.VPA) / c.Wall
}

// StealCores is the mean CPU (cores) the hypervisor took from the machine
// during the run (CPUShare.Steal); 0 without a measurement.
func (c CPUShare) StealCores() float64 {
	if !(c.Wall > 0) || !(c.Steal > 0) {
		return 0
	}
	return c.Steal / c.Wall
}

// Disturbed reports whether more than maxCores of CPU went to processes
// outside the benchmark, or to the hypervisor's other guests, during r.
// The benchmark's parts lose either alike. Before steal was split out it
// was counted as outside; on round twenty-nine's machine every run showed
// 0.11–0.26 cores outside, with nothing else started there, and the runs
// did not record which it was (docs/real-node-rounds.md).
func Disturbed(r Run, maxCores float64) bool {
	return r.CPU.OutsideCores()+r.CPU.StealCores() > maxCores
}

// WriteOutside prints the CPU outside the benchmark of every run above
// maxCores (nothing when none is).
func WriteOutside(w io.Writer, runs []Run, maxCores float64) error {
	var bad []Run
	for _, r := range runs {
		if Disturbed(r, maxCores) {
			bad = append(bad, r)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nDISTURBED: runs during which processes outside the benchmark and the hypervisor's steal took more than %.2f cores on average (latency is not the autoscaler's alone):\n", maxCores)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\trep\toutside (cores)\tsteal (cores)\tmachine (cores)")
	for _, r := range bad {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\n", r.Policy, r.Rep, r.CPU.OutsideCores(), r.CPU.StealCores(), r.CPU.Machine/r.CPU.Wall)
	}
	return tw.Flush()
}

// Quiet returns the runs that were not disturbed, and those that were.
func Quiet(runs []Run, maxCores float64) (quiet, disturbed []Run) {
	for _, r := range runs {
		if Disturbed(r, maxCores) {
			disturbed = append(disturbed, r)
		} else {
			quiet = append(quiet, r)
		}
	}
	return quiet, disturbed
}

// CPUUsedSeconds is the CPU the run's pods used (metrics.k8s.io's usage
// of each window times its width), in CPU-seconds.
func (r Run) CPUUsedSeconds() float64 {
	var used float64
	for _, w := range r.Windows {
		used += w.CPUUsed * (w.End - w.Start)
	}
	return used
}
