package train

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// AdaptRun is one arm learning one new app.
type AdaptRun struct {
	Arm string `json:"arm"`
	App string `json:"app"`
	// Rewards are the episodes' mean rewards, in order.
	Rewards []float64 `json:"rewards"`
	// ZeroShot is the first episode's reward, before any update on the
	// app: where a workload embedding should help most.
	ZeroShot float64 `json:"zeroShot"`
	// Final is the mean of the last ConvergedWindow episodes.
	Final float64 `json:"final"`
	// EpisodesTo90 is the first episode (1-based) at which the moving
	// average of SmoothEpisodes episodes reached 90% of the app's
	// converged reward; Reached is false when it never did (EpisodesTo90
	// is then the number of episodes run, a lower bound).
	EpisodesTo90 int  `json:"episodesTo90"`
	Reached      bool `json:"reached"`
	// To holds the same for each of AdaptThresholds.
	To []Reach `json:"to"`
	// Guarded is the share of Meta-PPO's decisions over the episodes that
	// its embedding guard turned into following the default, and
	// ZeroShotGuarded that of the first episode (0 without a guard).
	Guarded         float64 `json:"guarded,omitempty"`
	ZeroShotGuarded float64 `json:"zeroShotGuarded,omitempty"`
	// Shortfall is the mean, over the episodes, of the gap below the
	// converged reward relative to its magnitude (max(0, converged - r) /
	// |converged|): the area between the curve and the converged reward,
	// a regret that counts every episode, not only the first one past a
	// threshold.
	Shortfall float64 `json:"shortfall"`
}

// Reach is when a run first reached a fraction of the converged reward.
type Reach struct {
	Fraction float64 `json:"fraction"`
	// Episodes and Reached as EpisodesTo90 and Reached.
	Episodes int  `json:"episodes"`
	Reached  bool `json:"reached"`
}

// AdaptArm summarises one arm over the apps.
type AdaptArm struct {
	Name string `json:"name"`
	// MeanEpisodesTo90 averages EpisodesTo90 over the apps (censored runs
	// count with their lower bound).
	MeanEpisodesTo90 float64 `json:"meanEpisodesTo90"`
	Reached          int     `json:"reached"`
	MeanFinal        float64 `json:"meanFinal"`
	// MeanEpisodesTo and ReachedTo are the same for each of
	// AdaptThresholds; MeanShortfall averages the runs' Shortfall.
	MeanEpisodesTo []float64 `json:"meanEpisodesTo"`
	ReachedTo      []int     `json:"reachedTo"`
	MeanShortfall  float64   `json:"meanShortfall"`
}

// AdaptResult compares how fast each arm learns a new app.
type AdaptResult struct {
	// Converged is, per app, the best arm's final reward: the reward the
	// app converges to; the target is 90% of it.
	Converged map[string]float64 `json:"converged"`
	Runs      []AdaptRun         `json:"runs"`
	Arms      []AdaptArm         `json:"arms"`
	// SpeedupVsTransfer and SpeedupVsScratch are the mean episodes to 90%
	// of transfer (and scratch) over Meta-PPO's.
	SpeedupVsTransfer float64 `json:"speedupVsTransfer"`
	SpeedupVsScratch  float64 `json:"speedupVsScratch"`
	PretrainSeconds   float64 `json:"pretrainSeconds"`
	// Thresholds are EvidenceOptions.AdaptThresholds; SpeedupsVsTransfer
	// the transfer arm's mean episodes to each over Meta-PPO's.
	Thresholds         []float64 `json:"thresholds"`
	SpeedupsVsTransfer []float64 `json:"speedupsVsTransfer"`
	// ShortfallVsTransfer is the transfer arm's mean shortfall over
	// Meta-PPO's: above 1, Meta-PPO lost less reward while adapting.
	ShortfallVsTransfer float64 `json:"shortfallVsTransfer"`
	// CPUFactor, MemoryFactor and StartupFactor are the factors applied
	// to the new apps.
	CPUFactor     float64 `json:"cpuFactor"`
	MemoryFactor  float64 `json:"memoryFactor"`
	StartupFactor float64 `json:"startupFactor"`
}

// Adaptation arms. ArmFused is the floor: the fused default acting in
// every episode, learning nothing; it does not define the converged
// reward.
const (
	ArmMeta     = "meta-ppo"
	ArmTransfer = "transfer"
	ArmScratch  = "scratch"
	ArmFused    = "fused"
)

// AdaptArms lists the arms in the order the results hold them.
var AdaptArms = []string{ArmMeta, ArmTransfer, ArmScratch, ArmFused}

// defaultActs makes a training run one in which the fused default acts in
// every episode and nothing is learnt: bootstrapping for ever, no cloning,
// no offline update, gates that neither promote nor detect.
func defaultActs(o *Options) {
	o.BootstrapEpisodes, o.BCRounds, o.OfflineUpdates = o.Episodes, 0, 0
	o.Gates.PromoteMinMean, o.Gates.PromoteMaxStdDev = 1, 0
	o.Gates.RetrainBelowMean, o.Gates.RetrainAboveStdDev = -1, 2
}

// RunAdapt lets three learners learn each of e.AdaptApps new apps, the
// agent acting from the first episode: Meta-PPO pre-trained on the
// training apps (fine-tuned, its embedding reading the new app's
// trajectory), PPO pre-trained on the same apps and fine-tuned (transfer
// learning, no embedding), and a fresh PPO (scratch); the fused default
// runs the same episodes as the floor. Every arm acts in one action space,
// e.PPOSpace: in the residual space each learner starts on the default and
// deviates from it per dimension.
func RunAdapt(ctx context.Context, e EvidenceOptions, pre *Pretrained) (*AdaptResult, error) {
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	if err := e.ValidateExperiment(ExperimentAdapt); err != nil {
		return nil, err
	}
	if err := e.checkSpace(pre); err != nil {
		return nil, fmt.Errorf("adapt experiment: %w", err)
	}
	apps = apps[:e.AdaptApps]
	for i := range apps {
		apps[i].CPUSeconds *= e.AdaptCPUFactor
		apps[i].MemoryPerRequest *= e.AdaptMemoryFactor
		apps[i].StartupDelay = time.Duration(float64(apps[i].StartupDelay) * e.AdaptStartupFactor)
	}
	out := &AdaptResult{
		Converged: map[string]float64{}, PretrainSeconds: pre.PPOSeconds + pre.MetaSeconds,
		Thresholds: slices.Clone(e.AdaptThresholds), CPUFactor: e.AdaptCPUFactor, MemoryFactor: e.AdaptMemoryFactor,
		StartupFactor: e.AdaptStartupFactor,
	}
	arms := AdaptArms
	for _, app := range apps {
		var runs []AdaptRun
		for _, arm := range arms {
			var init Learner
			switch arm {
			case ArmMeta:
				init, err = CloneLearner(pre.Meta)
			case ArmTransfer:
				init, err = CloneLearner(pre.PPO)
			}
			if err != nil {
				return nil, err
			}
			res, err := e.run(ctx, func(o *Options) {
				o.Policy, o.Init, o.AppList, o.Traces = PolicyPPO, init, []sim.App{app}, e.AdaptTraces
				o.ActionSpace = e.PPOSpace()
				o.Episodes, o.BatchEpisodes, o.BootstrapEpisodes = e.AdaptEpisodes, e.AdaptBatch, 0
				if arm == ArmFused {
					defaultActs(o)
				}
			})
			if err != nil {
				return nil, fmt.Errorf("adapt experiment, %s on %s: %w", arm, app.Name, err)
			}
			r := AdaptRun{Arm: arm, App: app.Name}
			var guarded, steps int
			for _, ep := range res.Episodes {
				r.Rewards = append(r.Rewards, ep.MeanReward)
				guarded, steps = guarded+ep.GuardedDecisions, steps+ep.Steps
			}
			if steps > 0 {
				r.Guarded = float64(guarded) / float64(steps)
				r.ZeroShotGuarded = float64(res.Episodes[0].GuardedDecisions) / float64(max(res.Episodes[0].Steps, 1))
			}
			r.ZeroShot = r.Rewards[0]
			r.Final = mean(r.Rewards[len(r.Rewards)-e.ConvergedWindow:])
			runs = append(runs, r)
		}
		conv := math.Inf(-1)
		for _, r := range runs {
			if r.Arm != ArmFused {
				conv = math.Max(conv, r.Final)
			}
		}
		out.Converged[app.Name] = conv
		// 90% of the converged reward; rewards may be negative, so the
		// gap is taken on its magnitude.
		target := func(f float64) float64 { return conv - (1-f)*math.Abs(conv) }
		for i := range runs {
			runs[i].EpisodesTo90, runs[i].Reached = EpisodesTo(runs[i].Rewards, target(0.9), e.SmoothEpisodes)
			for _, f := range e.AdaptThresholds {
				n, ok := EpisodesTo(runs[i].Rewards, target(f), e.SmoothEpisodes)
				runs[i].To = append(runs[i].To, Reach{Fraction: f, Episodes: n, Reached: ok})
			}
			runs[i].Shortfall = shortfall(runs[i].Rewards, conv)
		}
		out.Runs = append(out.Runs, runs...)
	}
	for _, arm := range arms {
		a := AdaptArm{Name: arm, MeanEpisodesTo: make([]float64, len(e.AdaptThresholds)), ReachedTo: make([]int, len(e.AdaptThresholds))}
		var n int
		for _, r := range out.Runs {
			if r.Arm != arm {
				continue
			}
			n++
			a.MeanEpisodesTo90 += float64(r.EpisodesTo90)
			a.MeanFinal += r.Final
			a.MeanShortfall += r.Shortfall
			if r.Reached {
				a.Reached++
			}
			for k, to := range r.To {
				a.MeanEpisodesTo[k] += float64(to.Episodes)
				if to.Reached {
					a.ReachedTo[k]++
				}
			}
		}
		a.MeanEpisodesTo90 /= float64(n)
		a.MeanFinal /= float64(n)
		a.MeanShortfall /= float64(n)
		for k := range a.MeanEpisodesTo {
			a.MeanEpisodesTo[k] /= float64(n)
		}
		out.Arms = append(out.Arms, a)
	}
	meta, transfer := out.Arms[0], out.Arms[1]
	out.SpeedupVsTransfer = transfer.MeanEpisodesTo90 / meta.MeanEpisodesTo90
	out.SpeedupVsScratch = out.Arms[2].MeanEpisodesTo90 / meta.MeanEpisodesTo90
	for k := range e.AdaptThresholds {
		out.SpeedupsVsTransfer = append(out.SpeedupsVsTransfer, transfer.MeanEpisodesTo[k]/meta.MeanEpisodesTo[k])
	}
	out.ShortfallVsTransfer = ratio(transfer.MeanShortfall, meta.MeanShortfall)
	return out, nil
}

// Shift says how the new apps were moved from the training distribution.
func (r *AdaptResult) Shift() string {
	if r.CPUFactor == 1 && r.MemoryFactor == 1 && r.StartupFactor == 1 {
		return "New apps in distribution (no factor applied)."
	}
	return fmt.Sprintf("New apps shifted: CPU time per request x%.2f, memory per request x%.2f, pod start-up delay x%.2f.", r.CPUFactor, r.MemoryFactor, r.StartupFactor)
}

// shortfall returns the mean of max(0, conv - r) / |conv| over rs: the
// reward lost below conv, per episode, relative to conv (0 when conv is
// 0, where no relative gap is defined).
func shortfall(rs []float64, conv float64) float64 {
	if conv == 0 || len(rs) == 0 {
		return 0
	}
	var s float64
	for _, r := range rs {
		s += max(0, conv-r)
	}
	return s / float64(len(rs)) / math.Abs(conv)
}

// EpisodesTo returns the first 1-based episode at which the moving average
// of the last k rewards reaches target, or len(rs) and false.
func EpisodesTo(rs []float64, target float64, k int) (int, bool) {
	var sum float64
	for i, r := range rs {
		sum += r
		if i >= k {
			sum -= rs[i-k]
		}
		if sum/float64(min(i+1, k)) >= target {
			return i + 1, true
		}
	}
	return len(rs), false
}

// WriteTable prints one line per app and arm, then the summary.
func (r *AdaptResult) WriteTable(w io.Writer) error {
	if r.CPUFactor != 1 || r.MemoryFactor != 1 || r.StartupFactor != 1 {
		if _, err := fmt.Fprintln(w, r.Shift()); err != nil {
			return err
		}
	}
	pct := func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "APP\tARM\tFIRST EP\tFINAL\tCONVERGED\tEPISODES TO 90%\t")
	for _, f := range r.Thresholds {
		fmt.Fprintf(tw, "TO %s\t", pct(f))
	}
	fmt.Fprintln(tw, "SHORTFALL\t")
	reach := func(n int, ok bool) string {
		if !ok {
			return fmt.Sprintf(">%d", n)
		}
		return fmt.Sprint(n)
	}
	for _, x := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.3f\t%s\t", x.App, x.Arm, x.Rewards[0], x.Final, r.Converged[x.App], reach(x.EpisodesTo90, x.Reached))
		for _, to := range x.To {
			fmt.Fprintf(tw, "%s\t", reach(to.Episodes, to.Reached))
		}
		fmt.Fprintf(tw, "%.2f%%\t\n", 100*x.Shortfall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "ARM\tMEAN EPISODES TO 90%\tREACHED\t")
	for _, f := range r.Thresholds {
		fmt.Fprintf(tw, "MEAN TO %s\tREACHED\t", pct(f))
	}
	fmt.Fprintln(tw, "MEAN SHORTFALL\tMEAN FINAL\t")
	for _, a := range r.Arms {
		n := len(r.Converged)
		fmt.Fprintf(tw, "%s\t%.1f\t%d/%d\t", a.Name, a.MeanEpisodesTo90, a.Reached, n)
		for k := range a.MeanEpisodesTo {
			fmt.Fprintf(tw, "%.1f\t%d/%d\t", a.MeanEpisodesTo[k], a.ReachedTo[k], n)
		}
		fmt.Fprintf(tw, "%.2f%%\t%.3f\t\n", 100*a.MeanShortfall, a.MeanFinal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "Meta-PPO reaches 90%% of the converged reward %.2fx faster than transfer learning and %.2fx faster than scratch (paper: 5.5x vs transfer).\n",
		r.SpeedupVsTransfer, r.SpeedupVsScratch); err != nil {
		return err
	}
	for k, f := range r.Thresholds {
		if _, err := fmt.Fprintf(w, "To %s of it: Meta-PPO %.2fx faster than transfer.\n", pct(f), r.SpeedupsVsTransfer[k]); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "Shortfall below the converged reward while adapting: transfer loses %.2fx what Meta-PPO loses.\n", r.ShortfallVsTransfer)
	return err
}
