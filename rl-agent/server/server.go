// Package server is the rl-agent's gRPC service: the AgentService of
// proto/aware/rlagent/v1 over the per-workload agents of pkg/rl/learn, one
// shared policy, and the crash-safe state of pkg/rl/store.
//
// The shared policy is PPO (Options.Learner) or Meta-PPO
// (Options.MetaLearner), whose GRU encoder reads each workload's recent
// trajectory: the agents then keep their windows, and the forward pass and
// the training jobs pass them along.
//
// Instead of a learner, the server may serve an ensemble of frozen residual
// policies (Options.Ensemble, ensemble.go) that deviates from the default
// only where its members agree; then nothing trains.
//
// A workload in lifecycle stage Serving no longer trains the policy, and
// does not follow it either: on promotion it is pinned to a frozen copy of
// the policy version current then (nn.Frozen, the weights only), which
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
//
// Structure. Server is a thin gRPC front (server.go, forget.go,
// persist.go, its Options in options.go): it admits each call, converts and checks it, and wires
// parts that have one responsibility each, their own file, their own lock
// and a doc comment stating their invariants:
//
//   - healthState (health.go): admission, draining and readiness, from the
//     last write to the state directory; atomics only.
//   - bounds (bounds.go): physical bounds of requests and each workload's
//     last constraints; bounds.mu.
//   - registry (registry.go): the per-workload agents, their limit and the
//     time of each workload's last call, for the TTL; registry.mu.
//   - pinSet (frozen.go): the frozen copies Serving workloads are pinned
//     to and the live copy a promotion pins; pinSet.mu.
//   - trainer (trainer.go): the shared policy (or the ensemble), its
//     version and the training queue and goroutine; trainer.mu.
//   - batcher (batch.go): the decision queue and the goroutine that
//     answers it in batched forward passes; no lock.
//   - journal (journal.go): the experience log, its batching and
//     compaction, and its replay at start; journal.flushMu, journal.expMu.
//   - checkpointer (checkpoint.go): the one atomic checkpoint, the cut that
//     makes a stage transition and its pin one step as the checkpoint sees
//     it, and whether the state changed since the last; checkpointer.mu,
//     checkpointer.cut.
//
// Where one part calls another it does so through an interface declared
// on its side: the trainer publishes live copies to a livePublisher (the
// pins) and marks a dirtyMarker (the checkpointer), as the registry does;
// the journal asks a workloadIndex (the registry) which records to keep;
// the checkpointer reads agentStates, pinStates and policyStates (the
// registry, the pins, the trainer). Restore, forgetting and the
// persister's schedule cross parts and stay in the front.
//
// Locking order, outermost first: checkpointer.mu; then either
// checkpointer.cut, under which registry.mu or pinSet.mu (never both at
// once), bounds.mu and an agent's own lock (directly or under registry.mu)
// may be taken; or, with cut released, trainer.mu, under which no other part's
// lock is taken (the live copy and the dirty mark are atomic). journal's
// flushMu is taken with no other part's lock held, and is held while
// taking journal.expMu or registry.mu (never both). bounds.mu is a leaf. A
// stage transition holds checkpointer.cut for reading while its agent and
// its pin change; a forget holds it for writing while its agent and pin
// go.
package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

// Server implements AgentService: the thin gRPC front that admits,
// converts and checks each call and wires the parts that answer it (see
// Structure in the package comment).
type Server struct {
	pb.UnimplementedAgentServiceServer

	opts    Options
	metrics *metrics
	// spec is what every agent and every frozen copy must share with the
	// served policy.
	spec policySpec
	// ens is the ensemble served instead of a learner (Options.Ensemble),
	// nil when a learner is.
	ens *ensemble

	// The parts.
	bounds   *bounds       // physical bounds of requests (bounds.go)
	health   *healthState  // admission and readiness (health.go)
	registry *registry     // the workloads' agents (registry.go)
	pins     *pinSet       // Serving workloads' frozen copies (frozen.go)
	trainer  *trainer      // the shared policy and its training (trainer.go)
	batcher  *batcher      // batched forward passes (batch.go)
	journal  *journal      // the experience log (journal.go)
	ckpt     *checkpointer // the checkpoint (checkpoint.go)

	// stop ends the background goroutines, wg waits for them, close is
	// Close's work, done once.
	stop  chan struct{}
	wg    sync.WaitGroup
	close func() error
}

// policySpec is what the agents and the frozen copies must share with the
// served policy.
type policySpec struct {
	// meta: the served policy is Meta-PPO.
	meta bool
	// window is the trajectory each agent keeps: the meta-learner's
	// window, 0 for PPO.
	window int
	// signature: the meta-learner's encoder reads each step's
	// learn.Signature, which the agents then keep in their trajectories.
	signature bool
	// shape is the served policy's action space and state features.
	shape learn.PolicyShape
}

// configure makes a new or restored agent keep what the policy reads.
func (sp policySpec) configure(a *learn.Agent) {
	a.SetWindowLen(sp.window)
	a.SetSignature(sp.signature)
	a.SetShape(sp.shape)
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
		health:  newHealthState(),
		stop:    make(chan struct{}),
	}
	s.close = sync.OnceValue(s.doClose)
	var cfg nn.Config
	switch {
	case opts.Ensemble != nil:
		if s.ens, s.spec.shape, err = newEnsemble(opts.Ensemble); err != nil {
			return nil, fmt.Errorf("invalid server options: %w", err)
		}
	case opts.MetaLearner != nil:
		mc := opts.MetaLearner.Config()
		if mc.SignatureDim != 0 && mc.SignatureDim != learn.SignatureDim {
			return nil, fmt.Errorf("invalid server options: %w: the meta-learner reads %d signature values per step, the agents compute %d",
				nn.ErrIncompatibleCheckpoint, mc.SignatureDim, learn.SignatureDim)
		}
		s.spec.meta, s.spec.window, s.spec.signature = true, mc.Window, mc.SignatureDim > 0
		cfg = mc.Config
	default:
		cfg = opts.Learner.Freeze().Config().Config
	}
	if s.ens == nil {
		if s.spec.shape, err = learn.ShapeOf(cfg); err != nil {
			return nil, fmt.Errorf("invalid server options: the policy: %w", err)
		}
	}
	// The checkpointer reads the others, which mark it dirty: it is wired
	// to them once they exist.
	s.ckpt = newCheckpointer(opts.Store, m)
	s.registry = newRegistry(&s.opts, s.spec, m, s.ckpt)
	s.pins = newPinSet(opts.MaxFrozenPolicies, s.spec, m)
	s.trainer = newTrainer(&s.opts, s.ens, m, s.pins, s.ckpt)
	s.batcher = newBatcher(&s.opts, s.ens, m, s.stop)
	s.journal = newJournal(&s.opts, m, s.registry)
	s.ckpt.agents, s.ckpt.pins, s.ckpt.policy = s.registry, s.pins, s.trainer
	if err := s.registerRetraining(opts.Registerer); err != nil {
		return nil, err
	}
	if _, err := fusion.ParseVariant(s.spec.shape.Anchor); err != nil {
		// No recommender can send that default: every request would be
		// refused.
		return nil, fmt.Errorf("invalid server options: the policy: %w: its anchor: %w", nn.ErrIncompatibleCheckpoint, err)
	}
	// A residual policy acts on the default recommendation of the variant
	// it was trained beside; requests from a recommender that computes
	// another are refused one by one (checkVariant), so that fixing either
	// side needs no restart of the other.
	klog.InfoS("Serving requests whose default recommendation comes from the policy's anchor (empty: the fused default)", "anchor", s.spec.shape.Anchor)
	if err := s.restore(); err != nil {
		return nil, err
	}
	s.metrics.policyVersion.Set(float64(s.trainer.version.Load()))
	s.metrics.frozenPolicies.Set(float64(s.pins.len()))
	s.health.setServing(true)
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.batcher.run(rand.New(rand.NewPCG(opts.Seed, 0x5eed)))
	}()
	go func() {
		defer s.wg.Done()
		s.trainer.run(s.stop)
	}()
	go func() {
		defer s.wg.Done()
		s.persister()
	}()
	return s, nil
}

// Register adds the agent service and the standard health service to g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	pb.RegisterAgentServiceServer(g, s)
	healthpb.RegisterHealthServer(g, s.health.grpc)
}

// PolicyVersion returns the version of the shared policy: the number of
// training jobs applied to it since it was created; or the ensemble's name.
func (s *Server) PolicyVersion() string { return s.trainer.versionName() }

// Drain makes the server refuse new calls with Unavailable and report
// NOT_SERVING on the health service, so load balancers and the recommender
// move away before the listener closes. Calls already admitted complete.
func (s *Server) Drain() { s.health.drain() }

// Ready reports nil while the server accepts calls and can persist its
// state; for /readyz.
func (s *Server) Ready() error { return s.health.ready() }

// Close drains, stops the background goroutines and persists the final
// state. It is idempotent; call it after the gRPC server has stopped.
func (s *Server) Close() error { return s.close() }

func (s *Server) doClose() error {
	s.Drain()
	close(s.stop)
	s.wg.Wait()
	return s.persist(true)
}

// Recommend answers one workload's decision.
func (s *Server) Recommend(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	s.batcher.enter()
	defer s.batcher.leave()
	resp, err := s.recommend(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) recommend(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	if err := s.health.admitLearning(ctx); err != nil {
		return nil, err
	}
	in, err := fromRecommendRequest(req)
	if err != nil {
		return nil, err
	}
	if err := s.checkVariant("Recommend", in.cfg.DefaultVariant); err != nil {
		return nil, err
	}
	if err := s.bounds.checkRecommend(&in); err != nil {
		return nil, err
	}
	a, err := s.registry.agent(in.key, in.cfg.Gates)
	if err != nil {
		return nil, err
	}
	p, err := a.Prepare(in.obs, in.constraints, in.def, in.cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	var d *nn.Decision
	frozen := s.frozenFor(in.key, p)
	if p.NeedsPolicy {
		dd, err := s.batcher.decide(ctx, p, frozen)
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
	action := ""
	if d != nil {
		action = s.spec.shape.ActionName(int(res.Action))
	}
	return &pb.RecommendResponse{
		Recommendation: wire.ToRecommendation(&res.Recommendation),
		Source:         wire.ToSource(res.Recommendation.Source),
		Stage:          wire.ToStage(res.Stage),
		PolicyVersion:  version,
		Reason:         res.Recommendation.Reason,
		Action:         action,
	}, nil
}

// ReportOutcome records a transition, and at the end of an episode moves
// the lifecycle and queues training.
func (s *Server) ReportOutcome(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	resp, err := s.reportOutcome(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) reportOutcome(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	if err := s.health.admitLearning(ctx); err != nil {
		return nil, err
	}
	in, err := fromReportOutcomeRequest(req)
	if err != nil {
		return nil, err
	}
	// Nothing is learnt from a mismatched outcome: its applied step was
	// made beside a default the policy does not act on.
	if err := s.checkVariant("ReportOutcome", in.outcome.Config.DefaultVariant); err != nil {
		return nil, err
	}
	if err := s.bounds.checkOutcome(&in); err != nil {
		return nil, err
	}
	a, err := s.registry.agent(in.key, in.outcome.Config.Gates)
	if err != nil {
		return nil, err
	}
	// The checkpoint's cut: it sees the stage transition and the pin
	// together.
	s.ckpt.cut.RLock()
	res, err := a.Outcome(in.outcome, s.opts.Now())
	if err == nil && res.Transition != nil {
		s.repin(ctx, in.key, res.Transition)
	}
	s.ckpt.cut.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	s.ckpt.markDirty()
	if rec, err := learn.MarshalExperience(res.Experience); err == nil {
		s.journal.add(in.key, rec)
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
			s.ckpt.markDirty()
			klog.FromContext(ctx).Error(err, "Persisting a stage transition failed; will retry", "workload", in.key)
		}
	}
	if res.Train != nil {
		s.trainer.submit(res.Train)
	}
	// The transition is recorded either way; a caller past its deadline is
	// told so, and a retry of the same outcome is the caller's choice.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &pb.ReportOutcomeResponse{
		Reward:          res.Reward.Reward,
		Stage:           wire.ToStage(res.Stage),
		PolicyVersion:   s.versionFor(in.key, res.Stage),
		EpisodeComplete: res.EpisodeComplete,
	}, nil
}

// checkVariant refuses, with ErrVariantMismatch, a request of method
// whose default recommendation came from another variant of the fused
// default (fusion.SameVariant) than the served policy's anchor. It runs
// before the request touches any state: no agent is created, no bound or
// call time recorded, nothing learnt.
func (s *Server) checkVariant(method, variant string) error {
	if fusion.SameVariant(variant, s.spec.shape.Anchor) {
		return nil
	}
	s.metrics.variantMismatches.WithLabelValues(method).Inc()
	// Short enough for status.rl.message (the recommender keeps 256
	// characters of it) with variants of usual length.
	return fmt.Errorf("%w: config.default_variant %s, the policy's anchor %s: run the recommender with --default-variant=%q or serve a policy trained with --anchor=%q",
		ErrVariantMismatch, variantName(variant), variantName(s.spec.shape.Anchor), s.spec.shape.Anchor, variant)
}

// variantName names a variant of the fused default in a message.
func variantName(v string) string {
	if v == "" {
		return `"" (the fused default)`
	}
	return fmt.Sprintf("%q", v)
}

// GetPolicyStatus reports one workload's agent.
func (s *Server) GetPolicyStatus(ctx context.Context, req *pb.GetPolicyStatusRequest) (*pb.GetPolicyStatusResponse, error) {
	resp, err := s.getPolicyStatus(ctx, req)
	return resp, toStatus(err)
}

func (s *Server) getPolicyStatus(ctx context.Context, req *pb.GetPolicyStatusRequest) (*pb.GetPolicyStatusResponse, error) {
	if err := s.health.admit(ctx); err != nil {
		return nil, err
	}
	key, err := fromGetPolicyStatusRequest(req)
	if err != nil {
		return nil, err
	}
	a := s.registry.lookup(key)
	if a == nil {
		return nil, fmt.Errorf("%s: %w", key, ErrUnknownWorkload)
	}
	st := a.Status()
	return &pb.GetPolicyStatusResponse{Status: &pb.PolicyStatus{
		Workload:      wire.Ref(key),
		Stage:         wire.ToStage(st.Stage),
		PolicyVersion: s.versionFor(key, st.Stage),
		Episodes:      st.Episodes,
		Transitions:   st.Transitions,
		RewardMean:    st.RewardMean,
		RewardStdDev:  st.RewardStdDev,
		LastUpdate:    timestamppb.New(st.LastUpdate),
	}}, nil
}

// frozenFor returns the frozen copy that answers p, key's decision, or nil
// when the shared policy answers it (or none does). Only Serving decisions
// are greedy, and they are the ones that must not drift.
func (s *Server) frozenFor(key string, p learn.Prepared) *frozenPolicy {
	if !p.NeedsPolicy || !p.Greedy || s.ens != nil {
		return nil
	}
	return s.pins.servingPolicy(key)
}

// versionFor names the weights that answer a workload in stage: its
// frozen copy's version while Serving, the shared policy's otherwise.
func (s *Server) versionFor(key string, stage lifecycle.Stage) string {
	if stage == lifecycle.Serving && s.ens == nil {
		return s.pins.servingPolicy(key).name
	}
	return s.PolicyVersion()
}

// repin follows a stage transition of key with its pin (frozen.go).
func (s *Server) repin(ctx context.Context, key string, t *lifecycle.Transition) {
	if s.ens != nil {
		return // the ensemble's weights never change: nothing to pin
	}
	s.pins.repin(ctx, key, t, s.PolicyVersion())
}
