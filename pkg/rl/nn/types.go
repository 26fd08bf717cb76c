package nn

import (
	"errors"
	"math/rand/v2"
)

var (
	// ErrInvalidInput marks input that can never be valid: wrong lengths,
	// out-of-range actions, NaN or infinite numbers. Callers map it to
	// InvalidArgument.
	ErrInvalidInput = errors.New("invalid input")
	// ErrNonFinite marks a NaN or infinite number. When it comes from the
	// caller's input the error also matches ErrInvalidInput.
	ErrNonFinite = errors.New("non-finite value")
	// ErrAllActionsMasked is returned when a mask forbids every action.
	ErrAllActionsMasked = errors.New("all actions are masked")
	// ErrDiverged is returned when training produced non-finite losses,
	// gradients or weights. The learner has been rolled back to its state
	// before the call.
	ErrDiverged = errors.New("training diverged")
	// ErrCorruptCheckpoint is returned for checkpoint bytes that fail to
	// parse or whose checksum does not match.
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint")
	// ErrIncompatibleCheckpoint is returned for a well-formed checkpoint that
	// cannot be loaded into this learner (format version, kind or dimensions
	// differ).
	ErrIncompatibleCheckpoint = errors.New("incompatible checkpoint")
)

// Decision is the outcome of one Act.
type Decision struct {
	// Action is the chosen action; it is never masked.
	Action int
	// LogProb is the log-probability of Action under the current policy.
	LogProb float64
	// Value is the critic's estimate of the state's value.
	Value float64
	// Probs holds the probability of every action; masked actions have
	// probability exactly 0.
	Probs []float64
	// Guarded is set when a Meta-PPO's embedding lay outside its guard
	// (EmbedGuard) and Action is the guard's fallback where legal.
	Guarded bool
}

// Transition is one step of experience for Update.
//
// A batch is a time-ordered sequence. Consecutive transitions belong to the
// same trajectory unless the earlier one is Done or Truncated; the last
// transition of a batch is treated as Truncated unless it is Done.
type Transition struct {
	State []float64
	// Mask marks the legal actions in State (true = legal). Nil means all
	// actions are legal.
	Mask   []bool
	Action int
	Reward float64
	// NextState is the state reached. It is required unless Done, because the
	// value of the next state is bootstrapped from it.
	NextState []float64
	// Done marks a terminal transition: the return after it is zero.
	Done bool
	// Truncated marks the end of a trajectory segment that is not terminal
	// (time limit, gap in the data): the value of NextState is bootstrapped
	// and the advantage does not chain into the next transition.
	Truncated bool
}

// Demonstration is a teacher's choice, used by BehaviourClone.
type Demonstration struct {
	State []float64
	// Mask marks the legal actions (true = legal); nil means all are legal.
	Mask   []bool
	Action int
}

// Stats summarises one Update. Losses, entropy, KL and clip fraction are means
// over the minibatch steps taken; GradNorm is the mean global gradient norm
// before clipping.
type Stats struct {
	PolicyLoss   float64
	ValueLoss    float64
	Entropy      float64
	ApproxKL     float64
	ClipFraction float64
	GradNorm     float64
	// ExplainedVariance of the returns by the critic before the update.
	ExplainedVariance float64
	// Epochs and Steps count the passes and gradient steps actually taken.
	Epochs int
	Steps  int
	// EarlyStopped is true when TargetKL ended the update before Epochs.
	EarlyStopped bool
}

// BCStats summarises one BehaviourClone call.
type BCStats struct {
	// Loss is the mean masked cross-entropy over the steps taken.
	Loss float64
	// Accuracy is the fraction of the last epoch's samples on which the
	// policy's most likely legal action (before that minibatch's step) matched
	// the teacher.
	Accuracy float64
	GradNorm float64
	Steps    int
}

// DiscreteLearner is a trainable policy over a discrete, maskable action set.
//
// Implementations are safe for concurrent use.
type DiscreteLearner interface {
	// Act chooses an action for one state. mask marks legal actions (nil =
	// all legal); masked actions get probability 0 and are never chosen.
	// greedy picks the most likely legal action; otherwise the action is
	// sampled using rng, which must then be non-nil.
	Act(state []float64, mask []bool, greedy bool, rng *rand.Rand) (Decision, error)
	// ActBatch is Act for many states at once, sharing forward passes.
	// Samples are drawn from rng in the order of states.
	ActBatch(states [][]float64, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error)
	// Update trains on a batch of experience.
	Update(batch []Transition) (Stats, error)
	// BehaviourClone trains the actor to imitate a teacher.
	BehaviourClone(batch []Demonstration) (BCStats, error)
	// MarshalBinary returns a versioned checkpoint of the weights, the
	// optimiser state and the configuration.
	MarshalBinary() ([]byte, error)
	// UnmarshalBinary restores a checkpoint taken with MarshalBinary.
	UnmarshalBinary(data []byte) error
}

var _ DiscreteLearner = (*PPO)(nil)
