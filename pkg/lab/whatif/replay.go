package whatif

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
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
	_, err := contender(name, nil)
	return err
}

// contender returns the named policy for the runs of byApp.
func contender(name string, byApp map[string]*Series) (eval.Contender, error) {
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
			s := byApp[r.App.Name]
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
	// Config is the simulated cluster; its Step is the series' step and
	// its Nodes are raised to hold twice the peak recorded requests.
	Config   sim.Config
	Workers  int
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

// Replay replays the policies on every workload whose fit did not refuse,
// after checking that the replay of what actually ran reproduces the
// history (Consistency). Workloads must share one step. Result.Fits holds
// every fit, refused ones included.
func Replay(ctx context.Context, ws []Workload, o ReplayOptions) (*Result, error) {
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
	res := &Result{Seeds: o.Seeds, Seed: o.Seed, Policies: names}
	byApp := map[string]*Series{}
	var runs []eval.Run
	cfg := o.Config.WithDefaults()
	res.Resize, res.RateWindow, res.SampledLatency = cfg.Resize, cfg.RateWindow, cfg.SampledLatency
	for i, w := range ws {
		res.Fits = append(res.Fits, w.Fit)
		res.History = append(res.History, w.Series)
		if w.Fit.Refused != "" {
			continue
		}
		if byApp[w.Series.Name] != nil {
			return nil, fmt.Errorf("whatif: workload %q given twice", w.Series.Name)
		}
		if i > 0 && w.Series.Step != ws[0].Series.Step {
			return nil, fmt.Errorf("whatif: %q has step %s, %q %s", w.Series.Name, w.Series.Step, ws[0].Series.Name, ws[0].Series.Step)
		}
		byApp[w.Series.Name] = w.Series
		cfg.Step = w.Series.Step
		cfg.Nodes = max(cfg.Nodes, nodesFor(w.Series, cfg.NodeCapacity))
		rates, _ := filled(w.Series.Rate)
		tr := &sim.Trace{Name: "recorded", Step: w.Series.Step, Rates: rates}
		for k := range o.Seeds {
			runs = append(runs, eval.Run{App: w.Fit.App, Trace: tr, Seed: o.Seed + uint64(k)})
		}
	}
	if len(runs) == 0 {
		return res, errors.New("whatif: every workload's fit refused to predict; nothing to replay")
	}
	for _, w := range ws {
		if w.Fit.Refused != "" {
			continue
		}
		c, err := Check(w.Series, w.Fit, cfg, o.Prices, o.Seed)
		if err != nil {
			return nil, err
		}
		res.Consistency = append(res.Consistency, c)
	}
	var cs []eval.Contender
	for _, n := range names {
		c, err := contender(n, byApp)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	cs = append(cs, o.Extra...)
	eo := eval.Options{Config: cfg, Prices: o.Prices, SeriesRun: -1, Workers: o.Workers, Progress: o.Progress}
	if o.Plot {
		// The plots show the first seed's run of each workload: kept from
		// the runs the table counts, not simulated again.
		eo.KeepSeries = func(i int) bool { return runs[i].Seed == o.Seed }
	}
	rep, err := eval.Evaluate(ctx, runs, cs, eo)
	if err != nil {
		return nil, fmt.Errorf("whatif: %w", err)
	}
	res.Report = rep
	if len(runs) >= 2 && len(names) > 1 {
		if res.Comparisons, err = rep.Compare(PolicyActual); err != nil {
			return nil, fmt.Errorf("whatif: %w", err)
		}
	}
	if o.Plot {
		for i, r := range runs {
			if set := rep.RunSeries[i]; set != nil {
				res.Plots = append(res.Plots, Plot{History: byApp[r.App.Name], Replayed: set})
			}
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

// WriteText prints the fits, the self-consistency check and the demo's
// table and paired comparison against what actually ran.
func (r *Result) WriteText(w io.Writer) error {
	for _, f := range r.Fits {
		if f.Refused != "" {
			fmt.Fprintf(w, "%s: not predicted: %s\n", f.Workload, f.Refused)
			continue
		}
		fmt.Fprintf(w, "%s: fit %.4g CPU seconds per request (R² %.2f, residual %.3g cores), %s, memory %.0f MiB + %.2f MiB per request in flight (R² %.2f, residual %.1f%% of mean), start-up %gs (%s)\n",
			f.Workload, f.CPU.Slope, f.CPU.R2, f.CPU.RMSResidual, f.Idle, f.App.BaseMemory/(1<<20), f.App.MemoryPerRequest/(1<<20),
			f.Memory.R2, 100*f.Memory.RMSResidual/f.Memory.MeanY, f.StartupDelaySeconds, measured(f.StartupMeasured))
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
