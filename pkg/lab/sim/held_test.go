package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestHeldQueueConserves(t *testing.T) {
	cases := []struct {
		name               string
		rate, c, work, dt  float64
		windows            int
		kill               float64 // 0: none
		wantLost, wantDone bool
	}{
		{name: "below capacity: all answered", rate: 10, c: 0.2, work: 0.012, dt: 15, windows: 20, wantDone: true},
		{name: "overload: lost, and held grows", rate: 30, c: 0.2, work: 0.012, dt: 15, windows: 20, wantLost: true, wantDone: true},
		// 1-s sub-steps for an hour of overload: far more cohorts than
		// maxCohorts, so the oldest merge.
		{name: "long overload merges cohorts", rate: 5, c: 0.01, work: 0.012, dt: 60, windows: 60, wantLost: true},
		// Killed at 200 held, before any request has waited the timeout.
		{name: "overload killed at 200 held", rate: 30, c: 0.2, work: 0.012, dt: 15, windows: 8, kill: 200, wantDone: true},
	}
	for _, c := range cases {
		for _, quantum := range []float64{0, 0.005} {
			name := c.name
			if quantum > 0 {
				name += ", in turns"
			}
			t.Run(name, func(t *testing.T) {
				conserves(t, c.rate, c.c, c.work, c.dt, c.windows, c.kill, quantum, c.wantLost, c.wantDone)
			})
		}
	}
}

// conserves runs a held queue for windows of dt seconds at about rate
// arrivals a second, served in turns of quantum (0: by processor
// sharing), and checks serve's invariant and bounds each window.
func conserves(t *testing.T, rate, c, work, dt float64, windows int, killAt, quantum float64, wantLost, wantDone bool) {
	var q HeldQueue
	r := rand.New(rand.NewPCG(1, 2))
	var done, lost float64
	kills := 0
	kill := math.Inf(1)
	if killAt > 0 {
		kill = killAt
	}
	for i := range windows {
		liveBefore, lostBefore := q.counts()
		arrived := rate * dt * (0.8 + 0.4*r.Float64())
		w := q.serve(arrived, work, c, dt, 10, kill, quantum)
		liveAfter, lostAfter := q.counts()
		if d := w.Completed + w.TimedOut + w.Unserved + liveAfter - arrived - liveBefore; math.Abs(d) > 1e-6*(arrived+liveBefore+1) {
			t.Fatalf("window %d: completed %g + timed out %g + unserved %g + live %g ≠ arrived %g + live before %g (off by %g)", i, w.Completed, w.TimedOut, w.Unserved, liveAfter, arrived, liveBefore, d)
		}
		if w.KilledAt >= 0 {
			// The pod restarts empty (serveHeld resets it).
			if w.Peak <= kill || w.KilledAt >= dt {
				t.Fatalf("window %d: killed at %g s with %g held, want more than %g within the window", i, w.KilledAt, w.Peak, kill)
			}
			kills++
			q.reset()
		} else if w.Peak > kill {
			t.Fatalf("window %d: %g held, over %g, and no kill", i, w.Peak, kill)
		}
		if w.Work > c*dt*(1+1e-9) || w.Work < 0 {
			t.Fatalf("window %d: work %g outside [0, %g]", i, w.Work, c*dt)
		}
		if lostAfter < 0 || w.Mean < 0 || w.Peak+1e-9 < w.Mean {
			t.Fatalf("window %d: zombies %g (were %g), mean held %g, peak %g", i, lostAfter, lostBefore, w.Mean, w.Peak)
		}
		if n := len(q.cohorts) - q.head; n > maxCohorts+1 {
			t.Fatalf("window %d: %d cohorts, want at most %d", i, n, maxCohorts+1)
		}
		done += w.Completed
		lost += w.TimedOut
	}
	if (kills > 0) != (killAt > 0) {
		t.Errorf("%d kills with a kill at %g held", kills, killAt)
	}
	if (lost > 0) != wantLost || (done > 0) != wantDone {
		t.Errorf("answered %g, lost %g; want answered: %v, lost: %v", done, lost, wantDone, wantLost)
	}
}

func TestHeldQueueDrainsInArrivalOrder(t *testing.T) {
	// Two cohorts of 10 requests, the first with 0.1 CPU-seconds each to
	// go, the second 0.15, at 1 core: every request held gets the same
	// CPU, so after 1 s each has had 0.05 and none is done; after 2 s the
	// first cohort is; the second's remaining 0.05 each takes the third
	// second's first half.
	var q HeldQueue
	q.push(cohort{count: 10, finish: 0.1})
	q.push(cohort{count: 10, finish: 0.15, born: 0.5})
	for i, want := range []struct{ done, held, work float64 }{{0, 20, 1}, {10, 10, 1}, {10, 0, 0.5}} {
		w := q.serve(0, 0.1, 1, 1, 10, math.Inf(1), 0)
		if w.Completed != want.done || q.Len() != want.held || math.Abs(w.Work-want.work) > 1e-9 {
			t.Errorf("second %d: answered %g, held %g, work %g; want %g, %g, %g", i+1, w.Completed, q.Len(), w.Work, want.done, want.held, want.work)
		}
	}
}

func TestHeldQueueTurns(t *testing.T) {
	// Two cohorts of 10 requests of 0.01 CPU-seconds each, at 0.1 core (a
	// second serves 0.1 CPU-seconds). In turns of the whole request the
	// first cohort is done in the first second, the second in the next, as
	// first come, first served; in turns of half of it, each cohort's
	// first turns take the first second and their second turns the next,
	// so none is done before the second second, when all are, as by
	// processor sharing (TestHeldQueueDrainsInArrivalOrder).
	for _, tc := range []struct {
		quantum float64
		done    [2]float64
	}{
		{0.01, [2]float64{10, 10}},
		{0.005, [2]float64{0, 20}},
	} {
		var q HeldQueue
		q.push(cohort{count: 10, finish: 0.01})
		q.push(cohort{count: 10, finish: 0.01})
		for i, want := range tc.done {
			w := q.serve(0, 0.01, 0.1, 1, 10, math.Inf(1), tc.quantum)
			if math.Abs(w.Completed-want) > 1e-9 || math.Abs(w.Work-0.1) > 1e-9 {
				t.Errorf("quantum %g, second %d: answered %g, work %g; want %g, 0.1", tc.quantum, i+1, w.Completed, w.Work, want)
			}
		}
		if q.Len() > 1e-9 {
			t.Errorf("quantum %g: %g still held", tc.quantum, q.Len())
		}
	}
}

func TestHeldQuantumValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		quantum float64
		want    string // "" valid
	}{
		{"equal share", 0, ""},
		{"turns of 5 ms", 0.005, ""},
		{"turns longer than a request", 1, ""},
		{"negative", -0.001, "heldQuantum must be"},
		{"NaN", math.NaN(), "heldQuantum must be"},
		{"infinite", math.Inf(1), "heldQuantum must be"},
		{"finer than a 64th of a request", 0.012 / 100, "under a 64th"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := desApp(0.012, 1)
			a.ServesTimedOut, a.HeldQuantum = true, tc.quantum
			err := a.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
