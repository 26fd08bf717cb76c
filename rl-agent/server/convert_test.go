package server

import (
	"errors"
	"math"
	"testing"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// checkConverted asserts the invariant of conversion: either the request is
// rejected as InvalidArgument with every violation naming a field, or the
// result passes the domain's own validation and encodes to a finite state.
func checkConverted(t *testing.T, in recommendInput, err error) {
	t.Helper()
	if err != nil {
		var inv *InvalidRequestError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &inv) || len(inv.Violations) == 0 {
			t.Fatalf("rejection is not a field-level InvalidArgument: %v", err)
		}
		for _, v := range inv.Violations {
			if v.Field == "" || v.Description == "" {
				t.Fatalf("violation without field or description: %+v", v)
			}
		}
		return
	}
	for what, verr := range map[string]error{
		"observation": in.obs.Validate(), "constraints": in.constraints.Validate(),
		"default": in.def.Validate(), "config": in.cfg.Validate(),
	} {
		if verr != nil {
			t.Fatalf("accepted request has an invalid %s: %v", what, verr)
		}
	}
	if len(in.obs.Containers) == 0 {
		t.Fatal("accepted an observation without containers")
	}
	s := learn.Encode(learn.Input{Observation: in.obs, Constraints: in.constraints, Default: in.def})
	for i, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("feature %d is %v", i, v)
		}
	}
	if m := learn.Mask(&in.obs, &in.constraints, learn.DefaultSteps()); !m[learn.NoOp] {
		t.Fatal("NoOp masked")
	}
}

// TestConvertedRequestsEncode: what the conversion (proto/aware/rlagent/wire,
// where it is fuzzed) accepts, the agent encodes to a finite state with
// NoOp legal; what it refuses is refused field by field.
func TestConvertedRequestsEncode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*pb.RecommendRequest)
	}{
		{"valid", func(*pb.RecommendRequest) {}},
		{"empty", func(r *pb.RecommendRequest) { *r = pb.RecommendRequest{} }},
		{"NaN request rate", func(r *pb.RecommendRequest) { r.Observation.RequestRate = math.NaN() }},
		{"+Inf p95", func(r *pb.RecommendRequest) { r.Observation.Latency.P95Seconds = math.Inf(1) }},
		{"no containers", func(r *pb.RecommendRequest) { r.Observation.Containers = nil }},
		{"default without containers", func(r *pb.RecommendRequest) { r.DefaultRecommendation.Containers = nil }},
		{"no constraints", func(r *pb.RecommendRequest) { r.Constraints = nil }},
		{"no gates", func(r *pb.RecommendRequest) { r.Config.Gates = nil }},
		{"tiny and huge amounts", func(r *pb.RecommendRequest) {
			r.Observation.Containers[0].Usage.CpuCores = math.SmallestNonzeroFloat64
			r.Observation.Containers[0].Requests.MemoryBytes = math.MaxFloat64
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recommendReq("web", 0)
			tc.mutate(r)
			in, err := fromRecommendRequest(r)
			checkConverted(t, in, err)
		})
	}
}
