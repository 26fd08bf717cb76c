package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// batcher is the micro-batching part of the server: it coalesces the
// decisions of concurrent Recommend calls into one forward pass per policy
// (the shared one, or a frozen copy) and exploration mode, in its own
// goroutine (run), until stop is closed.
//
// Invariants: every job queued gets exactly one reply (answered, failed,
// or failed with ErrShuttingDown when the batcher stops); a full queue is
// refused at once (ErrOverloaded), never waited on; a lone call never
// waits for others (BatchWait applies only while more calls are in flight
// than the batch holds). The batcher has no mutex: the queue is its only
// shared state, and it takes no other part's lock. inflight counts the
// Recommend calls in progress (enter and leave).
type batcher struct {
	maxBatch int
	wait     time.Duration
	learner  Learner
	meta     *nn.MetaPPO
	ens      *ensemble
	metrics  *metrics
	stop     <-chan struct{}

	inflight atomic.Int64
	queue    chan *decisionJob
}

func newBatcher(o *Options, ens *ensemble, m *metrics, stop <-chan struct{}) *batcher {
	return &batcher{maxBatch: o.MaxBatch, wait: o.BatchWait, learner: o.Learner, meta: o.MetaLearner, ens: ens, metrics: m, stop: stop,
		queue: make(chan *decisionJob, o.QueueSize)}
}

// enter and leave count a Recommend call in flight: while more are than a
// batch holds, the batch waits for them.
func (s *batcher) enter() { s.inflight.Add(1) }
func (s *batcher) leave() { s.inflight.Add(-1) }

type decisionJob struct {
	ctx    context.Context
	state  []float64
	window []nn.Step // Meta-PPO only
	mask   []bool
	greedy bool
	// frozen answers the decision instead of the shared policy: a Serving
	// workload's frozen copy.
	frozen *nn.Frozen
	// value says what each residual choice sets, for an ensemble to agree
	// on (Prepared.ChoiceValue); nil when no ensemble is served.
	value func(d, i int) float64
	reply chan decisionResult
}

type decisionResult struct {
	d   nn.Decision
	err error
}

// decide queues p for the batcher and waits for its decision, by frozen if
// not nil, else by the shared policy.
func (s *batcher) decide(ctx context.Context, p learn.Prepared, frozen *frozenPolicy) (nn.Decision, error) {
	j := &decisionJob{ctx: ctx, state: p.State, window: p.Window, mask: p.Mask, greedy: p.Greedy, reply: make(chan decisionResult, 1)}
	if frozen != nil {
		j.frozen = frozen.policy
	}
	if s.ens != nil {
		j.value = func(d, i int) float64 {
			v, _ := p.ChoiceValue(d, i) // the ensemble's agents act in its residual space
			return v
		}
	}
	select {
	case s.queue <- j:
	default:
		return nn.Decision{}, ErrOverloaded
	}
	select {
	case r := <-j.reply:
		return r.d, r.err
	case <-ctx.Done():
		return nn.Decision{}, ctx.Err()
	}
}

// run coalesces queued decisions into forward passes until stop.
func (s *batcher) run(rng *rand.Rand) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]*decisionJob, 0, s.maxBatch)
	for {
		var first *decisionJob
		select {
		case first = <-s.queue:
		case <-s.stop:
			s.failQueued(ErrShuttingDown)
			return
		}
		batch = append(batch[:0], first)
		batch = s.gather(batch, timer)
		s.forward(batch, rng)
	}
}

// gather adds the decisions already queued and, while more calls are in
// flight than the batch holds, waits up to BatchWait for them.
func (s *batcher) gather(batch []*decisionJob, timer *time.Timer) []*decisionJob {
	waiting := false
	defer func() {
		if waiting && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}()
	yielded := false
	for len(batch) < s.maxBatch {
		select {
		case j := <-s.queue:
			batch = append(batch, j)
			continue
		default:
		}
		if s.wait == 0 || s.inflight.Load() <= int64(len(batch)) {
			if yielded {
				return batch
			}
			// Before closing the batch, let the goroutines that are
			// runnable now (calls being decoded or converted, when the
			// server is busy) run up to their queueing. Without this the
			// batcher, woken by the first call, can close every batch
			// before the next call is counted in flight, and a busy server
			// settles into passes of one or two decisions, paying a
			// wake-up and a forward pass per decision. With nothing else
			// runnable it returns at once, so a lone call does not wait.
			yielded = true
			runtime.Gosched()
			continue
		}
		if !waiting {
			timer.Reset(s.wait)
			waiting = true
		}
		select {
		case j := <-s.queue:
			batch = append(batch, j)
		case <-timer.C:
			waiting = false
			return batch
		case <-s.stop:
			return batch
		}
	}
	return batch
}

// forwardGroup is the decisions of a batch that share a forward pass: one
// policy (the shared one, or one frozen copy) and one exploration mode.
type forwardGroup struct {
	frozen *nn.Frozen // nil: the shared policy
	greedy bool
	jobs   []*decisionJob
}

// forward answers a batch: expired calls are dropped, the rest share one
// forward pass per policy and exploration mode, so that the Serving
// workloads pinned to one frozen copy still share theirs. The shared
// policy's greedy group goes first, then its sampled group, then the frozen
// copies' in the order they appear. An ensemble answers all in one group:
// it is always greedy, and nothing is pinned.
func (s *batcher) forward(batch []*decisionJob, rng *rand.Rand) {
	groups := []forwardGroup{{greedy: true}, {greedy: false}}
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.reply <- decisionResult{err: err}
			continue
		}
		gi := -1
		switch {
		case s.ens != nil:
			gi = 0
		case j.frozen == nil && j.greedy:
			gi = 0
		case j.frozen == nil:
			gi = 1
		default:
			for i := 2; i < len(groups); i++ {
				if groups[i].frozen == j.frozen && groups[i].greedy == j.greedy {
					gi = i
					break
				}
			}
			if gi < 0 {
				gi = len(groups)
				groups = append(groups, forwardGroup{frozen: j.frozen, greedy: j.greedy})
			}
		}
		groups[gi].jobs = append(groups[gi].jobs, j)
	}
	for _, grp := range groups {
		g := grp.jobs
		if len(g) == 0 {
			continue
		}
		states := make([][]float64, len(g))
		masks := make([][]bool, len(g))
		for i, j := range g {
			states[i], masks[i] = j.state, j.mask
		}
		var windows [][]nn.Step
		if s.meta != nil {
			windows = make([][]nn.Step, len(g))
			for i, j := range g {
				windows[i] = j.window
			}
		}
		s.metrics.batchSize.Observe(float64(len(g)))
		var ds []nn.Decision
		var err error
		switch {
		case s.ens != nil:
			values := make([]func(d, i int) float64, len(g))
			for i, j := range g {
				values[i] = j.value
			}
			ds, err = s.ens.actBatch(states, masks, values)
		case grp.frozen != nil:
			ds, err = grp.frozen.ActBatch(states, windows, masks, grp.greedy, rng)
		case s.meta != nil:
			ds, err = s.meta.ActWindowBatch(states, windows, masks, grp.greedy, rng)
		default:
			ds, err = s.learner.ActBatch(states, masks, grp.greedy, rng)
		}
		for i, j := range g {
			if err != nil {
				j.reply <- decisionResult{err: fmt.Errorf("forward pass: %w", err)}
			} else {
				j.reply <- decisionResult{d: ds[i]}
			}
		}
	}
}

func (s *batcher) failQueued(err error) {
	for {
		select {
		case j := <-s.queue:
			j.reply <- decisionResult{err: err}
		default:
			return
		}
	}
}
