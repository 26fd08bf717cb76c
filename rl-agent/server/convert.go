package server

// The requests' conversion and checking live in rl-agent/request, apart
// from the server so that they can be fuzzed without linking it (see that
// package); here they are adapted to the agent's types.

import (
	"github.com/aware-k8s/aware/pkg/learn"
	"github.com/aware-k8s/aware/pkg/lifecycle"
	"github.com/aware-k8s/aware/pkg/workload"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/rl-agent/request"
)

// ErrInvalidArgument marks a request that can never succeed as sent.
var ErrInvalidArgument = request.ErrInvalidArgument

// FieldViolation is one problem with one field.
type FieldViolation = request.FieldViolation

// InvalidRequestError lists every problem found in a request. It matches
// ErrInvalidArgument with errors.Is.
type InvalidRequestError = request.InvalidRequestError

// recommendInput is a validated RecommendRequest.
type recommendInput struct {
	key         string
	obs         workload.Observation
	constraints workload.Constraints
	def         workload.Recommendation
	cfg         learn.Config
}

func fromRecommendRequest(r *pb.RecommendRequest) (recommendInput, error) {
	in, err := request.FromRecommend(r)
	return recommendInput{key: in.Key, obs: in.Observation, constraints: in.Constraints, def: in.Default, cfg: in.Config}, err
}

// outcomeInput is a validated ReportOutcomeRequest.
type outcomeInput struct {
	key     string
	outcome learn.Outcome
}

func fromReportOutcomeRequest(r *pb.ReportOutcomeRequest) (outcomeInput, error) {
	in, err := request.FromReportOutcome(r)
	return outcomeInput{key: in.Key, outcome: learn.Outcome{
		Observation:   in.Observation,
		Applied:       in.Applied,
		AppliedSource: in.AppliedSource,
		Next:          in.Next,
		Config:        in.Config,
	}}, err
}

func fromGetPolicyStatusRequest(r *pb.GetPolicyStatusRequest) (string, error) {
	return request.WorkloadKey(r.GetWorkload())
}

func toStage(s lifecycle.Stage) pb.Stage {
	switch s {
	case lifecycle.Bootstrapping:
		return pb.Stage_STAGE_BOOTSTRAPPING
	case lifecycle.OnlineTraining:
		return pb.Stage_STAGE_ONLINE_TRAINING
	case lifecycle.Serving:
		return pb.Stage_STAGE_SERVING
	case lifecycle.Retraining:
		return pb.Stage_STAGE_RETRAINING
	}
	return pb.Stage_STAGE_UNSPECIFIED
}
