package logic

import (
	"time"

	"golang.org/x/time/rate"
)

// TokenBucket is a token bucket whose every method takes the current time,
// so the controller's clock decides (and tests need no sleeps). It refills at
// rate tokens per second up to burst; a zero or negative rate means
// unlimited. The bucket itself is golang.org/x/time/rate's Limiter; this type
// only adds the updater's "look, then take" use of it and the nil-is-unlimited
// convention.
type TokenBucket struct {
	l *rate.Limiter
}

// NewTokenBucket returns a full bucket. burst below 1 is raised to 1 so a
// positive rate always lets something through eventually.
func NewTokenBucket(r float64, burst int) *TokenBucket {
	limit := rate.Limit(r)
	if r <= 0 {
		limit = rate.Inf
	}
	return &TokenBucket{l: rate.NewLimiter(limit, max(burst, 1))}
}

func (b *TokenBucket) unlimited() bool { return b == nil || b.l.Limit() == rate.Inf }

// Ready reports whether a token is available at now, without taking it.
func (b *TokenBucket) Ready(now time.Time) bool {
	if b.unlimited() {
		return true
	}
	return b.l.TokensAt(now) >= 1
}

// Take removes a token at now; call it only after Ready returned true.
func (b *TokenBucket) Take(now time.Time) {
	if b.unlimited() {
		return
	}
	b.l.AllowN(now, 1)
}
