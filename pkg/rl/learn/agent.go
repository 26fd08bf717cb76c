package learn

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/reward"
)

// Mode is spec.rl.mode (workload.RLMode).
type Mode = workload.RLMode

const (
	// ModeOff: the agent neither acts nor learns; the default is applied.
	ModeOff = workload.RLModeOff
	// ModeShadow: the agent learns from the defaults and moves through its
	// stages, but the default is applied whatever the stage.
	ModeShadow = workload.RLModeShadow
	// ModeOn: the agent acts once its lifecycle allows.
	ModeOn = workload.RLModeOn
)

// Config is one workload's spec.rl as the agent needs it
// (workload.RLConfig, which holds it so that a request can be converted
// without linking the learners).
type Config = workload.RLConfig

// DefaultConfig is spec.rl's defaults, except Mode On: a workload that
// reaches the agent has asked for it.
func DefaultConfig() Config {
	return Config{Mode: ModeOn, Alpha: 0.5, Gates: lifecycle.DefaultGates()}
}

// Buffer sizes per workload. Demonstrations are kept across episodes (the
// behaviour-cloning corpus grows while bootstrapping); transitions only for
// the current episode, which is what one PPO update consumes. 512
// demonstrations are about 100 KiB, so memory stays bounded by the
// server's workload limit.
const (
	maxDemonstrations = 512
	maxEpisodeSteps   = 10000
)

// Prepared is the first half of a decision: the state and legal actions
// the shared learner needs. It is produced by Agent.Prepare and consumed by
// Agent.Decide, so that a server can batch the forward passes of many
// workloads between the two.
type Prepared struct {
	State []float64
	Mask  []bool
	// NeedsPolicy is false when the decision does not depend on the policy
	// (bootstrapping, mode Off): Decide then takes a nil decision.
	NeedsPolicy bool
	// Greedy is true when the policy should exploit rather than explore.
	Greedy bool
	// Window is the workload's trajectory that preceded State, oldest
	// first, for a learner that reads one (Meta-PPO); nil when the agent
	// keeps none. It must not be modified.
	Window []nn.Step

	obs   workload.Observation
	cons  workload.Constraints
	def   workload.Recommendation
	cfg   Config
	stage lifecycle.Stage
	rates []float64 // the rate history State was encoded with
	// space is the agent's residual action space, nil in the paper's.
	space *ResidualSpace
}

// Result is one decision.
type Result struct {
	Recommendation workload.Recommendation
	Stage          lifecycle.Stage
	// Action is the policy's action, or the default's nearest action when
	// the default was chosen.
	Action Action
}

// Outcome is what happened after a decision was applied.
type Outcome struct {
	Observation   workload.Observation
	Applied       workload.Recommendation
	AppliedSource workload.Source
	Next          workload.Observation
	Config        Config
}

// OutcomeResult is what the agent made of an Outcome.
type OutcomeResult struct {
	Reward          reward.Terms
	Stage           lifecycle.Stage
	EpisodeComplete bool
	// Transition is set when the episode moved the workload to a new stage.
	Transition *lifecycle.Transition
	// Train is set when the completed episode should train the learner.
	Train *TrainJob
	// Experience is the transition to persist.
	Experience Experience
}

// TrainJob is the training an episode asks for. Bootstrapping jobs clone
// the defaults (Demonstrations) and then run offline PPO updates on their
// transitions; training jobs run a PPO update on the episode.
type TrainJob struct {
	Demonstrations []nn.Demonstration
	Batch          []nn.Transition
	// DemoWindows and Windows hold the trajectory that preceded each
	// demonstration and transition (same index), when the agent keeps one
	// (SetWindowLen); otherwise they are nil.
	DemoWindows [][]nn.Step
	Windows     [][]nn.Step
	// Signatures hold each transition's Signature (same index) when the
	// agent's steps carry one (SetSignature); otherwise nil.
	Signatures [][]float64
}

// Run trains l as the job asks. It may take tens of milliseconds; servers
// run it off the request path.
func (j *TrainJob) Run(l nn.DiscreteLearner) error {
	if len(j.Demonstrations) > 0 {
		if _, err := l.BehaviourClone(j.Demonstrations); err != nil {
			return fmt.Errorf("behaviour cloning: %w", err)
		}
	}
	if len(j.Batch) > 0 {
		if _, err := l.Update(j.Batch); err != nil {
			return fmt.Errorf("PPO update: %w", err)
		}
	}
	return nil
}

// RunMeta trains a Meta-PPO learner as the job asks, each demonstration and
// transition with its window. The agent that produced the job must keep
// windows of the learner's length (SetWindowLen).
func (j *TrainJob) RunMeta(m *nn.MetaPPO) error {
	if len(j.DemoWindows) != len(j.Demonstrations) || len(j.Windows) != len(j.Batch) || (j.Signatures != nil && len(j.Signatures) != len(j.Batch)) {
		return fmt.Errorf("meta training job: %d demonstrations with %d windows, %d transitions with %d windows and %d signatures",
			len(j.Demonstrations), len(j.DemoWindows), len(j.Batch), len(j.Windows), len(j.Signatures))
	}
	if len(j.Demonstrations) > 0 {
		demos := make([]nn.MetaDemonstration, len(j.Demonstrations))
		for i, d := range j.Demonstrations {
			demos[i] = nn.MetaDemonstration{Demonstration: d, Window: j.DemoWindows[i]}
		}
		if _, err := m.BehaviourClone(demos); err != nil {
			return fmt.Errorf("behaviour cloning: %w", err)
		}
	}
	if len(j.Batch) > 0 {
		batch := make([]nn.MetaTransition, len(j.Batch))
		for i, t := range j.Batch {
			batch[i] = nn.MetaTransition{Transition: t, Window: j.Windows[i]}
			if j.Signatures != nil {
				batch[i].Signature = j.Signatures[i]
			}
		}
		if _, err := m.Update(batch); err != nil {
			return fmt.Errorf("meta-PPO update: %w", err)
		}
	}
	return nil
}

// Experience is one persisted transition of a workload, with the default's
// label, so a restarted agent can rebuild its behaviour-cloning corpus.
type Experience struct {
	Workload   string        `json:"w"`
	Transition nn.Transition `json:"t"`
	// Teacher is the default's nearest action in State, or -1 when the
	// transition was not the default's.
	Teacher int `json:"d"`
	// StepReward is the step's reward as the workload's trajectory holds
	// it: the paper's reward, as the simulator's agent (pkg/lab/train) feeds
	// its encoder, whereas Transition.Reward also carries the learner's
	// scaling charge. It is set only by agents that keep a trajectory, so
	// that Restore rebuilds the window Outcome kept; without it Restore
	// falls back to Transition.Reward.
	StepReward *float64 `json:"r,omitempty"`
	// Signature is the step's Signature, set only by agents whose steps
	// carry one (SetSignature), so that Restore rebuilds their window.
	Signature []float64 `json:"s,omitempty"`
}

// Status is a workload's agent as GetPolicyStatus reports it.
type Status struct {
	Stage        lifecycle.Stage
	Episodes     int64
	Transitions  int64
	RewardMean   float64
	RewardStdDev float64
	LastUpdate   time.Time
}

// AgentState is the persistent part of an Agent.
type AgentState struct {
	Workload     string          `json:"workload"`
	Lifecycle    lifecycle.State `json:"lifecycle"`
	Gates        lifecycle.Gates `json:"gates"`
	Transitions  int64           `json:"transitions"`
	EpisodeSum   float64         `json:"episodeSum"`
	EpisodeSteps int             `json:"episodeSteps"`
	LastUpdate   time.Time       `json:"lastUpdate"`
	// Rates is the request-rate history, oldest first (RateHistory).
	Rates []float64 `json:"rates,omitempty"`
	// PrevRate and HasPrev are the history of states written before Rates
	// existed: the previous window's rate only. Read, never written.
	PrevRate float64 `json:"prevRate,omitempty"`
	HasPrev  bool    `json:"hasPrev,omitempty"`
}

// Agent is one workload's side of the AWARE agent: its lifecycle, episode
// accounting and experience. The policy itself is shared by every workload
// (one network serves many workloads: docs/architecture.md, "The learning
// loop") and owned by the caller.
// Agent is safe for concurrent use.
type Agent struct {
	key   string
	steps Steps

	mu           sync.Mutex
	machine      *lifecycle.Machine
	transitions  int64
	episodeSum   float64
	episodeSteps int
	lastUpdate   time.Time
	rates        RateHistory
	// space is the residual action space when the learner acts relative to
	// the default (SetActionSpace); nil is the paper's seven actions.
	space *ResidualSpace
	// off are the state features the learner was trained without.
	off Features
	// last is the most recent decision, matched to its outcome by the
	// observation time, so the outcome's transition uses exactly the state,
	// mask and action of the decision.
	last    *decided
	cons    workload.Constraints
	demos   []nn.Demonstration
	episode []nn.Transition
	// traj is the workload's recent trajectory when the learner reads one
	// (SetWindowLen); demoWindows and episodeWindows hold, index for index,
	// the window that preceded each of demos and episode. The trajectory is
	// not in AgentState: Restore rebuilds it from the experience log, whose
	// records are its steps.
	traj           Trajectory
	demoWindows    [][]nn.Step
	episodeWindows [][]nn.Step
	// signature: each step carries the workload's Signature
	// (SetSignature); episodeSignatures holds, index for index, that of
	// each of episode.
	signature         bool
	episodeSignatures [][]float64
}

type decided struct {
	time   time.Time
	state  []float64
	mask   []bool
	action Action
	source workload.Source
	rates  []float64 // the rate history state was encoded with
}

// NewAgent returns a workload's agent in Bootstrapping since now.
func NewAgent(key string, gates lifecycle.Gates, steps Steps, now time.Time) (*Agent, error) {
	m, err := lifecycle.New(gates, now)
	if err != nil {
		return nil, err
	}
	return &Agent{key: key, steps: steps, machine: m, lastUpdate: now}, nil
}

// RestoreAgent returns an agent resuming st.
func RestoreAgent(st AgentState, steps Steps) (*Agent, error) {
	m, err := lifecycle.Restore(st.Gates, st.Lifecycle)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", st.Workload, err)
	}
	if st.Transitions < 0 || st.EpisodeSteps < 0 || math.IsNaN(st.EpisodeSum) || math.IsInf(st.EpisodeSum, 0) {
		return nil, fmt.Errorf("workload %s: invalid episode accounting", st.Workload)
	}
	rates := st.Rates
	if len(rates) == 0 && st.HasPrev {
		rates = []float64{st.PrevRate}
	}
	return &Agent{
		key: st.Workload, steps: steps, machine: m,
		transitions: st.Transitions, episodeSum: st.EpisodeSum, episodeSteps: st.EpisodeSteps,
		lastUpdate: st.LastUpdate, rates: RestoreRateHistory(rates),
	}, nil
}

// SetRetrainingBounds bounds the workload's stays in Retraining
// (lifecycle.RetrainingBounds). They are configuration, not saved state:
// set them again after RestoreAgent.
func (a *Agent) SetRetrainingBounds(b lifecycle.RetrainingBounds) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.machine.SetRetrainingBounds(b)
}

// SetWindowLen makes the agent keep the workload's last n steps for a
// learner that reads them (Meta-PPO's window; 0, the default, keeps none, as
// PPO needs). Call it before the agent's first Prepare, Outcome or Restore.
func (a *Agent) SetWindowLen(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.traj = NewTrajectory(n)
}

// SetSignature makes each step of the trajectory carry the workload's
// Signature, for a Meta-PPO whose encoder reads one
// (nn.MetaConfig.SignatureDim = SignatureDim). Configuration, like
// SetWindowLen: call it before the agent's first Prepare, Outcome or
// Restore.
func (a *Agent) SetSignature(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.signature = on
}

// SetShape makes the agent talk to a policy of shape sh (ShapeOf): in the
// residual action space, the learner's action is one choice per dimension
// relative to the default's recommendation (ResidualSpace.Act), its mask
// FlatMask, and the default's own decision is FollowAction; the defaults'
// decisions are then not demonstrations (each is FollowAction, which an
// untrained residual policy already takes, and cloning it only takes
// exploration away). States read the features sh turns off as 0. The zero
// shape, the default, is the paper's seven actions with every feature.
// Configuration, like SetWindowLen: call it before the agent's first
// Prepare, Outcome or Restore.
func (a *Agent) SetShape(sh PolicyShape) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.space, a.off = sh.Residual, sh.FeaturesOff
}

// numActions is the size of the learner's action space. The caller holds
// a.mu.
func (a *Agent) numActions() int {
	if a.space != nil {
		return a.space.NumActions()
	}
	return int(NumActions)
}

// mask is the legal actions at obs with def as the default. The caller
// holds a.mu.
func (a *Agent) mask(obs *workload.Observation, cons *workload.Constraints, def workload.Recommendation) []bool {
	if a.space != nil {
		return a.space.FlatMask(obs, cons, def)
	}
	return Mask(obs, cons, a.steps)
}

// teacher is the action that stands for rec, applied by the defaults. The
// caller holds a.mu.
func (a *Agent) teacher(obs *workload.Observation, cons *workload.Constraints, rec workload.Recommendation, mask []bool) Action {
	if a.space != nil {
		return FollowAction
	}
	return NearestAction(obs, cons, rec, a.steps, mask)
}

// Key returns the workload key.
func (a *Agent) Key() string { return a.key }

// State returns the persistent state.
func (a *Agent) State() AgentState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AgentState{
		Workload: a.key, Lifecycle: a.machine.State(), Gates: a.machine.Gates(),
		Transitions: a.transitions, EpisodeSum: a.episodeSum, EpisodeSteps: a.episodeSteps,
		LastUpdate: a.lastUpdate, Rates: a.rates.Rates(),
	}
}

// Stage returns the current stage.
func (a *Agent) Stage() lifecycle.Stage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.machine.Stage()
}

// StageSince returns the current stage and when it was entered, without
// copying the rest of the state as State does.
func (a *Agent) StageSince() (lifecycle.Stage, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.machine.Stage(), a.machine.Since()
}

// Status returns the agent's state for GetPolicyStatus.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	mean, std := a.machine.Stats()
	st := a.machine.State()
	return Status{Stage: st.Stage, Episodes: st.Episodes, Transitions: a.transitions, RewardMean: mean, RewardStdDev: std, LastUpdate: a.lastUpdate}
}

// Restore feeds a persisted experience record back into the agent, in the
// order of the log: the default's demonstrations rebuild the
// behaviour-cloning corpus and, when the agent keeps a trajectory, every
// record is its next step (the log holds exactly the state, action and
// reward Outcome appends), so the window is rebuilt too. Records lost to a
// crash before their flush, or compacted away, are missing from it, as
// from the corpus.
func (a *Agent) Restore(e Experience) {
	a.mu.Lock()
	defer a.mu.Unlock()
	window := a.traj.Window()
	// A record without the signature the steps carry (written before the
	// learner read one) is not a step the encoder can read.
	hasSignature := !a.signature || len(e.Signature) == SignatureDim
	if a.traj.Len() > 0 && hasSignature && len(e.Transition.State) == StateDim && e.Transition.Action >= 0 && e.Transition.Action < a.numActions() {
		r := e.Transition.Reward
		if e.StepReward != nil {
			r = *e.StepReward
		}
		st := nn.Step{State: e.Transition.State, Action: e.Transition.Action, Reward: r}
		if a.signature {
			st.Signature = e.Signature
		}
		a.traj.Push(st)
	}
	if e.Teacher < 0 || e.Teacher >= a.numActions() || a.space != nil {
		return
	}
	a.addDemo(nn.Demonstration{State: e.Transition.State, Mask: e.Transition.Mask, Action: e.Teacher}, window)
}

// addDemo keeps d, with the window that preceded it when the agent keeps
// windows. The caller holds a.mu.
func (a *Agent) addDemo(d nn.Demonstration, window []nn.Step) {
	if len(a.demos) >= maxDemonstrations {
		drop := len(a.demos) - maxDemonstrations + 1
		a.demos = slices.Delete(a.demos, 0, drop)
		if a.demoWindows != nil {
			a.demoWindows = slices.Delete(a.demoWindows, 0, drop)
		}
	}
	a.demos = append(a.demos, d)
	if a.traj.Len() > 0 {
		a.demoWindows = append(a.demoWindows, window)
	}
}

// Prepare computes the state and mask for a Recommend call. cfg must be
// valid.
func (a *Agent) Prepare(obs workload.Observation, cons workload.Constraints, def workload.Recommendation, cfg Config) (Prepared, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.machine.SetGates(cfg.Gates); err != nil {
		return Prepared{}, err
	}
	stage := a.machine.Stage()
	p := Prepared{
		obs: obs, cons: cons, def: def, cfg: cfg, stage: stage,
		rates: a.rates.Rates(), space: a.space,
	}
	p.State = Encode(Input{Observation: obs, Constraints: cons, Default: def, Rates: p.rates, Off: a.off})
	p.Mask = a.mask(&obs, &cons, def)
	// Only mode On ever applies the policy's decision, so only then is a
	// forward pass worth its cost. (Shadow learns from the defaults.)
	p.NeedsPolicy = cfg.Mode == ModeOn && stage.AgentActs()
	// Serving exploits; training stages explore by sampling.
	p.Greedy = stage == lifecycle.Serving
	p.Window = a.traj.Window()
	return p, nil
}

// Decide completes a decision. d is the learner's decision for p.State and
// p.Mask, or nil when !p.NeedsPolicy.
func (a *Agent) Decide(p Prepared, d *nn.Decision) (Result, error) {
	if p.NeedsPolicy && d == nil {
		return Result{}, errors.New("decision needs the policy's action")
	}
	a.mu.Lock()
	space, teacher := a.space, a.teacher(&p.obs, &p.cons, p.def, p.Mask)
	a.mu.Unlock()
	res := Result{Stage: p.stage}
	useDefault := func(reason string, src workload.Source) {
		res.Recommendation = p.def
		res.Recommendation.Source, res.Recommendation.Reason = src, reason
		res.Action = teacher
	}
	switch {
	case p.cfg.Mode == ModeOff:
		useDefault("RLModeOff", workload.SourceDefault)
	case !p.stage.AgentActs():
		useDefault(p.stage.String(), workload.SourceDefault) // Bootstrapping or Retraining
	case p.cfg.Mode == ModeShadow:
		useDefault("Shadow", workload.SourceDefault)
	case space != nil && !HasOpinion(p.def):
		// Nothing to act relative to: the allocation stays as it is.
		res.Recommendation = Apply(&p.obs, &p.cons, NoOp, a.steps)
		res.Recommendation.Source, res.Recommendation.Reason = workload.SourceDefault, "NoDefault"
		res.Action = FollowAction
	case space != nil:
		rec, err := space.Act(&p.obs, &p.cons, p.def, d.Action, p.Mask)
		if err != nil {
			return Result{}, fmt.Errorf("policy chose an illegal action: %w", err)
		}
		res.Recommendation = rec
		if rec.Source == workload.SourceAgent {
			res.Recommendation.Reason = p.stage.String()
		} else {
			res.Recommendation.Reason = "FollowDefault"
		}
		res.Action = Action(d.Action)
	default:
		act := Action(d.Action)
		if act < 0 || act >= NumActions || !p.Mask[act] {
			return Result{}, fmt.Errorf("policy chose illegal action %d", d.Action)
		}
		if SafeguardRefuses(&p.obs, &p.cons, act) {
			// FaaSRM: refuse the downward step and keep the allocation
			// in force (SafeguardRecommendation: not the default's,
			// which may shrink further).
			res.Recommendation = SafeguardRecommendation(&p.obs, &p.cons, a.steps)
			res.Recommendation.Reason = "SafeguardPeakUsage"
			res.Action = NoOp
			break
		}
		res.Recommendation = Apply(&p.obs, &p.cons, act, a.steps)
		res.Recommendation.Source, res.Recommendation.Reason = workload.SourceAgent, p.stage.String()
		res.Action = act
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	a.rates.Push(p.obs.RequestRate)
	a.cons = p.cons
	a.last = &decided{time: p.obs.Time, state: p.State, mask: p.Mask, action: res.Action, source: res.Recommendation.Source, rates: p.rates}
	return res, nil
}

// Outcome records the result of an applied decision: the reward, the
// transition, the episode accounting and, at the end of an episode, the
// lifecycle gate. now is the time of the report.
func (a *Agent) Outcome(o Outcome, now time.Time) (OutcomeResult, error) {
	terms, err := Reward(&o.Next, o.Config.Alpha)
	if err != nil {
		return OutcomeResult{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.machine.SetGates(o.Config.Gates); err != nil {
		return OutcomeResult{}, err
	}

	var state []float64
	var mask []bool
	var action Action
	var hist []float64 // the rate history before o.Observation
	if l := a.last; l != nil && l.time.Equal(o.Observation.Time) {
		state, mask, hist = l.state, l.mask, l.rates
		action = l.action
		if o.AppliedSource != l.source {
			// The recommender applied something else (e.g. it fell back to
			// the default): learn from what was applied.
			action = a.teacher(&o.Observation, &a.cons, o.Applied, mask)
		}
	} else {
		// No matching decision (e.g. the agent restarted in between): the
		// applied recommendation stands in for the default in the state.
		hist = a.rates.Rates()
		state = Encode(Input{Observation: o.Observation, Constraints: a.cons, Default: o.Applied, Rates: hist, Off: a.off})
		mask = a.mask(&o.Observation, &a.cons, o.Applied)
		action = a.teacher(&o.Observation, &a.cons, o.Applied, mask)
	}
	a.last = nil
	next := Encode(Input{Observation: o.Next, Constraints: a.cons, Default: o.Applied, Rates: append(slices.Clone(hist), o.Observation.RequestRate), Off: a.off})

	gates := a.machine.Gates()
	a.episodeSum += terms.Reward
	a.episodeSteps++
	a.transitions++
	a.lastUpdate = now
	done := a.episodeSteps >= gates.EpisodeSteps
	// The learner is charged for replica changes (ScalingCost); the
	// episode reward and the gates keep the paper's reward.
	learnReward := terms.Reward - ScalingCost(&o.Observation, o.Applied, DefaultScalingCost)
	if a.space != nil {
		// The residual learner's charges, as it was trained with.
		if VerticalChange(&o.Observation, &a.cons, o.Applied) {
			learnReward -= DefaultVerticalCost
		}
		if ViolatesSLO(&o.Next) {
			learnReward -= DefaultSLOCost
		}
	}
	tr := nn.Transition{State: state, Mask: mask, Action: int(action), Reward: learnReward, NextState: next, Truncated: done}
	stage := a.machine.Stage()
	teacher := -1
	// The window that preceded state; this step then joins the trajectory
	// (a no-op when the agent keeps none), with the paper's reward as the
	// simulator's agent records it.
	window := a.traj.Window()
	var sig []float64
	if a.signature && a.traj.Len() > 0 {
		sig = Signature(&o.Observation)
	}
	a.traj.Push(nn.Step{State: state, Signature: sig, Action: int(action), Reward: terms.Reward})
	if (o.AppliedSource == workload.SourceDefault || o.AppliedSource == workload.SourceSafeguard) && a.space == nil {
		teacher = int(action)
		a.addDemo(nn.Demonstration{State: state, Mask: mask, Action: teacher}, window)
	}
	if stage.Trains(a.space != nil) && len(a.episode) < maxEpisodeSteps {
		a.episode = append(a.episode, tr)
		if a.traj.Len() > 0 {
			a.episodeWindows = append(a.episodeWindows, window)
			if sig != nil {
				a.episodeSignatures = append(a.episodeSignatures, sig)
			}
		}
	}
	res := OutcomeResult{Reward: terms, Stage: stage, Experience: Experience{Workload: a.key, Transition: tr, Teacher: teacher}}
	if a.traj.Len() > 0 {
		r := terms.Reward
		res.Experience.StepReward = &r
		res.Experience.Signature = sig
	}
	if !done {
		return res, nil
	}

	res.EpisodeComplete = true
	episodeReward := a.episodeSum / float64(a.episodeSteps)
	a.episodeSum, a.episodeSteps = 0, 0
	if stage.Trains(a.space != nil) && len(a.episode) > 0 {
		job := &TrainJob{Batch: a.episode, Windows: a.episodeWindows, Signatures: a.episodeSignatures}
		if !stage.AgentActs() { // the defaults acted: Bootstrapping or Retraining
			job.Demonstrations = slices.Clone(a.demos)
			job.DemoWindows = slices.Clone(a.demoWindows)
		}
		res.Train = job
	}
	a.episode, a.episodeWindows, a.episodeSignatures = nil, nil, nil
	t, moved, err := a.machine.RecordEpisode(episodeReward, now)
	if err != nil {
		return OutcomeResult{}, err
	}
	if moved {
		res.Transition = &t
	}
	res.Stage = a.machine.Stage()
	return res, nil
}

// MarshalExperience encodes e for the experience log.
func MarshalExperience(e Experience) ([]byte, error) { return json.Marshal(e) }

// UnmarshalExperience decodes a record of the experience log.
func UnmarshalExperience(b []byte) (Experience, error) {
	var e Experience
	if err := json.Unmarshal(b, &e); err != nil {
		return Experience{}, fmt.Errorf("decode experience: %w", err)
	}
	if len(e.Transition.State) != StateDim {
		return Experience{}, fmt.Errorf("experience of %s: state of length %d, want %d", e.Workload, len(e.Transition.State), StateDim)
	}
	if e.Signature != nil && len(e.Signature) != SignatureDim {
		return Experience{}, fmt.Errorf("experience of %s: signature of length %d, want %d", e.Workload, len(e.Signature), SignatureDim)
	}
	return e, nil
}
