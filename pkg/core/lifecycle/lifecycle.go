// Package lifecycle is the per-workload stage machine of the AWARE agent
// (docs/architecture.md, "The learning loop"): Bootstrapping →
// OnlineTraining → Serving, and Serving → Retraining → OnlineTraining when
// the detector fires.
//
// The machine only sees episode rewards and the time they were recorded;
// it neither trains nor acts, so every transition is a pure function of its
// inputs and can be table-tested. The gates look at the last Window episode
// rewards recorded in the current stage: the window is cleared on every
// transition, so a promotion or a detection is always judged on evidence
// gathered under the regime it is about (defaults acting, the agent
// training, the agent serving), never on a mix.
package lifecycle

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Stage is where a workload's agent is in its lifecycle.
type Stage int

const (
	// Bootstrapping: the defaults act; their transitions are recorded and
	// used to pre-train (behaviour cloning, then offline updates).
	Bootstrapping Stage = iota + 1
	// OnlineTraining: the agent acts with the safeguard on and keeps learning.
	OnlineTraining
	// Serving: the agent acts; its weights are frozen for this workload.
	Serving
	// Retraining: the detector fired while serving, so the policy no
	// longer fits the workload. The defaults, the safe baseline, act
	// again as in Bootstrapping and the agent relearns from their
	// transitions, until the promotion gate passes on their episodes (not
	// before RetrainingBounds.Min of them) or RetrainingBounds.Max have
	// been recorded; the agent then acts again in OnlineTraining. The
	// rl-agent and the trainer both use DefaultRetrainingBounds unless told
	// otherwise. Letting the mis-fitted
	// policy act while it relearns cost more than the change itself: on
	// the simulator (docs/results/evidence-run.md §4, retrain) a served PPO whose app
	// needed 4x the CPU per request kept a near-deterministic action that
	// violated the SLO in every window, and sampling it explored nothing.
	Retraining
)

// Stages lists every stage in lifecycle order, e.g. to initialise gauges.
var Stages = []Stage{Bootstrapping, OnlineTraining, Serving, Retraining}

func (s Stage) String() string {
	switch s {
	case Bootstrapping:
		return "Bootstrapping"
	case OnlineTraining:
		return "OnlineTraining"
	case Serving:
		return "Serving"
	case Retraining:
		return "Retraining"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// Learns reports whether the agent trains on this workload's experience in s.
func (s Stage) Learns() bool { return s != Serving }

// Trains reports whether the episodes of s train the learner, given
// whether it acts in the residual action space (choices relative to the
// default's recommendation). There the defaults' episodes (Bootstrapping,
// Retraining) do not: every decision in them is "follow" in every head,
// which the initial bias already makes the greedy choice, so cloning it
// only takes exploration away, and a PPO update on transitions that all
// chose "follow" can only move probability to choices no transition
// tried, by the sign of an advantage the untrained critic makes up
// (measured: docs/results/evidence-slo.md, "Bootstrapping in the residual space").
// Training (pkg/lab/train) and the serving agent (pkg/rl/learn) both follow it.
func (s Stage) Trains(residual bool) bool { return s.Learns() && (s.AgentActs() || !residual) }

// AgentActs reports whether the agent's own decisions are applied in s:
// in OnlineTraining and Serving. In Bootstrapping and Retraining the
// defaults act and the agent learns from what they did.
func (s Stage) AgentActs() bool { return s == OnlineTraining || s == Serving }

// Gates are the thresholds on the last Window episode rewards. They mirror
// spec.rl.gates of the MultidimPodAutoscaler (and the proto's Gates), with
// the same defaults.
type Gates struct {
	Window             int
	EpisodeSteps       int
	PromoteMinMean     float64
	PromoteMaxStdDev   float64
	RetrainBelowMean   float64
	RetrainAboveStdDev float64
}

// DefaultGates returns the defaults of spec.rl.gates.
func DefaultGates() Gates {
	return Gates{
		Window:             10,
		EpisodeSteps:       30,
		PromoteMinMean:     0.6,
		PromoteMaxStdDev:   0.1,
		RetrainBelowMean:   0.5,
		RetrainAboveStdDev: 0.2,
	}
}

// WithDefaults fills every zero field from DefaultGates. Zero means unset
// because the proto (proto3 scalars) cannot tell the two apart; a gate of
// exactly 0 is therefore not expressible, which the CRD's minimums make
// harmless for Window and EpisodeSteps and rare for the thresholds.
func (g Gates) WithDefaults() Gates {
	d := DefaultGates()
	if g.Window == 0 {
		g.Window = d.Window
	}
	if g.EpisodeSteps == 0 {
		g.EpisodeSteps = d.EpisodeSteps
	}
	if g.PromoteMinMean == 0 {
		g.PromoteMinMean = d.PromoteMinMean
	}
	if g.PromoteMaxStdDev == 0 {
		g.PromoteMaxStdDev = d.PromoteMaxStdDev
	}
	if g.RetrainBelowMean == 0 {
		g.RetrainBelowMean = d.RetrainBelowMean
	}
	if g.RetrainAboveStdDev == 0 {
		g.RetrainAboveStdDev = d.RetrainAboveStdDev
	}
	return g
}

// Validate applies the CRD's rules, so that a request which bypassed the API
// server (another client of the gRPC contract) is held to the same limits.
func (g Gates) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	in := func(v, lo, hi float64) bool { return !math.IsNaN(v) && v >= lo && v <= hi }
	if g.Window < 2 || g.Window > 1000 {
		bad("window must be in [2, 1000], got %d", g.Window)
	}
	if g.EpisodeSteps < 1 || g.EpisodeSteps > 10000 {
		bad("episodeSteps must be in [1, 10000], got %d", g.EpisodeSteps)
	}
	if !in(g.PromoteMinMean, -1, 1) {
		bad("promoteMinMean must be in [-1, 1], got %v", g.PromoteMinMean)
	}
	if !in(g.RetrainBelowMean, -1, 1) {
		bad("retrainBelowMean must be in [-1, 1], got %v", g.RetrainBelowMean)
	}
	if !in(g.PromoteMaxStdDev, 0, 2) {
		bad("promoteMaxStdDev must be in [0, 2], got %v", g.PromoteMaxStdDev)
	}
	if !in(g.RetrainAboveStdDev, 0, 2) {
		bad("retrainAboveStdDev must be in [0, 2], got %v", g.RetrainAboveStdDev)
	}
	if g.RetrainBelowMean > g.PromoteMinMean {
		bad("retrainBelowMean %v must not exceed promoteMinMean %v", g.RetrainBelowMean, g.PromoteMinMean)
	}
	if g.RetrainAboveStdDev < g.PromoteMaxStdDev {
		bad("retrainAboveStdDev %v must be at least promoteMaxStdDev %v", g.RetrainAboveStdDev, g.PromoteMaxStdDev)
	}
	return errors.Join(errs...)
}

// Transition records a change of stage.
type Transition struct {
	From, To Stage
	Time     time.Time
	// Episode is the total episode count when the transition happened.
	Episode int64
	// Mean and StdDev are the window statistics that triggered it.
	Mean, StdDev float64
	// Reason is one CamelCase word, e.g. "RewardGatePassed".
	Reason string
}

// State is the machine's persistent state.
type State struct {
	Stage Stage `json:"stage"`
	// Window holds the episode rewards recorded in the current stage, oldest
	// first, at most Gates.Window of them.
	Window   []float64 `json:"window"`
	Episodes int64     `json:"episodes"`
	// StageEpisodes counts the episodes recorded since the current stage
	// was entered (the window keeps only the last Window of them), e.g. for
	// RetrainingBounds. A state saved before the field existed restores with
	// 0: the count restarts.
	StageEpisodes int64 `json:"stageEpisodes,omitempty"`
	// Since is when the current stage was entered.
	Since time.Time `json:"since"`
}

// RetrainingBounds bound a stay in Retraining, in episodes recorded since
// the detector fired. While Retraining the defaults act and the promotion
// gate is judged on their episodes, which says nothing about whether the
// agent has relearnt anything, and after a change that lowered what the
// defaults attain it may never pass:
//
//   - Min keeps the gate from returning the workload to the agent before
//     the agent has relearnt from that many episodes of the defaults. On
//     the simulator (docs/results/evidence-run.md §4, retrain) a PPO returned after 5 to
//     11 episodes acted worse than the defaults, once far worse.
//   - Max returns it to OnlineTraining after that many, whatever the gate
//     says (reason "RetrainingCapReached"), as a trainer's cap on
//     bootstrapping does (EndBootstrap): otherwise a workload whose
//     defaults stay below an absolute gate would never get the agent back.
//
// Zero disables each; the zero value is the machine without bounds.
type RetrainingBounds struct {
	Min int `json:"min,omitempty"`
	Max int `json:"max,omitempty"`
}

// DefaultRetrainEpisodes is each stay in Retraining, in episodes (Min and
// Max alike) of DefaultRetrainingBounds: the defaults act for that many
// while the agent relearns from them, then the agent acts again. Chosen on
// the simulator's retrain experiment (docs/results/evidence-run.md §4): over 4 seeds and
// 300 episodes after a change it gave a mean reward of 0.649 after the
// change, against 0.590 with the gate alone and 0.607 with a cap of 40 but
// no minimum; 60 gave 0.652 but leaves the workload on the defaults a
// third longer.
const DefaultRetrainEpisodes = 40

// DefaultRetrainingBounds are the bounds the trainer and the rl-agent use
// unless told otherwise.
func DefaultRetrainingBounds() RetrainingBounds {
	return RetrainingBounds{Min: DefaultRetrainEpisodes, Max: DefaultRetrainEpisodes}
}

// Validate checks that the bounds are non-negative and Min <= Max when
// both are set.
func (b RetrainingBounds) Validate() error {
	if b.Min < 0 || b.Max < 0 {
		return fmt.Errorf("retraining bounds must be >= 0, got min %d, max %d", b.Min, b.Max)
	}
	if b.Max > 0 && b.Min > b.Max {
		return fmt.Errorf("retraining min %d must not exceed max %d", b.Min, b.Max)
	}
	return nil
}

// Machine is one workload's stage machine. It is not safe for concurrent
// use; the owning agent serialises access.
type Machine struct {
	gates  Gates
	bounds RetrainingBounds
	st     State
}

// New returns a machine in Bootstrapping since now. gates must be valid.
func New(gates Gates, now time.Time) (*Machine, error) {
	return Restore(gates, State{Stage: Bootstrapping, Since: now})
}

// Restore returns a machine resuming st, e.g. after a restart.
func Restore(gates Gates, st State) (*Machine, error) {
	if err := gates.Validate(); err != nil {
		return nil, fmt.Errorf("invalid gates: %w", err)
	}
	if st.Stage < Bootstrapping || st.Stage > Retraining {
		return nil, fmt.Errorf("invalid stage %d", int(st.Stage))
	}
	if st.Episodes < 0 || st.StageEpisodes < 0 {
		return nil, fmt.Errorf("negative episode count %d (%d in the stage)", st.Episodes, st.StageEpisodes)
	}
	for _, r := range st.Window {
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("non-finite episode reward %v in window", r)
		}
	}
	m := &Machine{gates: gates, st: st}
	m.st.Window = append([]float64(nil), st.Window...)
	m.trim()
	return m, nil
}

// SetGates changes the thresholds (spec.rl.gates was edited). The current
// window is kept, trimmed to the new size.
func (m *Machine) SetGates(g Gates) error {
	if err := g.Validate(); err != nil {
		return fmt.Errorf("invalid gates: %w", err)
	}
	m.gates = g
	m.trim()
	return nil
}

// SetRetrainingBounds bounds every later stay in Retraining, and the
// current one (its episodes so far count).
func (m *Machine) SetRetrainingBounds(b RetrainingBounds) error {
	if err := b.Validate(); err != nil {
		return err
	}
	m.bounds = b
	return nil
}

// RetrainingBounds returns the bounds in force.
func (m *Machine) RetrainingBounds() RetrainingBounds { return m.bounds }

// Gates returns the thresholds in force.
func (m *Machine) Gates() Gates { return m.gates }

// Stage returns the current stage.
func (m *Machine) Stage() Stage { return m.st.Stage }

// Since returns when the current stage was entered.
func (m *Machine) Since() time.Time { return m.st.Since }

// State returns a copy of the persistent state.
func (m *Machine) State() State {
	st := m.st
	st.Window = append([]float64(nil), m.st.Window...)
	return st
}

// StageEpisodes returns the number of episodes recorded since the current
// stage was entered.
func (m *Machine) StageEpisodes() int64 { return m.st.StageEpisodes }

// Stats returns the mean and population standard deviation of the window;
// both are 0 for an empty window.
func (m *Machine) Stats() (mean, std float64) { return meanStd(m.st.Window) }

// RecordEpisode adds one episode's reward (the mean per-step reward of the
// episode) and moves to the next stage if a gate passes. It returns the
// transition, if any.
func (m *Machine) RecordEpisode(reward float64, now time.Time) (Transition, bool, error) {
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return Transition{}, false, fmt.Errorf("episode reward must be finite, got %v", reward)
	}
	m.st.Episodes++
	m.st.StageEpisodes++
	m.st.Window = append(m.st.Window, reward)
	m.trim()
	// The gates judge a full window only; the retraining cap needs none.
	full := len(m.st.Window) >= m.gates.Window
	capped := m.st.Stage == Retraining && m.bounds.Max > 0 && m.st.StageEpisodes >= int64(m.bounds.Max)
	if !full && !capped {
		return Transition{}, false, nil
	}
	mean, std := meanStd(m.st.Window)
	g := m.gates
	promote := full && mean >= g.PromoteMinMean && std <= g.PromoteMaxStdDev
	var to Stage
	var reason string
	switch m.st.Stage {
	case Bootstrapping:
		if promote {
			to, reason = OnlineTraining, "RewardGatePassed"
		}
	case OnlineTraining:
		if promote {
			to, reason = Serving, "TrainingStable"
		}
	case Serving:
		switch {
		case mean < g.RetrainBelowMean:
			to, reason = Retraining, "RewardDropped"
		case std > g.RetrainAboveStdDev:
			to, reason = Retraining, "RewardUnstable"
		}
	case Retraining:
		switch {
		case promote && m.st.StageEpisodes >= int64(m.bounds.Min):
			to, reason = OnlineTraining, "RewardGatePassed"
		case capped:
			to, reason = OnlineTraining, "RetrainingCapReached"
		}
	}
	if to == 0 {
		return Transition{}, false, nil
	}
	tr := Transition{From: m.st.Stage, To: to, Time: now, Episode: m.st.Episodes, Mean: mean, StdDev: std, Reason: reason}
	m.enter(to, now)
	return tr, true, nil
}

// EndBootstrap promotes a workload that is still Bootstrapping to
// OnlineTraining without the gate, with reason "BootstrapCapReached": the
// cap a trainer puts on bootstrapping, so that a workload whose defaults
// never score steadily enough (a bursty trace, a tight SLO) still reaches
// the agent. It reports false, and changes nothing, in any other stage.
func (m *Machine) EndBootstrap(now time.Time) (Transition, bool) {
	return m.end(Bootstrapping, "BootstrapCapReached", now)
}

// EndRetraining returns a workload that is still Retraining to
// OnlineTraining without the gate, with reason "RetrainingCapReached", as
// RetrainingBounds.Max does after a recorded episode; it mirrors
// EndBootstrap for a caller that decides the end itself. It reports
// false, and changes nothing, in any other stage.
func (m *Machine) EndRetraining(now time.Time) (Transition, bool) {
	return m.end(Retraining, "RetrainingCapReached", now)
}

// end moves a workload in stage from to OnlineTraining without the gate,
// for reason; in any other stage it reports false and changes nothing.
func (m *Machine) end(from Stage, reason string, now time.Time) (Transition, bool) {
	if m.st.Stage != from {
		return Transition{}, false
	}
	mean, std := meanStd(m.st.Window)
	tr := Transition{From: from, To: OnlineTraining, Time: now, Episode: m.st.Episodes, Mean: mean, StdDev: std, Reason: reason}
	m.enter(OnlineTraining, now)
	return tr, true
}

// enter moves to stage to, judged afresh: an empty window and episode
// count.
func (m *Machine) enter(to Stage, now time.Time) {
	m.st.Stage, m.st.Since, m.st.Window, m.st.StageEpisodes = to, now, m.st.Window[:0], 0
}

func (m *Machine) trim() {
	if n := len(m.st.Window) - m.gates.Window; n > 0 {
		m.st.Window = append(m.st.Window[:0], m.st.Window[n:]...)
	}
}

func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}
