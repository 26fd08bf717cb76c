package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Trace is a load trace: the mean arrival rate (requests/s) of each window.
// The simulator draws the actual arrivals of a window from a Poisson
// distribution around Rates[i].
type Trace struct {
	Name  string
	Step  time.Duration
	Rates []float64
}

// Rate returns the rate of window i, holding the last value past the end.
func (t *Trace) Rate(i int) float64 {
	switch {
	case len(t.Rates) == 0:
		return 0
	case i < 0:
		return t.Rates[0]
	case i >= len(t.Rates):
		return t.Rates[len(t.Rates)-1]
	}
	return t.Rates[i]
}

// Mean returns the mean rate of the trace.
func (t *Trace) Mean() float64 {
	if len(t.Rates) == 0 {
		return 0
	}
	var s float64
	for _, r := range t.Rates {
		s += r
	}
	return s / float64(len(t.Rates))
}

// TraceKind names a synthetic trace shape.
type TraceKind string

const (
	Steady     TraceKind = "steady"
	Diurnal    TraceKind = "diurnal"
	Bursty     TraceKind = "bursty"
	Ramp       TraceKind = "ramp"
	FlashCrowd TraceKind = "flash-crowd"
	StepChange TraceKind = "step-change"
)

// TraceKinds lists the synthetic shapes in a fixed order.
func TraceKinds() []TraceKind {
	return []TraceKind{Steady, Diurnal, Bursty, Ramp, FlashCrowd, StepChange}
}

// TraceOptions parameterise a synthetic trace.
type TraceOptions struct {
	// Mean is the long-run mean rate (requests/s) the shape is scaled to.
	Mean  float64
	Steps int
	Step  time.Duration
	// Period is the diurnal period; zero means the whole trace is one period.
	Period time.Duration
	Seed   uint64
}

// GenerateTrace builds a trace of the given kind. The shapes are:
//   - steady: Mean throughout;
//   - diurnal: Mean·(1 + 0.6·sin(2πt/Period)) with 5% noise;
//   - bursty: a two-state Markov-modulated Poisson process, a calm state at
//     0.6·Mean and a burst state at 3·Mean, entered 1 window in 40 and left 1
//     in 8 on average, so the stationary mean is ≈ Mean;
//   - ramp: linear from 0.2·Mean to 1.8·Mean;
//   - flash-crowd: 0.6·Mean, then at a random time in the middle third a
//     spike to 5·Mean within a minute, decaying with a 10-minute time constant;
//   - step-change: 0.5·Mean, then 1.5·Mean from a random time in the middle
//     third.
func GenerateTrace(kind TraceKind, o TraceOptions) (Trace, error) {
	if o.Steps <= 0 || o.Step <= 0 {
		return Trace{}, fmt.Errorf("trace %s: steps and step must be > 0, got %d and %s", kind, o.Steps, o.Step)
	}
	if !(o.Mean >= 0) || math.IsInf(o.Mean, 0) {
		return Trace{}, fmt.Errorf("trace %s: mean must be finite and >= 0, got %g", kind, o.Mean)
	}
	rng := rand.New(rand.NewPCG(o.Seed, splitmix(o.Seed^0x7472616365)))
	dt := o.Step.Seconds()
	n := o.Steps
	rates := make([]float64, n)
	switch kind {
	case Steady:
		for i := range rates {
			rates[i] = o.Mean
		}
	case Diurnal:
		period := o.Period.Seconds()
		if period <= 0 {
			period = float64(n) * dt
		}
		phase := rng.Float64() * 2 * math.Pi
		for i := range rates {
			t := float64(i) * dt
			rates[i] = o.Mean * (1 + 0.6*math.Sin(2*math.Pi*t/period+phase)) * (1 + 0.05*rng.NormFloat64())
		}
	case Bursty:
		// Stationary burst probability p = (1/40)/(1/40+1/8) = 1/6, so the
		// mean is (5/6·0.6 + 1/6·3)·Mean = Mean.
		burst := false
		for i := range rates {
			if burst {
				burst = rng.Float64() >= 1.0/8
			} else {
				burst = rng.Float64() < 1.0/40
			}
			if burst {
				rates[i] = 3 * o.Mean
			} else {
				rates[i] = 0.6 * o.Mean
			}
		}
	case Ramp:
		for i := range rates {
			f := 0.0
			if n > 1 {
				f = float64(i) / float64(n-1)
			}
			rates[i] = o.Mean * (0.2 + 1.6*f)
		}
	case FlashCrowd:
		t0 := n/3 + rng.IntN(n/3+1)
		rise := math.Max(60/dt, 1)
		decay := 600 / dt
		for i := range rates {
			r := 0.6
			if i >= t0 {
				k := float64(i - t0)
				r += 4.4 * math.Min(k/rise, 1) * math.Exp(-math.Max(k-rise, 0)/decay)
			}
			rates[i] = o.Mean * r
		}
	case StepChange:
		t0 := n/3 + rng.IntN(n/3+1)
		for i := range rates {
			if i < t0 {
				rates[i] = 0.5 * o.Mean
			} else {
				rates[i] = 1.5 * o.Mean
			}
		}
	default:
		return Trace{}, fmt.Errorf("unknown trace kind %q", kind)
	}
	for i, r := range rates {
		rates[i] = math.Max(r, 0)
	}
	return Trace{Name: string(kind), Step: o.Step, Rates: rates}, nil
}
