package sim

import (
	"math/rand/v2"
	"testing"
)

// TestServingPastTimeout is App.ServesTimedOut's validation case against
// the discrete-event reference, on the scenario hack/memlag.sh ran on the
// real test app: a 200m pod of 12-ms requests (16.7 a second) offered 30 a
// second for 30 s, then 15 a second (a second replica took half) for 30 s,
// then nothing. The real app does not cancel a request whose client gave
// up; it answered almost nothing from 5-10 s into the overload on, nothing
// at 15 a second behind what it held, and served what it held for 18-26 s
// after the last arrival (docs/real-node-rounds.md, 2026-12-07). The
// reference that serves requests past their timeout does the same: under
// processor sharing every request held gets c/n, so while n grows hardly
// any finishes. The held queue must follow it; the fluid backlog, which
// drops at arrival a request it cannot answer within the timeout, keeps
// answering at capacity (the default, kept as it was).
func TestServingPastTimeout(t *testing.T) {
	const (
		cpu, cpuSec, timeout, dt = 0.2, 0.012, 10.0, 15.0
		seeds                    = 8
	)
	rates := []float64{30, 30, 15, 15, 0, 0}
	var keep, cancel [6]desWindow
	var arrived [6]float64
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 99))
		var arrivals, demands []float64
		for i, lam := range rates {
			// A Poisson process: exponential gaps at the window's rate.
			for at := float64(i) * dt; lam > 0; {
				if at += r.ExpFloat64() / lam; at >= float64(i+1)*dt {
					break
				}
				arrivals = append(arrivals, at)
				demands = append(demands, cpuSec)
				arrived[i] += 1.0 / seeds
			}
		}
		for _, c := range []struct {
			into   *[6]desWindow
			cancel bool
		}{{&keep, false}, {&cancel, true}} {
			var out [6]desWindow
			runDESServing(out[:], arrivals, demands, cpu, timeout, dt, c.cancel)
			for i := range out {
				c.into[i].Completed += out[i].Completed / seeds
				c.into[i].TimedOut += out[i].TimedOut / seeds
				c.into[i].InFlight += out[i].InFlight / seeds
			}
		}
	}
	run := func(serves bool) (out [6]PodWindow) {
		a := desApp(cpuSec, 1)
		a.ServesTimedOut = serves
		in := PodInput{Held: &HeldQueue{}}
		for i, lam := range rates {
			in.Rate, in.Arrived, in.CPU = lam, arrived[i], cpu
			out[i] = a.ServePod(in, dt, timeout)
			in.Backlog = out[i].Backlog
		}
		return out
	}
	model, held := run(false), run(true)
	for i := range rates {
		t.Logf("window %d: held queue answered %.0f, lost %.0f, in flight %.0f, zombies at the end %.0f; the reference lost %.0f",
			i, held[i].Completed, held[i].TimedOut, held[i].InFlight, held[i].Zombies, keep[i].TimedOut)
	}
	var answered [4]float64
	for i := range rates {
		t.Logf("window %d: arrived %.0f; answered: serving past the timeout %.0f, cancelling %.0f, fluid backlog %.0f; in flight %.0f, %.0f, %.0f",
			i, arrived[i], keep[i].Completed, cancel[i].Completed, model[i].Completed, keep[i].InFlight, cancel[i].InFlight, model[i].InFlight)
		answered[0] += keep[i].Completed
		answered[1] += cancel[i].Completed
		answered[2] += model[i].Completed
		answered[3] += held[i].Completed
	}
	capacity := cpu / cpuSec * dt
	for i := 1; i <= 3; i++ {
		for name, c := range map[string]float64{"the reference": keep[i].Completed, "the held queue": held[i].Completed} {
			if c > arrived[i]/10 {
				t.Errorf("window %d: %s answered %.0f of %.0f, want at most a tenth (the real app's collapse)", i, name, c, arrived[i])
			}
		}
	}
	// The held queue beside the reference: answered over the run within
	// 25%; lost and held (which sets the working set) window by window
	// within 10% and 20% wherever the reference has a tenth of the peak.
	if r := answered[3] / answered[0]; r < 0.75 || r > 1.25 {
		t.Errorf("answered over the run: held queue %.0f, reference %.0f (%.2f×), want within 25%%", answered[3], answered[0], r)
	}
	var peak float64
	for i := range rates {
		peak = max(peak, keep[i].InFlight)
	}
	for i := range rates {
		if keep[i].TimedOut >= 100 {
			if r := held[i].TimedOut / keep[i].TimedOut; r < 0.9 || r > 1.1 {
				t.Errorf("window %d: lost %.0f, reference %.0f (%.2f×), want within 10%%", i, held[i].TimedOut, keep[i].TimedOut, r)
			}
		}
		if keep[i].InFlight >= peak/10 {
			if r := held[i].InFlight / keep[i].InFlight; r < 0.8 || r > 1.2 {
				t.Errorf("window %d: in flight %.0f, reference %.0f (%.2f×), want within 20%%", i, held[i].InFlight, keep[i].InFlight, r)
			}
		}
	}
	// Cancelling wastes the work done on the requests it gives up, so it
	// collapses too, but recovers at 15 a second once it has cancelled
	// what it held; the real app, like the reference that keeps serving,
	// answered nothing at 15 a second.
	if want := 0.8 * min(capacity, arrived[3]); cancel[3].Completed < want {
		t.Errorf("window 3: cancelling answered %.0f, want at least %.0f (recovered)", cancel[3].Completed, want)
	}
	// The fluid backlog answers at capacity all through the overload, and
	// several times what either reference answers over the run.
	for i := 1; i <= 2; i++ {
		if model[i].Completed < 0.9*capacity {
			t.Errorf("window %d: the fluid backlog answered %.0f, want at capacity %.0f", i, model[i].Completed, capacity)
		}
	}
	if answered[2] < 2*answered[1] || answered[2] < 4*answered[0] {
		t.Errorf("answered over the run: fluid backlog %.0f, cancelling reference %.0f, serving past the timeout %.0f: want the fluid backlog several times either", answered[2], answered[1], answered[0])
	}
}
