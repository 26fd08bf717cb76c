// Package server is the rl-agent's gRPC service: the AgentService of
// proto/aware/rlagent/v1 over the per-workload agents of pkg/learn, one
// shared policy, and the crash-safe state of pkg/store.
//
// The shared policy is PPO (Options.Learner) or Meta-PPO
// (Options.MetaLearner), whose GRU encoder reads each workload's recent
// trajectory: the agents then keep their windows, and the forward pass and
// the training jobs pass them along.
//
// A workload in lifecycle stage Serving no longer trains the policy, and
// does not follow it either: on promotion it is pinned to a frozen copy of
// the policy version current then (policy.Frozen, the weights only), which
// answers its decisions until it leaves Serving, however the shared policy
// trains on for the other workloads. Workloads promoted at one version
// share one copy; at most MaxFrozenPolicies copies are kept (frozen.go).
//
// Recommend calls of many workloads are coalesced into one forward pass per
// policy (micro-batching): a single goroutine takes a decision off a
// bounded queue, gathers the others that are already waiting or about to
// arrive (for at most BatchWait, and only while more calls are in flight,
// so a lone call never waits), and answers them with one batched act of
// the shared policy per exploration mode and one of each frozen copy
// needed. A full queue means overload and is answered at once with
// Unavailable rather than queued behind a growing backlog; the recommender
// then falls back to its default, which is always safe.
//
// Training never runs on the request path: a completed episode hands its
// training job to a background trainer. Experience is appended to the store
// in batches and the policy, the frozen copies in use and every workload's
// lifecycle and pin are checkpointed periodically and at shutdown, as one
// atomic file, so the policy version, the stages and the weights each
// Serving workload acts with can never disagree after a restart.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/agent"
	"github.com/aware-k8s/aware/pkg/learn"
	"github.com/aware-k8s/aware/pkg/lifecycle"
	"github.com/aware-k8s/aware/pkg/policy"
	"github.com/aware-k8s/aware/pkg/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// Store is what the server needs from its persistence.
type Store interface {
	// Experience returns the records recovered at open.
	Experience() [][]byte
	Append(records [][]byte) error
	Compact(keep [][]byte) error
	SaveCheckpoint(name string, data []byte) error
	LoadCheckpoint(name string) ([]byte, error)
}

var _ Store = (*store.Store)(nil)

// Learner is the shared policy when it reads no trajectory (PPO); a
// Meta-PPO policy is Options.MetaLearner. Freeze copies the weights it acts
// with, which Serving workloads keep acting with while it trains on.
type Learner interface {
	policy.DiscreteLearner
	Freeze() *policy.Frozen
}

// checkpointName is the one atomic checkpoint: policy, version, agents.
const checkpointName = "state"

// Options configure a Server. Registerer and exactly one of Learner and
// MetaLearner are required.
type Options struct {
	Learner Learner
	// MetaLearner is a Meta-PPO policy, served instead of Learner: each
	// workload's agent keeps its last Window steps, the batched forward
	// pass embeds them, and training uses them.
	MetaLearner *policy.MetaPPO
	// Store persists experience and checkpoints; nil keeps state in memory
	// only.
	Store      Store
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Seed seeds the sampling of exploratory actions.
	Seed uint64
	// Steps are the vertical action sizes.
	Steps learn.Steps

	// MaxBatch is the largest number of decisions in one forward pass.
	MaxBatch int
	// BatchWait bounds how long the first decision of a batch waits for
	// others.
	BatchWait time.Duration
	// QueueSize bounds the decisions waiting for a forward pass; beyond it
	// Recommend answers Unavailable.
	QueueSize int
	// MaxWorkloads bounds the number of workloads, hence memory.
	MaxWorkloads int
	// TrainQueue bounds the training jobs waiting for the trainer; beyond
	// it jobs are dropped (and counted): experience keeps flowing and the
	// next episode trains again.
	TrainQueue int
	// FlushInterval is how often experience is flushed and the state
	// checkpointed.
	FlushInterval time.Duration
	// FlushRecords flushes experience early once this many are pending.
	FlushRecords int
	// KeepRecords is how many experience records survive a compaction.
	KeepRecords int
	// Retraining bounds every workload's stays in Retraining: the defaults
	// act for at least Min episodes before the promotion gate may return
	// the workload to the agent, and after Max it returns whatever the
	// gate says (lifecycle.RetrainingBounds; zero disables each).
	Retraining lifecycle.RetrainingBounds
	// MaxFrozenPolicies bounds the frozen copies of the policy that
	// Serving workloads are pinned to (one per policy version pinned, each
	// the size of the weights). A workload promoted while that many are
	// pinned and none is of the current version shares the newest one.
	MaxFrozenPolicies int
}

// DefaultOptions returns the defaults for everything but Learner, Store and
// Registerer.
func DefaultOptions() Options {
	return Options{
		Steps:         learn.DefaultSteps(),
		MaxBatch:      256,
		BatchWait:     2 * time.Millisecond,
		QueueSize:     4096,
		MaxWorkloads:  10000,
		TrainQueue:    64,
		FlushInterval: 30 * time.Second,
		FlushRecords:  512,
		KeepRecords:   16384,
		// A copy of the default PPO is 11016 weights, 86 KiB (Meta-PPO:
		// 12832, 100 KiB): 32 copies are under 3.2 MiB.
		MaxFrozenPolicies: 32,
		Retraining:        lifecycle.DefaultRetrainingBounds(),
	}
}

func (o *Options) validate() error {
	var errs []error
	if (o.Learner == nil) == (o.MetaLearner == nil) {
		errs = append(errs, errors.New("exactly one of a learner and a meta-learner is required"))
	}
	if o.Registerer == nil {
		errs = append(errs, errors.New("a metrics registerer is required"))
	}
	if o.MaxBatch < 1 || o.QueueSize < 1 || o.MaxWorkloads < 1 || o.TrainQueue < 1 || o.FlushRecords < 1 || o.KeepRecords < 1 || o.MaxFrozenPolicies < 1 {
		errs = append(errs, fmt.Errorf("batch, queue, workload, record and frozen-policy limits must be >= 1: %+v", *o))
	}
	if err := o.Retraining.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.BatchWait < 0 || o.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("batchWait must be >= 0 and flushInterval > 0"))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return errors.Join(errs...)
}

// Server implements AgentService.
type Server struct {
	pb.UnimplementedAgentServiceServer

	opts    Options
	metrics *metrics
	health  *health.Server
	// bounds refuses requests outside physical bounds (bounds.go).
	bounds *bounds

	// windowLen is the trajectory each agent keeps: the meta-learner's
	// window, 0 for PPO.
	windowLen int

	mu     sync.RWMutex
	agents map[string]*learn.Agent

	// pins holds the frozen copies Serving workloads act with (frozen.go);
	// live is the frozen copy of the shared policy at its current version,
	// which a promotion pins, replaced after every training job.
	pins *pinSet
	live atomic.Pointer[frozenPolicy]
	// cutMu makes an agent's stage transition and its pin one step as seen
	// by the checkpoint: outcomes hold it for reading, the checkpoint takes
	// it to copy the agents and the pins.
	cutMu sync.RWMutex

	draining atomic.Bool
	inflight atomic.Int64
	queue    chan *decisionJob
	trainC   chan *learn.TrainJob
	// trainPending counts training jobs queued or running; it drops to
	// zero only after a job's outcome is counted in the metrics.
	trainPending atomic.Int64

	// trainMu makes a training job and the version bump one step as seen
	// by the checkpoint.
	trainMu sync.Mutex
	version atomic.Int64
	// versionName caches versionString of the version last asked for:
	// every answer carries it, and it changes only when training lands.
	versionName atomic.Pointer[namedVersion]

	expMu   sync.Mutex
	pending [][]byte // experience not yet appended to the store
	flushMu sync.Mutex
	recent  [][]byte // the last KeepRecords records, for compaction; flushMu
	written int      // records in the log since the last compaction; flushMu
	flushC  chan struct{}
	dirty   atomic.Bool
	ckptMu  sync.Mutex // orders checkpoints, so an older one never overwrites a newer

	stop     chan struct{}
	wg       sync.WaitGroup
	closeMu  sync.Mutex
	closed   bool
	closeErr error
}

type namedVersion struct {
	v    int64
	name string
}

type decisionJob struct {
	ctx    context.Context
	state  []float64
	window []policy.Step // Meta-PPO only
	mask   []bool
	greedy bool
	// frozen answers the decision instead of the shared policy: a Serving
	// workload's frozen copy.
	frozen *policy.Frozen
	reply  chan decisionResult
}

type decisionResult struct {
	d   policy.Decision
	err error
}

// New restores the state from opts.Store, if any, and starts the batcher,
// the trainer and the persister. Call Close to stop them.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("invalid server options: %w", err)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	b, err := newBounds(opts.Registerer, opts.MaxWorkloads, opts.Now)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:    opts,
		metrics: m,
		bounds:  b,
		health:  health.NewServer(),
		agents:  map[string]*learn.Agent{},
		pins:    newPinSet(opts.MaxFrozenPolicies),
		queue:   make(chan *decisionJob, opts.QueueSize),
		trainC:  make(chan *learn.TrainJob, opts.TrainQueue),
		flushC:  make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	if opts.MetaLearner != nil {
		s.windowLen = opts.MetaLearner.Config().Window
	}
	if err := s.restore(); err != nil {
		return nil, err
	}
	s.metrics.policyVersion.Set(float64(s.version.Load()))
	s.metrics.frozenPolicies.Set(float64(s.pins.len()))
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(pb.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.wg.Add(3)
	go s.batcher(rand.New(rand.NewPCG(opts.Seed, 0x5eed)))
	go s.trainer()
	go s.persister()
	return s, nil
}

// Register adds the agent service and the standard health service to g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	pb.RegisterAgentServiceServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// UnaryInterceptor records request counts and latencies by method and code.
// The series of the agent's own methods are looked up once per method and
// code rather than by label values on every call.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	known := map[string]*methodMetrics{}
	for _, m := range pb.AgentService_ServiceDesc.Methods {
		full := "/" + pb.AgentService_ServiceDesc.ServiceName + "/" + m.MethodName
		known[full] = &methodMetrics{m: s.metrics, method: m.MethodName}
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		if mm := known[info.FullMethod]; mm != nil {
			mm.observe(codeOf(err), time.Since(start))
			return resp, err
		}
		method := methodName(info.FullMethod)
		s.metrics.requests.WithLabelValues(method, codeOf(err).String()).Inc()
		s.metrics.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
		return resp, err
	}
}

// methodMetrics are one method's series, each created on first use, as
// WithLabelValues would, so /metrics shows the same series.
type methodMetrics struct {
	m       *metrics
	method  string
	latency atomic.Pointer[prometheus.Observer]
	byCode  [maxCode + 1]atomic.Pointer[prometheus.Counter]
}

// maxCode is the largest gRPC status code (Unauthenticated); others are
// counted through the vector.
const maxCode = 16

func (mm *methodMetrics) observe(code codes.Code, d time.Duration) {
	if code > maxCode {
		mm.m.requests.WithLabelValues(mm.method, code.String()).Inc()
	} else {
		c := mm.byCode[code].Load()
		if c == nil {
			cc := mm.m.requests.WithLabelValues(mm.method, code.String())
			c = &cc
			mm.byCode[code].Store(c)
		}
		(*c).Inc()
	}
	o := mm.latency.Load()
	if o == nil {
		oo := mm.m.latency.WithLabelValues(mm.method)
		o = &oo
		mm.latency.Store(o)
	}
	(*o).Observe(d.Seconds())
}

// PolicyVersion returns the version of the shared policy: the number of
// training jobs applied to it since it was created.
func (s *Server) PolicyVersion() string {
	v := s.version.Load()
	if n := s.versionName.Load(); n != nil && n.v == v {
		return n.name
	}
	n := &namedVersion{v: v, name: versionString(v)}
	s.versionName.Store(n)
	return n.name
}

func versionString(v int64) string { return fmt.Sprintf("v%d", v) }

// Drain makes the server refuse new calls with Unavailable and report
// NOT_SERVING on the health service, so load balancers and the recommender
// move away before the listener closes. Calls already admitted complete.
func (s *Server) Drain() {
	if s.draining.CompareAndSwap(false, true) {
		s.health.Shutdown()
	}
}

// Ready reports nil while the server accepts calls; for /readyz.
func (s *Server) Ready() error {
	if s.draining.Load() {
		return ErrShuttingDown
	}
	return nil
}

// Close drains, stops the background goroutines and persists the final
// state. It is idempotent; call it after the gRPC server has stopped.
func (s *Server) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return s.closeErr
	}
	s.closed = true
	s.Drain()
	close(s.stop)
	s.wg.Wait()
	s.closeErr = s.persist(true)
	return s.closeErr
}

func (s *Server) admit(ctx context.Context) error {
	if s.draining.Load() {
		return ErrShuttingDown
	}
	return ctx.Err()
}

// Recommend answers one workload's decision.
func (s *Server) Recommend(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	resp, err := s.recommend(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) recommend(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	if err := s.admit(ctx); err != nil {
		return nil, err
	}
	in, err := fromRecommendRequest(req)
	if err != nil {
		return nil, err
	}
	if err := s.bounds.checkRecommend(&in); err != nil {
		return nil, err
	}
	a, err := s.agent(in.key, in.cfg.Gates)
	if err != nil {
		return nil, err
	}
	p, err := a.Prepare(in.obs, in.constraints, in.def, in.cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	var d *policy.Decision
	frozen := s.frozenFor(in.key, p)
	if p.NeedsPolicy {
		dd, err := s.decide(ctx, p, frozen)
		if err != nil {
			return nil, err
		}
		d = &dd
	}
	// The answer is useless to a caller that gave up; do not let it think
	// a late answer was applied.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := a.Decide(p, d)
	if err != nil {
		return nil, err
	}
	version := ""
	if frozen != nil {
		version = frozen.name
	} else {
		version = s.versionFor(in.key, res.Stage)
	}
	return &pb.RecommendResponse{
		Recommendation: agent.ToRecommendation(&res.Recommendation),
		Source:         agent.ToSource(res.Recommendation.Source),
		Stage:          toStage(res.Stage),
		PolicyVersion:  version,
		Reason:         res.Recommendation.Reason,
	}, nil
}

// decide queues p for the batcher and waits for its decision, by frozen if
// not nil, else by the shared policy.
func (s *Server) decide(ctx context.Context, p learn.Prepared, frozen *frozenPolicy) (policy.Decision, error) {
	j := &decisionJob{ctx: ctx, state: p.State, window: p.Window, mask: p.Mask, greedy: p.Greedy, reply: make(chan decisionResult, 1)}
	if frozen != nil {
		j.frozen = frozen.policy
	}
	select {
	case s.queue <- j:
	default:
		return policy.Decision{}, ErrOverloaded
	}
	select {
	case r := <-j.reply:
		return r.d, r.err
	case <-ctx.Done():
		return policy.Decision{}, ctx.Err()
	}
}

// batcher coalesces queued decisions into forward passes until Close.
func (s *Server) batcher(rng *rand.Rand) {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]*decisionJob, 0, s.opts.MaxBatch)
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
func (s *Server) gather(batch []*decisionJob, timer *time.Timer) []*decisionJob {
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
	for len(batch) < s.opts.MaxBatch {
		select {
		case j := <-s.queue:
			batch = append(batch, j)
			continue
		default:
		}
		if s.opts.BatchWait == 0 || s.inflight.Load() <= int64(len(batch)) {
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
			timer.Reset(s.opts.BatchWait)
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
	frozen *policy.Frozen // nil: the shared policy
	greedy bool
	jobs   []*decisionJob
}

// forward answers a batch: expired calls are dropped, the rest share one
// forward pass per policy and exploration mode, so that the Serving
// workloads pinned to one frozen copy still share theirs. The shared
// policy's greedy group goes first, then its sampled group, then the frozen
// copies' in the order they appear.
func (s *Server) forward(batch []*decisionJob, rng *rand.Rand) {
	groups := []forwardGroup{{greedy: true}, {greedy: false}}
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.reply <- decisionResult{err: err}
			continue
		}
		gi := -1
		switch {
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
		var windows [][]policy.Step
		if s.opts.MetaLearner != nil {
			windows = make([][]policy.Step, len(g))
			for i, j := range g {
				windows[i] = j.window
			}
		}
		s.metrics.batchSize.Observe(float64(len(g)))
		var ds []policy.Decision
		var err error
		switch {
		case grp.frozen != nil:
			ds, err = grp.frozen.ActBatch(states, windows, masks, grp.greedy, rng)
		case s.opts.MetaLearner != nil:
			ds, err = s.opts.MetaLearner.ActWindowBatch(states, windows, masks, grp.greedy, rng)
		default:
			ds, err = s.opts.Learner.ActBatch(states, masks, grp.greedy, rng)
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

func (s *Server) failQueued(err error) {
	for {
		select {
		case j := <-s.queue:
			j.reply <- decisionResult{err: err}
		default:
			return
		}
	}
}

// ReportOutcome records a transition, and at the end of an episode moves
// the lifecycle and queues training.
func (s *Server) ReportOutcome(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	resp, err := s.reportOutcome(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) reportOutcome(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	if err := s.admit(ctx); err != nil {
		return nil, err
	}
	in, err := fromReportOutcomeRequest(req)
	if err != nil {
		return nil, err
	}
	if err := s.bounds.checkOutcome(&in); err != nil {
		return nil, err
	}
	a, err := s.agent(in.key, in.outcome.Config.Gates)
	if err != nil {
		return nil, err
	}
	s.cutMu.RLock()
	res, err := a.Outcome(in.outcome, s.opts.Now())
	if err == nil && res.Transition != nil {
		s.repin(ctx, in.key, res.Transition)
	}
	s.cutMu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	s.dirty.Store(true)
	if rec, err := learn.MarshalExperience(res.Experience); err == nil {
		s.addExperience(rec)
	} else {
		klog.FromContext(ctx).Error(err, "Dropping unencodable experience", "workload", in.key)
	}
	if t := res.Transition; t != nil {
		s.metrics.transitions.WithLabelValues(t.From.String(), t.To.String()).Inc()
		s.metrics.workloads.WithLabelValues(t.From.String()).Dec()
		s.metrics.workloads.WithLabelValues(t.To.String()).Inc()
		klog.FromContext(ctx).Info("Stage transition", "workload", in.key, "from", t.From, "to", t.To, "reason", t.Reason, "mean", t.Mean, "stdDev", t.StdDev)
		// A stage change is rare and decides who acts: persist it before
		// answering, so that once the recommender has seen the new stage a
		// crash cannot undo it. A failure is retried by the persister; the
		// outcome itself was recorded, so it is not reported as an error
		// (a retry by the recommender would count it twice).
		if err := s.persist(true); err != nil {
			s.dirty.Store(true)
			klog.FromContext(ctx).Error(err, "Persisting a stage transition failed; will retry", "workload", in.key)
		}
	}
	if res.Train != nil {
		s.trainPending.Add(1)
		select {
		case s.trainC <- res.Train:
		default:
			s.trainPending.Add(-1)
			s.metrics.training.WithLabelValues("dropped").Inc()
		}
	}
	// The transition is recorded either way; a caller past its deadline is
	// told so, and a retry of the same outcome is the caller's choice.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &pb.ReportOutcomeResponse{
		Reward:          res.Reward.Reward,
		Stage:           toStage(res.Stage),
		PolicyVersion:   s.versionFor(in.key, res.Stage),
		EpisodeComplete: res.EpisodeComplete,
	}, nil
}

// GetPolicyStatus reports one workload's agent.
func (s *Server) GetPolicyStatus(ctx context.Context, req *pb.GetPolicyStatusRequest) (*pb.GetPolicyStatusResponse, error) {
	resp, err := s.getPolicyStatus(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) getPolicyStatus(ctx context.Context, req *pb.GetPolicyStatusRequest) (*pb.GetPolicyStatusResponse, error) {
	if err := s.admit(ctx); err != nil {
		return nil, err
	}
	key, err := fromGetPolicyStatusRequest(req)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	a := s.agents[key]
	s.mu.RUnlock()
	if a == nil {
		return nil, fmt.Errorf("%s: %w", key, ErrUnknownWorkload)
	}
	st := a.Status()
	return &pb.GetPolicyStatusResponse{Status: &pb.PolicyStatus{
		Workload:      refFromKey(key),
		Stage:         toStage(st.Stage),
		PolicyVersion: s.versionFor(key, st.Stage),
		Episodes:      st.Episodes,
		Transitions:   st.Transitions,
		RewardMean:    st.RewardMean,
		RewardStdDev:  st.RewardStdDev,
		LastUpdate:    timestamppb.New(st.LastUpdate),
	}}, nil
}

// agent returns the workload's agent, creating it in Bootstrapping.
func (s *Server) agent(key string, gates lifecycle.Gates) (*learn.Agent, error) {
	s.mu.RLock()
	a := s.agents[key]
	s.mu.RUnlock()
	if a != nil {
		return a, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agents[key]; a != nil {
		return a, nil
	}
	if len(s.agents) >= s.opts.MaxWorkloads {
		return nil, fmt.Errorf("%w: limit %d reached", ErrTooManyWorkloads, s.opts.MaxWorkloads)
	}
	a, err := learn.NewAgent(key, gates, s.opts.Steps, s.opts.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := a.SetRetrainingBounds(s.opts.Retraining); err != nil {
		return nil, err // validated in New
	}
	a.SetWindowLen(s.windowLen)
	s.agents[key] = a
	s.metrics.workloads.WithLabelValues(lifecycle.Bootstrapping.String()).Inc()
	s.dirty.Store(true)
	return a, nil
}

// trainer runs training jobs one at a time until Close; jobs still queued
// at Close are dropped (their experience is in the log).
func (s *Server) trainer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case job := <-s.trainC:
			s.trainMu.Lock()
			err := s.train(job)
			if err == nil {
				// The copy a promotion pins from now on: taken under
				// trainMu, so its weights are exactly this version's.
				s.live.Store(newFrozenPolicy(s.version.Add(1), s.freezeLive()))
				s.dirty.Store(true)
			}
			s.trainMu.Unlock()
			if err != nil {
				s.metrics.training.WithLabelValues("failed").Inc()
				s.trainPending.Add(-1)
				klog.ErrorS(err, "Training job failed; the policy was rolled back")
				continue
			}
			s.metrics.training.WithLabelValues("ok").Inc()
			s.metrics.policyVersion.Set(float64(s.version.Load()))
			s.trainPending.Add(-1)
		}
	}
}

// train runs job on the shared policy; the caller holds trainMu.
func (s *Server) train(job *learn.TrainJob) error {
	if m := s.opts.MetaLearner; m != nil {
		return job.RunMeta(m)
	}
	return job.Run(s.opts.Learner)
}

// policyBytes and restorePolicy checkpoint the shared policy of either kind.
func (s *Server) policyBytes() ([]byte, error) {
	if m := s.opts.MetaLearner; m != nil {
		return m.MarshalBinary()
	}
	return s.opts.Learner.MarshalBinary()
}

func (s *Server) restorePolicy(b []byte) error {
	if m := s.opts.MetaLearner; m != nil {
		return m.UnmarshalBinary(b)
	}
	return s.opts.Learner.UnmarshalBinary(b)
}

func (s *Server) addExperience(rec []byte) {
	s.expMu.Lock()
	s.pending = append(s.pending, rec)
	n := len(s.pending)
	s.expMu.Unlock()
	if n >= s.opts.FlushRecords {
		select {
		case s.flushC <- struct{}{}:
		default:
		}
	}
}

// persister flushes experience when enough is pending and checkpoints every
// FlushInterval, until Close. (Stage transitions checkpoint at once.)
func (s *Server) persister() {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.FlushInterval)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-s.stop:
			return
		case <-s.flushC:
			err = s.flushExperience()
		case <-tick.C:
			err = s.persist(false)
		}
		if err != nil {
			klog.ErrorS(err, "Persisting agent state failed; will retry")
		}
	}
}

// persist flushes experience and, if anything changed (or force), writes
// the checkpoint.
func (s *Server) persist(force bool) error {
	if s.opts.Store == nil {
		return nil
	}
	err := s.flushExperience()
	if force || s.dirty.Swap(false) {
		if cerr := s.checkpoint(); cerr != nil {
			s.dirty.Store(true)
			err = errors.Join(err, cerr)
		}
	}
	return err
}

func (s *Server) flushExperience() error {
	// flushMu orders flushes (and compactions); expMu is held only to take
	// the pending batch, so ReportOutcome never waits for an fsync.
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.expMu.Lock()
	batch := s.pending
	s.pending = nil
	s.expMu.Unlock()
	if len(batch) == 0 || s.opts.Store == nil {
		return nil
	}
	if err := s.opts.Store.Append(batch); err != nil {
		s.metrics.persist.WithLabelValues("experience", "failed").Inc()
		// Keep the batch, ahead of what arrived meanwhile, for the next try.
		s.expMu.Lock()
		s.pending = append(batch, s.pending...)
		s.expMu.Unlock()
		return fmt.Errorf("append experience: %w", err)
	}
	s.metrics.persist.WithLabelValues("experience", "ok").Inc()
	s.recent = append(s.recent, batch...)
	s.written += len(batch)
	if over := len(s.recent) - s.opts.KeepRecords; over > 0 {
		s.recent = append(s.recent[:0], s.recent[over:]...)
	}
	// Compact once the log holds four times what we keep: the log stays
	// bounded and compaction costs O(1) amortised per record.
	if s.written >= 4*s.opts.KeepRecords {
		if err := s.opts.Store.Compact(s.recent); err != nil {
			return fmt.Errorf("compact experience: %w", err)
		}
		s.written = len(s.recent)
	}
	return nil
}

// snapshot is the checkpoint: the policy, its version, every agent, and the
// frozen policies Serving workloads are pinned to, in one file so that they
// are always consistent with each other.
type snapshot struct {
	PolicyVersion int64              `json:"policyVersion"`
	Policy        []byte             `json:"policy"`
	Agents        []learn.AgentState `json:"agents"`
	// Frozen holds the frozen copies pinned, Pins the version each Serving
	// workload is pinned to. Checkpoints written before frozen weights
	// have neither.
	Frozen []frozenState    `json:"frozen,omitempty"`
	Pins   map[string]int64 `json:"pins,omitempty"`
}

func (s *Server) checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	var snap snapshot
	// The agents and pins first, as one cut (no stage transition half
	// done), then the policy: a pinned version is then never newer than
	// the checkpointed policy, whose version a restarted agent counts on
	// from, so two versions can never share a name.
	s.cutMu.Lock()
	s.mu.RLock()
	for _, a := range s.agents {
		snap.Agents = append(snap.Agents, a.State())
	}
	s.mu.RUnlock()
	pins, copies := s.pins.state()
	s.cutMu.Unlock()
	if len(pins) > 0 {
		snap.Pins = pins
	}
	for _, fp := range copies {
		b, err := fp.bytes()
		if err != nil {
			return fmt.Errorf("marshal frozen policy %s: %w", fp.name, err)
		}
		snap.Frozen = append(snap.Frozen, frozenState{Version: fp.version, Policy: b})
	}
	s.trainMu.Lock()
	p, err := s.policyBytes()
	snap.PolicyVersion = s.version.Load()
	s.trainMu.Unlock()
	if err != nil {
		return fmt.Errorf("marshal policy: %w", err)
	}
	snap.Policy = p
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := s.opts.Store.SaveCheckpoint(checkpointName, b); err != nil {
		s.metrics.persist.WithLabelValues("checkpoint", "failed").Inc()
		return err
	}
	s.metrics.persist.WithLabelValues("checkpoint", "ok").Inc()
	return nil
}

// restore loads the checkpoint and replays the experience log into the
// agents' demonstration buffers and, for Meta-PPO, their trajectories.
func (s *Server) restore() error {
	for _, st := range lifecycle.Stages {
		s.metrics.workloads.WithLabelValues(st.String()).Set(0)
	}
	if s.opts.Store == nil {
		s.live.Store(newFrozenPolicy(s.version.Load(), s.freezeLive()))
		return nil
	}
	b, err := s.opts.Store.LoadCheckpoint(checkpointName)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// A fresh state directory.
		s.live.Store(newFrozenPolicy(s.version.Load(), s.freezeLive()))
	case err != nil:
		return fmt.Errorf("load checkpoint: %w", err)
	default:
		var snap snapshot
		if err := json.Unmarshal(b, &snap); err != nil {
			return fmt.Errorf("decode checkpoint: %w", err)
		}
		if err := s.restorePolicy(snap.Policy); err != nil {
			return fmt.Errorf("restore policy: %w", err)
		}
		s.version.Store(snap.PolicyVersion)
		for _, st := range snap.Agents {
			a, err := learn.RestoreAgent(st, s.opts.Steps)
			if err != nil {
				return fmt.Errorf("restore agent: %w", err)
			}
			if err := a.SetRetrainingBounds(s.opts.Retraining); err != nil {
				return fmt.Errorf("restore agent: %w", err)
			}
			// The trajectory is not in the checkpoint: the experience
			// replayed below rebuilds it.
			a.SetWindowLen(s.windowLen)
			s.agents[a.Key()] = a
			s.metrics.workloads.WithLabelValues(a.Stage().String()).Inc()
		}
		s.live.Store(newFrozenPolicy(s.version.Load(), s.freezeLive()))
		if err := s.restorePins(&snap); err != nil {
			return fmt.Errorf("restore frozen policies: %w", err)
		}
	}
	recs := s.opts.Store.Experience()
	for _, r := range recs {
		e, err := learn.UnmarshalExperience(r)
		if err != nil {
			// One undecodable record (e.g. from an older state layout)
			// must not cost the rest.
			klog.ErrorS(err, "Skipping experience record")
			continue
		}
		if a := s.agents[e.Workload]; a != nil {
			a.Restore(e)
		}
	}
	if over := len(recs) - s.opts.KeepRecords; over > 0 {
		recs = recs[over:]
	}
	s.recent = recs
	s.written = len(recs)
	klog.InfoS("Restored agent state", "workloads", len(s.agents), "policyVersion", versionString(s.version.Load()), "experience", len(recs), "frozenPolicies", s.pins.len())
	return nil
}
