package server

// The requests' conversion and checking live in proto/aware/rlagent/wire,
// beside the contract and apart from the server, so that they can be fuzzed
// without linking it (see that package); here they are adapted to the
// agent's types.

import (
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/proto/aware/rlagent/wire"
)

// ErrInvalidArgument marks a request that can never succeed as sent.
var ErrInvalidArgument = wire.ErrInvalidArgument

// FieldViolation is one problem with one field.
type FieldViolation = wire.FieldViolation

// InvalidRequestError lists every problem found in a request. It matches
// ErrInvalidArgument with errors.Is.
type InvalidRequestError = wire.InvalidRequestError

// recommendInput is a validated RecommendRequest.
type recommendInput struct {
	key         string
	obs         workload.Observation
	constraints workload.Constraints
	def         workload.Recommendation
	cfg         learn.Config
}

func fromRecommendRequest(r *pb.RecommendRequest) (recommendInput, error) {
	in, err := wire.FromRecommend(r)
	return recommendInput{key: in.Key, obs: in.Observation, constraints: in.Constraints, def: in.Default, cfg: in.Config}, err
}

// outcomeInput is a validated ReportOutcomeRequest.
type outcomeInput struct {
	key     string
	outcome learn.Outcome
}

func fromReportOutcomeRequest(r *pb.ReportOutcomeRequest) (outcomeInput, error) {
	in, err := wire.FromReportOutcome(r)
	return outcomeInput{key: in.Key, outcome: learn.Outcome{
		Observation:   in.Observation,
		Applied:       in.Applied,
		AppliedSource: in.AppliedSource,
		Next:          in.Next,
		Config:        in.Config,
	}}, err
}

func fromGetPolicyStatusRequest(r *pb.GetPolicyStatusRequest) (string, error) {
	return wire.WorkloadKey(r.GetWorkload())
}
