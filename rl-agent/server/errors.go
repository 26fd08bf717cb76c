package server

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aware-k8s/aware/pkg/rl/nn"
)

var (
	// ErrOverloaded is returned when the decision queue is full.
	ErrOverloaded = errors.New("agent overloaded: decision queue full")
	// ErrShuttingDown is returned once the server has begun to shut down.
	ErrShuttingDown = errors.New("agent shutting down")
	// ErrUnknownWorkload is returned for a status query about a workload
	// the agent has never seen.
	ErrUnknownWorkload = errors.New("unknown workload")
	// ErrTooManyWorkloads is returned when a new workload would exceed the
	// configured limit.
	ErrTooManyWorkloads = errors.New("too many workloads")
	// ErrCannotPersist makes the server unready, and refuse the calls
	// that act or learn, while it cannot write its state directory.
	ErrCannotPersist = errors.New("cannot persist agent state")
	// ErrVariantMismatch refuses a request whose default recommendation
	// came from another variant of the fused default than the one the
	// served policy was trained beside: its residual actions would move a
	// default it never learnt from. The recommender, or the policy, must be
	// redeployed; a retry cannot succeed.
	ErrVariantMismatch = errors.New("default variant mismatch")
)

// errorCodes is the one place where domain errors become gRPC status codes;
// the first entry that errors.Is matches wins. Anything unlisted is
// Internal: a bug or an I/O failure, never the caller's fault.
var errorCodes = []struct {
	err  error
	code codes.Code
}{
	{ErrInvalidArgument, codes.InvalidArgument},
	{nn.ErrInvalidInput, codes.InvalidArgument},
	{ErrOverloaded, codes.Unavailable},
	{ErrShuttingDown, codes.Unavailable},
	{ErrCannotPersist, codes.Unavailable},
	{ErrUnknownWorkload, codes.NotFound},
	{ErrTooManyWorkloads, codes.ResourceExhausted},
	{ErrVariantMismatch, codes.FailedPrecondition},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// codeOf returns the status code for err.
func codeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return codes.Internal
}

// toStatus converts a domain error into a gRPC status error. Invalid
// requests carry a BadRequest detail listing every field violation, so a
// client can point at the field without parsing the message.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	st := status.New(codeOf(err), err.Error())
	var inv *InvalidRequestError
	if errors.As(err, &inv) {
		br := &errdetails.BadRequest{}
		for _, v := range inv.Violations {
			br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		if d, derr := st.WithDetails(br); derr == nil {
			st = d
		}
	}
	return st.Err()
}
