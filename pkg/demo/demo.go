// Package demo is AWARE's main job on the embedded default: it evaluates the
// default policies and the oracle on a held-out set of generated apps in the
// simulator, prints the comparison table and writes the report and plots to
// a folder it names.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aware-k8s/aware/pkg/eval"
	"github.com/aware-k8s/aware/pkg/fusion"
	"github.com/aware-k8s/aware/pkg/hpa"
	"github.com/aware-k8s/aware/pkg/oracle"
	"github.com/aware-k8s/aware/pkg/sim"
	"github.com/aware-k8s/aware/pkg/vpa"
	"github.com/aware-k8s/aware/pkg/workload"
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
// every trace kind for one day. Measured: about 100 s of CPU in all, so
// roughly a minute on two idle cores.
const (
	DefaultApps  = 200
	DefaultSteps = 5760 // one day of 15-second windows
	DefaultSeed  = 1
)

// Options configure a demo run. The zero value is not valid; start from
// DefaultOptions.
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
	// AzureCSV, when set, names an Azure Functions 2019 invocation file
	// (invocations_per_function_md.anon.d*.csv); every app then also runs
	// under one of its functions (assigned round-robin among functions with
	// any invocations), scaled so that its mean rate is the app's base rate.
	AzureCSV string
	// Policies are evaluated in this order.
	Policies []string
	// Extra contenders (for instance a trained agent) run after Policies.
	Extra []eval.Contender
	// OutDir receives report.json and the plots; empty means a fresh
	// ./aware-demo-<seed> (suffixed -2, -3… if it exists).
	OutDir string
	// Workers defaults to GOMAXPROCS.
	Workers int
	// Resize is how vertical changes reach pods (Restart or InPlace).
	Resize string
	// SeriesApp is the index, among the evaluated apps, of the app whose
	// time series is plotted, under trace kind SeriesTrace.
	SeriesApp   int
	SeriesTrace string
	// Progress draws a bar on stderr.
	Progress bool
}

// DefaultOptions returns the options of `rl-agent demo` without flags.
func DefaultOptions() Options {
	kinds := make([]string, 0, 6)
	for _, k := range sim.TraceKinds() {
		kinds = append(kinds, string(k))
	}
	return Options{
		Apps:        DefaultApps,
		Seed:        DefaultSeed,
		Steps:       DefaultSteps,
		Step:        15 * time.Second,
		Traces:      kinds,
		Policies:    DefaultPolicies(),
		Resize:      string(sim.ResizeRestart),
		SeriesTrace: string(sim.FlashCrowd),
		Progress:    true,
	}
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
	if len(o.Traces) == 0 {
		errs = append(errs, errors.New("at least one trace kind is needed"))
	}
	for _, t := range o.Traces {
		if !slices.Contains(sim.TraceKinds(), sim.TraceKind(t)) {
			errs = append(errs, fmt.Errorf("unknown trace kind %q (known: %v)", t, sim.TraceKinds()))
		}
	}
	if len(o.Policies)+len(o.Extra) == 0 {
		errs = append(errs, errors.New("at least one policy is needed"))
	}
	for _, p := range o.Policies {
		if !slices.Contains(DefaultPolicies(), p) {
			errs = append(errs, fmt.Errorf("unknown policy %q (known: %s)", p, strings.Join(DefaultPolicies(), ", ")))
		}
	}
	if o.Resize != string(sim.ResizeRestart) && o.Resize != string(sim.ResizeInPlace) {
		errs = append(errs, fmt.Errorf("resize must be %s or %s, got %q", sim.ResizeRestart, sim.ResizeInPlace, o.Resize))
	}
	if o.SeriesApp < 0 || o.SeriesApp >= max(o.Apps, 1) {
		errs = append(errs, fmt.Errorf("series app must be in [0, %d), got %d", o.Apps, o.SeriesApp))
	}
	if !slices.Contains(o.Traces, o.SeriesTrace) {
		errs = append(errs, fmt.Errorf("series trace %q is not among the traces %v", o.SeriesTrace, o.Traces))
	}
	if o.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers must be >= 0, got %d", o.Workers))
	}
	return errors.Join(errs...)
}

// contender builds the named built-in policy.
func contender(name string) eval.Contender {
	switch name {
	case PolicyHPA:
		return eval.FromFactory(name, hpa.NewPolicyFactory(hpa.PolicyOptions{}))
	case PolicyVPA:
		return eval.FromFactory(name, vpa.NewPolicyFactory(vpa.PolicyOptions{}))
	case PolicyNaive:
		return eval.FromFactory(name, fusion.NewNaiveFactory(fusion.Options{}))
	case PolicyFused:
		return eval.FromFactory(name, fusion.NewPolicyFactory(fusion.Options{}))
	}
	return eval.Contender{Name: PolicyOracle, New: func(r eval.Run, cfg sim.Config) (workload.Policy, error) {
		return oracle.New(r.App, r.Trace, cfg, oracle.Options{})
	}}
}

// Runs returns the runs the demo evaluates: the first o.Apps held-out apps,
// each under every trace kind of o.Traces and then, with o.AzureCSV, under an
// Azure function's trace; app-major.
func Runs(o Options) ([]eval.Run, error) {
	n := max(sim.DefaultAppCount, 5*o.Apps) // every fifth app is held out
	apps, err := sim.GenerateApps(o.Seed, n)
	if err != nil {
		return nil, err
	}
	azure, err := readAzure(o)
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
			f := &azure[(held-1)%len(azure)]
			var total float64
			for _, c := range f.Counts {
				total += c
			}
			tr, err := f.Trace(o.Step, apps[i].BaseRate/(total/float64(len(f.Counts))/60))
			if err != nil {
				return nil, err
			}
			tr.Rates = tr.Rates[:o.Steps]
			runs = append(runs, eval.Run{App: apps[i], Trace: &tr, Seed: (o.Seed*1_000_003+uint64(i))*16 + 15})
		}
	}
	return runs, nil
}

// readAzure loads the functions of o.AzureCSV that have any invocations.
func readAzure(o Options) ([]sim.AzureFunction, error) {
	if o.AzureCSV == "" {
		return nil, nil
	}
	f, err := os.Open(o.AzureCSV)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := sim.ReadAzureCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.AzureCSV, err)
	}
	var active []sim.AzureFunction
	for _, fn := range all {
		if slices.ContainsFunc(fn.Counts, func(c float64) bool { return c > 0 }) {
			active = append(active, fn)
		}
	}
	if len(active) == 0 {
		return nil, fmt.Errorf("%s: no function has any invocations", o.AzureCSV)
	}
	if limit := sim.AzureMinutes * int(time.Minute/o.Step); o.Steps > limit {
		return nil, fmt.Errorf("%s: a day of per-minute counts covers %d windows of %s, fewer than the %d steps asked", o.AzureCSV, limit, o.Step, o.Steps)
	}
	return active, nil
}

// Run evaluates the policies, prints the table to stdout and writes the
// report into the output folder; progress goes to stderr.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("demo: invalid options: %w", err)
	}
	runs, err := Runs(o)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	var cs []eval.Contender
	for _, p := range o.Policies {
		cs = append(cs, contender(p))
	}
	cs = append(cs, o.Extra...)
	dir, err := outDir(o)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	cfg := sim.DefaultConfig()
	cfg.Step = o.Step
	cfg.Resize = sim.ResizeMode(o.Resize)
	hours := float64(o.Steps) * o.Step.Hours()
	traces := slices.Clone(o.Traces)
	if o.AzureCSV != "" {
		traces = append(traces, "azure")
	}
	fmt.Fprintf(stdout, "AWARE demo: %d held-out apps × %d traces (%s) × %d policies, %d windows of %s (%.3g h) per run, seed %d\n\n",
		len(runs)/len(traces), len(traces), strings.Join(traces, ","), len(cs), o.Steps, o.Step, hours, o.Seed)

	series := o.SeriesApp*len(traces) + slices.Index(o.Traces, o.SeriesTrace)
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
	paths, err := rep.WriteFiles(dir)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(stdout, "\nSLO VIOL: windows with p95 above the SLO. COST: core-hours + GiB-hours/7.5. REWARD: mean AWARE reward (α=0.5).\n")
	fmt.Fprintf(stdout, "Report and plots in %s:\n", dir)
	for _, p := range paths {
		fmt.Fprintf(stdout, "  %s\n", filepath.Base(p))
	}
	return nil
}

// outDir returns o.OutDir, or a fresh ./aware-demo-<seed>[-k].
func outDir(o Options) (string, error) {
	if o.OutDir != "" {
		return o.OutDir, nil
	}
	base := "aware-demo-" + strconv.FormatUint(o.Seed, 10)
	for k := 1; k < 1000; k++ {
		dir := base
		if k > 1 {
			dir = base + "-" + strconv.Itoa(k)
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return dir, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free output folder named %s-<n>", base)
}
