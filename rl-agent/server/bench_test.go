package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// tcpHarness serves on a loopback TCP port, as in production.
func tcpHarness(b *testing.B) (*Server, *grpc.ClientConn) {
	b.Helper()
	return tcpHarnessWith(b, nil)
}

// tcpHarnessWith is tcpHarness with the options changed by mutate.
func tcpHarnessWith(b *testing.B, mutate func(*Options)) (*Server, *grpc.ClientConn) {
	b.Helper()
	o := DefaultOptions()
	o.Learner = newPPO(b, 1)
	o.Registerer = prometheus.NewRegistry()
	if mutate != nil {
		mutate(&o)
	}
	srv, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer(grpc.ChainUnaryInterceptor(srv.UnaryInterceptor()))
	srv.Register(g)
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		GracefulStop(g, time.Second)
		srv.Close()
	})
	return srv, conn
}

// BenchmarkRecommendLatency is one client calling Recommend in a loop for
// a workload the agent acts on (OnlineTraining: a forward pass each call),
// over loopback TCP. It reports the p50 and p99 of the round trip.
func BenchmarkRecommendLatency(b *testing.B) {
	srv, conn := tcpHarness(b)
	c := pb.NewAgentServiceClient(conn)
	promote(b, c, "web")
	waitTrainerIdle(srv)
	req := recommendReq("web", 10)
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<16)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		r, err := c.Recommend(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if r.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
			b.Fatalf("stage %v", r.Stage)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// benchmarkBatched runs many concurrent callers, each for its own
// workload, and reports decisions per second and the mean batch size.
// Each workload first reports `history` outcomes beyond the two that
// promote it, e.g. to fill a Meta-PPO window.
func benchmarkBatched(b *testing.B, call func(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error), srv *Server, c pb.AgentServiceClient, history int) {
	const workloads = 256
	for i := range workloads {
		promote(b, c, fmt.Sprintf("w%d", i))
		for tick := 2; tick < 2+history; tick++ {
			if _, err := c.ReportOutcome(ctx(b), outcomeReq(fmt.Sprintf("w%d", i), tick)); err != nil {
				b.Fatal(err)
			}
		}
	}
	reqs := make([]*pb.RecommendRequest, workloads)
	for i := range reqs {
		reqs[i] = recommendReq(fmt.Sprintf("w%d", i), 10)
	}
	waitTrainerIdle(srv)
	var next atomic.Int64
	sum0, n0 := histogramSum(srv)
	b.SetParallelism(32) // 32×GOMAXPROCS callers
	b.ResetTimer()
	b.RunParallel(func(pbb *testing.PB) {
		req := reqs[int(next.Add(1))%workloads]
		ctx := context.Background()
		for pbb.Next() {
			if _, err := call(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	if sum, n := histogramSum(srv); n > n0 {
		b.ReportMetric((sum-sum0)/float64(n-n0), "decisions/batch")
	}
}

// waitTrainerIdle waits until every training job queued so far has run
// and been counted, so that it neither competes with what is measured nor
// lands in a later reading of the metrics.
func waitTrainerIdle(srv *Server) {
	for srv.trainer.pending.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
}

func histogramSum(srv *Server) (float64, uint64) {
	ch := make(chan prometheus.Metric, 1)
	srv.metrics.batchSize.Collect(ch)
	d := dtoMetric(<-ch)
	return d.GetHistogram().GetSampleSum(), d.GetHistogram().GetSampleCount()
}

// BenchmarkBatchedDecisionsTCP is the service's throughput: concurrent
// clients over loopback TCP, sharing one connection (as the recommender
// does) or spread over four. Client and server share the 2 cores.
func BenchmarkBatchedDecisionsTCP(b *testing.B) {
	for _, conns := range []int{1, 4} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			srv, conn := tcpHarness(b)
			clients := []pb.AgentServiceClient{pb.NewAgentServiceClient(conn)}
			for range conns - 1 {
				cc, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cc.Close() })
				clients = append(clients, pb.NewAgentServiceClient(cc))
			}
			var n atomic.Int64
			benchmarkBatched(b, func(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
				return clients[int(n.Add(1))%len(clients)].Recommend(ctx, req)
			}, srv, clients[0], 0)
		})
	}
}

// BenchmarkBatchedDecisionsInProcess calls the handler directly: the
// agent's own throughput (conversion, batching, forward pass) without
// gRPC's transport.
func BenchmarkBatchedDecisionsInProcess(b *testing.B) {
	srv, conn := tcpHarness(b)
	benchmarkBatched(b, srv.Recommend, srv, pb.NewAgentServiceClient(conn), 0)
}

// BenchmarkBatchedDecisionsInProcessServing is the same with every
// workload in Serving (two more good episodes each): greedy decisions
// answered by the frozen copies the workloads were pinned to. Training
// runs between the promotions, so they pin many versions (up to
// MaxFrozenPolicies copies) and a batch takes one forward pass per copy in
// it, the worst case for coalescing.
func BenchmarkBatchedDecisionsInProcessServing(b *testing.B) {
	srv, conn := tcpHarness(b)
	benchmarkBatched(b, srv.Recommend, srv, pb.NewAgentServiceClient(conn), 2)
	b.ReportMetric(float64(srv.pins.len()), "frozen-policies")
}

// BenchmarkBatchedDecisionsInProcessMetaPPO is the same for the default
// Meta-PPO policy (window 16, embedding 8), every workload with a full
// window: each forward pass also runs the GRU over 16 steps per decision.
func BenchmarkBatchedDecisionsInProcessMetaPPO(b *testing.B) {
	cfg := nn.DefaultMetaConfig(learn.StateDim, int(learn.NumActions))
	m, err := nn.NewMetaPPO(cfg)
	if err != nil {
		b.Fatal(err)
	}
	srv, conn := tcpHarnessWith(b, func(o *Options) { o.Learner, o.MetaLearner = nil, m })
	benchmarkBatched(b, srv.Recommend, srv, pb.NewAgentServiceClient(conn), cfg.Window)
}

func dtoMetric(m prometheus.Metric) *dto.Metric {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	return &d
}
