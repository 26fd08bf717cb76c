package logic

import (
	"math"
	"time"
)

// TokenBucket is a clock-free token bucket: it refills at Rate tokens per
// second up to Burst, and every method takes the current time. A zero or
// negative Rate means unlimited. It is not safe for concurrent use; the
// controller's loop is single-threaded.
type TokenBucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewTokenBucket returns a full bucket. burst below 1 is raised to 1 so a
// positive rate always lets something through eventually.
func NewTokenBucket(rate float64, burst int) *TokenBucket {
	b := math.Max(float64(burst), 1)
	return &TokenBucket{rate: rate, burst: b, tokens: b}
}

func (b *TokenBucket) unlimited() bool { return b == nil || b.rate <= 0 }

func (b *TokenBucket) refill(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
}

// Ready reports whether a token is available at now, without taking it.
func (b *TokenBucket) Ready(now time.Time) bool {
	if b.unlimited() {
		return true
	}
	b.refill(now)
	return b.tokens >= 1
}

// Take removes a token at now; call it only after Ready returned true.
func (b *TokenBucket) Take(now time.Time) {
	if b.unlimited() {
		return
	}
	b.refill(now)
	b.tokens = math.Max(0, b.tokens-1)
}
