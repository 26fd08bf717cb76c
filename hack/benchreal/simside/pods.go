package simside

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// A policy's miss in the side-by-side table has two parts that the table
// alone cannot tell apart: the simulator's queue and latency at the pods
// the policy had (the model's error), and the pods themselves, where the
// replayed policy scaled or resized otherwise than the real one did (its
// path). ReplayPods removes the second: it replays the trace on the real
// run's own pods, window by window, so that the simulator's SLO-violating
// windows there differ from the real ones by the model's error alone, and
// the closed-loop replay differs from it by the path alone.

// ReplayPods replays the trace of the real run r on r's own pods: from
// each window's start, the replicas the real Deployment wanted at its end
// (the real HPA scales at the end of a window, and a pod it creates is
// Ready some 7 s into the next, as a simulated pod created at the window's
// start), each requesting the mean of what the real Ready pods requested
// at its end (the real pods' requests may differ from one another, the
// simulated ones' do not; without a Ready pod, the window's mean requests
// over its replicas). The pods change from the first window on, including
// those before the real autoscaler's creation.
func ReplayPods(cal Calibration, settings map[string]string, r result.Run, draw int) (result.Run, error) {
	run, _, err := replay(cal, settings, r.Policy, r.Rep, draw, &r)
	return run, err
}

// podsChangeBelow is the relative change of a recorded per-pod request
// that the replay ignores: the real requests are window means, which
// wander by a few percent when a pod comes or goes within a window, where
// the real pods were not resized.
const podsChangeBelow = 0.02

// recordedPods returns a factory of a policy that, at the end of window j
// (its j-th call, from 0), recommends the pods of window j+1 of r.
func recordedPods(r *result.Run, container string) (workload.PolicyFactory, error) {
	if len(r.Windows) == 0 {
		return nil, fmt.Errorf("run %s repetition %d: no windows to replay the pods of", r.Policy, r.Rep)
	}
	for i, w := range r.Windows {
		if w.Replicas < 1 || !(w.CPURequested > 0) || !(w.MemoryRequested > 0) {
			return nil, fmt.Errorf("run %s repetition %d, window %d: %d replicas requesting %g cores and %g bytes: no pods to replay", r.Policy, r.Rep, i, w.Replicas, w.CPURequested, w.MemoryRequested)
		}
	}
	return func(workload.Constraints) (workload.Policy, error) {
		return &podsPolicy{ws: r.Windows, container: container}, nil
	}, nil
}

type podsPolicy struct {
	ws        []result.Window
	container string
	next      int
	cpu, mem  float64 // per pod, as last recommended
}

var _ workload.Policy = (*podsPolicy)(nil)

func (p *podsPolicy) Name() string { return "recorded pods" }

// ReadsLatency implements workload.LatencyReader: the pods are the
// recorded ones, whatever the observation holds.
func (p *podsPolicy) ReadsLatency() workload.Percentiles { return workload.NoPercentiles }

func (p *podsPolicy) Recommend(context.Context, workload.Observation) (workload.Recommendation, error) {
	k := min(p.next+1, len(p.ws)-1)
	p.next++
	w := p.ws[k]
	cpu := w.CPURequested / float64(w.Replicas)
	if w.Ready > 0 && w.ReadyCPURequested > 0 {
		cpu = w.ReadyCPURequested / float64(w.Ready)
	}
	mem := w.MemoryRequested / float64(w.Replicas)
	if p.cpu == 0 || math.Abs(cpu/p.cpu-1) >= podsChangeBelow {
		p.cpu = math.Round(cpu*1000) / 1000
	}
	if p.mem == 0 || math.Abs(mem/p.mem-1) >= podsChangeBelow {
		p.mem = math.Round(mem/sim.MiB) * sim.MiB
	}
	return workload.Recommendation{
		Replicas:   int32(w.Replicas),
		Containers: []workload.ContainerRecommendation{{Name: p.container, Target: workload.Resources{CPU: p.cpu, Memory: p.mem}}},
		Source:     workload.SourceDefault,
		Reason:     "recorded",
	}, nil
}

// WritePodsReplay splits each policy's simulated − real SLO-violating
// windows into the model's error (the simulator on the real pods, onPods,
// against the real runs) and the path's (the closed-loop replay, closed,
// against the simulator on the real pods), paired by repetition, with the
// cost and lost requests on the real pods beside the real ones.
func WritePodsReplay(w io.Writer, real, onPods, closed []result.Run) error {
	model, err := Compare(real, onPods)
	if err != nil {
		return fmt.Errorf("on the real pods: %w", err)
	}
	path, err := Compare(onPods, closed)
	if err != nil {
		return fmt.Errorf("closed loop against the real pods: %w", err)
	}
	byPolicy := map[string]Row{}
	for _, r := range path {
		byPolicy[r.Policy] = r
	}
	var b strings.Builder
	fmt.Fprintln(&b, "the simulator on the real runs' own pods (each window's replicas and mean requests as recorded): SLO-violating windows")
	fmt.Fprintln(&b, "Δ model = on the real pods − real (the queue and latency at the same pods); Δ path = closed loop − on the real pods (the replayed policy's other pods); paired by repetition, mean [95% interval]:")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tpairs\treal\ton real pods\tclosed loop\tΔ model (points)\tΔ path (points)\tcost on pods/real\tlost real\tlost on pods")
	for _, m := range model {
		p, ok := byPolicy[m.Policy]
		if !ok {
			return fmt.Errorf("policy %s has no closed-loop replay", m.Policy)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.1f%%\t%.1f%%\t%s\t%s\t%.3f\t%.2f%%\t%.2f%%\n",
			m.Policy, m.Pairs, 100*m.Real.Violations, 100*m.Simulated.Violations, 100*p.Simulated.Violations,
			pairedInterval(m.ViolationsDiff, 100), pairedInterval(p.ViolationsDiff, 100),
			m.CostRatio(), 100*m.Real.LostShare, 100*m.Simulated.LostShare)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	states := podStates(real, onPods)
	fmt.Fprintf(&b, "where the model's windows differ: the real runs' states (Ready pods × CPU per pod; \"loss\" a window that lost requests), the %d with the most windows the model gets otherwise:\n", min(len(states), maxPodStates))
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tstate\twindows\tviolating real\ton real pods\tΔ (windows)\tmedian ln(real/sim p95)")
	for _, st := range states[:min(len(states), maxPodStates)] {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%+.1f\t%s\n", st.policy, st.state, st.windows, st.real, st.sim, st.sim-float64(st.real), st.bias)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// maxPodStates is how many states WritePodsReplay lists.
const maxPodStates = 6

// podStateRow is one policy's windows in one state of the real pods.
type podStateRow struct {
	policy, state string
	windows, real int
	// sim is the windows the replay on the real pods violates, the mean
	// over its draws.
	sim  float64
	bias string
	logs []float64
}

// podStates groups each real window with its replays on the same pods
// (every draw) by policy and the real pods' state, largest difference of
// violating windows first.
func podStates(real, onPods []result.Run) []podStateRow {
	type key struct {
		policy string
		rep    int
	}
	draws := map[key][]result.Run{}
	for _, r := range onPods {
		k := key{r.Policy, r.Rep}
		draws[k] = append(draws[k], r)
	}
	rows := map[[2]string]*podStateRow{}
	var order [][2]string
	for _, r := range real {
		ds := draws[key{r.Policy, r.Rep}]
		for i, w := range r.Windows {
			if w.Sent == 0 {
				continue
			}
			state := "loss"
			if w.Lost == 0 && w.Ready > 0 {
				state = fmt.Sprintf("%d × %.2f", w.Ready, w.ReadyCPURequested/float64(w.Ready))
			}
			k := [2]string{r.Policy, state}
			row, ok := rows[k]
			if !ok {
				row = &podStateRow{policy: r.Policy, state: state}
				rows[k] = row
				order = append(order, k)
			}
			row.windows++
			if w.Violated(r.SLO) {
				row.real++
			}
			for _, d := range ds {
				if i >= len(d.Windows) {
					continue
				}
				sw := d.Windows[i]
				if sw.Violated(r.SLO) {
					row.sim += 1 / float64(len(ds))
				}
				if state != "loss" && w.P95 > 0 && sw.P95 > 0 && sw.Lost == 0 {
					row.logs = append(row.logs, math.Log(w.P95/sw.P95))
				}
			}
		}
	}
	out := make([]podStateRow, 0, len(order))
	for _, k := range order {
		row := rows[k]
		row.bias = "-"
		if len(row.logs) > 0 {
			row.bias = fmt.Sprintf("%+.2f", median(row.logs, "").Value)
		}
		out = append(out, *row)
	}
	slices.SortStableFunc(out, func(a, b podStateRow) int {
		return cmp.Compare(math.Abs(b.sim-float64(b.real)), math.Abs(a.sim-float64(a.real)))
	})
	return out
}
