package server

import (
	"context"
	"sync/atomic"
	"time"

	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

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
