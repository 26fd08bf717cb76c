package train

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/oracle"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// RetrainResult follows an agent serving an app through a workload change.
type RetrainResult struct {
	App       string  `json:"app"`
	CPUFactor float64 `json:"cpuFactor"`
	// RateFactor multiplies the arrival rate from the change on.
	RateFactor float64 `json:"rateFactor"`
	// Baseline is the mean episode reward served before the change, from
	// which Gates were set (RetrainMargin below it).
	Baseline float64         `json:"baseline"`
	Gates    lifecycle.Gates `json:"gates"`
	// ChangeEpisode is the first episode under the changed workload.
	ChangeEpisode int           `json:"changeEpisode"`
	Curve         []Episode     `json:"curve"`
	Changes       []StageChange `json:"changes"`
	// Detected is the episode whose reward made the detector fire after
	// the change (Serving → Retraining), -1 if it did not; FalseAlarms
	// counts detections before the change.
	Detected    int `json:"detectedEpisode"`
	FalseAlarms int `json:"falseAlarms"`
	// Recovered is the first episode after the gate promoted the app back
	// to Serving, -1 if it did not get back.
	Recovered int `json:"recoveredEpisode"`
	// Before is the agent's mean reward over the last Gates.Window
	// episodes before the change; During over the episodes from the
	// change until it served again (or the end); After over the last
	// Gates.Window episodes.
	Before float64 `json:"before"`
	During float64 `json:"during"`
	After  float64 `json:"after"`
	// Degradation is (Before - During) / |Before|: the online cost of
	// the change and of retraining, relative to before it.
	Degradation float64 `json:"degradation"`
	// DefaultBefore and DefaultAfter are the fused default's mean episode
	// rewards on the same episodes before and after the change: how much
	// the change costs a policy that does not learn.
	DefaultBefore float64 `json:"defaultBefore"`
	DefaultAfter  float64 `json:"defaultAfter"`

	// Retraining bounds each stay in Retraining (zero: unbounded).
	Retraining lifecycle.RetrainingBounds `json:"retraining"`
	// Returned is the first episode after the detection in which the
	// agent acted again (OnlineTraining), -1 if it never did.
	Returned int `json:"returnedEpisode"`
	// StageEpisodes counts the episodes from the change on by stage.
	StageEpisodes map[string]int `json:"stageEpisodes"`
	// AgentActed is the mean reward of the episodes from Returned on in
	// which the agent acted (nil if it never returned).
	AgentActed *float64 `json:"agentActed"`

	// The references, on the episodes During averages (from the change
	// until the app served again, or the end), say what is attainable on
	// the changed app, which Before cannot: Reference is the greedy
	// reward of a copy of the pre-trained PPO fine-tuned offline on the
	// changed app for ReferenceEpisodes episodes (EvidenceOptions.
	// RetrainReference; 0: not run, and Reference and
	// DegradationVsReference are 0); Oracle the oracle's, which knows the trace and the
	// changed app; DefaultDuring the fused default's.
	ReferenceEpisodes int     `json:"referenceEpisodes"`
	Reference         float64 `json:"reference"`
	Oracle            float64 `json:"oracle"`
	DefaultDuring     float64 `json:"defaultDuring"`
	// DegradationVsReference is (Reference - During) / |Reference|: the
	// online cost of retraining alone, relative to what the learner
	// attains on the changed workload; DegradationVsOracle the same
	// against the oracle. Negative: the online run did better.
	DegradationVsReference float64 `json:"degradationVsReference"`
	DegradationVsOracle    float64 `json:"degradationVsOracle"`
}

// RetrainSet is the retrain experiment of one seed: one run per app.
type RetrainSet struct {
	Seed uint64           `json:"seed"`
	Runs []*RetrainResult `json:"runs"`
}

// RunRetrain runs the retrain experiment (runRetrainApp) on each of the
// first e.RetrainApps evidence apps, one after the other, each from the
// same pre-trained PPO.
func RunRetrain(ctx context.Context, e EvidenceOptions, pre *Pretrained) (*RetrainSet, error) {
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	out := &RetrainSet{Seed: e.Seed}
	for _, app := range apps[:min(max(e.RetrainApps, 1), len(apps))] {
		r, err := runRetrainApp(ctx, e, pre, app)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", app.Name, err)
		}
		out.Runs = append(out.Runs, r)
	}
	return out, nil
}

// WriteTable prints the one run's timeline and summary, or with several
// apps one line per app.
func (s *RetrainSet) WriteTable(w io.Writer) error {
	if len(s.Runs) == 1 {
		return s.Runs[0].WriteTable(w)
	}
	fmt.Fprintf(w, "From episode %d each app's CPU time per request is x%.2f and its arrival rate x%.2f.\n", s.Runs[0].ChangeEpisode, s.Runs[0].CPUFactor, s.Runs[0].RateFactor)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "APP\tDETECTED\tFALSE ALARMS\tSERVED AGAIN\tBEFORE\tDURING\tDEGRADATION\tDEFAULT DURING\t")
	ep := func(i int) string {
		if i < 0 {
			return "-"
		}
		return fmt.Sprint(i)
	}
	for _, r := range s.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.3f\t%.3f\t%.1f%%\t%.3f\t\n", r.App, ep(r.Detected), r.FalseAlarms, ep(r.Recovered), r.Before, r.During, 100*r.Degradation, r.DefaultDuring)
	}
	return tw.Flush()
}

// runRetrainApp deploys the pre-trained PPO on a new app in Serving,
// changes the app's CPU time per request (and arrival rate) after
// RetrainBefore episodes, and follows the lifecycle: the detector should
// fire (Serving → Retraining), the fused default acts while the agent
// relearns from it, and the gate returns the app to the agent.
func runRetrainApp(ctx context.Context, e EvidenceOptions, pre *Pretrained, app sim.App) (*RetrainResult, error) {
	changed := app
	changed.CPUSeconds *= e.CPUFactor
	changed.BaseRate *= e.RateFactor
	change := func(i int, a sim.App) sim.App {
		if i >= e.RetrainBefore {
			return changed
		}
		return a
	}
	serve := func(o *Options, init Learner, episodes int, gates lifecycle.Gates) {
		o.Init, o.AppList, o.Traces, o.StartStage, o.Workload = init, []sim.App{app}, e.RetrainTraces, lifecycle.Serving, change
		o.Episodes, o.BatchEpisodes, o.Gates = episodes, e.RetrainBatch, gates
		o.FreezeServing = true // the lifecycle as in the cluster
	}
	// The baseline: the episodes before the change, served with frozen
	// weights and gates that cannot fire, so that the run below repeats
	// them exactly.
	quiet := e.Base.Gates
	quiet.RetrainBelowMean, quiet.RetrainAboveStdDev = -1, 2
	quiet.PromoteMinMean, quiet.PromoteMaxStdDev = max(quiet.PromoteMinMean, -1), min(quiet.PromoteMaxStdDev, 2)
	base, err := e.run(ctx, func(o *Options) { serve(o, pre.PPO, e.RetrainBefore, quiet) })
	if err != nil {
		return nil, fmt.Errorf("retrain experiment, baseline: %w", err)
	}
	baseline := base.MeanReward(0, len(base.Episodes))
	gates := e.Base.Gates
	gates.RetrainBelowMean = math.Max(-1, baseline-e.RetrainMargin)
	gates.PromoteMinMean = gates.RetrainBelowMean
	init, err := CloneLearner(pre.PPO)
	if err != nil {
		return nil, err
	}
	res, err := e.run(ctx, func(o *Options) {
		serve(o, init, e.RetrainBefore+e.RetrainAfter, gates)
		o.Retraining = lifecycle.RetrainingBounds{Min: e.RetrainMin, Max: e.RetrainCap}
	})
	if err != nil {
		return nil, fmt.Errorf("retrain experiment: %w", err)
	}
	out := &RetrainResult{
		Baseline: baseline, Gates: gates, Retraining: lifecycle.RetrainingBounds{Min: e.RetrainMin, Max: e.RetrainCap},
		App: app.Name, CPUFactor: e.CPUFactor, RateFactor: e.RateFactor, ChangeEpisode: e.RetrainBefore,
		Curve: res.Episodes, Changes: res.Changes, Detected: -1, Recovered: -1, Returned: -1,
		StageEpisodes: map[string]int{}, ReferenceEpisodes: e.RetrainReference,
	}
	for _, c := range res.Changes {
		if c.To != lifecycle.Retraining.String() {
			continue
		}
		if c.Episode < e.RetrainBefore {
			out.FalseAlarms++
		} else if out.Detected < 0 {
			out.Detected = c.Episode
		}
	}
	if out.Detected >= 0 {
		for _, c := range res.Changes {
			if c.To == lifecycle.Serving.String() && c.Episode > out.Detected {
				out.Recovered = c.Episode + 1
				break
			}
		}
	}
	rs := make([]float64, len(res.Episodes))
	var acted []float64
	for i, ep := range res.Episodes {
		rs[i] = ep.MeanReward
		if i >= e.RetrainBefore {
			out.StageEpisodes[ep.Stage]++
		}
		// Episodes planned as Serving before the detection was recorded
		// (the rest of its batch) do not count as a return.
		if out.Detected >= 0 && i > out.Detected && out.Returned < 0 && ep.Stage == lifecycle.OnlineTraining.String() {
			out.Returned = i
		}
		if out.Returned >= 0 && ep.Phase == PhaseOnline {
			acted = append(acted, ep.MeanReward)
		}
	}
	if len(acted) > 0 {
		m := mean(acted)
		out.AgentActed = &m
	}
	w := e.Base.Gates.Window
	out.Before = mean(rs[max(0, e.RetrainBefore-w):e.RetrainBefore])
	end := len(rs)
	if out.Recovered >= 0 {
		end = min(out.Recovered, len(rs))
	}
	out.During = mean(rs[e.RetrainBefore:end])
	out.After = mean(rs[max(e.RetrainBefore, len(rs)-w):])
	out.Degradation = (out.Before - out.During) / math.Abs(out.Before)

	// The fused default on the same episodes (apps, traces, seeds).
	def, err := e.run(ctx, func(o *Options) {
		o.AppList, o.Traces, o.Workload = []sim.App{app}, e.RetrainTraces, change
		o.Episodes, o.BatchEpisodes = e.RetrainBefore+e.RetrainAfter, e.RetrainBatch
		defaultActs(o)
	})
	if err != nil {
		return nil, fmt.Errorf("retrain experiment, default: %w", err)
	}
	var before, after []float64
	for i, ep := range def.Episodes {
		if i < e.RetrainBefore {
			before = append(before, ep.MeanReward)
		} else {
			after = append(after, ep.MeanReward)
		}
	}
	out.DefaultBefore, out.DefaultAfter = mean(before), mean(after)
	out.DefaultDuring = mean(after[:end-e.RetrainBefore])

	if e.RetrainReference > 0 {
		if out.Reference, err = retrainReference(ctx, e, pre, changed, change, end); err != nil {
			return nil, err
		}
		out.DegradationVsReference = (out.Reference - out.During) / math.Abs(out.Reference)
	}
	if out.Oracle, err = oracleReward(ctx, e, changed, e.RetrainBefore, end); err != nil {
		return nil, err
	}
	out.DegradationVsOracle = (out.Oracle - out.During) / math.Abs(out.Oracle)
	return out, nil
}

// retrainReference fine-tunes a copy of the pre-trained PPO offline on the
// changed app, as a new app is trained (the default bootstraps, then the
// agent acts and learns; never frozen), on episodes of another seed than
// the measured ones, and returns its greedy mean reward on the measured
// episodes [RetrainBefore, end) of the changed app.
func retrainReference(ctx context.Context, e EvidenceOptions, pre *Pretrained, changed sim.App, change func(int, sim.App) sim.App, end int) (float64, error) {
	ref, err := CloneLearner(pre.PPO)
	if err != nil {
		return 0, err
	}
	if _, err := e.run(ctx, func(o *Options) {
		o.Init, o.AppList, o.Traces = ref, []sim.App{changed}, e.RetrainTraces
		o.Episodes, o.BatchEpisodes, o.FreezeServing = e.RetrainReference, e.RetrainReferenceBatch, false
		o.Seed = mix(e.Seed, 0x7265666572656e63) // not the measured episodes
	}); err != nil {
		return 0, fmt.Errorf("retrain experiment, reference fine-tuning: %w", err)
	}
	quiet := e.Base.Gates
	quiet.PromoteMinMean, quiet.PromoteMaxStdDev, quiet.RetrainBelowMean, quiet.RetrainAboveStdDev = 1, 0, -1, 2
	served, err := e.run(ctx, func(o *Options) {
		o.Init, o.AppList, o.Traces, o.StartStage, o.Workload = ref, []sim.App{changed}, e.RetrainTraces, lifecycle.Serving, change
		o.Episodes, o.BatchEpisodes, o.Gates = end, e.RetrainBatch, quiet
	})
	if err != nil {
		return 0, fmt.Errorf("retrain experiment, reference: %w", err)
	}
	return served.MeanReward(e.RetrainBefore, end), nil
}

// oracleReward returns the oracle's mean episode reward on the retrain
// experiment's episodes [from, to) of app, each episode the trace and
// arrivals the trainer gives it (runEpisode) and scored as it scores them.
func oracleReward(ctx context.Context, e EvidenceOptions, app sim.App, from, to int) (float64, error) {
	cfg := e.Base.SimConfig()
	alpha := e.Base.Alpha
	var rs []float64
	for i := from; i < to; i++ {
		seed := mix(e.Seed, uint64(i))
		kind := sim.TraceKind(e.RetrainTraces[i%len(e.RetrainTraces)])
		r, err := policyEpisode(ctx, app, kind, seed, cfg, &e.Base, alpha, func(tr *sim.Trace) (workload.Policy, error) {
			return oracle.New(app, tr, cfg, oracle.Options{})
		})
		if err != nil {
			return 0, fmt.Errorf("retrain experiment, oracle episode %d: %w", i, err)
		}
		rs = append(rs, r)
	}
	return mean(rs), nil
}

// policyEpisode runs one episode of a policy that does not learn exactly
// as runEpisode runs the agent's (the trace episodeTrace gives, the first
// window observed, then o.EpisodeSteps decisions each scored on the window
// after it) and returns its mean reward.
func policyEpisode(ctx context.Context, app sim.App, kind sim.TraceKind, seed uint64, cfg sim.Config, o *Options, alpha float64,
	newPolicy func(*sim.Trace) (workload.Policy, error)) (float64, error) {
	steps := o.EpisodeSteps
	tr, err := episodeTrace(&spec{kind: kind, app: app, seed: seed}, *o)
	if err != nil {
		return 0, err
	}
	s, err := sim.New(cfg, app, &tr, seed)
	if err != nil {
		return 0, err
	}
	p, err := newPolicy(&tr)
	if err != nil {
		return 0, err
	}
	ropts := reward.Options{Alpha: &alpha}
	var sum float64
	s.Step()
	for t := range steps {
		rec, err := p.Recommend(ctx, s.Observation())
		if err != nil {
			return 0, fmt.Errorf("window %d: %w", t, err)
		}
		if _, err := s.Apply(rec); err != nil {
			return 0, fmt.Errorf("window %d: %w", t, err)
		}
		m := s.Step()
		terms, err := reward.Compute(m.RewardInputs(), ropts)
		if err != nil {
			return 0, fmt.Errorf("window %d: %w", t, err)
		}
		sum += terms.Reward
	}
	return sum / float64(steps), nil
}

// WriteTable prints the timeline and the summary.
func (r *RetrainResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "App %s: from episode %d its CPU time per request is x%.2f and its arrival rate x%.2f.\n", r.App, r.ChangeEpisode, r.CPUFactor, r.RateFactor)
	fmt.Fprintf(w, "Serving baseline %.3f: the detector fires below %.3f (or above std %.2f); promotion needs a mean of at least %.3f and std at most %.2f over %d episodes.\n",
		r.Baseline, r.Gates.RetrainBelowMean, r.Gates.RetrainAboveStdDev, r.Gates.PromoteMinMean, r.Gates.PromoteMaxStdDev, r.Gates.Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "EPISODE\tFROM\tTO\tREASON\tWINDOW MEAN\tWINDOW STD\t")
	for _, c := range r.Changes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.3f\t%.3f\t\n", c.Episode, c.From, c.To, c.Reason, c.Mean, c.StdDev)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	detected, recovered := "did not fire", "did not serve again"
	if r.Detected >= 0 {
		detected = fmt.Sprintf("fired at episode %d (%d after the change)", r.Detected, r.Detected-r.ChangeEpisode+1)
	}
	if r.Recovered >= 0 {
		recovered = fmt.Sprintf("served again from episode %d", r.Recovered)
	}
	returned := "the agent did not act again"
	if r.Returned >= 0 {
		returned = fmt.Sprintf("the agent acted again from episode %d", r.Returned)
		if r.AgentActed != nil {
			returned += fmt.Sprintf(" (mean reward %.3f in the episodes it acted)", *r.AgentActed)
		}
	}
	capped := "Retraining unbounded"
	switch b := r.Retraining; {
	case b.Min > 0 && b.Max > 0:
		capped = fmt.Sprintf("Retraining bounded to %d..%d episodes", b.Min, b.Max)
	case b.Max > 0:
		capped = fmt.Sprintf("Retraining capped at %d episodes", b.Max)
	case b.Min > 0:
		capped = fmt.Sprintf("Retraining at least %d episodes", b.Min)
	}
	if _, err := fmt.Fprintf(w, `Detector: %s, %d false alarms before the change; %s.
Episodes from the change on by stage: Serving %d, Retraining %d, OnlineTraining %d (%s); %s.
Agent reward: %.3f before the change, %.3f from the change until it served again, %.3f in the last episodes.
Fused default on the same episodes: %.3f before, %.3f after the change.
Online degradation while retraining (the change's episodes until served again), against:
`, detected, r.FalseAlarms, recovered,
		r.StageEpisodes[lifecycle.Serving.String()], r.StageEpisodes[lifecycle.Retraining.String()], r.StageEpisodes[lifecycle.OnlineTraining.String()], capped, returned,
		r.Before, r.During, r.After, r.DefaultBefore, r.DefaultAfter); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "REFERENCE\tREWARD\tDEGRADATION\t")
	deg := func(ref float64) float64 { return 100 * (ref - r.During) / math.Abs(ref) }
	fmt.Fprintf(tw, "agent before the change (paper's measure: < 3.6%%)\t%.3f\t%.1f%%\t\n", r.Before, 100*r.Degradation)
	if r.ReferenceEpisodes > 0 {
		fmt.Fprintf(tw, "agent fine-tuned %d episodes on the changed app\t%.3f\t%.1f%%\t\n", r.ReferenceEpisodes, r.Reference, 100*r.DegradationVsReference)
	}
	fmt.Fprintf(tw, "oracle on the changed app\t%.3f\t%.1f%%\t\n", r.Oracle, 100*r.DegradationVsOracle)
	fmt.Fprintf(tw, "fused default on the changed app\t%.3f\t%.1f%%\t\n", r.DefaultDuring, deg(r.DefaultDuring))
	return tw.Flush()
}
