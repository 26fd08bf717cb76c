package sim

import (
	"math"
	"strings"
	"testing"
)

// TestCFSIdleBursts is App.IdlePeriod's case: the pod's idle CPU as a job
// every period in the CFS quota model.
func TestCFSIdleBursts(t *testing.T) {
	const (
		cpuSec = 0.0117
		limit  = 0.2
		base   = 0.031 // a slower machine's idle CPU per pod
	)
	node := cfsNode{cores: 2, tick: 0.004}
	bursts := cfsIdle{burst: base * 2, period: 2}
	t.Run("the bursts spend the quota", func(t *testing.T) {
		// The requests at ρ of what the bursts leave, and the bursts:
		// ρ·(limit − base) + base cores over the run.
		const rho = 0.5
		_, use := cfsSimulate(cpuSec, 0, limit, node, bursts, rho, 20000, 100)
		want := rho*(limit-base) + base
		if got := use.used / use.elapsed; math.Abs(got/want-1) > 0.03 {
			t.Errorf("the pod used %.4f cores, want %.4f (the requests' %.4f and the bursts' %.3f)", got, want, rho*(limit-base), base)
		}
	})
	t.Run("a burst holds the requests up at a light load", func(t *testing.T) {
		// A 62-ms burst spends three CFS periods' quota of a 0.2-core
		// pod, so the requests that meet it wait periods where, spread
		// evenly, the same idle CPU slows each a little: at ρ 0.3 the p95
		// is 1.9× (measured 2026-12-07); at a heavy load the bursts leave
		// the whole quota between them and the p95 falls below.
		p95 := func(idle cfsIdle, rho float64) float64 {
			l := limit
			if idle.period == 0 {
				l = limit - base
			}
			return quantileOf(cfsQueue(cpuSec, 0, l, node, idle, rho, 50000, 1000), 0.95)
		}
		if even, b := p95(cfsIdle{}, 0.3), p95(bursts, 0.3); !(b > 1.5*even) {
			t.Errorf("at ρ 0.3 the p95 with bursts %.1f ms, spread %.1f ms: want at least 1.5× as long", b*1e3, even*1e3)
		}
		if even, b := p95(cfsIdle{}, 0.8), p95(bursts, 0.8); !(b < even) {
			t.Errorf("at ρ 0.8 the p95 with bursts %.1f ms, spread %.1f ms: want shorter", b*1e3, even*1e3)
		}
	})
	t.Run("no period is the model without bursts", func(t *testing.T) {
		a := cfsQueue(cpuSec, 0, limit, node, cfsIdle{}, 0.5, 5000, 100)
		b := cfsQueue(cpuSec, 0, limit, node, cfsIdle{burst: 0.062}, 0.5, 5000, 100)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("response %d: %g without a period, %g without bursts", i, b[i], a[i])
			}
		}
	})
	t.Run("ServePod", func(t *testing.T) {
		p95 := func(d Demand, podCPU float64) float64 {
			a := App{Demand: d}
			w := a.ServePod(PodInput{Rate: 0.3 * (podCPU - base) / cpuSec, Arrived: 1, CPU: podCPU, Cores: 2, Tick: 0.004}, 1, math.Inf(1))
			return w.Own + w.Stationary*math.Log(20)
		}
		even := Demand{CPUSeconds: cpuSec, CPUBurst: true, BaseCPU: base}
		withBursts := even
		withBursts.IdlePeriod = 2
		if e, b := p95(even, limit), p95(withBursts, limit); !(b > 1.5*e) {
			t.Errorf("p95 %.1f ms with IdlePeriod, %.1f ms without: want at least 1.5×", b*1e3, e*1e3)
		}
		// A burst of an exec probe's size, the rest spread evenly, fits in
		// a CFS period's quota beside the requests and hardly moves the
		// p95 (75.7 ms either way, measured 2026-12-07); checked against
		// the burst of all of it, which does.
		part := withBursts
		part.IdleBurst = 0.013
		if e, p := p95(even, limit), p95(part, limit); math.Abs(p/e-1) > 0.1 {
			t.Errorf("p95 %.1f ms with 13-ms bursts, %.1f ms spread evenly: want within 10%%", p*1e3, e*1e3)
		}
		// A pod its idle CPU nearly fills serves at a crawl, evenly.
		if e, b := p95(even, base), p95(withBursts, base); e != b {
			t.Errorf("a pod of its idle CPU: p95 %g with IdlePeriod, %g without: want the same", b, e)
		}
	})
}

func TestIdleValidate(t *testing.T) {
	for _, tc := range []struct {
		name          string
		period, burst float64
		want          string // "" valid
	}{
		{"spread evenly", 0, 0, ""},
		{"every 2 s", 2, 0, ""},
		{"every CFS period", cfsPeriod, 0, ""},
		{"under a CFS period", 0.05, 0, "idlePeriod must be"},
		{"negative period", -1, 0, "idlePeriod must be"},
		{"NaN period", math.NaN(), 0, "idlePeriod must be"},
		{"infinite period", math.Inf(1), 0, "idlePeriod must be"},
		{"an exec probe's burst", 2, 0.009, ""},
		{"negative burst", 2, -0.001, "idleBurst must be"},
		{"NaN burst", 2, math.NaN(), "idleBurst must be"},
		{"infinite burst", 2, math.Inf(1), "idleBurst must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := desApp(0.012, 1)
			a.IdlePeriod, a.IdleBurst = tc.period, tc.burst
			err := a.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
