package eval

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// Confidence is the level of the intervals the reports give.
const Confidence = 0.95

// WorseMargin is how much higher a run's share of SLO-violating windows must
// be than the baseline's on the same run to count as worse: one percentage
// point.
const WorseMargin = 0.01

// Comparison is one policy against a baseline, paired run by run: the same
// (app, trace, seed), so the differences carry no app-to-app variance.
type Comparison struct {
	Policy string `json:"policy"`
	Base   string `json:"base"`
	// Pairs is the number of runs both policies ran.
	Pairs int `json:"pairs"`
	// SLOViolationRate is the mean of the per-run differences in the share
	// of SLO-violating windows (policy − base; −0.002 is 0.2 points fewer).
	SLOViolationRate stats.Interval `json:"sloViolationRate"`
	// Reward is the mean per-run difference in mean reward.
	Reward stats.Interval `json:"reward"`
	// CostRatio is the mean per-run cost over the baseline's, minus one
	// (−0.15: 15% cheaper).
	CostRatio stats.Interval `json:"costRatio"`
	// OOMKills is the mean per-run difference in OOM kills.
	OOMKills stats.Interval `json:"oomKills"`
	// Worse is the fraction of runs whose share of SLO-violating windows
	// exceeds the baseline's by more than WorseMargin.
	Worse float64 `json:"worse"`
	// HorizontalRatio and VerticalRatio are the policy's total replica and
	// resource changes over the baseline's (churn); 0 when the baseline
	// made none.
	HorizontalRatio float64 `json:"horizontalRatio"`
	VerticalRatio   float64 `json:"verticalRatio"`
}

type runKey struct {
	app, trace string
	seed       uint64
}

// Compare pairs every other policy's runs with base's and returns one
// Comparison per policy, in summary order. Every run of a policy must have
// a run of base with the same app, trace and seed.
func (r *Report) Compare(base string) ([]Comparison, error) {
	return r.compare(base, func(policy string) string { return policy })
}

// Pool compares the runs of several policies together with base's, as one
// policy named name: each run is paired with base's run of the same app,
// trace and seed, so a baseline run pairs with one run of each policy. It
// is how several agents trained with different seeds are judged at once:
// the interval then also spans the training seed, though it treats the
// pairs as independent.
func (r *Report) Pool(base, name string, policies []string) (Comparison, error) {
	in := map[string]bool{}
	for _, p := range policies {
		in[p] = true
	}
	cs, err := r.compare(base, func(policy string) string {
		if in[policy] {
			return name
		}
		return ""
	})
	if err != nil {
		return Comparison{}, err
	}
	for _, c := range cs {
		if c.Policy == name {
			return c, nil
		}
	}
	return Comparison{}, fmt.Errorf("eval: none of %v ran", policies)
}

// compare is Compare with the runs of each policy counted under
// group(policy), skipped when that is "".
func (r *Report) compare(base string, group func(policy string) string) ([]Comparison, error) {
	baseRuns := map[runKey]*RunResult{}
	for i := range r.Results {
		x := &r.Results[i]
		if x.Policy != base {
			continue
		}
		k := runKey{x.App, x.Trace, x.Seed}
		if baseRuns[k] != nil {
			return nil, fmt.Errorf("eval: baseline %s ran %s/%s seed %d twice", base, x.App, x.Trace, x.Seed)
		}
		baseRuns[k] = x
	}
	if len(baseRuns) == 0 {
		return nil, fmt.Errorf("eval: baseline %q has no runs", base)
	}
	type acc struct {
		slo, slo0, rew, rew0, cost, oom, oom0 []float64
		worse, h, h0, v, v0                   int
	}
	accs := map[string]*acc{}
	var order []string // groups in the order of their first run
	for i := range r.Results {
		x := &r.Results[i]
		g := group(x.Policy)
		if x.Policy == base || g == "" {
			continue
		}
		b := baseRuns[runKey{x.App, x.Trace, x.Seed}]
		if b == nil {
			return nil, fmt.Errorf("eval: %s ran %s/%s seed %d, which baseline %s did not", x.Policy, x.App, x.Trace, x.Seed, base)
		}
		a := accs[g]
		if a == nil {
			a = &acc{}
			accs[g] = a
			order = append(order, g)
		}
		a.slo, a.slo0 = append(a.slo, x.SLOViolationRate), append(a.slo0, b.SLOViolationRate)
		a.rew, a.rew0 = append(a.rew, x.MeanReward), append(a.rew0, b.MeanReward)
		ratio := 0.0
		if b.Cost > 0 {
			ratio = x.Cost/b.Cost - 1
		}
		a.cost = append(a.cost, ratio)
		a.oom, a.oom0 = append(a.oom, float64(x.OOMKills)), append(a.oom0, float64(b.OOMKills))
		if x.SLOViolationRate > b.SLOViolationRate+WorseMargin {
			a.worse++
		}
		a.h, a.h0 = a.h+x.HorizontalScales, a.h0+b.HorizontalScales
		a.v, a.v0 = a.v+x.VerticalScales, a.v0+b.VerticalScales
	}
	// Summary order for policies; a pooled group where its first run was.
	names := slices.Clone(order)
	rank := map[string]int{}
	for i, s := range r.Summaries {
		if _, ok := rank[group(s.Policy)]; !ok {
			rank[group(s.Policy)] = i
		}
	}
	slices.SortStableFunc(names, func(a, b string) int { return rank[a] - rank[b] })
	var out []Comparison
	for _, name := range names {
		a := accs[name]
		c := Comparison{Policy: name, Base: base, Pairs: len(a.slo), Worse: float64(a.worse) / float64(len(a.slo))}
		var errs [4]error
		c.SLOViolationRate, errs[0] = stats.Paired(a.slo, a.slo0, Confidence)
		c.Reward, errs[1] = stats.Paired(a.rew, a.rew0, Confidence)
		c.CostRatio, errs[2] = stats.Mean(a.cost, Confidence)
		c.OOMKills, errs[3] = stats.Paired(a.oom, a.oom0, Confidence)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("eval: %s against %s: %w", name, base, err)
		}
		if a.h0 > 0 {
			c.HorizontalRatio = float64(a.h) / float64(a.h0)
		}
		if a.v0 > 0 {
			c.VerticalRatio = float64(a.v) / float64(a.v0)
		}
		out = append(out, c)
	}
	return out, nil
}

// WriteComparisons prints one line per comparison: each paired mean
// difference with its 95% interval in brackets.
func WriteComparisons(w io.Writer, cs []Comparison) error {
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "Paired against %s on the same (app, trace, seed), mean difference [95%% CI]:\n", cs[0].Base)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "POLICY\tPAIRS\tSLO VIOL (POINTS)\tREWARD\tCOST\tOOM PER RUN\tWORSE >1PT\tCHURN H/V\t")
	for _, c := range cs {
		pts := stats.Interval{N: c.SLOViolationRate.N, Mean: 100 * c.SLOViolationRate.Mean, Lo: 100 * c.SLOViolationRate.Lo, Hi: 100 * c.SLOViolationRate.Hi}
		cost := stats.Interval{N: c.CostRatio.N, Mean: 100 * c.CostRatio.Mean, Lo: 100 * c.CostRatio.Lo, Hi: 100 * c.CostRatio.Hi}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s%%\t%s\t%.1f%%\t%.2fx/%.2fx\t\n", c.Policy, c.Pairs,
			pts.Format("%+.2f"), c.Reward.Format("%+.4f"), cost.Format("%+.1f"), c.OOMKills.Format("%+.1f"),
			100*c.Worse, c.HorizontalRatio, c.VerticalRatio)
	}
	return tw.Flush()
}
