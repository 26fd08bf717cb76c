// Command burstwindows shows where, around the bursts of the simulator's
// bursty trace, a variant of the fused default violates its SLO: the share
// of violating windows at each offset from a burst's first window, and in
// the windows after it ends (docs/results/evidence-slo.md).
// It runs the demo's held-out apps (pkg/lab/demo.Runs) as `rl-agent demo` does.
//
// A window is in a burst when its rate is above BurstFactor times the
// trace's mean: the bursty trace is 0.6× its mean when calm and 3× in a
// burst (sim.GenerateTrace), so the threshold separates the two whatever
// the Poisson noise, which pkg/lab/sim keeps out of the trace's rates.
//
// Usage: go run ./hack/burstwindows [-apps 64] [-seed 1] [-variant SPEC] [-trace bursty]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/lab/demo"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// BurstFactor over the trace's mean marks a burst window.
const BurstFactor = 1.8

// maxOffset is the last offset shown on its own; later ones are pooled.
const maxOffset = 11

type tally struct{ windows, violating int }

func (t *tally) add(v bool) {
	t.windows++
	if v {
		t.violating++
	}
}

func (t tally) share() float64 {
	if t.windows == 0 {
		return 0
	}
	return 100 * float64(t.violating) / float64(t.windows)
}

type result struct {
	inBurst, after [maxOffset + 1]tally
	calm           tally
	bursts         int
	oomInBursts    int
	cost           float64
}

func main() {
	apps := flag.Int("apps", 64, "held-out apps, as rl-agent demo --apps")
	seed := flag.Uint64("seed", 1, "held-out set, as rl-agent demo --seed")
	variant := flag.String("variant", "", "variant of the fused default: "+fusion.VariantHelp)
	trace := flag.String("trace", string(sim.Bursty), "trace kind")
	flag.Parse()
	if err := run(os.Stdout, *apps, *seed, *variant, *trace); err != nil {
		fmt.Fprintln(os.Stderr, "burstwindows:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, apps int, seed uint64, variant, trace string) error {
	fo, err := fusion.ParseVariant(variant)
	if err != nil {
		return err
	}
	o := demo.DefaultOptions()
	o.Apps, o.Seed = apps, seed
	if err := o.Validate(); err != nil {
		return err
	}
	all, err := demo.Runs(o)
	if err != nil {
		return err
	}
	// The demo's runs of every trace kind, filtered, so that each run has
	// the trace and arrivals it has in rl-agent demo.
	var runs []eval.Run
	for _, r := range all {
		if r.Trace.Name == trace {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return fmt.Errorf("no run under trace %q (kinds: %v)", trace, o.Traces)
	}
	cfg := o.SimConfig()
	prices := sim.DefaultPrices() // as rl-agent demo
	factory := fusion.NewPolicyFactory(fo)
	var r result
	for _, run := range runs {
		s, err := sim.New(cfg, run.App, run.Trace, run.Seed)
		if err != nil {
			return err
		}
		p, err := factory(run.App.Constraints)
		if err != nil {
			return err
		}
		threshold := BurstFactor * run.Trace.Mean()
		offset, since := -1, maxOffset+1 // since: windows since the last burst window
		for range run.Trace.Rates {
			m := s.Step()
			r.cost += prices.Cost(m.Allocated.CPU, m.Allocated.Memory, cfg.Step.Seconds())
			violated := m.SLO > 0 && m.Latency.P95 > m.SLO
			switch {
			case m.Rate > threshold:
				if offset < 0 {
					r.bursts++
				}
				offset++
				since = 0
				r.inBurst[min(offset, maxOffset)].add(violated)
				r.oomInBursts += m.OOMKills
			case since < maxOffset+1:
				offset = -1
				since++
				r.after[since-1].add(violated)
			default:
				r.calm.add(violated)
			}
			rec, err := p.Recommend(context.Background(), s.Observation())
			if err != nil {
				return err
			}
			if _, err := s.Apply(rec); err != nil {
				return err
			}
		}
	}
	return r.write(w, variant, len(runs))
}

func (r *result) write(w io.Writer, variant string, runs int) error {
	var all tally
	for i := range r.inBurst {
		all.windows += r.inBurst[i].windows + r.after[i].windows
		all.violating += r.inBurst[i].violating + r.after[i].violating
	}
	all.windows += r.calm.windows
	all.violating += r.calm.violating
	fmt.Fprintf(w, "variant %q, %d runs: %d windows, %.2f%% violating, %d bursts (%.2f violating windows per burst), %d OOM kills in bursts, cost %.0f\n",
		variant, runs, all.windows, all.share(), r.bursts, float64(all.violating)/float64(max(r.bursts, 1)), r.oomInBursts, r.cost)
	fmt.Fprintln(w, "offset  in burst: windows  violating | after it: windows  violating")
	for i := range r.inBurst {
		label := fmt.Sprint(i)
		if i == maxOffset {
			label += "+"
		}
		fmt.Fprintf(w, "%6s  %17d  %8.1f%% | %16d  %8.1f%%\n", label, r.inBurst[i].windows, r.inBurst[i].share(), r.after[i].windows, r.after[i].share())
	}
	_, err := fmt.Fprintf(w, "calm (over %d windows after a burst): %d windows, %.2f%% violating\n", maxOffset+1, r.calm.windows, r.calm.share())
	return err
}
