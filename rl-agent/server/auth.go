package server

// Authorisation of callers by the identity of their verified client
// certificate (mutual TLS, pkg/kube/certs). Reading is open to any caller whose
// certificate the trusted CA signed; every other method, and any method
// added later, is for the authorised identities only (the recommender), so
// that nobody else can feed the agent transitions or change its state.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/aware-k8s/aware/pkg/kube/certs"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// readOnlyMethods change nothing and may be called by any authenticated
// client: the workload's status and the standard health service.
var readOnlyMethods = map[string]bool{
	pb.AgentService_GetPolicyStatus_FullMethodName: true,
	healthpb.Health_Check_FullMethodName:           true,
	healthpb.Health_Watch_FullMethodName:           true,
	healthpb.Health_List_FullMethodName:            true,
}

// Authorizer admits a call when its client certificate, verified by the
// TLS handshake, carries an authorised identity, or when the method only
// reads. It must be used with mutual TLS: without a verified certificate
// every call is Unauthenticated.
type Authorizer struct {
	identities []string
	refused    *prometheus.CounterVec
}

// NewAuthorizer authorises identities (a certificate's common name or a
// URI SAN) to call every method, and registers its metric on r.
func NewAuthorizer(identities []string, r prometheus.Registerer) (*Authorizer, error) {
	if len(identities) == 0 {
		return nil, errors.New("at least one authorised client identity is required")
	}
	a := &Authorizer{
		identities: slices.Clone(identities),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "aware", Subsystem: "rlagent", Name: "unauthorized_requests_total",
			Help: "gRPC calls refused by the client-certificate authorisation, by method and reason (unauthenticated: no verified certificate; forbidden: an identity that may not call the method).",
		}, []string{"method", "reason"}),
	}
	if err := r.Register(a.refused); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return a, nil
}

// Authorize returns nil when the caller in ctx may call fullMethod, else
// an Unauthenticated or PermissionDenied status.
func (a *Authorizer) Authorize(ctx context.Context, fullMethod string) error {
	ids, ok := peerIdentities(ctx)
	if !ok {
		a.refused.WithLabelValues(methodName(fullMethod), "unauthenticated").Inc()
		return status.Error(codes.Unauthenticated, "a client certificate verified by the agent's trusted CA is required")
	}
	if readOnlyMethods[fullMethod] || slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(a.identities, id) }) {
		return nil
	}
	a.refused.WithLabelValues(methodName(fullMethod), "forbidden").Inc()
	return status.Errorf(codes.PermissionDenied, "client %v may not call %s: only %v may report outcomes or change the agent's state", ids, methodName(fullMethod), a.identities)
}

// UnaryInterceptor refuses unauthorised unary calls.
func (a *Authorizer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := a.Authorize(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor refuses unauthorised streaming calls (health Watch).
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := a.Authorize(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// peerIdentities returns the identities of the caller's verified client
// certificate, and false when there is none.
func peerIdentities(ctx context.Context) ([]string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil, false
	}
	ids := certs.Identities(info.State.VerifiedChains[0][0])
	return ids, len(ids) > 0
}
