package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newPPO(t testing.TB, seed uint64) *nn.PPO {
	t.Helper()
	cfg := nn.DefaultConfig(learn.StateDim, int(learn.NumActions))
	cfg.MinibatchSize = 16
	cfg.Seed = seed
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// harness is a server behind a gRPC server on an in-memory listener.
type harness struct {
	srv    *Server
	reg    *prometheus.Registry
	client pb.AgentServiceClient
	health healthpb.HealthClient
	conn   *grpc.ClientConn
	g      *grpc.Server
}

func start(t testing.TB, mutate func(*Options)) *harness {
	t.Helper()
	o := DefaultOptions()
	o.Learner = newPPO(t, 1)
	// The agent's clock is past every tick a test reports: observations
	// stamped ahead of it are refused (bounds.go).
	o.Now = func() time.Time { return t0.Add(1000 * time.Hour) }
	h := &harness{reg: prometheus.NewRegistry()}
	o.Registerer = h.reg
	if mutate != nil {
		mutate(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	lis := bufconn.Listen(1 << 20)
	h.g = grpc.NewServer(grpc.ChainUnaryInterceptor(srv.UnaryInterceptor()))
	srv.Register(h.g)
	go h.g.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.conn, h.client, h.health = conn, pb.NewAgentServiceClient(conn), healthpb.NewHealthClient(conn)
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.conn.Close()
	GracefulStop(h.g, time.Second)
	h.srv.Close()
}

// restartStore stops h (if not yet stopped), closes its store st and reopens the state in dir,
// as a restarted agent would; the new store is closed when the test ends.
func restartStore(t testing.TB, h *harness, st *store.Store, dir string) (*store.Store, store.Recovery) {
	t.Helper()
	h.stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, rec, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	return st2, rec
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

const mi = 1 << 20

func ref(name string) *pb.WorkloadRef {
	return &pb.WorkloadRef{Namespace: "shop", Name: name, Uid: "uid-" + name, TargetKind: "Deployment"}
}

func observation(tick int) *pb.Observation {
	return &pb.Observation{
		Time:     timestamppb.New(t0.Add(time.Duration(tick) * time.Minute)),
		Window:   durationpb.New(time.Minute),
		Replicas: 3, ReadyReplicas: 3,
		Containers: []*pb.ContainerObservation{{
			Name:     "app",
			Requests: &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi},
			Usage:    &pb.Resources{CpuCores: 0.9, MemoryBytes: 470 * mi},
			Peak:     &pb.Resources{CpuCores: 0.95, MemoryBytes: 480 * mi},
		}},
		RequestRate: 100, Latency: &pb.Latency{P50Seconds: 0.02, P95Seconds: 0.05, P99Seconds: 0.08},
		SloSeconds: 0.2, Samples: 6,
	}
}

func defaultRec() *pb.Recommendation {
	return &pb.Recommendation{Replicas: 3, Containers: []*pb.ContainerRecommendation{{
		Name: "app", Target: &pb.Resources{CpuCores: 1, MemoryBytes: 512 * mi},
	}}}
}

// config has small gates so that tests reach a stage in a few calls.
func config() *pb.Config {
	return &pb.Config{Mode: pb.RLMode_RL_MODE_ON, Alpha: 0.5, Gates: &pb.Gates{Window: 2, EpisodeSteps: 1}}
}

func recommendReq(name string, tick int) *pb.RecommendRequest {
	return &pb.RecommendRequest{
		Workload: ref(name), Observation: observation(tick),
		Constraints:           &pb.Constraints{MinReplicas: 1, MaxReplicas: 10},
		DefaultRecommendation: defaultRec(), Config: config(),
	}
}

func outcomeReq(name string, tick int) *pb.ReportOutcomeRequest {
	return &pb.ReportOutcomeRequest{
		Workload: ref(name), Observation: observation(tick), Applied: defaultRec(),
		AppliedSource: pb.Source_SOURCE_DEFAULT, NextObservation: observation(tick + 1), Config: config(),
	}
}

// promote feeds good outcomes (reward ≈ 0.95) until the workload leaves
// Bootstrapping: with window 2 and one step per episode, two of them.
func promote(t testing.TB, c pb.AgentServiceClient, name string) {
	t.Helper()
	for i := range 2 {
		r, err := c.ReportOutcome(ctx(t), outcomeReq(name, i))
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 1; (r.Stage == pb.Stage_STAGE_ONLINE_TRAINING) != want || !r.EpisodeComplete {
			t.Fatalf("outcome %d: %v", i, r)
		}
	}
}

// sameAllocation compares replicas and targets, the parts of a
// recommendation that are applied.
func sameAllocation(a, b *pb.Recommendation) bool {
	if a.GetReplicas() != b.GetReplicas() || len(a.GetContainers()) != len(b.GetContainers()) {
		return false
	}
	for i := range a.GetContainers() {
		x, y := a.GetContainers()[i], b.GetContainers()[i]
		if x.GetName() != y.GetName() || !proto.Equal(x.GetTarget(), y.GetTarget()) {
			return false
		}
	}
	return true
}

// wantField checks for InvalidArgument with a BadRequest naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %v (%v), want InvalidArgument", st.Code(), err)
	}
	if !strings.Contains(st.Message(), field) {
		t.Errorf("message %q does not name %s", st.Message(), field)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return
				}
			}
			t.Errorf("BadRequest %v lacks field %s", br, field)
			return
		}
	}
	t.Errorf("no BadRequest detail in %v", st.Proto())
}

// gatedLearner blocks ActBatch until released, to hold the batcher.
type gatedLearner struct {
	Learner
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int64
	maxSize atomic.Int64
	// onDemand learners gate only while paused is set, so a test can set up
	// state through the learner first; others gate every call.
	onDemand bool
	paused   atomic.Bool
}

func (g *gatedLearner) ActBatch(states [][]float64, masks [][]bool, greedy bool, rng *rand.Rand) ([]nn.Decision, error) {
	g.calls.Add(1)
	for {
		cur := g.maxSize.Load()
		if int64(len(states)) <= cur || g.maxSize.CompareAndSwap(cur, int64(len(states))) {
			break
		}
	}
	if g.entered != nil && (!g.onDemand || g.paused.Load()) {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Learner.ActBatch(states, masks, greedy, rng)
}

// fakeStore records what the server persists and can fail on demand.
type fakeStore struct {
	mu        sync.Mutex
	appended  []string // workload of each durable record, in order
	compacted [][]string
	failNext  bool
	// failCheckpoints fails every SaveCheckpoint while set.
	failCheckpoints bool
	ckpts           map[string][]byte
}

var _ Store = (*fakeStore)(nil)

// workloadsOf names the workload of each record; an undecodable record
// shows as "<corrupt>" and fails the comparisons.
func workloadsOf(recs [][]byte) []string {
	var out []string
	for _, r := range recs {
		e, err := learn.UnmarshalExperience(r)
		if err != nil {
			e.Workload = "<corrupt>"
		}
		out = append(out, e.Workload)
	}
	return out
}

func (f *fakeStore) Experience() [][]byte { return nil }
func (f *fakeStore) Append(recs [][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext {
		f.failNext = false
		return errors.New("disk full")
	}
	f.appended = append(f.appended, workloadsOf(recs)...)
	return nil
}
func (f *fakeStore) Compact(keep [][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacted = append(f.compacted, workloadsOf(keep))
	return nil
}
func (f *fakeStore) SaveCheckpoint(name string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failCheckpoints {
		return errors.New("read-only file system")
	}
	f.ckpts[name] = data
	return nil
}
func (f *fakeStore) LoadCheckpoint(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.ckpts[name]; ok {
		return b, nil
	}
	return nil, store.ErrNotFound
}
