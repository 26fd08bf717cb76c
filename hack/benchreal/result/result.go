// Package result holds the pure parts of the real-node benchmark (make
// bench-real, hack/benchreal): one record per 15-s window of a run, the
// per-run figures the simulator also reports (cost, SLO-violating windows,
// lost requests, churn, reward), each policy's reaction time to the load
// step, the table, and the paired comparison of every policy with a
// reference over the repetitions. It does no I/O beyond the readers and
// writers it is given, so all of it is unit-tested; the harness that drives
// the node is hack/benchreal (build tag benchreal).
package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/reward"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// Window is one window of a run: what the load generator measured for the
// requests sent in it, and what the harness sampled from the API server
// and metrics.k8s.io during it.
type Window struct {
	Index int `json:"index"`
	// Start and End are seconds from the start of the load.
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Expected is the rate series' integral over the window; Sent, OK and
	// Lost (errors plus timeouts) count the requests sent in it.
	Expected float64 `json:"expected"`
	Sent     int     `json:"sent"`
	OK       int     `json:"ok"`
	Lost     int     `json:"lost"`
	// P95 is the client-side p95 latency in seconds (0 without samples).
	P95 float64 `json:"p95"`
	// Replicas is the Deployment's desired count at the window's end, Ready
	// its ready pods then.
	Replicas int `json:"replicas"`
	Ready    int `json:"ready"`
	// CPURequested (cores) and MemoryRequested (bytes) are the requests of
	// the pods placed on the node, as their containers run with them,
	// averaged over the window's samples; the cost counts them.
	CPURequested    float64 `json:"cpuRequested"`
	MemoryRequested float64 `json:"memoryRequested"`
	// ReadyCPURequested is the CPU request of the Ready pods at the window's
	// end, for the reaction time.
	ReadyCPURequested float64 `json:"readyCpuRequested"`
	// CPUUsed (cores) and MemoryUsed (bytes) are metrics.k8s.io's usage
	// of the same pods, averaged over the window's samples.
	CPUUsed    float64 `json:"cpuUsed"`
	MemoryUsed float64 `json:"memoryUsed"`
	// Events in the window.
	OOMKills       int `json:"oomKills"`
	ReplicaChanges int `json:"replicaChanges"`
	Resizes        int `json:"resizes"`
	Evictions      int `json:"evictions"`
	// With --slo-metrics (runs since issue 37; absent in older files):
	// SLORate and SLOP95 are what the testbed's Prometheus answered, at
	// the window's last look, to the recommender's request-rate and p95
	// queries for the app's SLO histogram (0 without an answer), and
	// ScalingReason is the reason of the autoscaler's ScalingActive
	// condition then (it names a missing SLO input).
	SLORate       float64 `json:"sloRate,omitempty"`
	SLOP95        float64 `json:"sloP95,omitempty"`
	ScalingReason string  `json:"scalingReason,omitempty"`
	// InFlight is the mean, over the window's looks that had an answer, of
	// the app's requests in flight summed over its pods, as the testbed's
	// Prometheus last scraped them (its in-flight gauge). InFlightPods is
	// the mean number of pods whose series those answers summed (a pod
	// whose last scrape failed is missing); 0 without an answer, and in
	// files before 2026-12-06, when InFlight means nothing. The memory fit
	// reads them.
	InFlight     float64 `json:"inFlight,omitempty"`
	InFlightPods float64 `json:"inFlightPods,omitempty"`
	// Stage and Source are the autoscaler's status.rl.stage and
	// status.rl.source at the window's last look (agent policies): the
	// agent's lifecycle stage, and whose recommendation was applied
	// (Agent, Default or Safeguard). Mode is spec.rl.mode then.
	Stage  string `json:"stage,omitempty"`
	Source string `json:"source,omitempty"`
	Mode   string `json:"mode,omitempty"`
}

// Run is one policy's run of the trace.
type Run struct {
	Policy string `json:"policy"`
	// Rep is the repetition; runs of the same Rep share the trace and the
	// arrivals and are compared as pairs. Order is the run's place in the
	// invocation.
	Rep   int    `json:"rep"`
	Order int    `json:"order"`
	Start string `json:"start"`
	// SLO is the p95 objective in seconds; Window the window's width.
	SLO     float64  `json:"slo"`
	Window  float64  `json:"window"`
	Windows []Window `json:"windows"`
	// CPUSecondsPerRequest is what the app measured it burned per request
	// (its own counter), for the reaction time's demand.
	CPUSecondsPerRequest float64 `json:"cpuSecondsPerRequest"`
	// StartupSeconds are, for each pod that became Ready during the run,
	// the seconds from its creation to its Ready condition: scheduling,
	// the container's start and the app's start-up delay.
	StartupSeconds []float64 `json:"startupSeconds,omitempty"`
	// CPU seconds the run took, by part of the machine.
	CPU CPUShare `json:"cpu"`
	// SLOMetrics: the app's metrics were scraped and the recommender read
	// them (--slo-metrics); SLOMissing says how the SLO inputs were found
	// missing in the run, empty when they were there (or not checked).
	// Both are absent from files written before.
	SLOMetrics bool   `json:"sloMetrics,omitempty"`
	SLOMissing string `json:"sloMissing,omitempty"`
	// RecommenderQueries are the recommender's Prometheus queries during
	// the run, by "template/result" (its counter
	// aware_recommender_prometheus_queries_total), for the policies it
	// serves: requestRate/success and latency/success say it read the
	// SLO histogram.
	RecommenderQueries map[string]float64 `json:"recommenderQueries,omitempty"`
	// Decisions are the recommender's RecommendationChanged events on the
	// run's autoscaler: what changed, who decided and the default's
	// reason, so that a run says which rule chose its path. Absent for
	// the HPA and VPA, and in files written before.
	Decisions []Decision `json:"decisions,omitempty"`
	// LoadPhase is how long after the end of a recommender loop the load
	// began (bench-real --load-phase), in seconds; 0 when not controlled.
	LoadPhase float64 `json:"loadPhase,omitempty"`
	// AutoscalerAfter is how long after the load began the run's
	// autoscaler was created (bench-real --autoscaler-after), in seconds;
	// 0 when it was created with the app.
	AutoscalerAfter float64 `json:"autoscalerAfter,omitempty"`
	// Events are the run's other events in its namespace, in time order:
	// the updater's evictions and resizes, the HPA's rescales, the
	// scheduler's FailedScheduling, the kubelet's kills and deferred
	// resizes. With Decisions they say which pod went where and why.
	// Absent in files written before.
	Events []Event `json:"events,omitempty"`
	// WhatIf is recommender whatif's prediction from this run's history
	// (bench-real --whatif); absent otherwise.
	WhatIf *WhatIf `json:"whatif,omitempty"`
}

// Event is one Kubernetes event of a run's namespace.
type Event struct {
	// At is as Decision's.
	At    float64 `json:"at"`
	Count int32   `json:"count,omitempty"`
	// Type is Normal or Warning; Source the component that reported it
	// (scheduler, kubelet, aware-updater, horizontal-pod-autoscaler, …).
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Object  string `json:"object"`
	Source  string `json:"source,omitempty"`
	Message string `json:"message"`
}

// Timeline writes a run's decisions and events merged in time order, one
// line each, so a run's path can be read without the JSON.
func Timeline(w io.Writer, r Run) error {
	type line struct {
		at   float64
		text string
	}
	lines := make([]line, 0, len(r.Decisions)+len(r.Events))
	for _, d := range r.Decisions {
		lines = append(lines, line{d.At, fmt.Sprintf("decision %s (×%d)", d.Message, max(d.Count, 1))})
	}
	for _, e := range r.Events {
		lines = append(lines, line{e.At, fmt.Sprintf("%s %s %s [%s] %s (×%d)", e.Type, e.Reason, e.Object, e.Source, e.Message, max(e.Count, 1))})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at < lines[j].at })
	for _, l := range lines {
		if _, err := fmt.Fprintf(w, "%7.1fs %s\n", l.at, l.text); err != nil {
			return err
		}
	}
	return nil
}

// Decision is one RecommendationChanged event.
type Decision struct {
	// At is the event's last time, in seconds from the run's start
	// (negative before the load began); Count how often the recorder saw
	// it (an event repeated with the same message is counted, not
	// repeated).
	At      float64 `json:"at"`
	Count   int32   `json:"count,omitempty"`
	Message string  `json:"message"`
}

// CPUShare is CPU time in seconds over a run, by part of the machine.
type CPUShare struct {
	Machine      float64 `json:"machine"`
	ControlPlane float64 `json:"controlPlane"`
	Node         float64 `json:"node"`
	Components   float64 `json:"components"`
	LoadGen      float64 `json:"loadGen"`
	// VPA is VPA's three processes (recommender, updater, admission
	// controller), run on the host beside the testbed; absent from runs
	// recorded before it was measured, where it is in the outside share.
	VPA float64 `json:"vpa,omitempty"`
	// Steal is the time the hypervisor ran something else while the
	// machine's CPUs had work (/proc/stat's steal): the benchmark's parts
	// lost it as they would to a process outside it. Not in Machine;
	// absent from runs recorded before it was split out, where it is in
	// Machine and so in the outside share.
	Steal float64 `json:"steal,omitempty"`
	Wall  float64 `json:"wall"`
}

// Summary is a run's figures, as the simulator's demo reports them.
type Summary struct {
	Policy string `json:"policy"`
	Rep    int    `json:"rep"`
	// Cost in the simulator's units (sim.DefaultPrices: core-hours plus
	// GiB-hours/7.5) of the requests held.
	Cost float64 `json:"cost"`
	// Violations is the share of windows with traffic whose p95 broke the
	// SLO or that lost a request.
	Violations float64 `json:"violations"`
	// LostShare is lost over sent.
	LostShare float64 `json:"lostShare"`
	Lost      int     `json:"lost"`
	OOMKills  int     `json:"oomKills"`
	// Churn counts replica changes, in-place resizes and evictions.
	ReplicaChanges int     `json:"replicaChanges"`
	Resizes        int     `json:"resizes"`
	Evictions      int     `json:"evictions"`
	Reward         float64 `json:"reward"`
	// Reaction times to the load step, in seconds: until p95 is back under
	// the SLO, and until the Ready pods' CPU requests cover the new demand.
	// NaN when there is no step or it was never reached.
	ReactSLO      Seconds `json:"reactSlo"`
	ReactCapacity Seconds `json:"reactCapacity"`
}

// Seconds is a duration in seconds that may be unknown (NaN), written as
// null in JSON.
type Seconds float64

// MarshalJSON writes NaN as null.
func (s Seconds) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(s)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(s))
}

// UnmarshalJSON reads null as NaN.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Seconds(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(s))
}

// Violated: the window had traffic and its p95 broke the SLO, or it lost a
// request.
func (w Window) Violated(slo float64) bool {
	return w.Sent > 0 && (w.P95 > slo || w.Lost > 0)
}

// Summarise computes r's figures.
func Summarise(r Run) (Summary, error) {
	if len(r.Windows) == 0 {
		return Summary{}, fmt.Errorf("run %s rep %d: no windows", r.Policy, r.Rep)
	}
	if !(r.SLO > 0) || !(r.Window > 0) {
		return Summary{}, fmt.Errorf("run %s rep %d: SLO %g s and window %g s must be > 0", r.Policy, r.Rep, r.SLO, r.Window)
	}
	s := Summary{Policy: r.Policy, Rep: r.Rep}
	prices := sim.DefaultPrices()
	var withTraffic, violated, sent int
	var rewards float64
	for _, w := range r.Windows {
		for _, v := range []float64{w.P95, w.CPURequested, w.MemoryRequested, w.CPUUsed, w.MemoryUsed} {
			if math.IsNaN(v) || v < 0 {
				return Summary{}, fmt.Errorf("run %s rep %d window %d: a measurement is %g", r.Policy, r.Rep, w.Index, v)
			}
		}
		s.Cost += prices.Cost(w.CPURequested, w.MemoryRequested, w.End-w.Start)
		if w.Sent > 0 {
			withTraffic++
			if w.Violated(r.SLO) {
				violated++
			}
		}
		sent += w.Sent
		s.Lost += w.Lost
		s.OOMKills += w.OOMKills
		s.ReplicaChanges += w.ReplicaChanges
		s.Resizes += w.Resizes
		s.Evictions += w.Evictions
		t, err := reward.Compute(reward.Inputs{
			CPUUsed: w.CPUUsed, CPUAllocated: w.CPURequested,
			MemoryUsed: w.MemoryUsed, MemoryAllocated: w.MemoryRequested,
			P95: w.P95, SLO: r.SLO, Requests: float64(w.Sent), Lost: float64(w.Lost), OOMKills: w.OOMKills,
		}, reward.Options{})
		if err != nil {
			return Summary{}, fmt.Errorf("run %s rep %d window %d: %w", r.Policy, r.Rep, w.Index, err)
		}
		rewards += t.Reward
	}
	if withTraffic > 0 {
		s.Violations = float64(violated) / float64(withTraffic)
	}
	if sent > 0 {
		s.LostShare = float64(s.Lost) / float64(sent)
	}
	s.Reward = rewards / float64(len(r.Windows))
	slo, capacity := Reaction(r)
	s.ReactSLO, s.ReactCapacity = Seconds(slo), Seconds(capacity)
	return s, nil
}

// Step finds the load step: the first window whose expected count is at
// least 1.5× the mean of the windows before it (at least two of them).
// ok is false when the trace has none.
func Step(ws []Window) (i int, ok bool) {
	var sum float64
	for i, w := range ws {
		if i >= 2 && sum > 0 && w.Expected >= 1.5*sum/float64(i) {
			return i, true
		}
		sum += w.Expected
	}
	return 0, false
}

// Reaction returns the two reaction times to the load step, in seconds
// from the step window's start:
//   - slo: until the end of the last SLO-violating window of the run of
//     violating windows that starts within two windows of the step (0 if
//     none violated);
//   - capacity: until the end of the first window from the step on whose
//     Ready pods' CPU requests cover the demand, the mean rate of the
//     windows from the step to the run's end (or the next drop) times the
//     CPU seconds per request.
//
// Either is NaN without a step, and capacity also without a measured CPU
// per request or when the requests never cover the demand.
func Reaction(r Run) (slo, capacity float64) {
	slo, capacity = math.NaN(), math.NaN()
	i, ok := Step(r.Windows)
	if !ok {
		return slo, capacity
	}
	ws := r.Windows
	t0 := ws[i].Start
	slo = 0
	j := i
	for j < len(ws) && j <= i+2 && !ws[j].Violated(r.SLO) {
		j++
	}
	if j <= i+2 {
		for ; j < len(ws) && ws[j].Violated(r.SLO); j++ {
			slo = ws[j].End - t0
		}
	}
	if !(r.CPUSecondsPerRequest > 0) {
		return slo, capacity
	}
	// The demand after the step: the windows until the rate falls back.
	var expected, seconds float64
	for k := i; k < len(ws) && ws[k].Expected >= 0.75*ws[i].Expected; k++ {
		expected += ws[k].Expected
		seconds += ws[k].End - ws[k].Start
	}
	demand := expected / seconds * r.CPUSecondsPerRequest
	for k := i; k < len(ws); k++ {
		if ws[k].ReadyCPURequested >= demand {
			return slo, ws[k].End - t0
		}
	}
	return slo, capacity
}

// ReadRuns decodes the runs of one or more results files (the JSON
// WriteRuns writes), in order.
func ReadRuns(r io.Reader) ([]Run, error) {
	var f File
	d := json.NewDecoder(r)
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	if f.Kind != FileKind {
		return nil, fmt.Errorf("results: kind %q, want %q", f.Kind, FileKind)
	}
	return f.Runs, nil
}

// FileKind names the results file's layout.
const FileKind = "aware-bench-real/v1"

// File is the JSON the benchmark writes: every run, the invocation's
// settings, and the summaries.
type File struct {
	Kind      string            `json:"kind"`
	Settings  map[string]string `json:"settings,omitempty"`
	Runs      []Run             `json:"runs"`
	Summaries []Summary         `json:"summaries,omitempty"`
}

// WriteRuns writes runs and their summaries as a File.
func WriteRuns(w io.Writer, settings map[string]string, runs []Run) error {
	f := File{Kind: FileKind, Settings: settings, Runs: runs}
	for _, r := range runs {
		s, err := Summarise(r)
		if err != nil {
			return err
		}
		f.Summaries = append(f.Summaries, s)
	}
	e := json.NewEncoder(w)
	e.SetIndent("", " ")
	return e.Encode(f)
}

// ErrUnpaired is returned when a policy has no repetition shared with the
// reference.
var ErrUnpaired = errors.New("no repetitions shared with the reference")

// Comparison is a policy against the reference over the repetitions both
// ran: the mean paired difference (policy − reference) of each figure with
// its 95% interval.
type Comparison struct {
	Policy, Reference string
	Pairs             int
	Cost, Violations  stats.Interval
	LostShare, Reward stats.Interval
	// CostRatio is the ratio of the mean costs (no interval below 3 pairs).
	CostRatio float64
}

// Compare pairs each policy's summaries with the reference's by Rep.
func Compare(sums []Summary, reference string) ([]Comparison, error) {
	ref := map[int]Summary{}
	var policies []string
	seen := map[string]bool{}
	for _, s := range sums {
		if s.Policy == reference {
			ref[s.Rep] = s
		}
		if !seen[s.Policy] {
			seen[s.Policy] = true
			policies = append(policies, s.Policy)
		}
	}
	if len(ref) == 0 {
		return nil, fmt.Errorf("the reference %q has no runs", reference)
	}
	var out []Comparison
	for _, p := range policies {
		if p == reference {
			continue
		}
		var a, b [4][]float64
		var costA, costB float64
		for _, s := range sums {
			r, ok := ref[s.Rep]
			if s.Policy != p || !ok {
				continue
			}
			for k, v := range [4][2]float64{{s.Cost, r.Cost}, {s.Violations, r.Violations}, {s.LostShare, r.LostShare}, {s.Reward, r.Reward}} {
				a[k] = append(a[k], v[0])
				b[k] = append(b[k], v[1])
			}
			costA += s.Cost
			costB += r.Cost
		}
		if len(a[0]) == 0 {
			return nil, fmt.Errorf("%s: %w %s", p, ErrUnpaired, reference)
		}
		c := Comparison{Policy: p, Reference: reference, Pairs: len(a[0])}
		if costB > 0 {
			c.CostRatio = costA / costB
		}
		for k, dst := range []*stats.Interval{&c.Cost, &c.Violations, &c.LostShare, &c.Reward} {
			iv, err := stats.Paired(a[k], b[k], 0.95)
			if err != nil {
				return nil, fmt.Errorf("%s against %s: %w", p, reference, err)
			}
			*dst = iv
		}
		out = append(out, c)
	}
	return out, nil
}

// WriteTable prints one row per policy (means over its runs) in the order
// the policies first appear, then the paired comparison with reference.
func WriteTable(w io.Writer, runs []Run, reference string) error {
	var sums []Summary
	by := map[string][]Summary{}
	var order []string
	for _, r := range runs {
		s, err := Summarise(r)
		if err != nil {
			return err
		}
		sums = append(sums, s)
		if _, ok := by[s.Policy]; !ok {
			order = append(order, s.Policy)
		}
		by[s.Policy] = append(by[s.Policy], s)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\truns\tcost\tSLO-violating windows\tlost\tOOM kills\treplica changes\tresizes\tevictions\treward\treact p95 (s)\treact capacity (s)")
	for _, p := range order {
		ss := by[p]
		mean := func(f func(Summary) float64) float64 {
			var t float64
			var n int
			for _, s := range ss {
				if v := f(s); !math.IsNaN(v) {
					t += v
					n++
				}
			}
			if n == 0 {
				return math.NaN()
			}
			return t / float64(n)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.1f%%\t%.2f%%\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f\t%s\t%s\n", p, len(ss),
			mean(func(s Summary) float64 { return s.Cost }),
			100*mean(func(s Summary) float64 { return s.Violations }),
			100*mean(func(s Summary) float64 { return s.LostShare }),
			mean(func(s Summary) float64 { return float64(s.OOMKills) }),
			mean(func(s Summary) float64 { return float64(s.ReplicaChanges) }),
			mean(func(s Summary) float64 { return float64(s.Resizes) }),
			mean(func(s Summary) float64 { return float64(s.Evictions) }),
			mean(func(s Summary) float64 { return s.Reward }),
			seconds(mean(func(s Summary) float64 { return float64(s.ReactSLO) }), ss, func(s Summary) float64 { return float64(s.ReactSLO) }),
			seconds(mean(func(s Summary) float64 { return float64(s.ReactCapacity) }), ss, func(s Summary) float64 { return float64(s.ReactCapacity) }))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := WriteActed(w, runs); err != nil {
		return err
	}
	if err := WriteSLOInputs(w, runs); err != nil {
		return err
	}
	if _, ok := by[reference]; !ok || len(order) < 2 {
		return nil
	}
	cs, err := Compare(sums, reference)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\npaired by repetition, policy − %s, mean [95%% interval]:\n", reference)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tpairs\tcost ×\tcost\tSLO-violating windows (points)\tlost (points)\treward")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%s\t%s\t%s\t%s\n", c.Policy, c.Pairs, c.CostRatio,
			interval(c.Cost, 1, "%+.4f"), interval(c.Violations, 100, "%+.1f"), interval(c.LostShare, 100, "%+.2f"), interval(c.Reward, 1, "%+.3f"))
	}
	return tw.Flush()
}

// seconds prints a mean reaction time with how many runs reached it.
func seconds(mean float64, ss []Summary, f func(Summary) float64) string {
	n := 0
	for _, s := range ss {
		if !math.IsNaN(f(s)) {
			n++
		}
	}
	if n == 0 {
		return "never"
	}
	if n < len(ss) {
		return fmt.Sprintf("%.0f (%d of %d)", mean, n, len(ss))
	}
	return fmt.Sprintf("%.0f", mean)
}

func interval(iv stats.Interval, scale float64, format string) string {
	m := fmt.Sprintf(format, iv.Mean*scale)
	if iv.N < 2 {
		return m
	}
	return m + " [" + strings.TrimSpace(fmt.Sprintf(format, iv.Lo*scale)) + ", " + strings.TrimSpace(fmt.Sprintf(format, iv.Hi*scale)) + "]"
}

// Reps are the repetitions present in runs, sorted.
func Reps(runs []Run) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range runs {
		if !seen[r.Rep] {
			seen[r.Rep] = true
			out = append(out, r.Rep)
		}
	}
	sort.Ints(out)
	return out
}
