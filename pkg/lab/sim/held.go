package sim

import "math"

// heldStep is the longest sub-step of a window in the held queue: arrivals
// join, the CPU is shared and ages are checked this often.
const heldStep = 1.0

// maxCohorts bounds a held queue's cohorts; beyond it two of the oldest
// merge (push).
const maxCohorts = 1024

// cohort is a fluid group of requests that arrived together: count of
// them, each done once the queue's virtual time reaches finish, born at
// the queue's time born; lost once older than the timeout (counted then).
type cohort struct {
	count, finish, born float64
	lost                bool
}

// HeldQueue is the state of a pod whose app serves every request it holds
// by processor sharing, to the end, even past its client's timeout
// (App.ServesTimedOut): the requests beyond the stationary queue, in
// cohorts by arrival. Every request held receives the same CPU, so the
// queue keeps one virtual time V (the CPU-seconds each request held has
// received since V began) and a cohort that arrived at V0 with work w is
// done at V0 + w: with equal work, cohorts finish in arrival order. The
// zero value is an empty queue.
type HeldQueue struct {
	cohorts []cohort // by arrival, so by finish
	head    int      // cohorts[:head] are done
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
// with c cores, shared equally by every request held; a live request
// older than timeout is lost to its client and served to the end all the
// same. Once more than kill requests are held the pod is OOM-killed: the
// window stops there, with what it holds as it was.
//
// Invariant: Completed + TimedOut + Unserved + live' = arrived + live,
// where live is what counts() returns before and live' after.
func (q *HeldQueue) serve(arrived, work, c, dt, timeout, kill float64) heldWindow {
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
		// Water-filling: every request held gets the same CPU until the
		// front cohort is done, which leaves the rest more.
		budget, spent := c*h, 0.0
		for budget > 0 && q.head < len(q.cohorts) {
			f := &q.cohorts[q.head]
			need := (f.finish - q.v) * n
			if need > budget {
				q.v += budget / n
				spent, budget = spent+budget, 0
				break
			}
			q.v = f.finish
			spent, budget = spent+need, budget-need
			at := q.now + spent/c // the CPU runs at c throughout
			if !f.lost && at-f.born <= timeout {
				w.Completed += f.count
				w.Sojourn += f.count * max(at-f.born, 0)
			} else if !f.lost {
				// Done, but after its client gave up.
				w.TimedOut += f.count
			}
			n -= f.count
			q.head++
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

// push adds a cohort, merging two of the oldest held when there are too
// many (their requests then finish and time out together, as one). The
// lost cohorts are the oldest, a prefix; two cohorts merge only if both
// are lost or both live, so no request is counted lost twice.
func (q *HeldQueue) push(c cohort) {
	if len(q.cohorts)-q.head >= maxCohorts {
		i := q.head
		if q.cohorts[i].lost != q.cohorts[i+1].lost {
			i++
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
	q.cohorts = append(q.cohorts, c)
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
