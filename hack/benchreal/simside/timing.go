package simside

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// Timing is when the replay's policies decide and when their decisions
// reach the pods. Its zero value is the simulator's own timing: one
// simulator step a window, a decision at each window's end, applied from
// the next window on. On the node the project's recommender looks some
// 9.5 s into a window (--load-phase 5s: its loops end 10 s into each
// window) and the updater acts on the status it writes some 14 s later
// (docs/real-node-rounds.md, "When a decision lands"); Look and Act say
// so, and Step lets a decision land within a window. Look and Act are the
// project's recommender and updater's: the real HPA scales in the loop it
// decides in, and the real VPA's cadence is vpaCadence's.
type Timing struct {
	// Lag holds each decision of the fused default and its variants this
	// many windows more (--sim-lag), on top of Act.
	Lag int `json:"lag,omitempty"`
	// Step is the simulator's step: the window (0) or a whole fraction of
	// it, whose steps the replay pools into the harness's windows.
	Step time.Duration `json:"step,omitempty"`
	// Look is how far into each window the fused default decides, a whole
	// number of Steps shorter than the window; it reads what the steps
	// before it show.
	Look time.Duration `json:"look,omitempty"`
	// Act is how long after a decision the simulated updater applies it:
	// at the first step boundary not earlier, from the next step on. A
	// look reads what the steps before it showed, so it sees a decision
	// applied at an earlier boundary and not one applied at its own: on
	// the node the updater acts some 23.5 s after the window's start and
	// the next look, some 24.5 s, sees it; Step 2.5s, Look 10s and Act
	// 12.5s give 22.5 s and 25 s (docs/real-node-rounds.md).
	Act time.Duration `json:"act,omitempty"`
	// HPAPhases has the real HPA's loop (the policies hpa and hpa+vpa)
	// decide at a phase of its own within the window, one step later with
	// each draw in turn (draw d at (d mod steps) steps in), where without
	// it it decides at each window's end: the controller-manager's 15-s
	// loop runs out of phase with the harness's windows, at a phase no run
	// records. Needs a Step finer than the window.
	HPAPhases bool `json:"hpaPhases,omitempty"`
	// NoVPAAdmission has the replayed VPA (vpa, hpa+vpa) give the pods
	// created between its loops what its updater last let through, where
	// by default they take the target of its last loop, as the real
	// admission controller gives them (vpaCadence).
	NoVPAAdmission bool `json:"noVpaAdmission,omitempty"`
}

// maxTimingLag bounds Lag and Act: the recommender's decision is stale
// long before (its 2-minute rate window).
const maxTimingLag = 2 * time.Minute

// steps returns how many simulator steps make one window of length
// window, with an error naming the setting when Timing cannot be replayed
// on it.
func (t Timing) steps(window time.Duration) (int, error) {
	switch {
	case t.Lag < 0 || time.Duration(t.Lag)*window > maxTimingLag:
		return 0, fmt.Errorf("decision lag %d windows of %s: want 0 to %s", t.Lag, window, maxTimingLag)
	case t.Act < 0 || t.Act > maxTimingLag:
		return 0, fmt.Errorf("decision act %s: want 0 to %s", t.Act, maxTimingLag)
	case t.Step < 0 || t.Step > window:
		return 0, fmt.Errorf("simulator step %s: want 0 (the window) to the window, %s", t.Step, window)
	case t.Look < 0 || t.Look >= window:
		return 0, fmt.Errorf("decision look %s: want 0 to less than the window, %s", t.Look, window)
	}
	step := t.Step
	if step == 0 {
		step = window
	}
	if window%step != 0 {
		return 0, fmt.Errorf("simulator step %s: the window, %s, is not a whole number of them", step, window)
	}
	if t.HPAPhases && step == window {
		return 0, fmt.Errorf("the HPA's phases need a simulator step finer than the window, %s", window)
	}
	if t.Look%step != 0 {
		return 0, fmt.Errorf("decision look %s: not a whole number of simulator steps of %s", t.Look, step)
	}
	return int(window / step), nil
}

// String describes the timing for the calibration's print-out; "" for
// the simulator's own.
func (t Timing) String() string {
	if t == (Timing{}) {
		return ""
	}
	s := "the fused default decides at each window's end"
	if t.Look > 0 {
		s = fmt.Sprintf("the fused default decides %s into each window", t.Look)
	}
	if t.Act > 0 {
		s += fmt.Sprintf(" and its decision reaches the pods %s later", t.Act)
	}
	if t.Lag > 0 {
		s += fmt.Sprintf(", held %d window(s) more", t.Lag)
	}
	if t.Step > 0 {
		s += fmt.Sprintf("; the simulator steps %s", t.Step)
	}
	if t.HPAPhases {
		s += "; the real HPA decides at a phase of its own, one step later each draw"
	}
	if t.NoVPAAdmission {
		s += "; the VPA's new pods take what its updater last let through"
	}
	return s
}

// pending is a decision the simulated updater has not applied yet.
type pending struct {
	r   workload.Recommendation
	due time.Duration // since the run's start
}

// updaterQueue holds decisions until they are due, in the order they were
// made.
type updaterQueue struct{ held []pending }

// hold adds a decision due at due.
func (q *updaterQueue) hold(r workload.Recommendation, due time.Duration) {
	q.held = append(q.held, pending{r: r, due: due})
}

// take removes and returns, oldest first, the decisions due by now.
func (q *updaterQueue) take(now time.Duration) []workload.Recommendation {
	var out []workload.Recommendation
	for len(q.held) > 0 && q.held[0].due <= now {
		out = append(out, q.held[0].r)
		q.held = q.held[1:]
	}
	return out
}

// finer returns tr at k steps a window: each window's rate for each of its
// steps.
func finer(tr sim.Trace, k int) sim.Trace {
	if k <= 1 {
		return tr
	}
	rates := make([]float64, 0, len(tr.Rates)*k)
	for _, r := range tr.Rates {
		for range k {
			rates = append(rates, r)
		}
	}
	tr.Rates, tr.Step = rates, tr.Step/time.Duration(k)
	return tr
}

// windowPool sums the harness's window from the simulator's finer steps:
// counts and events add up, requests and usage are the steps' mean (the
// harness averages its samples), the desired and Ready counts are the
// last step's, the p95 is the pooled requests' (sim.WindowPool), and a
// replica change is a desired count at the window's end other than at the
// previous window's (the harness samples the count once a window).
type windowPool struct {
	k        int
	steps    []result.Window
	latency  *sim.WindowPool
	prevRepl int
}

func newWindowPool(s *sim.Simulator, k int) *windowPool {
	return &windowPool{k: k, latency: sim.NewWindowPool(s, k), prevRepl: -1}
}

// add records a step's window; at a window's last step it returns the
// window and true.
func (p *windowPool) add(s *sim.Simulator, w result.Window) (result.Window, bool) {
	p.steps = append(p.steps, w)
	p.latency.Add(s)
	if len(p.steps) < p.k {
		return result.Window{}, false
	}
	first, last := p.steps[0], p.steps[len(p.steps)-1]
	out := result.Window{
		Index: first.Index / p.k, Start: first.Start, End: last.End,
		Replicas: last.Replicas, Ready: last.Ready, ReadyCPURequested: last.ReadyCPURequested,
	}
	n := float64(len(p.steps))
	var inFlight float64
	for _, st := range p.steps {
		inFlight += st.InFlight / n
		out.Expected += st.Expected
		out.Sent += st.Sent
		out.OK += st.OK
		out.Lost += st.Lost
		out.CPURequested += st.CPURequested / n
		out.MemoryRequested += st.MemoryRequested / n
		out.CPUUsed += st.CPUUsed / n
		out.MemoryUsed += st.MemoryUsed / n
		out.OOMKills += st.OOMKills
		out.Resizes += st.Resizes
		out.Evictions += st.Evictions
	}
	out.InFlight, out.InFlightPods = inFlight, last.InFlightPods
	if out.Sent > 0 {
		out.P95 = p.latency.Latency().P95
	}
	if p.prevRepl >= 0 && out.Replicas != p.prevRepl {
		out.ReplicaChanges = 1
	}
	p.prevRepl = out.Replicas
	p.steps = p.steps[:0]
	p.latency.Reset()
	return out, true
}

// usageWindow gives a policy, stepping finer than its window, each pod's
// CPU usage as a rate over the last few steps (the calibration's usage
// resolution, metrics-server's 10 s), where the simulator's observation
// has the last step's alone.
type usageWindow struct {
	n    int
	pods map[string][]float64
}

func newUsageWindow(resolution, step time.Duration, k int) *usageWindow {
	n := k
	if resolution > 0 {
		n = int(math.Ceil(float64(resolution) / float64(step)))
	}
	return &usageWindow{n: max(n, 1), pods: map[string][]float64{}}
}

// add records the step just simulated.
func (u *usageWindow) add(obs workload.Observation) {
	seen := make(map[string]bool, len(obs.Pods))
	for _, p := range obs.Pods {
		seen[p.Name] = true
		if !p.HasMetrics {
			delete(u.pods, p.Name)
			continue
		}
		h := append(u.pods[p.Name], p.Usage.CPU)
		if len(h) > u.n {
			h = h[len(h)-u.n:]
		}
		u.pods[p.Name] = h
	}
	for name := range u.pods {
		if !seen[name] {
			delete(u.pods, name)
		}
	}
}

// observe returns obs as the policy reads it at a look: its window the
// harness's, each pod's CPU usage its mean over the last steps, and the
// container's usage the mean of the pods'. obs's slices are not changed.
func (u *usageWindow) observe(obs workload.Observation, window time.Duration) workload.Observation {
	obs.Window = window
	obs.Pods = slices.Clone(obs.Pods)
	obs.Containers = slices.Clone(obs.Containers)
	var sum float64
	var n int
	for i := range obs.Pods {
		p := &obs.Pods[i]
		h := u.pods[p.Name]
		if !p.HasMetrics || len(h) == 0 {
			continue
		}
		var s float64
		for _, v := range h {
			s += v
		}
		p.Usage.CPU = s / float64(len(h))
		sum += p.Usage.CPU
		n++
	}
	if n > 0 && len(obs.Containers) > 0 {
		obs.Containers[0].Usage.CPU = sum / float64(n)
	}
	return obs
}
