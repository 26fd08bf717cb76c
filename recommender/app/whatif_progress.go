package app

import (
	"fmt"
	"sync"

	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/progress"
)

// whatifProgress draws the whole what-if on one bar: every workload's range
// queries and its replay's runs, from workloads read and replayed
// concurrently. A workload's number of queries is learnt from its first
// report and its runs from its fit (none when the fit refuses); a workload
// not yet begun counts the last number of queries learnt, and one not yet
// fitted the runs of a replayed workload. So the total only shrinks once
// the first workload's queries are known, as fits refuse.
//
// Its methods may be called on a nil receiver (no bar), and from any
// goroutine.
type whatifProgress struct {
	mu        sync.Mutex
	bar       *progress.Bar
	workloads int
	// runs is a replayed workload's jobs: seeds × policies.
	runs     int
	queries  map[int]int // by workload index, learnt
	replayed map[int]int // by workload index: its runs, 0 if refused
	last     int         // the last number of queries learnt
	begun    bool
}

var _ eval.Progress = (*whatifProgress)(nil)

// total is the work known plus the estimate of the rest; q.mu is held.
func (q *whatifProgress) total() int {
	n := (q.workloads-len(q.queries))*q.last + (q.workloads-len(q.replayed))*q.runs
	for _, v := range q.queries {
		n += v
	}
	for _, v := range q.replayed {
		n += v
	}
	return n
}

// advance counts one unit of work done, begun with the first; q.mu is held.
func (q *whatifProgress) advance(what, detail string) {
	if !q.begun {
		q.bar.Begin(q.total())
		q.begun = true
	} else {
		q.bar.SetTotal(q.total())
	}
	q.bar.Advance(what, detail)
}

// query hears that workload i (name) has done of its total range queries.
func (q *whatifProgress) query(i int, name string, done, total int) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queries == nil {
		q.queries = map[int]int{}
	}
	q.queries[i], q.last = total, total
	q.advance(name, fmt.Sprintf("query %d/%d", done, total))
}

// fitted hears that workload i's fit is done: replayed, or refused.
func (q *whatifProgress) fitted(i int, replayed bool) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.replayed == nil {
		q.replayed = map[int]int{}
	}
	q.replayed[i] = 0
	if replayed {
		q.replayed[i] = q.runs
	}
	if q.begun {
		q.bar.SetTotal(q.total())
	}
}

// Begin implements eval.Progress: the bar began with the first query.
func (q *whatifProgress) Begin(int) {}

// Advance implements eval.Progress: one replayed run of policy on app.
func (q *whatifProgress) Advance(policy, app string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.advance(policy, app)
}

// End implements eval.Progress: the bar ends with the what-if (end).
func (q *whatifProgress) End() {}

// end closes the bar.
func (q *whatifProgress) end() {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.begun {
		q.bar.End()
	}
}
