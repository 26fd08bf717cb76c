package train

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// A study is one experiment run for several seeds (EvidenceOptions.Seeds),
// each with its own pre-training, evidence apps, traces and weights,
// summarised over the (app, seed) pairs: every measure is a mean with a
// 95% Student-t interval (pkg/rl/stats, as pkg/lab/eval's comparisons), two arms
// are compared by the interval of their paired difference on the same
// (app, seed), and a ratio of two arms' means by a percentile bootstrap
// over the pairs (stats.RatioOfMeans, RatioResamples draws seeded from
// the first seed). The intervals treat the pairs as independent; apps of
// one seed share that seed's pre-trained policies, so the key comparisons
// are also given with the seed as the unit (the Seed* fields: the paired
// difference of per-seed means, a t-interval over the seeds).

// SeedMeans averages xs by seed: seedOf[i] is the index of xs[i]'s seed,
// n the number of seeds; a seed without a value averages to NaN.
func SeedMeans(xs []float64, seedOf []int, n int) []float64 {
	sum, cnt := make([]float64, n), make([]float64, n)
	for i, x := range xs {
		sum[seedOf[i]] += x
		cnt[seedOf[i]]++
	}
	for k := range sum {
		sum[k] /= cnt[k]
	}
	return sum
}

// RatioResamples is the number of bootstrap draws behind every ratio's
// interval.
const RatioResamples = 4000

// BootstrapPair is one (app, seed) of the bootstrap study: the app's
// episodes among the first K training episodes of each arm.
type BootstrapPair struct {
	Seed uint64 `json:"seed"`
	App  string `json:"app"`
	// Windows is the app's decisions in each arm (the arms run the same
	// episodes); Bootstrapped and Scratch its SLO-violating windows.
	Windows      int `json:"windows"`
	Bootstrapped int `json:"bootstrapped"`
	Scratch      int `json:"scratch"`
}

// BootstrapStudy is the bootstrap experiment over seeds.
type BootstrapStudy struct {
	Seeds   []uint64           `json:"seeds"`
	PerSeed []*BootstrapResult `json:"perSeed"`
	Pairs   []BootstrapPair    `json:"pairs"`
	// Bootstrapped and Scratch are each arm's SLO-violating windows per
	// (app, seed); Difference is scratch − bootstrapped, paired.
	Bootstrapped stats.Interval `json:"bootstrapped"`
	Scratch      stats.Interval `json:"scratch"`
	Difference   stats.Interval `json:"difference"`
	// SeedDifference is Difference with the seed as the unit.
	SeedDifference stats.Interval `json:"seedDifference"`
	// Ratio is mean scratch over mean bootstrapped violations (the
	// paper's 16.9x), with a bootstrap interval; nil when the
	// bootstrapped arm had no violation at all.
	Ratio *stats.Interval `json:"ratio"`
	// ScratchWorse counts the pairs in which scratch violated more.
	ScratchWorse int `json:"scratchWorse"`
}

// StudyBootstrap summarises per-seed bootstrap results.
func StudyBootstrap(rs []*BootstrapResult, seeds []uint64) (*BootstrapStudy, error) {
	if len(rs) == 0 || len(rs) != len(seeds) {
		return nil, fmt.Errorf("bootstrap study: %d results for %d seeds", len(rs), len(seeds))
	}
	st := &BootstrapStudy{Seeds: slices.Clone(seeds), PerSeed: rs}
	var boot, scratch []float64
	var seedOf []int
	for k, r := range rs {
		if len(r.Arms) != 2 {
			return nil, fmt.Errorf("bootstrap study: seed %d has %d arms, want 2", seeds[k], len(r.Arms))
		}
		for _, app := range r.Apps {
			p := BootstrapPair{Seed: seeds[k], App: app}
			for i, arm := range r.Arms {
				var viol, windows int
				for _, ep := range arm.Curve {
					if ep.App == app {
						viol += ep.SLOViolations
						windows += ep.Steps
					}
				}
				if i == 0 {
					p.Bootstrapped, p.Windows = viol, windows
				} else {
					p.Scratch = viol
				}
			}
			st.Pairs = append(st.Pairs, p)
			boot, scratch = append(boot, float64(p.Bootstrapped)), append(scratch, float64(p.Scratch))
			seedOf = append(seedOf, k)
			if p.Scratch > p.Bootstrapped {
				st.ScratchWorse++
			}
		}
	}
	var errs [4]error
	st.Bootstrapped, errs[0] = stats.Mean(boot, eval.Confidence)
	st.Scratch, errs[1] = stats.Mean(scratch, eval.Confidence)
	st.Difference, errs[2] = stats.Paired(scratch, boot, eval.Confidence)
	st.SeedDifference, errs[3] = stats.Paired(SeedMeans(scratch, seedOf, len(rs)), SeedMeans(boot, seedOf, len(rs)), eval.Confidence)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("bootstrap study: %w", err)
	}
	if st.Bootstrapped.Mean > 0 {
		iv, err := stats.RatioOfMeans(scratch, boot, eval.Confidence, RatioResamples, seeds[0])
		if err != nil {
			return nil, fmt.Errorf("bootstrap study: %w", err)
		}
		st.Ratio = &iv
	}
	return st, nil
}

// WriteTable prints one line per (app, seed) and the summary.
func (s *BootstrapStudy) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SEED\tAPP\tWINDOWS\tBOOTSTRAPPED VIOL\tSCRATCH VIOL\t")
	for _, p := range s.Pairs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t\n", p.Seed, p.App, p.Windows, p.Bootstrapped, p.Scratch)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := len(s.Pairs)
	fmt.Fprintf(w, "SLO-violating windows per (app, seed), %d pairs over seeds %v, mean [95%% CI]:\n", n, s.Seeds)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "bootstrapped\t%s\t\n", s.Bootstrapped.Format("%.1f"))
	fmt.Fprintf(tw, "scratch\t%s\t\n", s.Scratch.Format("%.1f"))
	fmt.Fprintf(tw, "scratch - bootstrapped (paired)\t%s\t\n", s.Difference.Format("%+.1f"))
	fmt.Fprintf(tw, "the same, the seed as the unit (%d seeds)\t%s\t\n", len(s.Seeds), s.SeedDifference.Format("%+.1f"))
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Ratio == nil {
		_, err := fmt.Fprintf(w, "Bootstrapping had no SLO violations; scratch had more in %d of %d pairs (paper: 16.9x fewer with bootstrapping).\n", s.ScratchWorse, n)
		return err
	}
	_, err := fmt.Fprintf(w, "Scratch has %s times the SLO violations of bootstrapping (ratio of means, bootstrap 95%% CI over pairs; paper: 16.9x); more in %d of %d pairs.\n",
		formatRatio(*s.Ratio), s.ScratchWorse, n)
	return err
}

// formatRatio prints a ratio interval as "4.2x [3.1x, 6.0x]".
func formatRatio(iv stats.Interval) string {
	end := func(x float64) string {
		if x >= stats.Unbounded {
			return "inf"
		}
		return fmt.Sprintf("%.2fx", x)
	}
	return fmt.Sprintf("%s [%s, %s]", end(iv.Mean), end(iv.Lo), end(iv.Hi))
}

// AdaptArmStudy is one arm of the adapt study over the (app, seed) pairs.
type AdaptArmStudy struct {
	Name string `json:"name"`
	// EpisodesTo holds, per AdaptStudy.Thresholds, the episodes to reach
	// that fraction of the converged reward (censored runs count with the
	// episodes run, a lower bound), and ReachedTo how many runs reached
	// it.
	EpisodesTo []stats.Interval `json:"episodesTo"`
	ReachedTo  []int            `json:"reachedTo"`
	ZeroShot   stats.Interval   `json:"zeroShot"`
	Shortfall  stats.Interval   `json:"shortfall"`
	Final      stats.Interval   `json:"final"`
}

// AdaptComparison is arm − base on the same (app, seed) pairs.
type AdaptComparison struct {
	Arm        string           `json:"arm"`
	Base       string           `json:"base"`
	EpisodesTo []stats.Interval `json:"episodesTo"`
	ZeroShot   stats.Interval   `json:"zeroShot"`
	Shortfall  stats.Interval   `json:"shortfall"`
	Final      stats.Interval   `json:"final"`
	// Speedup is base's mean episodes to each threshold over arm's, with
	// a bootstrap interval: above 1, arm is the faster.
	Speedup []stats.Interval `json:"speedup"`
	// SeedEpisodesTo90 and SeedZeroShot are EpisodesTo[0] and ZeroShot
	// with the seed as the unit.
	SeedEpisodesTo90 stats.Interval `json:"seedEpisodesTo90"`
	SeedZeroShot     stats.Interval `json:"seedZeroShot"`
}

// AdaptStudy is the adapt experiment over seeds.
type AdaptStudy struct {
	Seeds   []uint64       `json:"seeds"`
	PerSeed []*AdaptResult `json:"perSeed"`
	Shift   string         `json:"shift"`
	// Pairs is the number of (app, seed) pairs.
	Pairs int `json:"pairs"`
	// Thresholds are 0.9 and then EvidenceOptions.AdaptThresholds.
	Thresholds  []float64         `json:"thresholds"`
	Arms        []AdaptArmStudy   `json:"arms"`
	Comparisons []AdaptComparison `json:"comparisons"`
}

// adaptComparisons are the pairs of arms the study compares.
var adaptComparisons = [][2]string{{ArmMeta, ArmTransfer}, {ArmMeta, ArmScratch}, {ArmMeta, ArmFused}, {ArmTransfer, ArmFused}}

// adaptSamples are one arm's measures over the pairs, in pair order.
type adaptSamples struct {
	to                     [][]float64 // per threshold
	reached                []int
	zero, shortfall, final []float64
}

// StudyAdapt summarises per-seed adapt results.
func StudyAdapt(rs []*AdaptResult, seeds []uint64) (*AdaptStudy, error) {
	if len(rs) == 0 || len(rs) != len(seeds) {
		return nil, fmt.Errorf("adapt study: %d results for %d seeds", len(rs), len(seeds))
	}
	st := &AdaptStudy{Seeds: slices.Clone(seeds), PerSeed: rs, Shift: rs[0].Shift(), Thresholds: append([]float64{0.9}, rs[0].Thresholds...)}
	nt := len(st.Thresholds)
	samples := map[string]*adaptSamples{}
	for _, arm := range AdaptArms {
		samples[arm] = &adaptSamples{to: make([][]float64, nt), reached: make([]int, nt)}
	}
	var seedOf []int
	for k, r := range rs {
		if r.Shift() != st.Shift || len(r.Thresholds) != nt-1 {
			return nil, fmt.Errorf("adapt study: seed %d ran another setting (%s, thresholds %v)", seeds[k], r.Shift(), r.Thresholds)
		}
		byApp := map[string]map[string]AdaptRun{}
		var apps []string
		for _, x := range r.Runs {
			if byApp[x.App] == nil {
				byApp[x.App] = map[string]AdaptRun{}
				apps = append(apps, x.App)
			}
			byApp[x.App][x.Arm] = x
		}
		for _, app := range apps {
			st.Pairs++
			seedOf = append(seedOf, k)
			for _, arm := range AdaptArms {
				x, ok := byApp[app][arm]
				if !ok {
					return nil, fmt.Errorf("adapt study: seed %d, app %s has no %s run", seeds[k], app, arm)
				}
				s := samples[arm]
				reach := append([]Reach{{Fraction: 0.9, Episodes: x.EpisodesTo90, Reached: x.Reached}}, x.To...)
				for i, to := range reach {
					s.to[i] = append(s.to[i], float64(to.Episodes))
					if to.Reached {
						s.reached[i]++
					}
				}
				s.zero, s.shortfall, s.final = append(s.zero, x.ZeroShot), append(s.shortfall, x.Shortfall), append(s.final, x.Final)
			}
		}
	}
	var errs []error
	mean := func(xs []float64) stats.Interval {
		iv, err := stats.Mean(xs, eval.Confidence)
		errs = append(errs, err)
		return iv
	}
	paired := func(a, b []float64) stats.Interval {
		iv, err := stats.Paired(a, b, eval.Confidence)
		errs = append(errs, err)
		return iv
	}
	for _, arm := range AdaptArms {
		s := samples[arm]
		a := AdaptArmStudy{Name: arm, ReachedTo: s.reached, ZeroShot: mean(s.zero), Shortfall: mean(s.shortfall), Final: mean(s.final)}
		for i := range nt {
			a.EpisodesTo = append(a.EpisodesTo, mean(s.to[i]))
		}
		st.Arms = append(st.Arms, a)
	}
	for _, c := range adaptComparisons {
		a, b := samples[c[0]], samples[c[1]]
		cmp := AdaptComparison{Arm: c[0], Base: c[1], ZeroShot: paired(a.zero, b.zero), Shortfall: paired(a.shortfall, b.shortfall), Final: paired(a.final, b.final),
			SeedEpisodesTo90: paired(SeedMeans(a.to[0], seedOf, len(rs)), SeedMeans(b.to[0], seedOf, len(rs))),
			SeedZeroShot:     paired(SeedMeans(a.zero, seedOf, len(rs)), SeedMeans(b.zero, seedOf, len(rs)))}
		for i := range nt {
			cmp.EpisodesTo = append(cmp.EpisodesTo, paired(a.to[i], b.to[i]))
			sp, err := stats.RatioOfMeans(b.to[i], a.to[i], eval.Confidence, RatioResamples, seeds[0])
			errs = append(errs, err)
			cmp.Speedup = append(cmp.Speedup, sp)
		}
		st.Comparisons = append(st.Comparisons, cmp)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("adapt study: %w", err)
	}
	return st, nil
}

// WriteTable prints each arm's measures and the paired comparisons.
func (s *AdaptStudy) WriteTable(w io.Writer) error {
	pct := func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }
	fmt.Fprintf(w, "%s %d (app, seed) pairs over seeds %v; mean [95%% CI]; episodes-to counts an unreached threshold as the episodes run.\n", s.Shift, s.Pairs, s.Seeds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "ARM\t")
	for _, f := range s.Thresholds {
		fmt.Fprintf(tw, "EPISODES TO %s\tREACHED\t", pct(f))
	}
	fmt.Fprintln(tw, "ZERO-SHOT REWARD\tSHORTFALL\tFINAL REWARD\t")
	for _, a := range s.Arms {
		fmt.Fprintf(tw, "%s\t", a.Name)
		for i := range s.Thresholds {
			fmt.Fprintf(tw, "%s\t%d/%d\t", a.EpisodesTo[i].Format("%.1f"), a.ReachedTo[i], s.Pairs)
		}
		sf := scaled(a.Shortfall, 100)
		fmt.Fprintf(tw, "%s\t%s%%\t%s\t\n", a.ZeroShot.Format("%.3f"), sf.Format("%.2f"), a.Final.Format("%.3f"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "Paired differences (arm - base) on the same (app, seed), mean [95% CI]; SPEED-UP is base's mean episodes over arm's (bootstrap 95% CI):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "ARM - BASE\t")
	for _, f := range s.Thresholds {
		fmt.Fprintf(tw, "EPISODES TO %s\tSPEED-UP TO %s\t", pct(f), pct(f))
	}
	fmt.Fprintln(tw, "ZERO-SHOT REWARD\tSHORTFALL (POINTS)\tFINAL REWARD\t")
	for _, c := range s.Comparisons {
		fmt.Fprintf(tw, "%s - %s\t", c.Arm, c.Base)
		for i := range s.Thresholds {
			fmt.Fprintf(tw, "%s\t%s\t", c.EpisodesTo[i].Format("%+.1f"), formatRatio(c.Speedup[i]))
		}
		sf := scaled(c.Shortfall, 100)
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", c.ZeroShot.Format("%+.3f"), sf.Format("%+.2f"), c.Final.Format("%+.3f"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "The same with the seed as the unit (per-seed means, %d seeds), mean difference [95%% CI]:\n", len(s.Seeds))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ARM - BASE\tEPISODES TO 90%\tZERO-SHOT REWARD\t")
	for _, c := range s.Comparisons {
		fmt.Fprintf(tw, "%s - %s\t%s\t%s\t\n", c.Arm, c.Base, c.SeedEpisodesTo90.Format("%+.1f"), c.SeedZeroShot.Format("%+.3f"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "Paper: Meta-PPO reaches 90% of the converged reward 5.5x faster than transfer learning.")
	return err
}

// scaled multiplies an interval by f (for percentages).
func scaled(iv stats.Interval, f float64) stats.Interval {
	return stats.Interval{N: iv.N, Mean: f * iv.Mean, Lo: f * iv.Lo, Hi: f * iv.Hi, StdDev: math.Abs(f) * iv.StdDev}
}

// RetrainStudy is the retrain experiment over seeds: one run per (app,
// seed).
type RetrainStudy struct {
	Seeds   []uint64      `json:"seeds"`
	PerSeed []*RetrainSet `json:"perSeed"`
	Runs    int           `json:"runs"`
	// Detected counts the runs whose detector fired after the change,
	// FalseAlarms the detections before it over all runs, Recovered the
	// runs served again before the end.
	Detected    int `json:"detected"`
	FalseAlarms int `json:"falseAlarms"`
	Recovered   int `json:"recovered"`
	// DetectionDelay is the episodes from the change to the detection,
	// over the runs that detected it (nil if none did).
	DetectionDelay *stats.Interval `json:"detectionDelay"`
	// Degradation is the paper's online degradation, (before − during) /
	// |before| per run; DefaultDegradation the fused default's on the
	// same episodes; AgentMinusDefault the agent's reward during minus the
	// default's, paired.
	Degradation stats.Interval `json:"degradation"`
	// SeedDegradation is Degradation with the seed as the unit.
	SeedDegradation    stats.Interval `json:"seedDegradation"`
	DefaultDegradation stats.Interval `json:"defaultDegradation"`
	AgentMinusDefault  stats.Interval `json:"agentMinusDefault"`
	// VsOracle is the degradation against the oracle on the changed app;
	// VsReference against the fine-tuned reference (nil when it was not
	// run).
	VsOracle    stats.Interval  `json:"vsOracle"`
	VsReference *stats.Interval `json:"vsReference"`
}

// StudyRetrain summarises per-seed retrain results.
func StudyRetrain(rs []*RetrainSet, seeds []uint64) (*RetrainStudy, error) {
	if len(rs) == 0 || len(rs) != len(seeds) {
		return nil, fmt.Errorf("retrain study: %d results for %d seeds", len(rs), len(seeds))
	}
	st := &RetrainStudy{Seeds: slices.Clone(seeds), PerSeed: rs}
	var deg, defDeg, during, defDuring, vsOracle, vsRef, delay []float64
	var seedOf []int
	for k, set := range rs {
		for _, r := range set.Runs {
			st.Runs++
			seedOf = append(seedOf, k)
			st.FalseAlarms += r.FalseAlarms
			if r.Detected >= 0 {
				st.Detected++
				delay = append(delay, float64(r.Detected-r.ChangeEpisode+1))
			}
			if r.Recovered >= 0 {
				st.Recovered++
			}
			deg = append(deg, r.Degradation)
			defDeg = append(defDeg, (r.DefaultBefore-r.DefaultDuring)/math.Abs(r.DefaultBefore))
			during, defDuring = append(during, r.During), append(defDuring, r.DefaultDuring)
			vsOracle = append(vsOracle, r.DegradationVsOracle)
			if r.ReferenceEpisodes > 0 {
				vsRef = append(vsRef, r.DegradationVsReference)
			}
		}
	}
	var errs [5]error
	st.Degradation, errs[0] = stats.Mean(deg, eval.Confidence)
	st.SeedDegradation, errs[4] = stats.Mean(SeedMeans(deg, seedOf, len(rs)), eval.Confidence)
	st.DefaultDegradation, errs[1] = stats.Mean(defDeg, eval.Confidence)
	st.AgentMinusDefault, errs[2] = stats.Paired(during, defDuring, eval.Confidence)
	st.VsOracle, errs[3] = stats.Mean(vsOracle, eval.Confidence)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("retrain study: %w", err)
	}
	if len(delay) > 0 {
		iv, err := stats.Mean(delay, eval.Confidence)
		if err != nil {
			return nil, fmt.Errorf("retrain study: %w", err)
		}
		st.DetectionDelay = &iv
	}
	if len(vsRef) > 0 {
		iv, err := stats.Mean(vsRef, eval.Confidence)
		if err != nil {
			return nil, fmt.Errorf("retrain study: %w", err)
		}
		st.VsReference = &iv
	}
	return st, nil
}

// WriteTable prints the summary.
func (s *RetrainStudy) WriteTable(w io.Writer) error {
	delay := "-"
	if s.DetectionDelay != nil {
		delay = s.DetectionDelay.Format("%.1f")
	}
	fmt.Fprintf(w, "%d (app, seed) runs over seeds %v: the detector fired after the change in %d (episodes after it: %s), %d false alarms before it; %d served again.\n",
		s.Runs, s.Seeds, s.Detected, delay, s.FalseAlarms, s.Recovered)
	fmt.Fprintln(w, "Online degradation from the change until served again (or the end), per run, mean [95% CI]:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MEASURE\tMEAN [95% CI]\t")
	pct := func(iv stats.Interval) string { return scaled(iv, 100).Format("%.1f") + "%" }
	fmt.Fprintf(tw, "agent, against its reward before the change (paper: < 3.6%%)\t%s\t\n", pct(s.Degradation))
	fmt.Fprintf(tw, "the same, the seed as the unit (%d seeds)\t%s\t\n", len(s.Seeds), pct(s.SeedDegradation))
	fmt.Fprintf(tw, "fused default, against its reward before the change\t%s\t\n", pct(s.DefaultDegradation))
	fmt.Fprintf(tw, "agent, against the oracle on the changed app\t%s\t\n", pct(s.VsOracle))
	if s.VsReference != nil {
		fmt.Fprintf(tw, "agent, against itself fine-tuned on the changed app\t%s\t\n", pct(*s.VsReference))
	}
	fmt.Fprintf(tw, "agent - fused default, reward on the same episodes (paired)\t%s\t\n", s.AgentMinusDefault.Format("%+.4f"))
	return tw.Flush()
}

// AfterStudy is the after experiment over seeds: every pre-trained agent
// paired with the fused default on the same (app, trace, seed).
type AfterStudy struct {
	Seeds       []uint64          `json:"seeds"`
	PerSeed     []*AfterResult    `json:"perSeed"`
	Comparisons []eval.Comparison `json:"comparisons"`
}

// StudyAfter pools the per-seed evaluations and compares every policy
// with the fused default (eval.Report.Compare).
func StudyAfter(rs []*AfterResult, seeds []uint64) (*AfterStudy, error) {
	if len(rs) == 0 || len(rs) != len(seeds) {
		return nil, fmt.Errorf("after study: %d results for %d seeds", len(rs), len(seeds))
	}
	all := &eval.Report{Summaries: rs[0].Report.Summaries}
	for _, r := range rs {
		all.Results = append(all.Results, r.Report.Results...)
	}
	cs, err := all.Compare("fused")
	if err != nil {
		return nil, fmt.Errorf("after study: %w", err)
	}
	return &AfterStudy{Seeds: slices.Clone(seeds), PerSeed: rs, Comparisons: cs}, nil
}

// WriteTable prints the paired comparisons.
func (s *AfterStudy) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Seeds %v pooled.\n", s.Seeds)
	return eval.WriteComparisons(w, s.Comparisons)
}
