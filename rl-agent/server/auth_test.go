package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func peerWith(cert *x509.Certificate) context.Context {
	st := tls.ConnectionState{}
	if cert != nil {
		st.VerifiedChains = [][]*x509.Certificate{{cert}}
	}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: st}})
}

func TestAuthorizer(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewAuthorizer([]string{"aware-recommender", "spiffe://cluster/ns/aware-system/sa/aware-recommender"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	recommender := &x509.Certificate{Subject: pkix.Name{CommonName: "aware-recommender"}}
	spiffe := &x509.Certificate{URIs: []*url.URL{{Scheme: "spiffe", Host: "cluster", Path: "/ns/aware-system/sa/aware-recommender"}}}
	other := &x509.Certificate{Subject: pkix.Name{CommonName: "intruder"}}
	nameless := &x509.Certificate{}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		method string
		want   codes.Code
	}{
		{"recommender recommends", peerWith(recommender), pb.AgentService_Recommend_FullMethodName, codes.OK},
		{"recommender reports", peerWith(recommender), pb.AgentService_ReportOutcome_FullMethodName, codes.OK},
		{"identity by URI SAN", peerWith(spiffe), pb.AgentService_ReportOutcome_FullMethodName, codes.OK},
		{"other identity reads", peerWith(other), pb.AgentService_GetPolicyStatus_FullMethodName, codes.OK},
		{"other identity checks health", peerWith(other), healthpb.Health_Watch_FullMethodName, codes.OK},
		{"other identity may not recommend", peerWith(other), pb.AgentService_Recommend_FullMethodName, codes.PermissionDenied},
		{"other identity may not report", peerWith(other), pb.AgentService_ReportOutcome_FullMethodName, codes.PermissionDenied},
		{"a method added later is for the recommender", peerWith(other), "/aware.rlagent.v1.AgentService/ForgetWorkload", codes.PermissionDenied},
		{"a certificate without identity", peerWith(nameless), pb.AgentService_GetPolicyStatus_FullMethodName, codes.Unauthenticated},
		{"TLS without a verified certificate", peerWith(nil), pb.AgentService_GetPolicyStatus_FullMethodName, codes.Unauthenticated},
		{"no peer", context.Background(), healthpb.Health_Check_FullMethodName, codes.Unauthenticated},
		{"plaintext peer", peer.NewContext(context.Background(), &peer.Peer{}), pb.AgentService_Recommend_FullMethodName, codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(a.Authorize(tc.ctx, tc.method)); got != tc.want {
				t.Fatalf("Authorize = %v, want %v", got, tc.want)
			}
		})
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues("Recommend", "forbidden")); n != 1 {
		t.Errorf("forbidden Recommend counted %g times, want 1", n)
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues("GetPolicyStatus", "unauthenticated")); n != 2 {
		t.Errorf("unauthenticated GetPolicyStatus counted %g times, want 2", n)
	}
	if _, err := NewAuthorizer(nil, prometheus.NewRegistry()); err == nil {
		t.Error("no identities must be refused")
	}
}
