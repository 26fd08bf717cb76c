package train

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/hpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// PolicyName is the trained agent's name in reports.
const PolicyName = "aware"

// AgentOptions configure an Agent.
type AgentOptions struct {
	// Greedy picks the most likely legal action (serving); otherwise actions
	// are sampled from RNG (training).
	Greedy bool
	RNG    *rand.Rand
	// NoSafeguard turns FaaSRM's safeguard off. It is on by default, as in
	// every stage where the agent acts (pkg/rl/learn).
	NoSafeguard bool
	// Steps are the sizes of the vertical actions (default
	// learn.DefaultSteps).
	Steps learn.Steps
	// Alpha weighs utilisation against SLO preservation in the rewards of
	// the trajectory a Meta-PPO learner reads (default 0.5, as spec.rl).
	Alpha *float64
	// FeaturesOff are the optional state features the agent reads as 0
	// (learn.Features): an ablation must serve the set it trained with.
	FeaturesOff learn.Features
	// Blind keeps no trajectory: a Meta-PPO learner is given an empty
	// window at every decision (Options.MetaBlind).
	Blind bool
}

// Agent is the AWARE agent for one workload as a workload.Policy: each
// window it asks the fused default for its recommendation (part of the
// state, pkg/rl/learn.Encode), lets the learner choose a legal action (masks
// from the constraints), and refuses a downward vertical step when the
// safeguard says so, keeping the allocation in force instead
// (learn.SafeguardRecommendation). It is what the serving
// agent does in the cluster, without gRPC. An Agent is not safe for
// concurrent use; the learner is, so many Agents may share one.
//
// For a Meta-PPO learner the agent also keeps the workload's recent
// trajectory: each step's state, the action recorded for it and the reward
// of the window that followed, computed from the next observation with
// learn.Reward exactly as the serving agent computes it, so that the
// encoder reads the same thing in training, evaluation and serving.
//
// The replica count it returns is the one the updater would apply
// (hpa.Horizontal, as updater/controller runs it, with the anchor's
// scale-up rate as the updater's --default-variant gives it): a count of
// the fused default only through the behaviour's rate limits, which the
// default already applied, and any other count through the stabilisation
// windows as well, so that an agent's scale-down waits out the window in
// the simulator as it does in a cluster.
type Agent struct {
	learner Learner
	cons    workload.Constraints
	o       AgentOptions
	alpha   float64
	teacher workload.Policy
	rates   learn.RateHistory
	traj    learn.Trajectory
	last    *nn.Step // the previous decision, its reward not yet known
	// residual is set when the learner acts in the residual action space
	// (its actor has one head per dimension of learn.DefaultResidualSpace).
	residual *learn.ResidualSpace
	// updater holds the replica counts to the behaviour, as in a cluster.
	updater *hpa.Horizontal
}

var _ workload.Policy = (*Agent)(nil)

// NewAgent returns the agent for one workload under c.
func NewAgent(l Learner, c workload.Constraints, o AgentOptions) (*Agent, error) {
	if l == nil {
		return nil, errors.New("agent: nil learner")
	}
	if !o.Greedy && o.RNG == nil {
		return nil, errors.New("agent: sampling needs a random source")
	}
	if o.Steps == (learn.Steps{}) {
		o.Steps = learn.DefaultSteps()
	}
	// The default whose recommendation is part of the state, the residual
	// actions' anchor and the teacher's: the variant the learner was
	// trained beside.
	anchor, err := fusion.ParseVariant(l.PolicyConfig().Anchor)
	if err != nil {
		return nil, fmt.Errorf("agent: the learner's anchor: %w", err)
	}
	t, err := fusion.NewPolicyFactory(anchor)(c)
	if err != nil {
		return nil, fmt.Errorf("agent: default policy: %w", err)
	}
	u, err := hpa.NewHorizontal(fusion.WithScaleUp(c, anchor.ScaleUpPercent))
	if err != nil {
		return nil, fmt.Errorf("agent: updater: %w", err)
	}
	alpha := 0.5
	if o.Alpha != nil {
		alpha = *o.Alpha
	}
	sh, err := learn.ShapeOf(l.PolicyConfig())
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	// The agent reads what the learner was trained with, less what the
	// caller turns off.
	o.FeaturesOff |= sh.FeaturesOff
	window := l.WindowLen()
	if o.Blind {
		window = 0
	}
	return &Agent{learner: l, cons: c, o: o, alpha: alpha, teacher: t, traj: learn.NewTrajectory(window), residual: sh.Residual, updater: u}, nil
}

// Factory returns a PolicyFactory of greedy agents sharing l.
func Factory(l Learner, o AgentOptions) workload.PolicyFactory {
	o.Greedy, o.RNG = true, nil
	return func(c workload.Constraints) (workload.Policy, error) { return NewAgent(l, c, o) }
}

// Contender returns the greedy agent as an evaluation contender named
// PolicyName.
func Contender(l Learner, o AgentOptions) eval.Contender {
	return eval.FromFactory(PolicyName, Factory(l, o))
}

// Name implements workload.Policy.
func (a *Agent) Name() string { return PolicyName }

// Recommend implements workload.Policy.
func (a *Agent) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	d, err := a.decide(ctx, obs, true)
	return d.Recommendation, err
}

// valueActor is a residual learner that decides better knowing what each
// choice does (Ensemble).
type valueActor interface {
	ActValues(state []float64, window []nn.Step, mask []bool, value func(d, i int) float64) (nn.Decision, error)
}

var _ valueActor = (*Ensemble)(nil)

// decision is one window's decision with what learning needs.
type decision struct {
	State []float64
	Mask  []bool
	// Action is the action the transition records: the learner's, or the
	// teacher's nearest action when the default was applied (in the
	// residual space: following the default in every dimension).
	Action int
	// Teacher is the default's nearest legal action (the BC label).
	Teacher        int
	Recommendation workload.Recommendation
	// Window is the trajectory that preceded State (Meta-PPO only).
	Window []nn.Step
	// Signature is the workload's signature at State, when the learner's
	// encoder reads one (Learner.SignatureLen).
	Signature []float64
	// Guarded: a Meta-PPO's embedding left its guard's range and the
	// learner followed the default (nn.EmbedGuard).
	Guarded bool
}

// decide is choose with the recommendation's replica count as the updater
// applies it (see Agent). A count of 0 (no opinion) is left alone.
func (a *Agent) decide(ctx context.Context, obs workload.Observation, agentActs bool) (decision, error) {
	d, err := a.choose(ctx, obs, agentActs)
	if err != nil || d.Recommendation.Replicas <= 0 {
		return d, err
	}
	a.updater.SetUnit(d.Recommendation.TargetCPU())
	h := a.updater.Decide(obs.Time, obs.Replicas, d.Recommendation.Replicas, d.Recommendation.Source == workload.SourceDefault)
	d.Recommendation.Replicas = h.Replicas
	return d, nil
}

// choose computes the state and, when agentActs, the learner's action; with
// !agentActs (bootstrapping) the default is applied and the learner is not
// consulted.
func (a *Agent) choose(ctx context.Context, obs workload.Observation, agentActs bool) (decision, error) {
	if err := ctx.Err(); err != nil {
		return decision{}, err
	}
	def, err := a.teacher.Recommend(ctx, obs)
	if err != nil {
		// A default that cannot decide has no opinion; the state says so.
		def = workload.Recommendation{}
	}
	d := decision{
		State: learn.Encode(learn.Input{Observation: obs, Constraints: a.cons, Default: def, Rates: a.rates.Rates(), Off: a.o.FeaturesOff}),
	}
	if a.residual != nil {
		// Each dimension's legal choices, the safeguard among them (a
		// refused cut is never proposed); the default's own decision is
		// "follow" in every head (index 0).
		d.Mask = a.residual.FlatMask(&obs, &a.cons, def)
	} else {
		d.Mask = learn.Mask(&obs, &a.cons, a.o.Steps)
		d.Teacher = int(learn.NearestAction(&obs, &a.cons, def, a.o.Steps, d.Mask))
	}
	a.rates.Push(obs.RequestRate)
	if err := a.observe(&obs); err != nil {
		return decision{}, err
	}
	d.Window = a.traj.Window()
	if a.learner.SignatureLen() > 0 {
		d.Signature = learn.Signature(&obs)
	}
	defer func() { a.last = &nn.Step{State: d.State, Signature: d.Signature, Action: d.Action} }()
	noOpinion := !learn.HasOpinion(def)
	// The default applies while bootstrapping, and in the residual space
	// whenever it has no opinion to act relative to (the allocation then
	// stays as it is).
	if !agentActs || (a.residual != nil && noOpinion) {
		d.Action = d.Teacher
		d.Recommendation = def
		if noOpinion {
			d.Recommendation = learn.Apply(&obs, &a.cons, learn.NoOp, a.o.Steps)
		}
		d.Recommendation.Source = workload.SourceDefault
		return d, nil
	}
	var dec nn.Decision
	if va, ok := a.learner.(valueActor); ok && a.residual != nil && a.o.Greedy {
		dec, err = va.ActValues(d.State, d.Window, d.Mask, func(dim, i int) float64 {
			return learn.ChoiceValue(&obs, &a.cons, def, learn.Dimension(dim), a.residual[dim][i])
		})
	} else {
		dec, err = a.learner.Act(d.State, d.Window, d.Mask, a.o.Greedy, a.o.RNG)
	}
	if err != nil {
		return decision{}, fmt.Errorf("agent: %w", err)
	}
	d.Action, d.Guarded = dec.Action, dec.Guarded
	if a.residual != nil {
		if d.Recommendation, err = a.residual.Act(&obs, &a.cons, def, dec.Action, d.Mask); err != nil {
			return decision{}, fmt.Errorf("agent: %w", err)
		}
		return d, nil
	}
	act := learn.Action(dec.Action)
	if !a.o.NoSafeguard && learn.SafeguardRefuses(&obs, &a.cons, act) {
		// The transition records what was applied: no change.
		d.Action = int(learn.NoOp)
		d.Recommendation = learn.SafeguardRecommendation(&obs, &a.cons, a.o.Steps)
		return d, nil
	}
	d.Recommendation = learn.Apply(&obs, &a.cons, act, a.o.Steps)
	d.Recommendation.Source = workload.SourceAgent
	return d, nil
}

// observe completes the previous decision's step with the reward of the
// window obs describes and appends it to the trajectory, keeping the last
// WindowLen steps (learn.Trajectory, shared with the serving agent). A
// window handed out earlier stays valid.
func (a *Agent) observe(obs *workload.Observation) error {
	if a.traj.Len() == 0 || a.last == nil {
		return nil
	}
	r, err := learn.Reward(obs, a.alpha)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	st := *a.last
	st.Reward = r.Reward
	a.traj.Push(st)
	return nil
}

// state returns the state at obs without acting, e.g. the state after an
// episode's last decision.
func (a *Agent) state(ctx context.Context, obs workload.Observation) ([]float64, error) {
	d, err := a.decide(ctx, obs, false)
	return d.State, err
}
