package nn

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Limits that keep a (possibly operator-supplied or checkpoint-supplied)
// configuration from allocating absurd amounts of memory.
const (
	maxStateDim   = 1 << 14
	maxActions    = 1 << 10
	maxHidden     = 1 << 12
	maxLayers     = 8
	maxBatchSize  = 1 << 14
	maxEpochCount = 1 << 10
	maxLabel      = 256
)

// Config configures a PPO learner. StateDim and NumActions describe the
// problem and have no defaults; everything else does (see DefaultConfig).
type Config struct {
	// StateDim is the length of every state vector.
	StateDim int `json:"stateDim"`
	// NumActions is the number of discrete actions: the actor's logits.
	NumActions int `json:"numActions"`
	// Heads, when set, splits the NumActions logits into independent
	// categorical heads of these sizes (a multi-discrete action, one choice
	// per head; see heads.go). They must add up to NumActions.
	Heads []int `json:"heads,omitempty"`
	// InitBias, when set, is added to the actor's output bias at
	// initialisation (one entry per logit), e.g. to make one choice per head
	// the initial greedy action. It does not change training.
	InitBias []float64 `json:"initBias,omitempty"`
	// StateFeatures names the state encoding's optional features the
	// learner was trained with, in its consumer's words (the rl-agent's
	// learn.Features); the policy never reads it, it only travels with the
	// weights so that whoever serves them encodes states the same way.
	StateFeatures string `json:"stateFeatures,omitempty"`
	// Anchor names the variant of the default recommendation the learner
	// was trained beside (its residual actions are relative to it, and it
	// is part of the state), in its consumer's words (the rl-agent's
	// fusion.ParseVariant); empty: the default itself. Like StateFeatures
	// it only travels with the weights.
	Anchor string `json:"anchor,omitempty"`
	// Hidden lists the widths of the tanh hidden layers, used by both the
	// actor and the (separate) critic network.
	Hidden []int `json:"hidden"`

	// LearningRate is Adam's step size.
	LearningRate float64 `json:"learningRate"`
	// ClipEpsilon is PPO's ε: the probability ratio is clipped to [1-ε, 1+ε].
	ClipEpsilon float64 `json:"clipEpsilon"`
	// Gamma is the discount factor.
	Gamma float64 `json:"gamma"`
	// Lambda is the GAE λ.
	Lambda float64 `json:"lambda"`
	// EntropyCoef weighs the entropy bonus.
	EntropyCoef float64 `json:"entropyCoef"`
	// ValueCoef weighs the value loss (mean squared error to the GAE returns).
	ValueCoef float64 `json:"valueCoef"`
	// MaxGradNorm is the threshold of global-norm gradient clipping.
	MaxGradNorm float64 `json:"maxGradNorm"`
	// Epochs is the number of passes over a batch in Update (and in
	// BehaviourClone).
	Epochs int `json:"epochs"`
	// MinibatchSize is the number of samples per gradient step. It fixes the
	// shape of the training graphs.
	MinibatchSize int `json:"minibatchSize"`
	// TargetKL stops an Update early once an epoch's mean approximate KL
	// divergence exceeds 1.5×TargetKL. Zero disables early stopping.
	TargetKL float64 `json:"targetKL"`

	AdamBeta1   float64 `json:"adamBeta1"`
	AdamBeta2   float64 `json:"adamBeta2"`
	AdamEpsilon float64 `json:"adamEpsilon"`

	// Seed determines the initial weights and the minibatch shuffling: the
	// same seed and the same calls give bit-identical weights.
	Seed uint64 `json:"seed"`
}

// DefaultConfig returns the default configuration for a problem with the given
// state size and number of actions. The values are the usual PPO defaults for
// small networks.
func DefaultConfig(stateDim, numActions int) Config {
	return Config{
		StateDim:      stateDim,
		NumActions:    numActions,
		Hidden:        []int{64, 64},
		LearningRate:  3e-4,
		ClipEpsilon:   0.2,
		Gamma:         0.99,
		Lambda:        0.95,
		EntropyCoef:   0.01,
		ValueCoef:     0.5,
		MaxGradNorm:   0.5,
		Epochs:        4,
		MinibatchSize: 64,
		TargetKL:      0,
		AdamBeta1:     0.9,
		AdamBeta2:     0.999,
		AdamEpsilon:   1e-8,
		Seed:          1,
	}
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

	if c.StateDim < 1 || c.StateDim > maxStateDim {
		bad("stateDim must be in [1, %d], got %d", maxStateDim, c.StateDim)
	}
	if c.NumActions < 2 || c.NumActions > maxActions {
		bad("numActions must be in [2, %d], got %d", maxActions, c.NumActions)
	}
	if len(c.Heads) > 0 {
		sum, count := 0, 1
		for i, h := range c.Heads {
			if h < 1 {
				bad("heads[%d] must be >= 1, got %d", i, h)
				continue
			}
			sum += h
			count = min(count*h, maxActions*maxActions)
		}
		if sum != c.NumActions {
			bad("heads %v must add up to numActions %d", c.Heads, c.NumActions)
		}
		if count >= maxActions*maxActions {
			bad("heads %v make too many distinct actions", c.Heads)
		}
	}
	if len(c.StateFeatures) > maxLabel {
		bad("stateFeatures must be at most %d bytes, got %d", maxLabel, len(c.StateFeatures))
	}
	if len(c.Anchor) > maxLabel {
		bad("anchor must be at most %d bytes, got %d", maxLabel, len(c.Anchor))
	}
	if c.InitBias != nil && len(c.InitBias) != c.NumActions {
		bad("initBias must have numActions (%d) entries, got %d", c.NumActions, len(c.InitBias))
	}
	for i, v := range c.InitBias {
		if !finite(v) {
			bad("initBias[%d] is %v", i, v)
		}
	}
	if len(c.Hidden) < 1 || len(c.Hidden) > maxLayers {
		bad("hidden must list between 1 and %d layer widths, got %d", maxLayers, len(c.Hidden))
	}
	for i, h := range c.Hidden {
		if h < 1 || h > maxHidden {
			bad("hidden[%d] must be in [1, %d], got %d", i, maxHidden, h)
		}
	}
	if !finite(c.LearningRate) || c.LearningRate <= 0 || c.LearningRate > 1 {
		bad("learningRate must be in (0, 1], got %v", c.LearningRate)
	}
	if !finite(c.ClipEpsilon) || c.ClipEpsilon <= 0 || c.ClipEpsilon >= 1 {
		bad("clipEpsilon must be in (0, 1), got %v", c.ClipEpsilon)
	}
	if !finite(c.Gamma) || c.Gamma < 0 || c.Gamma > 1 {
		bad("gamma must be in [0, 1], got %v", c.Gamma)
	}
	if !finite(c.Lambda) || c.Lambda < 0 || c.Lambda > 1 {
		bad("lambda must be in [0, 1], got %v", c.Lambda)
	}
	if !finite(c.EntropyCoef) || c.EntropyCoef < 0 {
		bad("entropyCoef must be finite and >= 0, got %v", c.EntropyCoef)
	}
	if !finite(c.ValueCoef) || c.ValueCoef <= 0 {
		bad("valueCoef must be finite and > 0, got %v", c.ValueCoef)
	}
	if !finite(c.MaxGradNorm) || c.MaxGradNorm <= 0 {
		bad("maxGradNorm must be finite and > 0, got %v", c.MaxGradNorm)
	}
	if c.Epochs < 1 || c.Epochs > maxEpochCount {
		bad("epochs must be in [1, %d], got %d", maxEpochCount, c.Epochs)
	}
	if c.MinibatchSize < 1 || c.MinibatchSize > maxBatchSize {
		bad("minibatchSize must be in [1, %d], got %d", maxBatchSize, c.MinibatchSize)
	}
	if !finite(c.TargetKL) || c.TargetKL < 0 {
		bad("targetKL must be finite and >= 0 (0 disables), got %v", c.TargetKL)
	}
	if !finite(c.AdamBeta1) || c.AdamBeta1 < 0 || c.AdamBeta1 >= 1 {
		bad("adamBeta1 must be in [0, 1), got %v", c.AdamBeta1)
	}
	if !finite(c.AdamBeta2) || c.AdamBeta2 < 0 || c.AdamBeta2 >= 1 {
		bad("adamBeta2 must be in [0, 1), got %v", c.AdamBeta2)
	}
	if !finite(c.AdamEpsilon) || c.AdamEpsilon <= 0 {
		bad("adamEpsilon must be finite and > 0, got %v", c.AdamEpsilon)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid policy config: %w", err)
	}
	return nil
}

// clone returns a deep copy so that callers cannot alias the Hidden slice.
func (c Config) clone() Config {
	c.Hidden = slices.Clone(c.Hidden)
	c.Heads = slices.Clone(c.Heads)
	c.InitBias = slices.Clone(c.InitBias)
	return c
}

// sameArchitecture reports whether weights trained under o fit c.
func (c Config) sameArchitecture(o Config) bool {
	return c.StateDim == o.StateDim && c.NumActions == o.NumActions && slices.Equal(c.Hidden, o.Hidden) &&
		slices.Equal(c.heads(), o.heads())
}
