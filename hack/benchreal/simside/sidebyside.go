package simside

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aware-k8s/aware/hack/benchreal/result"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// The goals for the simulator against the real node, per policy.
const (
	// CostTolerance is the largest relative difference of the mean cost.
	CostTolerance = 0.15
	// ViolationTolerance is the largest difference of the share of
	// SLO-violating windows (2 points).
	ViolationTolerance = 0.02
)

// Side is one policy's means over its paired runs, real or simulated.
type Side struct {
	Cost, Violations, LostShare, Churn, Reward float64
}

// Row is one policy real against simulated, over the repetitions both ran.
type Row struct {
	Policy          string
	Pairs           int
	Real, Simulated Side
	// CostOff and ViolationsOff flag a miss of the goals.
	CostOff, ViolationsOff bool
	// CostRel (simulated/real − 1) and ViolationsDiff (simulated − real)
	// are the paired differences over the repetitions, with 95% intervals.
	CostRel, ViolationsDiff stats.Interval

	costRel, violDiff []float64
}

// CostRatio is the simulated mean cost over the real one (NaN without a
// real cost).
func (r Row) CostRatio() float64 {
	if !(r.Real.Cost > 0) {
		return math.NaN()
	}
	return r.Simulated.Cost / r.Real.Cost
}

// Compare pairs real and simulated runs by policy and repetition and
// averages each side over the pairs, in the order the policies first
// appear among the real runs. A real run without its simulated twin is an
// error (and a simulated run without a real one is ignored).
func Compare(real, simulated []result.Run) ([]Row, error) {
	type key struct {
		policy string
		rep    int
	}
	// A repetition replayed with several draws (ReplayDraw) counts as the
	// mean of its draws.
	sims := map[key][]result.Summary{}
	for _, r := range simulated {
		s, err := result.Summarise(r)
		if err != nil {
			return nil, fmt.Errorf("simulated: %w", err)
		}
		k := key{r.Policy, r.Rep}
		sims[k] = append(sims[k], s)
	}
	var rows []Row
	idx := map[string]int{}
	for _, r := range real {
		rs, err := result.Summarise(r)
		if err != nil {
			return nil, fmt.Errorf("real: %w", err)
		}
		draws, ok := sims[key{r.Policy, r.Rep}]
		if !ok {
			return nil, fmt.Errorf("real run %s repetition %d has no simulated twin", r.Policy, r.Rep)
		}
		var ss Side
		for _, d := range draws {
			add(&ss, d, 1/float64(len(draws)))
		}
		i, ok := idx[r.Policy]
		if !ok {
			i = len(rows)
			idx[r.Policy] = i
			rows = append(rows, Row{Policy: r.Policy})
		}
		row := &rows[i]
		row.Pairs++
		add(&row.Real, rs, 1)
		row.Simulated.plus(ss)
		if rs.Cost > 0 {
			row.costRel = append(row.costRel, ss.Cost/rs.Cost-1)
		}
		row.violDiff = append(row.violDiff, ss.Violations-rs.Violations)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no real runs")
	}
	for i := range rows {
		r := &rows[i]
		for _, s := range []*Side{&r.Real, &r.Simulated} {
			n := float64(r.Pairs)
			s.Cost, s.Violations, s.LostShare, s.Churn, s.Reward = s.Cost/n, s.Violations/n, s.LostShare/n, s.Churn/n, s.Reward/n
		}
		var err error
		if len(r.costRel) > 0 {
			if r.CostRel, err = stats.Mean(r.costRel, 0.95); err != nil {
				return nil, fmt.Errorf("%s: %w", r.Policy, err)
			}
		}
		if r.ViolationsDiff, err = stats.Mean(r.violDiff, 0.95); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Policy, err)
		}
		ratio := r.CostRatio()
		r.CostOff = math.IsNaN(ratio) || math.Abs(ratio-1) > CostTolerance
		r.ViolationsOff = math.Abs(r.Simulated.Violations-r.Real.Violations) > ViolationTolerance+1e-12
	}
	return rows, nil
}

// add adds w times the run's summary to s.
func add(s *Side, x result.Summary, w float64) {
	s.plus(Side{Cost: w * x.Cost, Violations: w * x.Violations, LostShare: w * x.LostShare,
		Churn: w * float64(x.ReplicaChanges+x.Resizes+x.Evictions), Reward: w * x.Reward})
}

func (s *Side) plus(x Side) {
	s.Cost += x.Cost
	s.Violations += x.Violations
	s.LostShare += x.LostShare
	s.Churn += x.Churn
	s.Reward += x.Reward
}

// Ranking orders the policies by mean reward, best first (ties by name).
func Ranking(rows []Row, side func(Row) Side) []string {
	rs := slices.Clone(rows)
	slices.SortStableFunc(rs, func(a, b Row) int {
		switch ra, rb := side(a).Reward, side(b).Reward; {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		}
		return strings.Compare(a.Policy, b.Policy)
	})
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Policy
	}
	return out
}

// WriteSideBySide prints, per policy, the real node's figures against the
// simulator's on the same traces: cost, SLO-violating windows, lost
// requests, churn (replica changes, in-place resizes and evictions) and
// reward, with their differences (simulated − real). A flag marks a miss
// of the goals: "COST" when the costs differ by more than 15%, "SLO" when
// the violating windows differ by more than 2 points. Then the ranking of
// the policies by reward in both, and whether it is the same, and the
// windows' p95 spread in both (WriteSpread).
func WriteSideBySide(w io.Writer, real, simulated []result.Run) error {
	rows, err := Compare(real, simulated)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintln(&b, "simulator beside the real node, per policy: means over the repetitions both ran; Δ is simulated − real")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tpairs\tcost real\tcost sim\tsim/real\tSLO-viol. real\tSLO-viol. sim\tΔ (points)\tlost real\tlost sim\tΔ (points)\tchurn real\tchurn sim\treward real\treward sim\tΔ reward\tflags")
	misses := 0
	for _, r := range rows {
		var flags []string
		if r.CostOff {
			flags = append(flags, "COST")
		}
		if r.ViolationsOff {
			flags = append(flags, "SLO")
		}
		if len(flags) > 0 {
			misses++
		}
		f := strings.Join(flags, ",")
		if f == "" {
			f = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.4f\t%.4f\t%.3f\t%.1f%%\t%.1f%%\t%+.1f\t%.2f%%\t%.2f%%\t%+.2f\t%.1f\t%.1f\t%.3f\t%.3f\t%+.3f\t%s\n",
			r.Policy, r.Pairs, r.Real.Cost, r.Simulated.Cost, r.CostRatio(),
			100*r.Real.Violations, 100*r.Simulated.Violations, 100*(r.Simulated.Violations-r.Real.Violations),
			100*r.Real.LostShare, 100*r.Simulated.LostShare, 100*(r.Simulated.LostShare-r.Real.LostShare),
			r.Real.Churn, r.Simulated.Churn, r.Real.Reward, r.Simulated.Reward, r.Simulated.Reward-r.Real.Reward, f)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&b, "\npaired by repetition, simulated − real, mean [95% interval]:")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tpairs\tcost (relative, %)\tSLO-violating windows (points)")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.Policy, r.Pairs, pairedInterval(r.CostRel, 100), pairedInterval(r.ViolationsDiff, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "goals: cost within %.0f%% (COST), SLO-violating windows within %.0f points (SLO): %d of %d policies miss\n",
		100*CostTolerance, 100*ViolationTolerance, misses, len(rows))
	rr := Ranking(rows, func(r Row) Side { return r.Real })
	rs := Ranking(rows, func(r Row) Side { return r.Simulated })
	same := "same"
	if !slices.Equal(rr, rs) {
		same = "DIFFERENT"
	}
	fmt.Fprintf(&b, "ranking by reward, best first: real %s; simulated %s (%s)\n", strings.Join(rr, " > "), strings.Join(rs, " > "), same)
	if err := WriteSpread(&b, real, simulated); err != nil {
		return err
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// pairedInterval prints a scaled interval, the mean alone below two pairs.
func pairedInterval(iv stats.Interval, scale float64) string {
	if iv.N == 0 {
		return "-"
	}
	if iv.N < 2 {
		return fmt.Sprintf("%+.1f", iv.Mean*scale)
	}
	return fmt.Sprintf("%+.1f [%+.1f, %+.1f]", iv.Mean*scale, iv.Lo*scale, iv.Hi*scale)
}
