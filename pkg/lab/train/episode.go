// Package train trains the AWARE agent on the built-in simulator: episodes
// over generated training apps (never the held-out ones, sim.HeldOut), each
// app moving through the lifecycle of pkg/core/lifecycle as a workload does in
// the cluster. While an app is Bootstrapping the fused default acts and the
// learner clones its actions (mapped to the agent's action space with
// learn.NearestAction), then runs offline PPO updates on its transitions;
// the lifecycle's reward gate, or a cap on bootstrapping episodes, moves it
// to OnlineTraining, where the agent acts under masks from the constraints
// and the FaaSRM safeguard and learns by PPO (charged learn.ScalingCost for
// every replica it changes); then Serving (frozen, greedy; see
// Options.FreezeServing) and, when the detector fires, Retraining, where
// the fused default acts again and the learner relearns from it as while
// bootstrapping, for a stay bounded by Options.Retraining, after which the
// agent acts again in OnlineTraining.
//
// The learner is PPO or Meta-PPO (Options.Policy); the agent hands Meta-PPO
// the workload's recent trajectory, whose GRU embedding joins the state.
//
// The package is pure: no clock, no gRPC, no client-go. Everything derives
// from Options.Seed, rollouts run in parallel but are reduced in episode
// order, so equal options give bit-identical learners and checkpoints.
package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// spec is one episode to roll out.
type spec struct {
	index int
	stage lifecycle.Stage
	// pinned acts instead of the shared learner while the app is Serving.
	pinned Learner
	app    sim.App
	kind   sim.TraceKind
	// azure is the function an "azure" episode runs under; series the
	// rate series a "csv" one does.
	azure  *sim.AzureWorkload
	series *sim.SeriesWorkload
	seed   uint64
}

// rollout is one episode's experience.
type rollout struct {
	ep          Episode
	transitions []nn.MetaTransition
	demos       []nn.MetaDemonstration
	err         error
}

// rolloutAll runs the episodes on a pool of workers; the learner is only
// read, and results land in spec order.
func rolloutAll(ctx context.Context, l Learner, specs []spec, cfg sim.Config, o Options, workers int) []rollout {
	outs := make([]rollout, len(specs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(specs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				el := l
				if specs[i].stage == lifecycle.Serving && specs[i].pinned != nil {
					el = specs[i].pinned
				}
				outs[i] = runEpisode(ctx, el, specs[i], cfg, o)
			}
		}()
	}
	for i := range specs {
		next <- i
	}
	close(next)
	wg.Wait()
	return outs
}

// runEpisode simulates one episode from the app's initial deployment.
func runEpisode(ctx context.Context, l Learner, sp spec, cfg sim.Config, o Options) rollout {
	phase := PhaseOnline
	if !sp.stage.AgentActs() {
		phase = PhaseBootstrap
	}
	r := rollout{ep: Episode{Index: sp.index, Phase: phase, Stage: sp.stage.String(), App: sp.app.Name, Trace: string(sp.kind)}}
	fail := func(err error) rollout { r.err = err; return r }
	tr, err := episodeTrace(&sp, o)
	if err != nil {
		return fail(err)
	}
	s, err := sim.New(cfg, sp.app, &tr, sp.seed)
	if err != nil {
		return fail(err)
	}
	alpha := o.Alpha
	// Serving exploits with frozen weights; the other stages explore.
	agent, err := NewAgent(l, sp.app.Constraints, AgentOptions{
		FeaturesOff: o.FeaturesOff,
		Blind:       o.MetaBlind,
		Greedy:      sp.stage == lifecycle.Serving,
		RNG:         rand.New(rand.NewPCG(sp.seed, mix(sp.seed, 0x6578706c))),
		Alpha:       &alpha,
	})
	if err != nil {
		return fail(err)
	}
	ropts := reward.Options{Alpha: &alpha}
	acts := sp.stage.AgentActs()
	r.transitions = make([]nn.MetaTransition, 0, o.EpisodeSteps)
	// The auxiliary target is the app's (after episodeTrace: an Azure
	// episode's measured demand), the same for every window of the episode.
	var aux []float64
	if o.AuxWeight > 0 && l.Kind() == PolicyMetaPPO {
		aux = AuxTarget(sp.app)
	}
	var sum, shaping float64
	s.Step() // the first window: what the first decision observes
	for t := range o.EpisodeSteps {
		obs := s.Observation()
		d, err := agent.decide(ctx, obs, acts)
		if err != nil {
			return fail(err)
		}
		applied, err := s.Apply(d.Recommendation)
		if err != nil {
			return fail(fmt.Errorf("window %d: %w", t, err))
		}
		charge := learn.ScalingCost(&obs, d.Recommendation, o.ScalingCost)
		if applied.Vertical {
			charge += o.VerticalCost
		}
		m := s.Step()
		if m.SLO > 0 && m.Latency.P95 > m.SLO {
			charge += o.SLOCost
		}
		terms, err := reward.Compute(m.RewardInputs(), ropts)
		if err != nil {
			return fail(fmt.Errorf("window %d: %w", t, err))
		}
		sum += terms.Reward
		shaping += charge
		if m.SLO > 0 && m.Latency.P95 > m.SLO {
			r.ep.SLOViolations++
		}
		r.ep.OOMKills += m.OOMKills
		if d.Recommendation.Source == workload.SourceAgent {
			r.ep.AgentDecisions++
		}
		if d.Guarded {
			r.ep.GuardedDecisions++
		}
		if n := len(r.transitions); n > 0 {
			r.transitions[n-1].NextState = d.State
		}
		r.transitions = append(r.transitions, nn.MetaTransition{
			Transition: nn.Transition{State: d.State, Mask: d.Mask, Action: int(d.Action), Reward: terms.Reward - charge},
			Window:     d.Window,
			Signature:  d.Signature,
			Aux:        aux,
		})
		if !acts {
			r.demos = append(r.demos, nn.MetaDemonstration{
				Demonstration: nn.Demonstration{State: d.State, Mask: d.Mask, Action: int(d.Teacher)},
				Window:        d.Window,
			})
		}
	}
	last, err := agent.state(ctx, s.Observation())
	if err != nil {
		return fail(err)
	}
	n := len(r.transitions)
	r.transitions[n-1].NextState, r.transitions[n-1].Truncated = last, true
	r.ep.Steps = n
	r.ep.MeanReward = sum / float64(n)
	r.ep.MeanShaping = shaping / float64(n)
	return r
}

// mix derives a well-mixed seed from a seed and a counter (splitmix64).
func mix(seed, i uint64) uint64 {
	x := seed ^ (i+1)*0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// AzureTrace is the trace kind of episodes that run under an Azure
// function (Options.Azure); SeriesTrace of those that run under the rate
// series (Options.Series).
const (
	AzureTrace  sim.TraceKind = "azure"
	SeriesTrace sim.TraceKind = "csv"
)

// episodeTrace returns the episode's trace; an "azure" or "csv" episode
// also gets its app's demand from the file (sp.app changes), under a
// seed-chosen stretch of the file's data (which Train checked is long
// enough).
func episodeTrace(sp *spec, o Options) (sim.Trace, error) {
	n := o.EpisodeSteps + 1
	switch {
	case sp.azure != nil:
		start := int(sp.seed % uint64(sp.azure.Windows(o.Step)-n+1))
		app, tr, err := sp.azure.Run(sp.app, o.Step, n, start, o.AzureRate)
		sp.app = app
		return tr, err
	case sp.series != nil:
		start := int(sp.seed % uint64(len(sp.series.Rates)-n+1))
		app, tr, err := sp.series.Run(sp.app, n, start)
		sp.app = app
		return tr, err
	}
	full := max(n, o.TraceSteps)
	tr, err := sim.GenerateTrace(sp.kind, sim.TraceOptions{
		Mean: sp.app.BaseRate, Steps: full, Step: o.Step, Period: 24 * time.Hour, Seed: sp.seed,
	})
	if err != nil || full == n {
		return tr, err
	}
	off := int(mix(sp.seed, 0x736c696365) % uint64(full-n+1))
	tr.Rates = tr.Rates[off : off+n]
	return tr, nil
}
