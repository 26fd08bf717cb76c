// Package demo is AWARE's main job on the embedded default: it takes the
// agents trained on generated training apps (pkg/lab/train) that it ships
// (shipped.go; `make agents` trains them as the demo would), or trains
// them when its options are not theirs, or loads checkpoints; evaluates
// them with the default policies and the oracle on a held-out set of
// generated apps in the simulator, prints the comparison table and writes
// the report and plots to a folder it names.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/faas"
	"github.com/aware-k8s/aware/pkg/lab/oracle"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/lab/train"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// Policy names the demo knows.
const (
	PolicyHPA    = "hpa"
	PolicyVPA    = "vpa"
	PolicyNaive  = "hpa+vpa"
	PolicyFused  = "fused"
	PolicyOracle = "oracle"
)

// DefaultPolicies returns every built-in policy, in table order.
func DefaultPolicies() []string {
	return []string{PolicyHPA, PolicyVPA, PolicyNaive, PolicyFused, PolicyOracle}
}

// Defaults: the whole held-out set (200 of AWARE's 1000 apps), each under
// every trace kind for one day. Measured: about 100 s of CPU for the five
// built-in policies; the default agent adds about 50 s of CPU of training
// (train.DefaultOptions) and 50 s of evaluation, about 200 s in all.
const (
	DefaultApps  = 200
	DefaultSteps = 5760 // one day of 15-second windows
	DefaultSeed  = 1
)

// Options configure a demo run. The zero value is not valid; start from
// DefaultOptions. rl-agent's experiment file holds the fields under their
// names in lowerCamelCase, except those tagged "-", which are set in code.
type Options struct {
	// Apps is how many held-out apps to evaluate.
	Apps int
	// Seed derives the apps, traces and arrivals.
	Seed uint64
	// Steps is the number of windows per run.
	Steps int
	// Step is the window length.
	Step time.Duration
	// Traces are the trace kinds; every app runs under each of them.
	Traces []string
	// Azure, when its invocations file is set, names files of one day of
	// the Azure Functions 2019 trace; every app then also runs under one of
	// its functions (assigned round-robin among the usable ones, see
	// sim.LoadAzure), scaled so that its mean rate is the app's base rate,
	// with the function's measured execution time and its app's memory
	// when those files are given (sim.App.WithMeasured).
	Azure sim.AzureFiles
	// AzureRate is how a function's invocations become the app's load
	// (empty: sim.AzureRateScaled).
	AzureRate sim.AzureRate
	// Series, when its Path is set, is a rate series file; every app then
	// also runs under it (after the Azure run), resampled to the window
	// (sim.SeriesFile).
	Series sim.SeriesFile
	// Policies are evaluated in this order.
	Policies []string
	// Extra contenders (for instance a trained agent) run after Policies.
	Extra []eval.Contender `json:"-"`
	// OutDir receives report.json and the plots; empty means a fresh
	// ./aware-demo-<seed> (suffixed -2, -3… if it exists).
	OutDir string
	// Workers defaults to GOMAXPROCS.
	Workers int
	// Resize is how vertical changes reach pods (Restart or InPlace).
	Resize string
	// Tenants is the fraction of each node's CPU beyond the app's requests
	// that other workloads use (sim.Config.Tenants).
	Tenants float64
	// StartupBoost gives every app a CPU start-up boost; zero is none.
	StartupBoost StartupBoost
	// FaaSRMTimeout ends an invocation of the FaaSRM study (PolicyFaaSRM)
	// this long after its arrival; zero means never.
	FaaSRMTimeout time.Duration `json:"faasrmTimeout"`
	// SeriesApp is the index, among the evaluated apps, of the app whose
	// time series is plotted, under trace kind SeriesTrace; an empty
	// SeriesTrace follows Traces: flash-crowd if it is among them, else the
	// first.
	SeriesApp   int
	SeriesTrace string
	// Progress draws a bar on stderr.
	Progress bool `json:"-"`
	// Agent, when set, adds the trained AWARE agent (row "aware", or one
	// row per agent and a pooled comparison when there are several) after
	// Policies and Extra.
	Agent *AgentOptions `json:"-"`
	// Name labels the header and the default output folder
	// (./aware-<name>-<seed>); empty means "demo".
	Name string `json:"-"`
}

// DefaultOptions returns the options of `rl-agent demo` without flags.
func DefaultOptions() Options {
	kinds := make([]string, 0, 6)
	for _, k := range sim.TraceKinds() {
		kinds = append(kinds, string(k))
	}
	return Options{
		Apps:          DefaultApps,
		Seed:          DefaultSeed,
		Steps:         DefaultSteps,
		Step:          15 * time.Second,
		Traces:        kinds,
		Policies:      DefaultPolicies(),
		Resize:        string(sim.ResizeRestart),
		Progress:      true,
		FaaSRMTimeout: faas.DefaultTimeout,
		Agent: &AgentOptions{Train: train.DefaultOptions(), Seeds: DefaultAgentSeeds, Quorums: DefaultQuorums(),
			Validation: demoValidation()},
	}
}

// demoValidation is the demo's checkpoint selection: on, on
// DefaultValidationApps apps. Without it one training seed in three of the
// demo's drew a policy that violated the SLO in 35.9% of the held-out runs
// by more than a point (docs/results/evidence-slo.md, "The demo's agents").
func demoValidation() ValidationOptions {
	v := DefaultValidationOptions()
	v.Apps = DefaultValidationApps
	return v
}

// Validate rejects options that cannot run.
func (o *Options) Validate() error {
	var errs []error
	if o.Apps <= 0 {
		errs = append(errs, fmt.Errorf("apps must be > 0, got %d", o.Apps))
	}
	if o.Steps <= 0 {
		errs = append(errs, fmt.Errorf("steps must be > 0, got %d", o.Steps))
	}
	if o.Step <= 0 {
		errs = append(errs, fmt.Errorf("step must be > 0, got %s", o.Step))
	}
	if len(o.Traces) == 0 && o.Azure.Invocations == "" && o.Series.Path == "" {
		errs = append(errs, errors.New("at least one trace kind, Azure invocations file or rate series is needed"))
	}
	if _, err := sim.ParseAzureRate(string(o.AzureRate)); err != nil {
		errs = append(errs, err)
	}
	if err := o.Series.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, t := range o.Traces {
		if !slices.Contains(sim.TraceKinds(), sim.TraceKind(t)) {
			errs = append(errs, fmt.Errorf("unknown trace kind %q (known: %v)", t, sim.TraceKinds()))
		}
	}
	if len(o.Policies)+len(o.Extra) == 0 && o.Agent == nil {
		errs = append(errs, errors.New("at least one policy is needed"))
	}
	for _, p := range o.Policies {
		if err := validPolicy(p); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Resize != string(sim.ResizeRestart) && o.Resize != string(sim.ResizeInPlace) {
		errs = append(errs, fmt.Errorf("resize must be %s or %s, got %q", sim.ResizeRestart, sim.ResizeInPlace, o.Resize))
	}
	if o.FaaSRMTimeout < 0 {
		errs = append(errs, fmt.Errorf("faasrm timeout must be >= 0, got %s", o.FaaSRMTimeout))
	}
	if !(o.Tenants >= 0 && o.Tenants <= 1) {
		errs = append(errs, fmt.Errorf("tenants must be in [0, 1], got %g", o.Tenants))
	}
	if err := o.StartupBoost.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.SeriesApp < 0 || o.SeriesApp >= max(o.Apps, 1) {
		errs = append(errs, fmt.Errorf("series app must be in [0, %d), got %d", o.Apps, o.SeriesApp))
	}
	if o.SeriesTrace != "" && !slices.Contains(o.Traces, o.SeriesTrace) {
		errs = append(errs, fmt.Errorf("series trace %q is not among the traces %v", o.SeriesTrace, o.Traces))
	}
	if o.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers must be >= 0, got %d", o.Workers))
	}
	if o.Agent != nil && len(o.Agent.Checkpoints) == 0 {
		if t := o.trainOptions(0); t.Validate() != nil {
			errs = append(errs, fmt.Errorf("agent training: %w", t.Validate()))
		}
		if o.Agent.Seeds < 0 || o.Agent.Seeds > 16 {
			errs = append(errs, fmt.Errorf("agent seeds must be in [0, 16], got %d", o.Agent.Seeds))
		}
		if v := o.Agent.Validation; v.Apps != 0 {
			if err := v.Validate(); err != nil {
				errs = append(errs, err)
			}
			// The evaluated set, or a training seed, would be judged on
			// the apps it selected with.
			if v.Seed >= o.Seed && v.Seed < o.Seed+uint64(max(o.Agent.count(), 1)) {
				errs = append(errs, fmt.Errorf("validation seed %d is the evaluated set's or a training seed (%d to %d)", v.Seed, o.Seed, o.Seed+uint64(o.Agent.count())-1))
			}
		}
	}
	if o.Agent != nil && len(o.Agent.Quorums) > 0 {
		n := o.Agent.count()
		if n < 2 {
			errs = append(errs, fmt.Errorf("an ensemble needs at least 2 agents, got %d", n))
		}
		for _, q := range o.Agent.Quorums {
			if q < 0 || q > n {
				errs = append(errs, fmt.Errorf("ensemble quorum must be in [0, %d] (0: all agents), got %d", n, q))
			}
		}
	}
	return errors.Join(errs...)
}

// seriesTrace is the trace whose time series is plotted: a kind of
// o.Traces or, with none, the first of the files' traces.
func (o *Options) seriesTrace() string {
	switch {
	case o.SeriesTrace != "":
		return o.SeriesTrace
	case slices.Contains(o.Traces, string(sim.FlashCrowd)):
		return string(sim.FlashCrowd)
	case len(o.Traces) > 0:
		return o.Traces[0]
	}
	return o.traces()[0]
}

// Labels of the runs under the files' traces.
const (
	AzureTraceLabel  = "azure"
	SeriesTraceLabel = "csv"
)

// traces labels each app's runs in order: the trace kinds, then the
// Azure function's and the rate series' when their files are given.
func (o *Options) traces() []string {
	ts := slices.Clone(o.Traces)
	if o.Azure.Invocations != "" {
		ts = append(ts, AzureTraceLabel)
	}
	if o.Series.Path != "" {
		ts = append(ts, SeriesTraceLabel)
	}
	return ts
}

// Derived policies: the fused default through the paper's one-step actions,
// the fused default with a constant residual (learn.ParseResidual), and the
// fused default steered within the residual space towards the oracle's
// allocation (learn.GuidedResidualPolicy): what that space allows a policy
// that knew the future.
const (
	PolicyFusedPaper     = "fused-paper"
	PolicyResidualPrefix = "residual:"
	PolicyOracleResidual = "oracle-residual"
	// PolicyTargetPrefix names the fused default with another HPA target
	// CPU utilisation, e.g. fused:target=0.8 (the default's is
	// hpa.DefaultTargetCPUUtilization).
	PolicyTargetPrefix = "fused:target="
	// PolicyLimitTargetPrefix names the fused default whose HPA target CPU
	// utilisation is a fraction of the pods' CPU limit, e.g.
	// fused:limit-target=0.7: with limits twice the requests its pods run
	// at 140% of their requests (fusion.Options.TargetOfLimit). A suffix
	// "/hold=D" (a Go duration) reads the target of the request again for
	// D after the pods were starved of CPU by their node
	// (fusion.Options.PressureHold), e.g. fused:limit-target=0.7/hold=1h; a
	// suffix "/burst=R" reads it of the request while the request rate's
	// decayed peak is at least R times its decayed mean
	// (fusion.Options.BurstRatio), e.g. fused:limit-target=0.7/hold=24h/burst=3.
	PolicyLimitTargetPrefix = "fused:limit-target="
	// PolicyOracleRequests is the oracle planning every pod within its
	// requests (oracle.Options.WithinRequests): the cheapest allocation that
	// meets the SLO knowing the future, without counting on capacity above
	// the requests, which the cost does not charge.
	PolicyOracleRequests = "oracle-requests"
)

// fusedVariant reads the fused default's variant of a PolicyTargetPrefix
// or PolicyLimitTargetPrefix name (ok false for other names).
func fusedVariant(name string) (o fusion.Options, ok bool, err error) {
	if !strings.HasPrefix(name, PolicyTargetPrefix) && !strings.HasPrefix(name, PolicyLimitTargetPrefix) {
		return fusion.Options{}, false, nil
	}
	o, err = fusion.ParseVariant(strings.TrimPrefix(name, "fused:"))
	return o, true, err
}

// validPolicy reports whether name is a built-in or derived policy.
func validPolicy(name string) error {
	if rest, ok := strings.CutPrefix(name, PolicyResidualPrefix); ok {
		_, err := learn.ParseResidual(rest)
		return err
	}
	if _, ok, err := fusedVariant(name); ok {
		return err
	}
	if _, ok, err := qlearnPolicy(name); ok {
		return err
	}
	if name == PolicyFaaSRM {
		return nil
	}
	if name == PolicyFusedPaper || name == PolicyOracleResidual || name == PolicyOracleRequests || slices.Contains(DefaultPolicies(), name) {
		return nil
	}
	return fmt.Errorf("unknown policy %q (known: %s, %s, %s, %s, %sSPEC, %sT, %sT, %s, %s, %sT, %s, %s)", name, strings.Join(DefaultPolicies(), ", "), PolicyFusedPaper, PolicyOracleResidual, PolicyOracleRequests, PolicyResidualPrefix, PolicyTargetPrefix, PolicyLimitTargetPrefix, PolicyQLearn, PolicyQLearnRule, PolicyHPATargetPrefix, PolicyHPABestTarget, PolicyFaaSRM)
}

// contender builds the named built-in policy.
func contender(name string) eval.Contender {
	fused := fusion.NewPolicyFactory(fusion.Options{})
	if o, ok, _ := fusedVariant(name); ok { // validPolicy checked it
		return eval.FromFactory(name, fusion.NewPolicyFactory(o))
	}
	if c, ok, _ := qlearnPolicy(name); ok {
		return c
	}
	if rest, ok := strings.CutPrefix(name, PolicyResidualPrefix); ok {
		ch, _ := learn.ParseResidual(rest) // validPolicy checked it
		return eval.FromFactory(name, func(c workload.Constraints) (workload.Policy, error) {
			def, err := fused(c)
			if err != nil {
				return nil, err
			}
			return learn.NewResidualPolicy(name, def, c, ch), nil
		})
	}
	switch name {
	case PolicyOracleResidual:
		return eval.Contender{Name: name, New: func(r eval.Run, cfg sim.Config) (workload.Policy, error) {
			orc, err := oracle.New(r.App, r.Trace, cfg, oracle.Options{})
			if err != nil {
				return nil, err
			}
			def, err := fused(r.App.Constraints)
			if err != nil {
				return nil, err
			}
			return learn.NewGuidedResidualPolicy(name, def, orc, r.App.Constraints), nil
		}}
	case PolicyFusedPaper:
		return eval.FromFactory(name, func(c workload.Constraints) (workload.Policy, error) {
			def, err := fused(c)
			if err != nil {
				return nil, err
			}
			return learn.NewPaperPolicy(name, def, c), nil
		})
	case PolicyHPA:
		return eval.FromFactory(name, hpa.NewPolicyFactory(hpa.PolicyOptions{}))
	case PolicyVPA:
		return eval.FromFactory(name, vpa.NewPolicyFactory(vpa.PolicyOptions{}))
	case PolicyNaive:
		return eval.FromFactory(name, fusion.NewNaiveFactory(fusion.Options{}))
	case PolicyFused:
		return eval.FromFactory(name, fusion.NewPolicyFactory(fusion.Options{}))
	}
	return eval.Contender{Name: name, New: func(r eval.Run, cfg sim.Config) (workload.Policy, error) {
		return oracle.New(r.App, r.Trace, cfg, oracle.Options{WithinRequests: name == PolicyOracleRequests, FeasibleFirst: fileTrace(r)})
	}}
}

// fileTrace reports whether r runs under a file's trace (an Azure
// function's or a rate series'). The oracle chooses its pod size feasible
// first there (oracle.Options.FeasibleFirst): a sparse function's bursts
// otherwise make it pick a pod that cannot serve them. The generated
// traces keep the cheapest size, so that the default table stays as
// measured until the change is judged on it.
func fileTrace(r eval.Run) bool {
	return strings.HasPrefix(r.Trace.Name, "azure:") || strings.HasPrefix(r.Trace.Name, "csv:")
}

// SimConfig is the simulator configuration of o's window, resize mode and
// tenants, as the demo runs every policy.
func (o *Options) SimConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Step, cfg.Resize, cfg.Tenants = o.Step, sim.ResizeMode(o.Resize), o.Tenants
	return cfg
}

// Runs returns the runs the demo evaluates: the first o.Apps held-out apps,
// each under every trace kind of o.Traces and then, with o.Azure, under an
// Azure function's trace; app-major.
func Runs(o Options) ([]eval.Run, error) {
	n := max(sim.DefaultAppCount, 5*o.Apps) // every fifth app is held out
	apps, err := sim.GenerateApps(o.Seed, n)
	if err != nil {
		return nil, err
	}
	azure, err := sim.LoadAzure(o.Azure)
	if err != nil {
		return nil, err
	}
	series, err := o.Series.Load(o.Step)
	if err != nil {
		return nil, err
	}
	var runs []eval.Run
	held := 0
	for i := 0; i < len(apps) && held < o.Apps; i++ {
		if !sim.HeldOut(i) {
			continue
		}
		held++
		for k, kind := range o.Traces {
			seed := (o.Seed*1_000_003+uint64(i))*16 + uint64(k)
			tr, err := sim.GenerateTrace(sim.TraceKind(kind), sim.TraceOptions{
				Mean: apps[i].BaseRate, Steps: o.Steps, Step: o.Step, Period: 24 * time.Hour, Seed: seed,
			})
			if err != nil {
				return nil, err
			}
			runs = append(runs, eval.Run{App: apps[i], Trace: &tr, Seed: seed})
		}
		if len(azure) > 0 {
			w := &azure[(held-1)%len(azure)]
			// A file of part of a day gives runs as long as its minutes.
			app, tr, err := w.Run(apps[i], o.Step, min(o.Steps, w.Windows(o.Step)), 0, o.AzureRate)
			if err != nil {
				return nil, err
			}
			runs = append(runs, eval.Run{App: app, Trace: &tr, Seed: (o.Seed*1_000_003+uint64(i))*16 + 15})
		}
		if series != nil {
			app, tr, err := series.Run(apps[i], min(o.Steps, len(series.Rates)), 0)
			if err != nil {
				return nil, err
			}
			runs = append(runs, eval.Run{App: app, Trace: &tr, Seed: (o.Seed*1_000_003+uint64(i))*16 + 14})
		}
	}
	o.StartupBoost.apply(runs)
	return runs, nil
}

// Run evaluates the policies, prints the table to stdout and writes the
// report into the output folder; progress goes to stderr.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%s: invalid options: %w", o.name(), err)
	}
	if slices.Contains(o.Policies, PolicyFaaSRM) {
		if err := runFaaSRM(o, stdout); err != nil {
			return err
		}
		if o.Policies = withoutFaaSRM(o.Policies); len(o.Policies)+len(o.Extra) == 0 && o.Agent == nil {
			return nil
		}
	}
	runs, err := Runs(o)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	var cs []eval.Contender
	var settle *SettleLog
	for _, p := range o.Policies {
		c := contender(p)
		if p == PolicyQLearn {
			c, settle = recordSettle(c)
		}
		cs = append(cs, c)
	}
	cs = append(cs, o.Extra...)
	dir, err := outDir(o)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	cfg := o.SimConfig()
	hours := float64(o.Steps) * o.Step.Hours()
	traces := o.traces()
	npol := len(cs)
	if o.Agent != nil {
		npol += o.Agent.count() + len(o.Agent.Quorums)
	}
	fmt.Fprintf(stdout, "AWARE %s: %d held-out apps × %d traces (%s) × %d policies, %d windows of %s (%.3g h) per run, seed %d\n\n",
		o.name(), len(runs)/len(traces), len(traces), strings.Join(traces, ","), npol, o.Steps, o.Step, hours, o.Seed)
	writeFileRuns(stdout, o, runs, len(traces))
	var agentFiles, agentNames []string
	if o.Agent != nil {
		acs, files, err := agents(ctx, o, dir, stdout, stderr)
		if err != nil {
			return fmt.Errorf("%s: agent: %w", o.name(), err)
		}
		// The ensembles' rows follow the agents' and are not pooled.
		for _, c := range acs[:o.Agent.count()] {
			agentNames = append(agentNames, c.Name)
		}
		cs = append(cs, acs...)
		agentFiles = files
	}

	series := o.SeriesApp*len(traces) + slices.Index(traces, o.seriesTrace())
	eo := eval.Options{Config: cfg, Workers: o.Workers, SeriesRun: series}
	if o.Progress {
		eo.Progress = NewProgressBar(stderr)
	}
	rep, err := eval.Evaluate(ctx, runs, cs, eo)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := rep.WriteTable(stdout); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if slices.Contains(o.Policies, PolicyFused) && len(rep.Summaries) > 1 {
		if rep.Comparisons, err = rep.Compare(PolicyFused); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if len(agentNames) > 1 {
			pooled, err := rep.Pool(PolicyFused, PooledName, agentNames)
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			rep.Comparisons = append(rep.Comparisons, pooled)
		}
		fmt.Fprintln(stdout)
		if err := eval.WriteComparisons(stdout, rep.Comparisons); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if settle != nil {
		settle.Write(stdout, o.Step.Seconds())
	}
	paths, err := rep.WriteFiles(dir)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	paths = append(paths, agentFiles...)
	fmt.Fprintf(stdout, "\nSLO VIOL: windows with p95 above the SLO. COST: core-hours + GiB-hours/7.5. REWARD: mean AWARE reward (α=0.5).\n")
	switch {
	case len(agentNames) == 1:
		fmt.Fprintf(stdout, "%s: the trained agent, greedy, with the safeguard on, on apps it never trained on.\n", train.PolicyName)
	case len(agentNames) > 1:
		from := fmt.Sprintf("trained with seeds %d to %d", o.Seed, o.Seed+uint64(len(agentNames))-1)
		if len(o.Agent.Checkpoints) > 0 {
			from = "loaded from the checkpoints in order"
		}
		fmt.Fprintf(stdout, "%s: the agents %s, greedy, with the safeguard on, on apps they never trained on; %s: their runs paired with the default's together.\n",
			strings.Join(agentNames, ", "), from, PooledName)
		for _, q := range o.Agent.Quorums {
			if q == 0 {
				q = len(agentNames)
			}
			fmt.Fprintf(stdout, "%s: the agents as one, deviating from the default in a dimension only as far as at least %d of them deviate the same way.\n", EnsembleName(q, len(agentNames)), q)
		}
	}
	fmt.Fprintf(stdout, "Report and plots in %s:\n", dir)
	for _, p := range paths {
		fmt.Fprintf(stdout, "  %s\n", filepath.Base(p))
	}
	return nil
}
