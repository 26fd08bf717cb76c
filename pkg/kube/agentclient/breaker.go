package agentclient

import (
	"sync"
	"time"
)

// State is a circuit breaker state; the values are the metric's encoding.
type State int

const (
	Closed   State = 0
	HalfOpen State = 1
	Open     State = 2
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// Breaker stops calling a failing agent: after Threshold consecutive
// failures it opens for Cooldown, then lets one trial call through
// (half-open); the trial's success closes it, its failure reopens it. Time
// is passed in so tests need no sleeping. Safe for concurrent use.
type Breaker struct {
	Threshold int
	Cooldown  time.Duration

	mu       sync.Mutex
	state    State
	failures int
	openedAt time.Time
	trial    bool
}

// NewBreaker returns a closed breaker.
func NewBreaker(threshold int, cooldown time.Duration) *Breaker {
	return &Breaker{Threshold: max(threshold, 1), Cooldown: cooldown}
}

// Allow reports whether a call may be made at now.
func (b *Breaker) Allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		if now.Sub(b.openedAt) < b.Cooldown {
			return false
		}
		b.state, b.trial = HalfOpen, true
		return true
	case HalfOpen:
		if b.trial {
			return false // one trial at a time
		}
		b.trial = true
		return true
	}
	return true
}

// Success records a successful call.
func (b *Breaker) Success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.failures, b.trial = Closed, 0, false
}

// Failure records a failed call at now.
func (b *Breaker) Failure(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.state == HalfOpen || b.failures >= b.Threshold {
		b.state, b.openedAt, b.trial = Open, now, false
	}
}

// State returns the current state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
