package whatif

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// Policy names of the replay, in table order; Actual is the baseline.
const (
	PolicyActual = "actual"
	PolicyHPA    = "hpa"
	PolicyVPA    = "vpa"
	PolicyNaive  = "hpa+vpa"
	PolicyFused  = "fused"
)

// Policies returns the replayed policies, the baseline first.
func Policies() []string {
	return []string{PolicyActual, PolicyHPA, PolicyVPA, PolicyNaive, PolicyFused}
}

// Workload is a history and its fit, ready to replay.
type Workload struct {
	Series *Series
	Fit    Fit
}

// recorded replays what actually ran: before window i+1 it sets the
// replicas and per-pod requests recorded at step i+1. It relies on
// eval's loop calling Recommend exactly once after each window, in order.
type recorded struct {
	container     string
	replicas, cpu []float64
	mem           []float64
	next          int
}

var _ workload.Policy = (*recorded)(nil)

func (r *recorded) Name() string { return PolicyActual }

// ReadsLatency implements workload.LatencyReader: what ran is replayed
// from the history, whatever the observation holds.
func (r *recorded) ReadsLatency() workload.Percentiles { return workload.NoPercentiles }

func (r *recorded) Recommend(_ context.Context, _ workload.Observation) (workload.Recommendation, error) {
	r.next++
	i := min(r.next, len(r.replicas)-1)
	return workload.Recommendation{
		Replicas:   int32(max(1, math.Round(r.replicas[i]))),
		Containers: []workload.ContainerRecommendation{{Name: r.container, Target: workload.Resources{CPU: r.cpu[i], Memory: r.mem[i]}}},
		Source:     workload.SourceDefault,
		Reason:     "recorded",
	}, nil
}

func newRecorded(s *Series) (*recorded, error) {
	reps, ok1 := filled(s.Replicas)
	cpu, ok2 := filled(s.RequestCPU)
	mem, ok3 := filled(s.RequestMemory)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("%w %q: replicas or requests are never recorded", ErrSeries, s.Name)
	}
	return &recorded{container: s.Container, replicas: reps, cpu: cpu, mem: mem}, nil
}

// VariantPrefix names a variant of the fused default: "fused:" followed
// by fusion.ParseVariant's spec, as the demo and the recommender's
// --default-variant read it (e.g. "fused:target=0.6").
const VariantPrefix = "fused:"

// ValidPolicy reports whether name is a policy Replay knows, so a
// command can refuse it before reading any history.
func ValidPolicy(name string) error {
	_, err := contender(name, func(string) *Series { return nil })
	return err
}

// contender returns the named policy; history gives the replay of what
// ran each app's series.
func contender(name string, history func(app string) *Series) (eval.Contender, error) {
	if spec, ok := strings.CutPrefix(name, VariantPrefix); ok {
		o, err := fusion.ParseVariant(spec)
		if err != nil {
			return eval.Contender{}, fmt.Errorf("whatif: policy %q: %w", name, err)
		}
		return eval.FromFactory(name, fusion.NewPolicyFactory(o)), nil
	}
	switch name {
	case PolicyActual:
		return eval.Contender{Name: name, New: func(r eval.Run, _ sim.Config) (workload.Policy, error) {
			s := history(r.App.Name)
			if s == nil {
				return nil, fmt.Errorf("no history for %q", r.App.Name)
			}
			return newRecorded(s)
		}}, nil
	case PolicyHPA:
		return eval.FromFactory(name, hpa.NewPolicyFactory(hpa.PolicyOptions{})), nil
	case PolicyVPA:
		return eval.FromFactory(name, vpa.NewPolicyFactory(vpa.PolicyOptions{})), nil
	case PolicyNaive:
		return eval.FromFactory(name, fusion.NewNaiveFactory(fusion.Options{})), nil
	case PolicyFused:
		return eval.FromFactory(name, fusion.NewPolicyFactory(fusion.Options{})), nil
	}
	return eval.Contender{}, fmt.Errorf("whatif: unknown policy %q (known: %s and %sSPEC)", name, strings.Join(Policies(), ", "), VariantPrefix)
}

// ReplayOptions configure a replay. Zero fields take defaults.
type ReplayOptions struct {
	// Seeds is how many arrival seeds each workload is replayed with
	// (default 5): the pairs of the comparison are (workload, seed).
	Seeds int
	// Seed is the first seed (default 1).
	Seed uint64
	// Policies default to Policies(); PolicyActual is always run first.
	Policies []string
	Prices   sim.Prices
	// Config is the simulated cluster; its Step is the series' step and,
	// for each workload, its Nodes are raised to hold twice that
	// workload's peak recorded requests.
	Config  sim.Config
	Workers int
	// Progress hears each replayed run (Advance); Replay also calls its
	// Begin and End, a Replayer's caller does, knowing the total.
	Progress eval.Progress
	// Extra are policies the caller builds itself, replayed after
	// Policies: rl-agent whatif-replay adds trained agents here, which the
	// recommender cannot link (they need Gorgonia).
	Extra []eval.Contender
	// Plot keeps, for each replayed workload, every policy's time series
	// on the first seed (Result.Plots, for WritePlotSVG), from the replay
	// the table counts: it costs memory (a week at one minute is 10,080
	// points per policy and workload), not another replay.
	Plot bool
	// InstallAfter replays every policy but what ran (Extra's too) as if
	// installed this long after the history begins: until its first look
	// past it the pods are what ran, and from there the policy decides,
	// with no memory of the looks before (installed). 0: from the start.
	InstallAfter time.Duration
}

// Result is a replay's outcome.
type Result struct {
	// Seeds, Seed and Policies are the replay's (Policies without Extra's
	// names); FitOptions the fit's, set by the caller. With History they
	// let another command replay the same workloads again (Load).
	Seeds      int        `json:"seeds"`
	Seed       uint64     `json:"seed"`
	Policies   []string   `json:"policies"`
	FitOptions FitOptions `json:"fitOptions"`
	// Resize and RateWindow are the replay's simulated cluster's
	// (Config.Resize, Config.RateWindow), so that another command replays
	// alike; a result written before they were kept has neither (the
	// replay then restarted pods to resize them and saw each step's rate).
	Resize     sim.ResizeMode `json:"resize,omitempty"`
	RateWindow time.Duration  `json:"rateWindow,omitempty"`
	// SampledLatency is the cluster's Config.SampledLatency.
	SampledLatency bool `json:"sampledLatency,omitempty"`
	// Timeout and ReadyWithinWindow are the cluster's Config.Timeout (its
	// clients' timeout) and Config.ReadyWithinWindow; a result written
	// before they were kept has neither (30 s, and pods Ready from the
	// next step).
	Timeout           time.Duration `json:"timeout,omitempty"`
	ReadyWithinWindow bool          `json:"readyWithinWindow,omitempty"`
	// InstallAfter is ReplayOptions.InstallAfter.
	InstallAfter time.Duration `json:"installAfter,omitempty"`
	// History holds every workload's series, refused ones included.
	History     []*Series         `json:"history,omitempty"`
	Fits        []Fit             `json:"fits"`
	Consistency []Consistency     `json:"consistency"`
	Report      *eval.Report      `json:"report,omitempty"`
	Comparisons []eval.Comparison `json:"comparisons,omitempty"`
	// Plots are the series Plot keeps, one per replayed workload; not
	// written to JSON (a week at one minute is 10,080 points a policy).
	Plots []Plot `json:"-"`
}

// Cluster is the simulated cluster r's replay ran on, for replaying its
// histories again alike (ReplayOptions.Config): its Nodes are set per
// workload by the replay.
func (r *Result) Cluster() sim.Config {
	return sim.Config{Resize: r.Resize, RateWindow: r.RateWindow, SampledLatency: r.SampledLatency,
		Timeout: r.Timeout, ReadyWithinWindow: r.ReadyWithinWindow,
		NodeCores: r.FitOptions.NodeCPU, NodeTick: r.FitOptions.NodeTick}
}

// Replay replays the policies on every workload whose fit did not refuse,
// after checking that the replay of what actually ran reproduces the
// history (Consistency). Workloads must share one step. Result.Fits holds
// every fit, refused ones included. It is a Replayer given every workload
// at once.
func Replay(ctx context.Context, ws []Workload, o ReplayOptions) (*Result, error) {
	// A workload refused stops the runs of those added before it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := NewReplayer(ctx, o)
	if err != nil {
		return nil, err
	}
	// The Replayer's progress hears Advance; the total is known here.
	if o.Progress != nil {
		replayed := 0
		for _, w := range ws {
			if w.Fit.Refused == "" {
				replayed++
			}
		}
		o.Progress.Begin(replayed * r.JobsPerWorkload())
		defer o.Progress.End()
	}
	for i, w := range ws {
		if err := r.Add(i, w); err != nil {
			cancel()
			r.Result() // stops the workers; the error is Add's
			return nil, err
		}
	}
	return r.Result()
}

// A Replayer replays workloads while its caller is still adding them: the
// what-if adds each workload as soon as its history is read and fitted, so
// that the replay of the first overlaps the range queries of the next.
// Its result is Replay's of the same workloads put in the order of their
// indexes, whatever order they were added in. Add may be called from
// several goroutines; Result must be called once, after the last Add.
type Replayer struct {
	o     ReplayOptions
	cfg   sim.Config
	names []string
	cs    []eval.Contender
	ctx   context.Context

	mu          sync.Mutex
	stream      *eval.Stream // from the first workload replayed, whose step cfg takes
	first       string
	byApp       map[string]*Series
	workloads   map[int]Workload
	consistency map[int]Consistency
}

// NewReplayer checks the options and the policies' names; it reads no
// workload.
func NewReplayer(ctx context.Context, o ReplayOptions) (*Replayer, error) {
	if o.Seeds <= 0 {
		o.Seeds = 5
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Prices == (sim.Prices{}) {
		o.Prices = sim.DefaultPrices()
	}
	names := o.Policies
	if len(names) == 0 {
		names = Policies()
	}
	names = append([]string{PolicyActual}, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == PolicyActual })...)
	r := &Replayer{o: o, cfg: o.Config.WithDefaults(), names: names, ctx: ctx,
		byApp: map[string]*Series{}, workloads: map[int]Workload{}, consistency: map[int]Consistency{}}
	for _, n := range names {
		c, err := contender(n, r.history)
		if err != nil {
			return nil, err
		}
		r.cs = append(r.cs, c)
	}
	r.cs = append(r.cs, o.Extra...)
	if o.InstallAfter < 0 {
		return nil, fmt.Errorf("whatif: install after %s: must not be negative", o.InstallAfter)
	}
	if o.InstallAfter > 0 {
		for i := 1; i < len(r.cs); i++ { // r.cs[0] is what ran
			r.cs[i] = installAfter(r.cs[i], o.InstallAfter, r.history)
		}
	}
	return r, nil
}

// JobsPerWorkload is how many runs a replayed workload adds: one per seed
// and policy, what ran and Extra included.
func (r *Replayer) JobsPerWorkload() int { return r.o.Seeds * len(r.cs) }

// history is the series of the replayed workload app, for the replay of
// what ran.
func (r *Replayer) history(app string) *Series {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byApp[app]
}

// Add fits nothing: it takes w as read and fitted, as the i-th workload of
// the result. A refused fit is kept for the result; any other is checked
// for consistency (the replay of what ran) and its runs, one per seed,
// queued for every policy.
func (r *Replayer) Add(i int, w Workload) error {
	if w.Series == nil {
		return fmt.Errorf("whatif: workload %d has no history", i)
	}
	r.mu.Lock()
	if _, dup := r.workloads[i]; dup {
		r.mu.Unlock()
		return fmt.Errorf("whatif: workload %d (%q) given twice", i, w.Series.Name)
	}
	r.workloads[i] = w
	if w.Fit.Refused != "" {
		r.mu.Unlock()
		return nil
	}
	if r.byApp[w.Series.Name] != nil {
		r.mu.Unlock()
		return fmt.Errorf("whatif: workload %q given twice", w.Series.Name)
	}
	if r.stream == nil {
		r.cfg.Step, r.first = w.Series.Step, w.Series.Name
		eo := eval.Options{Config: r.cfg, Prices: r.o.Prices, SeriesRun: -1, Workers: r.o.Workers, Progress: r.o.Progress}
		if r.o.Plot {
			// The plots show the first seed's run of each workload: kept from
			// the runs the table counts, not simulated again.
			seeds := r.o.Seeds
			eo.KeepSeries = func(key int) bool { return key%seeds == 0 }
		}
		s, err := eval.NewStream(r.ctx, r.cs, eo)
		if err != nil {
			r.mu.Unlock()
			return fmt.Errorf("whatif: %w", err)
		}
		r.stream = s
	} else if w.Series.Step != r.cfg.Step {
		r.mu.Unlock()
		return fmt.Errorf("whatif: %q has step %s, %q %s", w.Series.Name, w.Series.Step, r.first, r.cfg.Step)
	}
	r.byApp[w.Series.Name] = w.Series
	cfg := r.cfg
	r.mu.Unlock()

	// Each workload's cluster holds twice its own peak: its replay does
	// not depend on which other workloads are replayed with it.
	cfg.Nodes = max(cfg.Nodes, nodesFor(w.Series, cfg.NodeCapacity))
	rates, _ := filled(w.Series.Rate)
	tr := &sim.Trace{Name: "recorded", Step: w.Series.Step, Rates: rates}
	for k := range r.o.Seeds {
		run := eval.Run{App: w.Fit.App, Trace: tr, Seed: r.o.Seed + uint64(k), Nodes: cfg.Nodes}
		if err := r.stream.Add(i*r.o.Seeds+k, run); err != nil {
			return fmt.Errorf("whatif: %w", err)
		}
	}
	c, err := Check(w.Series, w.Fit, cfg, r.o.Prices, r.o.Seed)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.consistency[i] = c
	r.mu.Unlock()
	return nil
}

// Result waits for the runs added and reduces them: the fits and
// histories of every workload, the consistency of each replayed one, the
// table and the paired comparison against what ran, in the workloads'
// order.
func (r *Replayer) Result() (*Result, error) {
	// Not held while the stream closes: its workers read the histories.
	r.mu.Lock()
	res := &Result{Seeds: r.o.Seeds, Seed: r.o.Seed, Policies: r.names}
	res.Resize, res.RateWindow, res.SampledLatency = r.cfg.Resize, r.cfg.RateWindow, r.cfg.SampledLatency
	res.Timeout, res.ReadyWithinWindow = r.cfg.Timeout, r.cfg.ReadyWithinWindow
	res.InstallAfter = r.o.InstallAfter
	keys := slices.Sorted(maps.Keys(r.workloads))
	for _, i := range keys {
		w := r.workloads[i]
		res.Fits = append(res.Fits, w.Fit)
		res.History = append(res.History, w.Series)
		if c, ok := r.consistency[i]; ok {
			res.Consistency = append(res.Consistency, c)
		}
	}
	stream := r.stream
	r.mu.Unlock()
	if stream == nil {
		return res, errors.New("whatif: every workload's fit refused to predict; nothing to replay")
	}
	rep, err := stream.Close()
	if err != nil {
		return nil, fmt.Errorf("whatif: %w", err)
	}
	res.Report = rep
	if rep.Runs >= 2 && len(r.names) > 1 {
		if res.Comparisons, err = rep.Compare(PolicyActual); err != nil {
			return nil, fmt.Errorf("whatif: %w", err)
		}
	}
	if r.o.Plot {
		for _, key := range slices.Sorted(maps.Keys(rep.RunSeries)) {
			set := rep.RunSeries[key]
			res.Plots = append(res.Plots, Plot{History: r.history(set.App), Replayed: set})
		}
		rep.RunSeries = nil
	}
	return res, nil
}

// nodesFor is how many nodes hold twice the peak recorded requests, so
// that a policy scaling beyond what ran is not cut short by the simulated
// cluster's size.
func nodesFor(s *Series, capacity workload.Resources) int {
	var peakCPU, peakMem float64
	for i := range s.Replicas {
		n := s.Replicas[i]
		if c := at(s.RequestCPU, i); ok(n, c) {
			peakCPU = math.Max(peakCPU, n*c)
		}
		if m := at(s.RequestMemory, i); ok(n, m) {
			peakMem = math.Max(peakMem, n*m)
		}
	}
	return int(math.Ceil(math.Max(2*peakCPU/capacity.CPU, 2*peakMem/capacity.Memory)))
}

// inFlightSource names where a fit's requests in flight came from.
func inFlightSource(s string) string {
	if s == InFlightGauge {
		return "requests in flight from the app's gauge"
	}
	return "requests in flight by Little's law"
}

// cpuSteps says which steps the CPU line was fitted on.
func cpuSteps(f Fit) string {
	if f.CPUSteps == CPUStepsSteady {
		return fmt.Sprintf("%d steady steps", f.CPU.Points)
	}
	return fmt.Sprintf("all %d steps", f.CPU.Points)
}

// WriteText prints the fits, the self-consistency check and the demo's
// table and paired comparison against what actually ran.
func (r *Result) WriteText(w io.Writer) error {
	for _, f := range r.Fits {
		if f.Refused != "" {
			fmt.Fprintf(w, "%s: not predicted: %s\n", f.Workload, f.Refused)
			continue
		}
		fmt.Fprintf(w, "%s: fit %.4g CPU seconds per request (%s; R² %.2f, residual %.3g cores), %s, memory %.0f MiB + %.2f MiB per request in flight (%s; R² %.2f, residual %.1f%% of mean), start-up %gs (%s)\n",
			f.Workload, f.CPU.Slope, cpuSteps(f), f.CPU.R2, f.CPU.RMSResidual, f.Idle, f.App.BaseMemory/(1<<20), f.App.MemoryPerRequest/(1<<20),
			inFlightSource(f.MemoryInFlight), f.Memory.R2, 100*f.Memory.RMSResidual/f.Memory.MeanY, f.StartupDelaySeconds, measured(f.StartupMeasured))
		if l := f.Latency; l.Steps >= MinLatencySteps {
			fmt.Fprintf(w, "%s: latency model %s (median |ln(recorded/model p95)| over %d calm steps: fluid %.2f, burst %.2f)\n", f.Workload, l.Model, l.Steps, l.FluidError, l.BurstError)
		} else {
			fmt.Fprintf(w, "%s: latency model %s\n", f.Workload, l.Model)
		}
	}
	if err := WriteConsistency(w, r.Consistency); err != nil {
		return err
	}
	if r.Report == nil {
		return nil
	}
	fmt.Fprintln(w)
	if r.InstallAfter > 0 {
		fmt.Fprintf(w, "Every policy but what ran replayed as installed %s after the period began (--install-after): until its first look past it, the pods are what ran.\n", r.InstallAfter)
	}
	if err := r.Report.WriteTable(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return eval.WriteComparisons(w, r.Comparisons)
}

func measured(b bool) string {
	if b {
		return "measured"
	}
	return "assumed, not measured"
}

// WriteJSON writes the result as compact JSON (jq . indents it). It holds
// every workload's history, so it is large (163 MB for 100 workloads over
// 7 days at a minute), and indenting it, which encoding/json does on a
// second copy of the whole document, cost 5 s of make bench-whatif's CPU.
func (r *Result) WriteJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}
