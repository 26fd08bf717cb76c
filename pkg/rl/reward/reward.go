// Package reward computes AWARE's reward for one observation window:
//
//	R = α·RU + (1−α)·SP
//
// where RU is resource utilisation, used/allocated averaged over CPU and
// memory and each capped at 1 (using more than the request is not better
// than using all of it), and SP is SLO preservation, min(SLO/p95, 1).
// Both terms lie in [0, 1], so R does too, except for penalties, which are
// always negative so that an agent never learns to seek them:
//
//   - an OOM kill in the window gives R = −OOMPenalty (default −1);
//   - lost requests (failed or timed out) subtract LossPenalty × the lost
//     fraction from SP, which may push SP, and R, below 0.
//
// Edge cases, each chosen so that the reward cannot be gamed:
//   - no traffic: SP = 1 (nothing was slow), RU still counts, so idle
//     capacity is paid for;
//   - zero latency with traffic (nothing measured) or no SLO: SP = 1;
//   - nothing allocated: RU = 0.
package reward

import (
	"fmt"
	"math"
)

// Options weight the terms. The zero value means α = 0.5, OOMPenalty = 1,
// LossPenalty = 1.
type Options struct {
	// Alpha weighs utilisation against SLO preservation, in [0, 1].
	Alpha *float64
	// OOMPenalty is the magnitude of the reward of a window with an OOM kill.
	OOMPenalty float64
	// LossPenalty scales the lost-request fraction subtracted from SP.
	LossPenalty float64
}

// Inputs are one window's measurements.
type Inputs struct {
	CPUUsed, CPUAllocated       float64
	MemoryUsed, MemoryAllocated float64
	// P95 is the window's p95 latency and SLO its objective, in seconds.
	P95, SLO float64
	// Requests is the number of requests that arrived; Lost how many of
	// them failed or timed out.
	Requests, Lost float64
	OOMKills       int
}

// Terms is the reward with its parts, for logging and tests.
type Terms struct {
	RU, SP, Reward float64
}

// Compute returns the reward for in. It fails on NaN or negative inputs and
// on an α outside [0, 1].
func Compute(in Inputs, o Options) (Terms, error) {
	alpha := 0.5
	if o.Alpha != nil {
		alpha = *o.Alpha
	}
	if !(alpha >= 0 && alpha <= 1) {
		return Terms{}, fmt.Errorf("reward: alpha must be in [0, 1], got %g", alpha)
	}
	for _, v := range [...]float64{in.CPUUsed, in.CPUAllocated, in.MemoryUsed, in.MemoryAllocated, in.P95, in.SLO, in.Requests, in.Lost, o.OOMPenalty, o.LossPenalty} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return Terms{}, fmt.Errorf("reward: inputs must be finite and >= 0: %+v", in)
		}
	}
	if in.OOMKills < 0 {
		return Terms{}, fmt.Errorf("reward: negative OOM kills %d", in.OOMKills)
	}
	oomPenalty, lossPenalty := o.OOMPenalty, o.LossPenalty
	if oomPenalty == 0 {
		oomPenalty = 1
	}
	if lossPenalty == 0 {
		lossPenalty = 1
	}

	var t Terms
	var n float64
	for _, p := range [...][2]float64{{in.CPUUsed, in.CPUAllocated}, {in.MemoryUsed, in.MemoryAllocated}} {
		if p[1] > 0 {
			t.RU += min(p[0]/p[1], 1)
		}
		n++
	}
	t.RU /= n

	t.SP = 1
	if in.Requests > 0 && in.SLO > 0 && in.P95 > 0 {
		t.SP = min(in.SLO/in.P95, 1)
	}
	if in.Requests > 0 {
		t.SP -= lossPenalty * min(in.Lost/in.Requests, 1)
	}

	t.Reward = alpha*t.RU + (1-alpha)*t.SP
	if in.OOMKills > 0 {
		t.Reward = -oomPenalty
	}
	return t, nil
}
