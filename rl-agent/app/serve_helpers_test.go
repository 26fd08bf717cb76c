package app

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runCommand starts `rl-agent serve args...` (the subcommand alone: the
// root's logging flags can only be applied once per process) and returns a function that stops it
// (as SIGTERM would) and returns its error.
func runCommand(t *testing.T, args ...string) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newServeCommand()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	done := make(chan error, 1)
	go func() {
		err := cmd.ExecuteContext(ctx)
		if err != nil {
			t.Logf("rl-agent serve %s: %v", strings.Join(args, " "), err)
		}
		done <- err
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not stop within 20s")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func waitServing(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: pb.AgentService_ServiceDesc.ServiceName})
		cancel()
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving: %v %v", r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func request() *pb.RecommendRequest {
	return &pb.RecommendRequest{
		Workload: &pb.WorkloadRef{Namespace: "ns", Name: "web", Uid: "1"},
		Observation: &pb.Observation{
			Time: timestamppb.New(time.Unix(1000, 0)), Replicas: 2, ReadyReplicas: 2, RequestRate: 10,
			Containers: []*pb.ContainerObservation{{Name: "app", Requests: &pb.Resources{CpuCores: 1, MemoryBytes: 1 << 30}, Usage: &pb.Resources{CpuCores: 0.5, MemoryBytes: 1 << 29}}},
		},
		DefaultRecommendation: &pb.Recommendation{Replicas: 2, Containers: []*pb.ContainerRecommendation{{Name: "app", Target: &pb.Resources{CpuCores: 1, MemoryBytes: 1 << 30}}}},
		Config:                &pb.Config{Mode: pb.RLMode_RL_MODE_ON, Alpha: 0.5},
	}
}

// nextObservation is request()'s observation one minute later: an outcome
// moves forward in time.
func nextObservation() *pb.Observation {
	o := request().Observation
	o.Time = timestamppb.New(o.Time.AsTime().Add(time.Minute))
	return o
}

func writePolicy(t *testing.T, l interface{ MarshalBinary() ([]byte, error) }) string {
	t.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.ckpt")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func smallPPO(t *testing.T, stateDim int) *nn.PPO {
	t.Helper()
	cfg := nn.DefaultConfig(stateDim, int(learn.NumActions))
	cfg.Hidden = []int{8}
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func smallMeta(t *testing.T, stateDim, window int) *nn.MetaPPO {
	t.Helper()
	return smallMetaAux(t, stateDim, window, 0)
}

// smallMetaAux is smallMeta with an auxiliary head of auxDim outputs (as
// `rl-agent train --meta-aux-weight` gives).
func smallMetaAux(t *testing.T, stateDim, window, auxDim int) *nn.MetaPPO {
	t.Helper()
	cfg := nn.DefaultMetaConfig(stateDim, int(learn.NumActions))
	cfg.Hidden, cfg.Window, cfg.EmbedDim = []int{8}, window, 3
	if auxDim > 0 {
		cfg.AuxDim, cfg.AuxWeight = auxDim, 1
	}
	m, err := nn.NewMetaPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// callCtx bounds one phase of a serve test (a call, or a start that must
// be refused) on its own. A deadline shared by the phases before and after
// a restart ran out when -race tests loaded both cores, and failed the
// first call after the restart with DeadlineExceeded.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startServe runs serve on dir, plaintext on a free loopback port without
// metrics or health endpoints, with the extra flags, and waits until it
// serves. It returns those base flags without the extras (to restart on
// the same port with others), the serve stop function, and a connection
// closed when the test ends.
func startServe(t *testing.T, dir string, extra ...string) (base []string, stop func() error, conn *grpc.ClientConn) {
	t.Helper()
	addr := freeAddr(t)
	base = []string{"--listen-address", addr, "--state-dir", dir, "--metrics-bind-address", "0", "--health-bind-address", "0", "--tls-mode", "plaintext"}
	stop = runCommand(t, append(slices.Clone(base), extra...)...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	waitServing(t, conn)
	return base, stop, conn
}

// stopForState stops serve, which must return cleanly, and returns the
// checkpoint it left in dir.
func stopForState(t *testing.T, stop func() error, dir string) []byte {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	state, err := os.ReadFile(filepath.Join(dir, "state.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// refusedStart runs serve with args and requires it to refuse the state in
// dir as incompatible, leaving the checkpoint byte-identical to state.
func refusedStart(ctx context.Context, t *testing.T, dir string, state []byte, args ...string) {
	t.Helper()
	cmd := newServeCommand()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "incompatible") {
		t.Fatalf("serve %s: %v, want an incompatible-state error", strings.Join(args, " "), err)
	}
	after, err := os.ReadFile(filepath.Join(dir, "state.ckpt"))
	if err != nil || !bytes.Equal(after, state) {
		t.Fatalf("the refused start changed the state (err %v)", err)
	}
}
