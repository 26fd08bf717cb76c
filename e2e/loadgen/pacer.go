package loadgen

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// PoissonPacer paces a vegeta attack with the arrivals of a
// non-homogeneous Poisson process whose rate follows a Series: each
// inter-arrival is exponential at the current rate, drawn by inverting the
// integrated rate (an Exp(1) draw is spent across windows of different
// rates), so the mean rate of every window matches the series and the
// arrivals are Poisson within it.
//
// The arrival times depend only on the series and the seed, never on when
// responses come back: Pace tells the attacker to wait until the next
// scheduled arrival, or not at all when it is late, so a slow server does
// not slow the arrivals. It stops after Limit arrivals or past Duration.
// Vegeta calls Pace from one goroutine; a PoissonPacer is not safe for
// concurrent use.
type PoissonPacer struct {
	series   Series
	rng      *rand.Rand
	duration time.Duration
	limit    uint64
	// next is the scheduled time of arrival number idx (0-based); +Inf
	// once the series has no more arrivals.
	next float64
	idx  uint64
}

var _ vegeta.Pacer = (*PoissonPacer)(nil)

// NewPoissonPacer returns a pacer for s seeded with seed, stopping after
// limit arrivals (0: no limit) or at d.
func NewPoissonPacer(s Series, seed uint64, d time.Duration, limit uint64) *PoissonPacer {
	p := &PoissonPacer{series: s, rng: rand.New(rand.NewPCG(seed, seed^0x6c6f616467656e)), duration: d, limit: limit}
	p.next = p.after(0)
	return p
}

// after returns the time of the first arrival after t (seconds): t plus
// the time it takes the integrated rate to grow by an Exp(1) draw.
func (p *PoissonPacer) after(t float64) float64 {
	e := p.rng.ExpFloat64()
	starts := p.series.Starts
	for {
		if t >= p.duration.Seconds() {
			return math.Inf(1)
		}
		// The window holding t: the last start <= t (rate 0 before the
		// first), ending at the next start.
		i := sort.Search(len(starts), func(i int) bool { return starts[i].Seconds() > t })
		rate, end := 0.0, math.Inf(1)
		if i > 0 {
			rate = p.series.Rates[i-1]
		}
		if i < len(starts) {
			end = starts[i].Seconds()
		}
		if rate > 0 && t+e/rate <= end {
			return t + e/rate
		}
		if math.IsInf(end, 1) {
			return math.Inf(1)
		}
		e -= rate * (end - t)
		t = end
	}
}

// Next returns the scheduled offset of arrival number i (0-based), and
// false when there is none. It advances the pacer, so i must not decrease.
func (p *PoissonPacer) Next(i uint64) (time.Duration, bool) {
	for p.idx < i && !math.IsInf(p.next, 1) {
		p.next = p.after(p.next)
		p.idx++
	}
	if math.IsInf(p.next, 1) || p.next > p.duration.Seconds() || (p.limit > 0 && i >= p.limit) {
		return 0, false
	}
	return time.Duration(p.next * float64(time.Second)), true
}

// Pace implements vegeta.Pacer: hits arrivals have been sent after elapsed;
// wait until arrival number hits is due.
func (p *PoissonPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	at, ok := p.Next(hits)
	if !ok {
		return 0, true
	}
	return max(at-elapsed, 0), false
}

// Rate implements vegeta.Pacer: the series' rate at elapsed.
func (p *PoissonPacer) Rate(elapsed time.Duration) float64 { return p.series.Rate(elapsed) }
