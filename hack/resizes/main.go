// Command resizes lists the vertical changes (pod resizes) a variant of the
// fused default makes on the demo's held-out runs, with the size of each
// change and the policy's reason, and sums them by size and reason
// (docs/results/evidence-slo.md, "Resizes for a drifting floor"). It runs the
// demo's held-out apps (pkg/lab/demo.Runs) as `rl-agent demo` does; every
// change it counts is one `rl-agent demo` counts in its SCALE V column.
//
// Usage: go run ./hack/resizes [-apps 32] [-seed 1] [-variant SPEC] [-app NAME] [-trace KIND] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/demo"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// sizeClasses are the upper ends of the relative-change classes summed.
var sizeClasses = []float64{0.01, 0.1, math.Inf(1)}

type options struct {
	apps       int
	seed       uint64
	variant    string
	app, trace string
	verbose    bool
}

func main() {
	var o options
	flag.IntVar(&o.apps, "apps", 32, "held-out apps, as rl-agent demo --apps")
	flag.Uint64Var(&o.seed, "seed", 1, "held-out set, as rl-agent demo --seed")
	flag.StringVar(&o.variant, "variant", "", "variant of the fused default: "+fusion.VariantHelp)
	flag.StringVar(&o.app, "app", "", "only this app (e.g. app-0014); all when empty")
	flag.StringVar(&o.trace, "trace", "", "only this trace kind; all when empty")
	flag.BoolVar(&o.verbose, "v", false, "print every resize")
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "resizes:", err)
		os.Exit(1)
	}
}

// tally sums resizes by size class and by reason.
type tally struct {
	runs, resizes int
	bySize        []int
	byReason      map[string]int
}

func run(w io.Writer, o options) error {
	fo, err := fusion.ParseVariant(o.variant)
	if err != nil {
		return err
	}
	d := demo.DefaultOptions()
	d.Apps, d.Seed = o.apps, o.seed
	if err := d.Validate(); err != nil {
		return err
	}
	all, err := demo.Runs(d)
	if err != nil {
		return err
	}
	cfg := d.SimConfig()
	factory := fusion.NewPolicyFactory(fo)
	t := tally{bySize: make([]int, len(sizeClasses)), byReason: map[string]int{}}
	for _, r := range all {
		if (o.app != "" && r.App.Name != o.app) || (o.trace != "" && r.Trace.Name != o.trace) {
			continue
		}
		t.runs++
		s, err := sim.New(cfg, r.App, r.Trace, r.Seed)
		if err != nil {
			return err
		}
		p, err := factory(r.App.Constraints)
		if err != nil {
			return err
		}
		for i := range r.Trace.Rates {
			m := s.Step()
			rec, err := p.Recommend(context.Background(), s.Observation())
			if err != nil {
				return err
			}
			a, err := s.Apply(rec)
			if err != nil {
				return err
			}
			if !a.Vertical {
				continue
			}
			c, _ := rec.Container(r.App.Container)
			change := relChange(m.Requests, c.Target)
			t.add(change, reasonTag(rec.Reason))
			if o.verbose {
				fmt.Fprintf(w, "%s %s window %4d: %d pods, cpu %.3f -> %.3f, memory %.0fMi -> %.0fMi (%.2f%%): %s\n",
					r.App.Name, r.Trace.Name, i, m.Replicas, m.Requests.CPU, c.Target.CPU,
					m.Requests.Memory/(1<<20), c.Target.Memory/(1<<20), 100*change, rec.Reason)
			}
		}
	}
	if t.runs == 0 {
		return fmt.Errorf("no held-out run matches app %q and trace %q", o.app, o.trace)
	}
	return t.write(w, o.variant)
}

// relChange is the larger relative change of the CPU and memory requests
// (a resource the recommendation leaves at 0 is unchanged).
func relChange(cur, next workload.Resources) float64 {
	c := 0.0
	for _, r := range []workload.Resource{workload.CPU, workload.Memory} {
		if a, b := cur.Get(r), next.Get(r); a > 0 && b > 0 {
			c = max(c, math.Abs(b/a-1))
		}
	}
	return c
}

// reasonTag is what a recommendation's reason adds to the horizontal
// decision (the part after the first "; ", without the figures in
// parentheses, e.g. a growth's gain), or "-".
func reasonTag(reason string) string {
	_, tag, ok := strings.Cut(reason, "; ")
	if !ok {
		return "-"
	}
	var b strings.Builder
	depth := 0
	for _, r := range tag {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (t *tally) add(change float64, reason string) {
	t.resizes++
	t.bySize[slices.IndexFunc(sizeClasses, func(hi float64) bool { return change < hi })]++
	t.byReason[reason]++
}

func (t *tally) write(w io.Writer, variant string) error {
	fmt.Fprintf(w, "variant %q, %d runs: %d resizes (%.2f per run); by the larger relative change of CPU or memory: under 1%% %d, 1-10%% %d, 10%% or more %d\n",
		variant, t.runs, t.resizes, float64(t.resizes)/float64(t.runs), t.bySize[0], t.bySize[1], t.bySize[2])
	reasons := make([]string, 0, len(t.byReason))
	for r := range t.byReason {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		if _, err := fmt.Fprintf(w, "  %6d  %s\n", t.byReason[r], r); err != nil {
			return err
		}
	}
	return nil
}
