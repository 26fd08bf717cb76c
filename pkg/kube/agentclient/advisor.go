package agentclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

// Observer receives call outcomes, e.g. to export metrics. code is "OK",
// a gRPC code name, or "InvalidAnswer".
type Observer interface {
	ObserveAgentCall(method string, d time.Duration, code string)
	ObserveBreaker(s State)
}

// Options configure an Advisor.
type Options struct {
	// Timeout is each call's deadline.
	Timeout time.Duration
	// Breaker stops calls to a failing agent.
	Breaker *Breaker
	// Now is the clock (time is an input).
	Now func() time.Time
	// Observer may be nil.
	Observer Observer
	// DefaultVariant is the variant of the fused default (fusion.ParseVariant)
	// the recommender computes the default recommendations it sends with;
	// empty: the fused default. Every request carries it
	// (config.default_variant), so that an agent whose policy was trained
	// beside another variant refuses to act on them.
	DefaultVariant string
}

// Advisor asks the agent for each workload whose spec.rl.mode is Shadow or
// On and decides whether its answer is applied. It also reports the
// outcome of the previous step (whatever was applied) with the current
// observation, so the agent can learn, including from the defaults while
// it bootstraps.
type Advisor struct {
	client pb.AgentServiceClient
	opts   Options

	mu   sync.Mutex
	last map[types.UID]step
}

type step struct {
	obs     *pb.Observation
	applied *pb.Recommendation
	source  pb.Source
}

// NewAdvisor returns an advisor calling client.
func NewAdvisor(client pb.AgentServiceClient, o Options) *Advisor {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Breaker == nil {
		o.Breaker = NewBreaker(5, 30*time.Second)
	}
	return &Advisor{client: client, opts: o, last: map[types.UID]step{}}
}

// Forget drops the state of a deleted workload.
func (a *Advisor) Forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.last, uid)
}

// Remove tells the agent that the autoscaler namespace/name with uid was
// deleted, so that it drops the workload's state (ForgetWorkload) instead
// of keeping a slot for it until its TTL. It is skipped while the breaker
// is open; a failure is returned for the caller to log, and the agent's
// TTL is the fallback. It does not move the breaker: an agent that lacks
// the call (Unimplemented) still answers Recommend.
func (a *Advisor) Remove(ctx context.Context, namespace, name string, uid types.UID) error {
	a.Forget(uid)
	if !a.opts.Breaker.Allow(a.opts.Now()) {
		return errors.New("the agent failed repeatedly; calls are paused")
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	start := a.opts.Now()
	_, err := a.client.ForgetWorkload(cctx, &pb.ForgetWorkloadRequest{Workload: &pb.WorkloadRef{Namespace: namespace, Name: name, Uid: string(uid)}})
	a.observe("ForgetWorkload", start, err)
	if err != nil {
		return fmt.Errorf("ForgetWorkload %s/%s: %w", namespace, name, err)
	}
	return nil
}

func (a *Advisor) observe(method string, start time.Time, err error) {
	if a.opts.Observer == nil {
		return
	}
	code := "OK"
	if errors.Is(err, wire.ErrInvalidAnswer) {
		code = "InvalidAnswer"
	} else if err != nil {
		code = status.Code(err).String()
	}
	a.opts.Observer.ObserveAgentCall(method, a.opts.Now().Sub(start), code)
	a.opts.Observer.ObserveBreaker(a.opts.Breaker.State())
}

func config(m *v1alpha1.MultidimPodAutoscaler, variant string) *pb.Config {
	cfg := &pb.Config{Mode: pb.RLMode_RL_MODE_OFF, Alpha: 0.5, DefaultVariant: variant}
	rl := m.Spec.RL
	if rl == nil {
		return cfg
	}
	switch rl.Mode {
	case v1alpha1.RLModeShadow:
		cfg.Mode = pb.RLMode_RL_MODE_SHADOW
	case v1alpha1.RLModeOn:
		cfg.Mode = pb.RLMode_RL_MODE_ON
	}
	if rl.Alpha != nil {
		cfg.Alpha = *rl.Alpha
	}
	if g := rl.Gates; g != nil {
		cfg.Gates = &pb.Gates{Window: g.Window, EpisodeSteps: g.EpisodeSteps}
		for dst, src := range map[*float64]*float64{&cfg.Gates.PromoteMinMean: g.PromoteMinMean, &cfg.Gates.PromoteMaxStdDev: g.PromoteMaxStdDev,
			&cfg.Gates.RetrainBelowMean: g.RetrainBelowMean, &cfg.Gates.RetrainAboveStdDev: g.RetrainAboveStdDev} {
			if src != nil {
				*dst = *src
			}
		}
	}
	return cfg
}

// Advise implements the recommender's Advisor: the returned
// recommendation is the agent's only when the mode is On, the agent's
// stage lets it act, it chose to act (source Agent or Safeguard) and the
// answer is valid and within the constraints; otherwise it is def, and
// status.rl says why.
func (a *Advisor) Advise(ctx context.Context, m *v1alpha1.MultidimPodAutoscaler, obs *workload.Observation, c *workload.Constraints, def workload.Recommendation) (workload.Recommendation, *v1alpha1.RLStatus) {
	now := a.opts.Now()
	ref := &pb.WorkloadRef{Namespace: m.Namespace, Name: m.Name, Uid: string(m.UID)}
	if m.Spec.ScaleTargetRef != nil {
		ref.TargetKind = m.Spec.ScaleTargetRef.Kind
	}
	cfg := config(m, a.opts.DefaultVariant)
	pobs := wire.ToObservation(obs)
	fallback := func(reason, msg string, rl *v1alpha1.RLStatus) (workload.Recommendation, *v1alpha1.RLStatus) {
		// Outcomes are reported only for steps the agent answered: after
		// a failure it has no record of the step to attach a reward to.
		if rl == nil {
			rl = &v1alpha1.RLStatus{}
			// The agent did not answer: lastAgentContactTime keeps saying
			// when it last did (as last written), so an outage's length
			// shows in the status instead of the field vanishing.
			if prev := m.Status.RL; prev != nil && prev.LastAgentContactTime != nil {
				rl.LastAgentContactTime = prev.LastAgentContactTime.DeepCopy()
			}
			a.Forget(m.UID)
		} else {
			a.remember(m.UID, pobs, wire.ToRecommendation(&def), pb.Source_SOURCE_DEFAULT)
		}
		rl.Source, rl.Reason, rl.Message = v1alpha1.SourceDefault, reason, msg
		return def, rl
	}
	if !a.opts.Breaker.Allow(now) {
		return fallback("CircuitOpen", "the agent failed repeatedly; calls are paused", nil)
	}
	a.reportPrevious(ctx, m.UID, ref, pobs, cfg)

	cctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	start := a.opts.Now()
	resp, err := a.client.Recommend(cctx, &pb.RecommendRequest{
		Workload: ref, Observation: pobs, Constraints: wire.ToConstraints(c), DefaultRecommendation: wire.ToRecommendation(&def), Config: cfg,
	})
	if err != nil && status.Code(err) == codes.InvalidArgument {
		// The agent is up and refused this workload's input (e.g. outside
		// its physical bounds): a fault of the request, not of the agent,
		// so the breaker, which guards every workload, does not count it.
		a.observe("Recommend", start, err)
		return fallback("AgentRefusedInput", fmt.Sprintf("the agent refused the observation: %s", status.Convert(err).Message()), nil)
	}
	if err != nil && status.Code(err) == codes.FailedPrecondition {
		// The agent is up and its policy cannot act on this recommender's
		// default (trained beside another --default-variant): a fault of
		// the deployment that no retry mends. The breaker is not moved, so
		// that the agent's own words, naming both variants, stay in
		// status.rl instead of CircuitOpen.
		a.observe("Recommend", start, err)
		return fallback("AgentRefusedDefault", fmt.Sprintf("the agent cannot act on this recommender's default: %s", truncate(status.Convert(err).Message(), maxAgentMessage)), nil)
	}
	if err != nil {
		a.opts.Breaker.Failure(a.opts.Now())
		a.observe("Recommend", start, err)
		reason := "AgentUnavailable"
		if status.Code(err) == codes.DeadlineExceeded {
			reason = "AgentTimeout"
		}
		// The agent's own words say why (e.g. it cannot persist its
		// state), so the operator reads the cause in status.rl.
		st := status.Convert(err)
		msg := fmt.Sprintf("the agent did not answer: %s", st.Code())
		if m := st.Message(); m != "" && st.Code() != codes.DeadlineExceeded {
			msg += ": " + truncate(m, maxAgentMessage)
		}
		return fallback(reason, msg, nil)
	}
	a.opts.Breaker.Success()
	rl := &v1alpha1.RLStatus{
		Stage:                stage(resp.GetStage()),
		PolicyVersion:        resp.GetPolicyVersion(),
		LastAgentContactTime: &metav1.Time{Time: now},
	}
	rec, err := wire.FromRecommendation(resp.GetRecommendation())
	src := resp.GetSource()
	if err == nil && src != pb.Source_SOURCE_AGENT && src != pb.Source_SOURCE_SAFEGUARD && src != pb.Source_SOURCE_DEFAULT {
		err = fmt.Errorf("%w: source %s", wire.ErrInvalidAnswer, src)
	}
	a.observe("Recommend", start, err)
	switch {
	case err != nil:
		return fallback("InvalidAgentAnswer", err.Error(), rl)
	case cfg.Mode != pb.RLMode_RL_MODE_ON:
		return fallback("ShadowMode", "spec.rl.mode is Shadow: the agent learns, the default is applied", rl)
	case !actingStage(resp.GetStage()):
		reason := "AgentStageUnknown"
		if rl.Stage != "" {
			reason = "Agent" + string(rl.Stage)
		}
		return fallback(reason, "the agent's stage does not let it act yet", rl)
	case src == pb.Source_SOURCE_DEFAULT:
		return fallback("AgentDeferred", "the agent deferred to the default", rl)
	}
	if err := wire.Within(&rec, c); err != nil {
		return fallback("OutOfConstraints", err.Error(), rl)
	}
	rec.Source, rl.Source, rl.Reason = workload.SourceAgent, v1alpha1.SourceAgent, "AgentActing"
	if src == pb.Source_SOURCE_SAFEGUARD {
		rec.Source, rl.Source, rl.Reason = workload.SourceSafeguard, v1alpha1.SourceSafeguard, "SafeguardApplied"
	}
	rl.Message = resp.GetReason()
	if act := resp.GetAction(); act != "" {
		// What the policy chose, for operators; bounded, since it is the
		// agent's free text going into the object's status.
		rl.Message = fmt.Sprintf("%s: %.*s", rl.Message, maxActionName, act)
	}
	a.remember(m.UID, pobs, wire.ToRecommendation(&rec), src)
	return rec, rl
}

// maxActionName bounds the agent's action name copied into status.rl.
const maxActionName = 128

// reportPrevious sends the previous step's outcome with the current
// observation. Failures are counted, not retried: a lost transition costs
// one sample of learning, not correctness.
func (a *Advisor) reportPrevious(ctx context.Context, uid types.UID, ref *pb.WorkloadRef, next *pb.Observation, cfg *pb.Config) {
	a.mu.Lock()
	prev, ok := a.last[uid]
	delete(a.last, uid)
	a.mu.Unlock()
	if !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	start := a.opts.Now()
	_, err := a.client.ReportOutcome(cctx, &pb.ReportOutcomeRequest{
		Workload: ref, Observation: prev.obs, Applied: prev.applied, AppliedSource: prev.source, NextObservation: next, Config: cfg,
	})
	a.observe("ReportOutcome", start, err)
}

func (a *Advisor) remember(uid types.UID, obs *pb.Observation, applied *pb.Recommendation, src pb.Source) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last[uid] = step{obs: obs, applied: applied, source: src}
}

func actingStage(s pb.Stage) bool {
	return s == pb.Stage_STAGE_ONLINE_TRAINING || s == pb.Stage_STAGE_SERVING || s == pb.Stage_STAGE_RETRAINING
}

func stage(s pb.Stage) v1alpha1.RLStage {
	switch s {
	case pb.Stage_STAGE_BOOTSTRAPPING:
		return v1alpha1.RLStageBootstrapping
	case pb.Stage_STAGE_ONLINE_TRAINING:
		return v1alpha1.RLStageOnlineTraining
	case pb.Stage_STAGE_SERVING:
		return v1alpha1.RLStageServing
	case pb.Stage_STAGE_RETRAINING:
		return v1alpha1.RLStageRetraining
	}
	return ""
}

// maxAgentMessage bounds how much of an agent's error message goes into
// status.rl.message: the agent is another process, maybe another team's.
const maxAgentMessage = 256

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
