package learn

import "github.com/aware-k8s/aware/pkg/rl/nn"

// Trajectory is a workload's recent steps as a Meta-PPO encoder reads them
// (nn.Step: the state of a decision, the action recorded for it and the
// reward of the window that followed), oldest first. The simulator's agent
// (pkg/lab/train) and the serving agent keep it with this one type, so the
// encoder reads the same thing in training, evaluation and serving.
//
// Windows handed out by Window are never written afterwards: they stay
// valid as the trajectory moves on, so a decision's window can be kept with
// its transition or demonstration. They share one backing array, which is
// replaced (not overwritten) when it fills, so keeping a window per step
// costs a slice header rather than a copy of the steps.
//
// The zero Trajectory keeps nothing. A Trajectory is not safe for
// concurrent use.
type Trajectory struct {
	n     int
	steps []nn.Step
}

// NewTrajectory returns a trajectory keeping the last n steps; n <= 0
// keeps none (a learner that reads no window, like PPO).
func NewTrajectory(n int) Trajectory { return Trajectory{n: max(n, 0)} }

// Len is the number of steps a window holds at most.
func (t *Trajectory) Len() int { return t.n }

// Push appends a completed step, dropping the oldest beyond Len.
func (t *Trajectory) Push(st nn.Step) {
	if t.n == 0 {
		return
	}
	if len(t.steps) == cap(t.steps) {
		// Full (or new): start a fresh array with the n-1 steps the next
		// window keeps. Room for 3n more steps amortises the copy.
		keep := t.steps[max(len(t.steps)-t.n+1, 0):]
		fresh := make([]nn.Step, len(keep), t.n-1+3*t.n)
		copy(fresh, keep)
		t.steps = fresh
	}
	// Appending within capacity writes past the end of every window handed
	// out, each of which is capped at its own length.
	t.steps = append(t.steps, st)
}

// Window returns the last Len steps, oldest first (nil when there are
// none). The result must not be modified.
func (t *Trajectory) Window() []nn.Step {
	if len(t.steps) == 0 {
		return nil
	}
	lo := max(len(t.steps)-t.n, 0)
	return t.steps[lo:len(t.steps):len(t.steps)]
}
