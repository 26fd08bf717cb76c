package faas

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// StudyOptions configure the comparison of the rule with fixed allocation.
type StudyOptions struct {
	// Functions per seed, packed on nodes of Capacity (first fit).
	Functions int
	Seeds     []uint64
	// Steps windows of Options.Step per run.
	Steps    int
	Capacity workload.Resources
	Options  Options
}

// Validate rejects options that cannot run.
func (o *StudyOptions) Validate() error {
	var errs []error
	if o.Functions < 2 || len(o.Seeds) == 0 || o.Steps < 1 {
		errs = append(errs, fmt.Errorf("need at least 2 functions, 1 seed and 1 window, got %d, %d and %d", o.Functions, len(o.Seeds), o.Steps))
	}
	if !(o.Capacity.CPU > 0 && o.Capacity.Memory > 0) {
		errs = append(errs, fmt.Errorf("node capacity must be positive, got %v", o.Capacity))
	}
	if err := o.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Study is the outcome: the paper's measures over every invocation of
// every seed, and per function paired with fixed allocation.
type Study struct {
	Seeds, Functions, Nodes int
	Timeout                 time.Duration
	Invocations             int
	// Percentiles of completion time (seconds) over all invocations;
	// Unguarded is the rule without the safeguard.
	Fixed, Harvest, Unguarded Percentiles
	// UnguardedTimedOut and UnguardedSaturated are FixedTimedOut's and
	// FixedSaturated's for the rule without the safeguard.
	UnguardedTimedOut  float64
	UnguardedSaturated int
	// HarvestWorse and UnguardedWorse count the functions whose p98 under
	// the rule, or under it without the safeguard, is more than
	// WorseRatio times their p98 under fixed allocation: the functions
	// harvesting hurts, which the safeguard is there to protect.
	HarvestWorse, UnguardedWorse int
	// P98Change is Harvest.P98 / Fixed.P98 − 1 over all invocations.
	P98Change float64
	// FunctionP98Change is the mean over functions (and seeds) of each
	// function's p98 under the rule over its p98 under fixed allocation,
	// minus one, with its 95% interval; FunctionP98Median its median.
	FunctionP98Change stats.Interval
	FunctionP98Median float64
	// SeedP98Change is P98Change of each seed alone.
	SeedP98Change []float64
	// Harvested and Accelerated are the shares of the rule's invocations
	// that arrived while their function's allocation was below, or above,
	// the user's.
	Harvested, Accelerated float64
	// HarvestedWindows and AcceleratedWindows are the shares of
	// function-windows so; Restores the safeguard's restorations per
	// thousand function-windows.
	HarvestedWindows, AcceleratedWindows, Restores float64
	// FixedTimedOut and HarvestTimedOut are the shares of invocations
	// ended by the timeout under each policy.
	FixedTimedOut, HarvestTimedOut float64
	// UnderProvisioned counts the functions whose user CPU allocation is
	// below their mean load (rate × work), and UnderShare is their share
	// of the invocations; FixedSaturated and HarvestSaturated count the
	// functions whose own p98 is the timeout under each policy.
	UnderProvisioned, FixedSaturated, HarvestSaturated int
	UnderShare                                         float64
}

// WorseRatio is how much higher than under fixed allocation a function's
// p98 must be for the function to count as hurt.
const WorseRatio = 1.1

// Percentiles of a set of completion times.
type Percentiles struct{ P50, P95, P98, P99, Mean float64 }

func percentiles(xs []float32) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	slices.Sort(xs)
	q := func(p float64) float64 { return float64(xs[int(math.Ceil(p*float64(len(xs))))-1]) }
	sum := 0.0
	for _, x := range xs {
		sum += float64(x)
	}
	return Percentiles{P50: q(0.5), P95: q(0.95), P98: q(0.98), P99: q(0.99), Mean: sum / float64(len(xs))}
}

// RunStudy simulates each seed's functions under fixed allocation and the
// rule, on the same arrivals.
func RunStudy(o StudyOptions) (*Study, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("faas: %w", err)
	}
	step := o.Options.withDefaults().Step
	st := &Study{Seeds: len(o.Seeds), Functions: o.Functions, Timeout: o.Options.withDefaults().Timeout}
	var allFixed, allHarvest, allUnguarded []float32
	uto := 0
	var perFn []float64
	var harvested, accelerated, invs, hw, aw, windows, restores, fto, hto, under int
	for _, seed := range o.Seeds {
		fs, err := Generate(seed, o.Functions, o.Steps, step)
		if err != nil {
			return nil, err
		}
		nodes, err := Pack(fs, o.Capacity)
		if err != nil {
			return nil, err
		}
		// Full nodes: each node's capacity is its functions' user
		// allocations, so that every core a function gets beyond its own
		// was harvested from another, not idle room first fit left over.
		for k := range nodes {
			var sum workload.Resources
			for _, f := range nodes[k].Functions {
				sum = sum.Add(f.User)
			}
			nodes[k].Capacity = sum
		}
		st.Nodes += len(nodes)
		var seedFixed, seedHarvest []float32
		for k := range nodes {
			fixed, err := Simulate(&nodes[k], PolicyFixed, o.Options)
			if err != nil {
				return nil, err
			}
			harvest, err := Simulate(&nodes[k], PolicyHarvest, o.Options)
			if err != nil {
				return nil, err
			}
			unguarded, err := Simulate(&nodes[k], PolicyUnguarded, o.Options)
			if err != nil {
				return nil, err
			}
			for i, f := range unguarded.Functions {
				allUnguarded = append(allUnguarded, f.Completion...)
				uto += f.TimedOut
				pu := percentiles(slices.Clone(f.Completion)).P98
				if to := float32(st.Timeout.Seconds()); to > 0 && float32(pu) >= to {
					st.UnguardedSaturated++
				}
				if pu > WorseRatio*percentiles(slices.Clone(fixed.Functions[i].Completion)).P98 {
					st.UnguardedWorse++
				}
			}
			for i := range fixed.Functions {
				a, b := fixed.Functions[i].Completion, harvest.Functions[i].Completion
				seedFixed, seedHarvest = append(seedFixed, a...), append(seedHarvest, b...)
				pa, pb := percentiles(slices.Clone(a)).P98, percentiles(slices.Clone(b)).P98
				if to := float32(st.Timeout.Seconds()); to > 0 {
					if float32(pa) >= to {
						st.FixedSaturated++
					}
					if float32(pb) >= to {
						st.HarvestSaturated++
					}
				}
				if f := &nodes[k].Functions[i]; f.User.CPU < meanLoad(f) {
					st.UnderProvisioned++
					under += len(a)
				}
				if pa > 0 {
					perFn = append(perFn, pb/pa-1)
				}
				if pb > WorseRatio*pa {
					st.HarvestWorse++
				}
				fto, hto = fto+fixed.Functions[i].TimedOut, hto+harvest.Functions[i].TimedOut
				harvested += harvest.Functions[i].Harvested
				accelerated += harvest.Functions[i].Accelerated
				invs += len(b)
			}
			hw, aw, windows, restores = hw+harvest.HarvestedWindows, aw+harvest.AcceleratedWindows, windows+harvest.Windows, restores+harvest.Restores
		}
		pf, ph := percentiles(slices.Clone(seedFixed)).P98, percentiles(slices.Clone(seedHarvest)).P98
		st.SeedP98Change = append(st.SeedP98Change, ph/pf-1)
		allFixed, allHarvest = append(allFixed, seedFixed...), append(allHarvest, seedHarvest...)
	}
	st.Fixed, st.Harvest, st.Unguarded = percentiles(allFixed), percentiles(allHarvest), percentiles(allUnguarded)
	st.UnguardedTimedOut = float64(uto) / float64(max(len(allUnguarded), 1))
	st.P98Change = st.Harvest.P98/st.Fixed.P98 - 1
	var err error
	if st.FunctionP98Change, err = stats.Mean(perFn, 0.95); err != nil {
		return nil, fmt.Errorf("faas: %w", err)
	}
	slices.Sort(perFn)
	st.FunctionP98Median = perFn[len(perFn)/2]
	st.Invocations = invs
	st.Harvested, st.Accelerated = float64(harvested)/float64(max(invs, 1)), float64(accelerated)/float64(max(invs, 1))
	st.HarvestedWindows, st.AcceleratedWindows = float64(hw)/float64(max(windows, 1)), float64(aw)/float64(max(windows, 1))
	st.Restores = 1000 * float64(restores) / float64(max(windows, 1))
	st.UnderShare = float64(under) / float64(max(len(allFixed), 1))
	st.FixedTimedOut, st.HarvestTimedOut = float64(fto)/float64(max(len(allFixed), 1)), float64(hto)/float64(max(invs, 1))
	return st, nil
}

// Write prints the study beside the paper's figures.
func (s *Study) Write(w io.Writer, step time.Duration, steps int) error {
	_, err := fmt.Fprintf(w, `FaaSRM's harvesting rule (the rule, not the paper's learned allocator) against fixed allocation:
%d functions × %d seeds on %d full nodes in all, %d windows of %s each, %d invocations per policy; invocations time out after %s (0: never).

     POLICY    P50 (s)   P95 (s)   P98 (s)   P99 (s)  MEAN (s)  TIMED OUT
      fixed  %9.3f %9.3f %9.3f %9.3f %9.3f  %8.3f%%
     faasrm  %9.3f %9.3f %9.3f %9.3f %9.3f  %8.3f%%
  unguarded  %9.3f %9.3f %9.3f %9.3f %9.3f  %8.3f%%
(unguarded: the rule without the safeguard)

p98 over all invocations: %+.1f%% (per seed: %s; paper: -87.6%% in its simulation, -35.8%% on OpenWhisk)
p98 per function, paired with fixed allocation: mean %s%%, median %+.1f%% (%d functions)
invocations harvested from: %.1f%% (paper 38.8%%); accelerated: %.1f%% (paper 39.2%%)
function-windows harvested from: %.1f%%, accelerated: %.1f%%; safeguard restorations: %.1f per 1000 function-windows
functions whose p98 is more than 10%% above fixed allocation's: %d faasrm, %d unguarded
functions whose own p98 is the timeout: %d fixed, %d faasrm, %d unguarded; %d functions have a user CPU allocation below their mean load, with %.1f%% of the invocations
`, s.Functions, s.Seeds, s.Nodes, steps, step, s.Invocations, s.Timeout,
		s.Fixed.P50, s.Fixed.P95, s.Fixed.P98, s.Fixed.P99, s.Fixed.Mean, 100*s.FixedTimedOut,
		s.Harvest.P50, s.Harvest.P95, s.Harvest.P98, s.Harvest.P99, s.Harvest.Mean, 100*s.HarvestTimedOut,
		s.Unguarded.P50, s.Unguarded.P95, s.Unguarded.P98, s.Unguarded.P99, s.Unguarded.Mean, 100*s.UnguardedTimedOut,
		100*s.P98Change, pcts(s.SeedP98Change),
		stats.Interval{N: s.FunctionP98Change.N, Mean: 100 * s.FunctionP98Change.Mean, Lo: 100 * s.FunctionP98Change.Lo, Hi: 100 * s.FunctionP98Change.Hi}.Format("%+.1f"),
		100*s.FunctionP98Median, s.FunctionP98Change.N,
		100*s.Harvested, 100*s.Accelerated, 100*s.HarvestedWindows, 100*s.AcceleratedWindows, s.Restores,
		s.HarvestWorse, s.UnguardedWorse,
		s.FixedSaturated, s.HarvestSaturated, s.UnguardedSaturated, s.UnderProvisioned, 100*s.UnderShare)
	return err
}

func pcts(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%+.1f%%", 100*x)
	}
	return out
}

// meanLoad is a function's mean CPU demand over its run, in cores.
func meanLoad(f *Function) float64 {
	sum := 0.0
	for _, r := range f.Rates {
		sum += r
	}
	return sum / float64(max(len(f.Rates), 1)) * f.Work
}
