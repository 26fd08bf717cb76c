// Package nn holds AWARE's neural networks: the actor-critic learners (PPO,
// Meta-PPO, DDPG) that the rl-agent trains and serves as its policy.
//
// All Gorgonia code of the project lives in this package. Its exported API
// speaks plain Go types only ([]float64, []bool, int, []byte), so that no
// other package depends on Gorgonia's types or its build quirks.
//
// The main learner is PPO, a discrete-action actor-critic (see PPO and
// DiscreteLearner): masked actions, GAE advantages, the clipped surrogate
// objective with an entropy bonus and a value loss, Adam, global-norm gradient
// clipping, behaviour cloning for bootstrapping from a teacher, and versioned
// checkpoints that include the optimiser state. DDPG (see ContinuousLearner)
// is the continuous-action FIRM baseline.
//
// Every learner rejects NaN or infinite input with an error wrapping
// ErrInvalidInput and ErrNonFinite before touching any state, and rolls a
// training call back entirely (returning ErrDiverged) if it produced a
// non-finite loss, gradient or weight. Given the same seed and the same calls,
// results are bit-identical.
//
// Gorgonia builds the training graphs (losses and their gradients). Its
// graphs have static shapes, so they are built for the minibatch size and
// padded rows carry weight zero; the graphs read the canonical weight slices
// in place. Inference does not use Gorgonia (see forward.go for why): it is a
// direct forward pass over a copy of the weights that is refreshed after
// every change, so acting never observes a half-applied optimiser step and
// is only blocked for the duration of that copy.
package nn
