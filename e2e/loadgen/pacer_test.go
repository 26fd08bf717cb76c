package loadgen

import (
	"math"
	"slices"
	"testing"
	"time"
)

// arrivals drains a fresh pacer's schedule.
func arrivals(s Series, seed uint64, d time.Duration, limit uint64) []time.Duration {
	p := NewPoissonPacer(s, seed, d, limit)
	var out []time.Duration
	for i := uint64(0); ; i++ {
		at, ok := p.Next(i)
		if !ok {
			return out
		}
		out = append(out, at)
	}
}

func TestPoissonPacerRateAndVariation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		series Series
		d      time.Duration
		seed   uint64
	}{
		{"steady 50/s", Series{Starts: []time.Duration{0}, Rates: []float64{50}}, 200 * time.Second, 1},
		{"steady 400/s", Series{Starts: []time.Duration{0}, Rates: []float64{400}}, 30 * time.Second, 7},
		{"a step from 20/s to 200/s", Series{Starts: []time.Duration{0, 500 * time.Second}, Rates: []float64{20, 200}}, 550 * time.Second, 3},
		{"a silent window", Series{Starts: []time.Duration{0, 40 * time.Second, 60 * time.Second}, Rates: []float64{100, 0, 100}}, 100 * time.Second, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := arrivals(tc.series, tc.seed, tc.d, 0)
			if again := arrivals(tc.series, tc.seed, tc.d, 0); !slices.Equal(got, again) {
				t.Fatal("the same seed gave other arrival times")
			}
			if other := arrivals(tc.series, tc.seed+1, tc.d, 0); slices.Equal(got, other) {
				t.Fatal("another seed gave the same arrival times")
			}
			// Per segment: the count within 4 standard deviations of the
			// Poisson expectation, and the inter-arrival times exponential:
			// coefficient of variation 1 within 4 standard errors (the
			// sample CV of n exponential gaps has a standard error of about
			// sqrt(2/n)).
			ends := append(append([]time.Duration(nil), tc.series.Starts[1:]...), tc.d)
			for i, lo := range tc.series.Starts {
				hi := ends[i]
				var seg []float64
				for _, a := range got {
					if a >= lo && a < hi {
						seg = append(seg, a.Seconds())
					}
				}
				want := tc.series.Expected(lo, hi)
				if want == 0 {
					if len(seg) != 0 {
						t.Errorf("segment %d: %d arrivals at rate 0", i, len(seg))
					}
					continue
				}
				if tol := 4 * math.Sqrt(want); math.Abs(float64(len(seg))-want) > tol {
					t.Errorf("segment %d: %d arrivals, want %.0f ± %.0f", i, len(seg), want, tol)
				}
				var gaps []float64
				for j := 1; j < len(seg); j++ {
					gaps = append(gaps, seg[j]-seg[j-1])
				}
				mean, sd := meanSD(gaps)
				tol := 4 * math.Sqrt(2/float64(len(gaps)))
				if cv := sd / mean; math.Abs(cv-1) > tol {
					t.Errorf("segment %d: inter-arrival coefficient of variation %.3f, want 1 ± %.3f", i, cv, tol)
				}
				t.Logf("segment %d: %d arrivals (expected %.0f), CV %.3f", i, len(seg), want, sd/mean)
			}
		})
	}
}

func meanSD(x []float64) (float64, float64) {
	var s, ss float64
	for _, v := range x {
		s += v
	}
	m := s / float64(len(x))
	for _, v := range x {
		ss += (v - m) * (v - m)
	}
	return m, math.Sqrt(ss / float64(len(x)-1))
}

func TestPoissonPacerPace(t *testing.T) {
	s := Series{Starts: []time.Duration{0}, Rates: []float64{10}}
	sched := arrivals(s, 9, 10*time.Second, 0)
	p := NewPoissonPacer(s, 9, 10*time.Second, 3)
	for _, step := range []struct {
		name     string
		elapsed  time.Duration
		hits     uint64
		wantWait time.Duration
		wantStop bool
	}{
		{"waits for the first arrival", 0, 0, sched[0], false},
		{"asked again, the same arrival", sched[0] / 2, 0, sched[0] - sched[0]/2, false},
		{"late: no wait, no catching up by skipping", sched[2] + time.Second, 1, 0, false},
		{"stops at the request limit", sched[2] + time.Second, 3, 0, true},
	} {
		t.Run(step.name, func(t *testing.T) {
			wait, stop := p.Pace(step.elapsed, step.hits)
			if wait != step.wantWait || stop != step.wantStop {
				t.Errorf("Pace = %s, %v; want %s, %v", wait, stop, step.wantWait, step.wantStop)
			}
		})
	}
	if got := len(arrivals(s, 9, 2*time.Second, 0)); got == 0 || got > 40 {
		t.Errorf("%d arrivals in 2 s at 10/s", got)
	}
	for _, a := range sched {
		if a > 10*time.Second {
			t.Errorf("arrival at %s, past the duration", a)
		}
	}
}

func BenchmarkPoissonPacer(b *testing.B) {
	s := Series{Rates: make([]float64, 7200), Starts: make([]time.Duration, 7200)}
	for i := range s.Rates {
		s.Starts[i], s.Rates[i] = time.Duration(i)*time.Second, 100+float64(i%50)
	}
	p := NewPoissonPacer(s, 1, 2*time.Hour, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, stop := p.Pace(0, uint64(i)); stop {
			p = NewPoissonPacer(s, uint64(i), 2*time.Hour, 0)
		}
	}
}
