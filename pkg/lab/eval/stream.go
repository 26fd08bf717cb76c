package eval

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// job is one contender on the run of key run.
type job struct {
	run, contender int
}

type jobResult struct {
	res    RunResult
	series []Point
	err    error
}

// Evaluate runs every contender on every run and reduces the results in run
// order. It stops at the first error, or when ctx is done. It is a Stream
// given every run at once, keyed by its index.
func Evaluate(ctx context.Context, runs []Run, contenders []Contender, o Options) (*Report, error) {
	s, err := NewStream(ctx, contenders, o)
	if err != nil {
		return nil, err
	}
	// Every run is checked before any is simulated.
	for i, r := range runs {
		if err := validRun(i, r); err != nil {
			s.Close()
			return nil, err
		}
	}
	if o.Progress != nil {
		o.Progress.Begin(len(runs) * len(contenders))
	}
	for i, r := range runs {
		if err := s.Add(i, r); err != nil {
			s.Close()
			return nil, err
		}
	}
	rep, err := s.Close()
	if o.Progress != nil {
		o.Progress.End()
	}
	return rep, err
}

func validRun(key int, r Run) error {
	if r.Trace == nil || len(r.Trace.Rates) == 0 {
		return fmt.Errorf("eval: run %d (%s) has an empty trace", key, r.App.Name)
	}
	if r.Nodes < 0 {
		return fmt.Errorf("eval: run %d (%s) has %d nodes", key, r.App.Name, r.Nodes)
	}
	return nil
}

// Stream evaluates runs while its caller is still adding them: each run
// added is queued for every contender, and a pool of workers simulates the
// queue in the order it was filled. The what-if adds a workload's runs as
// soon as its history is read, so the replay overlaps the range queries of
// the workloads after it.
//
// Its report is the one Evaluate gives for the same runs put in the order
// of their keys, whatever order they were added in, and however the jobs
// interleaved: results land in a slot named by (key, contender) and are
// reduced in key order. Options.Progress hears Advance for each finished
// job; its Begin and End are the caller's, who knows the total.
type Stream struct {
	contenders []Contender
	cfg        sim.Config
	o          Options
	parent     context.Context
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup

	mu      sync.Mutex
	work    *sync.Cond // signalled when queue grows or closed is set
	queue   []job
	closed  bool
	runs    map[int]Run
	results map[job]jobResult
}

// NewStream starts the workers (Options.Workers, default GOMAXPROCS). The
// caller must Close the stream, which stops them.
func NewStream(ctx context.Context, contenders []Contender, o Options) (*Stream, error) {
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	if len(contenders) == 0 {
		return nil, errors.New("eval: no policies to evaluate")
	}
	seen := map[string]bool{}
	for _, c := range contenders {
		if c.Name == "" || c.New == nil || seen[c.Name] {
			return nil, fmt.Errorf("eval: policy %q is unnamed, duplicated or has no constructor", c.Name)
		}
		seen[c.Name] = true
	}
	if o.Prices == (sim.Prices{}) {
		o.Prices = sim.DefaultPrices()
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	s := &Stream{contenders: slices.Clone(contenders), cfg: cfg, o: o, parent: ctx,
		runs: map[int]Run{}, results: map[job]jobResult{}}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.work = sync.NewCond(&s.mu)
	for range workers {
		s.wg.Add(1)
		go s.worker()
	}
	return s, nil
}

// Add queues run, under key, for every contender. Keys order the report
// and name the run to Options.SeriesRun and KeepSeries; a key given twice,
// an empty trace or an Add after Close is refused.
func (s *Stream) Add(key int, run Run) error {
	if err := validRun(key, run); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch _, dup := s.runs[key]; {
	case s.closed:
		return fmt.Errorf("eval: run %d (%s) added to a closed stream", key, run.App.Name)
	case dup:
		return fmt.Errorf("eval: run %d (%s) added twice", key, run.App.Name)
	}
	s.runs[key] = run
	for c := range s.contenders {
		s.queue = append(s.queue, job{key, c})
	}
	s.work.Broadcast()
	return nil
}

// worker simulates queued jobs until the stream is closed and its queue
// empty. Once a job fails or ctx is done, the jobs left are dropped.
func (s *Stream) worker() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.work.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		jb := s.queue[0]
		s.queue = s.queue[1:]
		run := s.runs[jb.run]
		s.mu.Unlock()
		if s.ctx.Err() != nil {
			continue
		}
		c := s.contenders[jb.contender]
		res, series, err := runOne(s.ctx, run, c, s.configFor(run), s.o, s.o.keeps(jb.run))
		s.mu.Lock()
		s.results[jb] = jobResult{res, series, err}
		s.mu.Unlock()
		if err != nil {
			s.cancel()
		}
		if s.o.Progress != nil {
			s.o.Progress.Advance(c.Name, run.App.Name)
		}
	}
}

// configFor is the simulated cluster of run.
func (s *Stream) configFor(run Run) sim.Config {
	cfg := s.cfg
	if run.Nodes > 0 {
		cfg.Nodes = run.Nodes
	}
	return cfg
}

// Close waits for every job added and reduces the results in key order.
// It returns the error of the lowest (key, contender) that failed, so
// failures are deterministic too, or ctx's if it was done first.
func (s *Stream) Close() (*Report, error) {
	s.mu.Lock()
	s.closed = true
	s.work.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
	defer s.cancel()
	keys := make([]int, 0, len(s.runs))
	for k := range s.runs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	jobs := make([]job, 0, len(keys)*len(s.contenders))
	for _, k := range keys {
		for c := range s.contenders {
			jobs = append(jobs, job{k, c})
		}
	}
	// A cancellation only explains the jobs after a failure.
	for _, jb := range jobs {
		if r := s.results[jb]; r.err != nil && !errors.Is(r.err, context.Canceled) {
			run := s.runs[jb.run]
			return nil, fmt.Errorf("eval: policy %s on %s/%s: %w", s.contenders[jb.contender].Name, run.App.Name, run.Trace.Name, r.err)
		}
	}
	for _, jb := range jobs {
		if r := s.results[jb]; r.err != nil { // only cancellations are left: the caller's ctx is done
			return nil, fmt.Errorf("eval: %w", r.err)
		}
	}
	if err := s.parent.Err(); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	results := make([]jobResult, len(jobs))
	for i, jb := range jobs {
		results[i] = s.results[jb]
	}
	return reduce(s.runs, s.contenders, jobs, results, s.cfg, s.o), nil
}
