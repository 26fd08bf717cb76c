package sim

import "math"

// heldStep is the longest sub-step of a window in the held queue: arrivals
// join, the CPU is shared and ages are checked this often.
const heldStep = 1.0

// maxCohorts bounds a held queue's cohorts; beyond it two of the oldest
// merge (push).
const maxCohorts = 1024

// cohort is a fluid group of requests that arrived together: count of
// them, each done once the queue's virtual time reaches finish (served in
// turns: finish is the work each still needs, and the virtual time stays
// 0), born at the queue's time born; lost once older than the timeout
// (counted then).
type cohort struct {
	count, finish, born float64
	lost                bool
}

// HeldQueue is the state of a pod whose app serves every request it holds
// to the end, even past its client's timeout (App.ServesTimedOut): the
// requests beyond the stationary queue, in cohorts by arrival. By
// processor sharing every request held receives the same CPU, so the
// queue keeps one virtual time V (the CPU-seconds each request held has
// received since V began) and a cohort that arrived at V0 with work w is
// done at V0 + w: with equal work, cohorts finish in arrival order. In
// turns (App.HeldQuantum) the cohorts form a ring: the one at the head
// takes a turn, each of its requests served for the quantum, and goes to
// the tail, or is done. The zero value is an empty queue.
type HeldQueue struct {
	// By processor sharing, by arrival and so by finish; in turns, in
	// the ring's order from head.
	cohorts []cohort
	head    int // cohorts[:head] are done (or, in turns, moved to the tail)
	v, now  float64
}

// Len is the number of requests held, live and lost.
func (q *HeldQueue) Len() float64 {
	var n float64
	for _, c := range q.cohorts[q.head:] {
		n += c.count
	}
	return n
}

// reset empties the queue (the pod restarted).
func (q *HeldQueue) reset() {
	q.cohorts, q.head, q.v, q.now = q.cohorts[:0], 0, 0, 0
}

// counts returns the live and lost requests held.
func (q *HeldQueue) counts() (live, lost float64) {
	for _, c := range q.cohorts[q.head:] {
		if c.lost {
			lost += c.count
		} else {
			live += c.count
		}
	}
	return live, lost
}

// heldWindow is what a held queue did in one window.
type heldWindow struct {
	// Completed answered their clients within the timeout; TimedOut were
	// lost to them in the window (they may still be held).
	Completed, TimedOut float64
	// Sojourn is the completed requests' total time in the queue (s).
	Sojourn float64
	// Work is the CPU-seconds the window's service took.
	Work float64
	// Mean and Peak are the time-average and the largest number held.
	Mean, Peak float64
	// KilledAt is when in the window the pod was OOM-killed (seconds), -1
	// if it was not; Unserved are the arrivals after it, which failed.
	KilledAt, Unserved float64
}

// serve runs one window of dt seconds: arrived requests join in equal
// parts at each sub-step, each needing work CPU-seconds; the pod serves
// with c cores, shared equally by every request held (quantum 0) or in
// turns of quantum CPU-seconds a request; a live request older than
// timeout is lost to its client and served to the end all the same. Once
// more than kill requests are held the pod is OOM-killed: the window stops
// there, with what it holds as it was.
//
// Invariant: Completed + TimedOut + Unserved + live' = arrived + live,
// where live is what counts() returns before and live' after.
func (q *HeldQueue) serve(arrived, work, c, dt, timeout, kill, quantum float64) heldWindow {
	w := heldWindow{KilledAt: -1}
	k := max(1, int(math.Ceil(dt/heldStep-1e-9)))
	h := dt / float64(k)
	n := q.Len()
	for i := range k {
		if a := arrived / float64(k); a > 0 {
			q.push(cohort{count: a, finish: q.v + work, born: q.now + h/2})
			n += a
		}
		w.Peak = max(w.Peak, n)
		if n > kill {
			// Killed as this sub-step's arrivals came: the later ones
			// find no pod.
			w.KilledAt = float64(i) * h
			w.Unserved = arrived / float64(k) * float64(k-i-1)
			break
		}
		start := n
		var spent float64
		if quantum > 0 {
			spent, n = q.turns(&w, c*h, c, n, quantum, timeout)
		} else {
			spent, n = q.share(&w, c*h, c, n, timeout)
		}
		if n < 1e-9 {
			n = 0
		}
		w.Work += spent
		w.Mean += (start + n) / 2 * h / dt // the sub-step's held, roughly
		q.now += h
		for i := q.head; i < len(q.cohorts); i++ {
			if f := &q.cohorts[i]; !f.lost && q.now-f.born > timeout {
				f.lost = true
				w.TimedOut += f.count
			}
		}
		w.Peak = max(w.Peak, n)
	}
	q.compact()
	return w
}

// share spends budget CPU-seconds (c cores over a sub-step) by water-
// filling: every request held gets the same CPU until the front cohort is
// done, which leaves the rest more. It returns the CPU spent and the
// requests still held of the n held before.
func (q *HeldQueue) share(w *heldWindow, budget, c, n, timeout float64) (spent, held float64) {
	for budget > 0 && q.head < len(q.cohorts) {
		f := &q.cohorts[q.head]
		need := (f.finish - q.v) * n
		if need > budget {
			q.v += budget / n
			spent += budget
			break
		}
		q.v = f.finish
		spent, budget = spent+need, budget-need
		q.done(w, *f, q.now+spent/c, timeout) // the CPU runs at c throughout
		n -= f.count
		q.head++
	}
	return spent, n
}

// turns spends budget CPU-seconds (c cores over a sub-step) in turns of
// quantum CPU-seconds a request, around the ring from its head: a cohort
// whose requests have all had their turn goes to the tail, or is done; a
// budget that ends within a cohort splits it, the part served going to the
// tail. Requests that arrive wait for the whole ring's turns, as a run
// queue's newcomers do. It returns what share returns.
func (q *HeldQueue) turns(w *heldWindow, budget, c, n, quantum, timeout float64) (spent, held float64) {
	for budget > 1e-15 && q.head < len(q.cohorts) {
		f := q.cohorts[q.head]
		turn := min(quantum, f.finish)
		if need := f.count * turn; need > budget {
			part := f.count * budget / need
			q.cohorts[q.head].count -= part
			f.count = part
			spent, budget = spent+budget, 0
		} else {
			q.head++
			spent, budget = spent+need, budget-need
		}
		if f.finish -= turn; f.finish > 1e-12 {
			// A split adds a cohort: bounded as push bounds them.
			if len(q.cohorts)-q.head >= maxCohorts {
				q.merge()
			}
			q.cohorts = append(q.cohorts, f)
			continue
		}
		q.done(w, f, q.now+spent/c, timeout)
		n -= f.count
	}
	return spent, n
}

// done counts cohort f's requests, served to the end at time at: answered,
// or lost to their clients if they were not already.
func (q *HeldQueue) done(w *heldWindow, f cohort, at, timeout float64) {
	switch {
	case f.lost:
	case at-f.born <= timeout:
		w.Completed += f.count
		w.Sojourn += f.count * max(at-f.born, 0)
	default:
		// Done, but after its client gave up.
		w.TimedOut += f.count
	}
}

// push adds a cohort, merging two of the oldest held when there are too
// many (their requests then finish and time out together, as one). Two
// cohorts merge only if both are lost or both live, so no request is
// counted lost twice: by processor sharing the lost cohorts are the
// oldest, a prefix, so the first such pair is at the head or next to it;
// in turns, lost and live may alternate around the ring, and with no such
// pair the queue grows past the bound instead.
func (q *HeldQueue) push(c cohort) {
	if len(q.cohorts)-q.head >= maxCohorts {
		q.merge()
	}
	q.cohorts = append(q.cohorts, c)
}

// merge merges the first two neighbouring cohorts from the head that are
// both lost or both live.
func (q *HeldQueue) merge() {
	i := q.head
	for i+1 < len(q.cohorts) && q.cohorts[i].lost != q.cohorts[i+1].lost {
		i++
	}
	if i+1 >= len(q.cohorts) {
		return
	}
	a, b := q.cohorts[i], q.cohorts[i+1]
	m := a.count + b.count
	q.cohorts[i+1] = cohort{
		count:  m,
		finish: (a.finish*a.count + b.finish*b.count) / m,
		born:   (a.born*a.count + b.born*b.count) / m,
		lost:   b.lost,
	}
	// Drop cohort i: move what is before it up by one.
	copy(q.cohorts[q.head+1:i+1], q.cohorts[q.head:i])
	q.head++
}

// compact drops the done cohorts and rebases the clocks, so the slice and
// the numbers stay bounded over a long run.
func (q *HeldQueue) compact() {
	q.cohorts = q.cohorts[:copy(q.cohorts, q.cohorts[q.head:])]
	q.head = 0
	for i := range q.cohorts {
		q.cohorts[i].finish -= q.v
		q.cohorts[i].born -= q.now
	}
	q.v, q.now = 0, 0
}
