package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aware-k8s/aware/pkg/kube/certs"
	"github.com/aware-k8s/aware/pkg/lab/train"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func TestServeOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*serveOptions)
		want   string
	}{
		{"valid", func(*serveOptions) {}, ""},
		{"no state dir", func(o *serveOptions) { o.StateDir = "" }, "--state-dir"},
		{"bad listen address", func(o *serveOptions) { o.ListenAddress = "nonsense" }, "--listen-address"},
		{"bad metrics address", func(o *serveOptions) { o.MetricsBindAddress = "x" }, "--metrics-bind-address"},
		{"metrics disabled", func(o *serveOptions) { o.MetricsBindAddress = "0" }, ""},
		{"no TLS chosen", func(o *serveOptions) { o.TLS.Mode = "" }, "no TLS for the agent link"},
		{"cert without key", func(o *serveOptions) { o.TLS.Mode, o.TLS.CertFile = "", "c.pem" }, "--tls-key-file"},
		{"self-managed", func(o *serveOptions) { o.TLS.Mode = certs.LinkModeSelfManaged }, ""},
		{"TLS without authorised identities", func(o *serveOptions) {
			o.TLS.Mode, o.AuthorizedIdentities = certs.LinkModeSelfManaged, nil
		}, "--authorized-client-identities"},
		{"plaintext needs no identities", func(o *serveOptions) { o.AuthorizedIdentities = nil }, ""},
		{"negative batch wait", func(o *serveOptions) { o.BatchWait = -time.Millisecond }, "--batch-wait"},
		{"negative workload ttl", func(o *serveOptions) { o.WorkloadTTL = -time.Hour }, "--workload-ttl"},
		{"zero queue", func(o *serveOptions) { o.QueueSize = 0 }, "--queue-size"},
		{"no frozen policies", func(o *serveOptions) { o.MaxFrozenPolicies = 0 }, "--max-frozen-policies"},
		{"meta-ppo", func(o *serveOptions) { o.Policy = "meta-ppo" }, ""},
		{"unknown policy", func(o *serveOptions) { o.Policy = "ddpg" }, `--policy must be "ppo" or "meta-ppo", got "ddpg"`},
		{"retraining min above max", func(o *serveOptions) { o.RetrainMin, o.RetrainMax = 5, 3 }, "--retrain-min-episodes, --retrain-max-episodes: retraining min 5 must not exceed max 3"},
		{"retraining gate only", func(o *serveOptions) { o.RetrainMin, o.RetrainMax = 0, 0 }, ""},
		{"residual", func(o *serveOptions) { o.ActionSpace = "residual" }, ""},
		{"unknown action space", func(o *serveOptions) { o.ActionSpace = "joint" }, `--action-space must be "paper" or "residual", got "joint"`},
		{"residual meta-ppo", func(o *serveOptions) { o.ActionSpace, o.Policy = "residual", "meta-ppo" }, ""},
		{"meta-ppo reading signatures", func(o *serveOptions) { o.Policy, o.MetaSignature = "meta-ppo", true }, ""},
		{"signature without meta-ppo", func(o *serveOptions) { o.MetaSignature = true }, "--meta-signature configures a fresh Meta-PPO"},
		{"signature with a checkpoint", func(o *serveOptions) { o.Policy, o.MetaSignature, o.InitialCheckpoint = "meta-ppo", true, "c" }, "--meta-signature configures a fresh Meta-PPO"},
		{"ensemble", func(o *serveOptions) { o.EnsembleCheckpoints, o.EnsembleQuorum = []string{"a", "b", "c"}, 2 }, ""},
		{"ensemble of one", func(o *serveOptions) { o.EnsembleCheckpoints = []string{"a"} }, "--ensemble-checkpoints needs at least 2"},
		{"ensemble and initial checkpoint", func(o *serveOptions) { o.EnsembleCheckpoints, o.InitialCheckpoint = []string{"a", "b"}, "c" }, "exclude each other"},
		{"ensemble of meta-ppo", func(o *serveOptions) { o.EnsembleCheckpoints, o.Policy = []string{"a", "b"}, "meta-ppo" }, "--ensemble-checkpoints serves ppo policies"},
		{"ensemble in the paper's space", func(o *serveOptions) { o.EnsembleCheckpoints, o.ActionSpace = []string{"a", "b"}, "paper" }, "--ensemble-checkpoints serves ppo policies"},
		{"ensemble quorum above members", func(o *serveOptions) { o.EnsembleCheckpoints, o.EnsembleQuorum = []string{"a", "b"}, 3 }, "--ensemble-quorum must be in [0, 2]"},
		{"quorum without ensemble", func(o *serveOptions) { o.EnsembleQuorum = 2 }, "--ensemble-quorum needs --ensemble-checkpoints"},
		{"profiling", func(o *serveOptions) { o.Profiling = true }, ""},
		{"profiling without metrics", func(o *serveOptions) { o.Profiling, o.MetricsBindAddress = true, "0" }, "--profiling serves on the metrics address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newServeOptions()
			o.StateDir = "/tmp/x"
			o.TLS.Mode = certs.LinkModePlaintext
			tc.mutate(o)
			err := o.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

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

// TestServe runs `rl-agent serve` on loopback: it answers Recommend,
// serves health and metrics, stops cleanly on cancellation (SIGTERM), and a
// restart on the same state directory knows the workload.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	addr, metrics := freeAddr(t), freeAddr(t)
	args := []string{"--listen-address", addr, "--state-dir", dir, "--metrics-bind-address", metrics, "--health-bind-address", "0", "--tls-mode", "plaintext", "--profiling"}
	stop := runCommand(t, args...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, conn)
	c := pb.NewAgentServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Recommend(ctx, request())
	if err != nil {
		t.Fatal(err)
	}
	if r.Stage != pb.Stage_STAGE_BOOTSTRAPPING || r.Source != pb.Source_SOURCE_DEFAULT {
		t.Errorf("first response %v", r)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `aware_rlagent_requests_total{code="OK",method="Recommend"} 1`) {
		t.Errorf("metrics lack the Recommend call:\n%s", body)
	}
	if resp, err := http.Get("http://" + metrics + "/debug/pprof/cmdline"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("--profiling: /debug/pprof/cmdline gave %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.ckpt")); err != nil {
		t.Fatalf("no checkpoint after shutdown: %v", err)
	}

	stop = runCommand(t, args...)
	conn2, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	waitServing(t, conn2)
	st, err := pb.NewAgentServiceClient(conn2).GetPolicyStatus(callCtx(t), &pb.GetPolicyStatusRequest{Workload: request().Workload})
	if err != nil || st.Status.Stage != pb.Stage_STAGE_BOOTSTRAPPING {
		t.Fatalf("after restart: %v, %v", st, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServeEnsemble serves residual checkpoints as one frozen ensemble:
// every answer names it; a member that is not a residual policy, or a
// file that is not a checkpoint, stops the start with an error naming it.
func TestServeEnsemble(t *testing.T) {
	residual := func(seed uint64) string {
		cfg := learn.ResidualConfig(learn.DefaultFollowBias)
		cfg.Seed = seed
		p, err := nn.NewPPO(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return writePolicy(t, p)
	}
	a, b := residual(1), residual(2)
	addr := freeAddr(t)
	stop := runCommand(t, "--listen-address", addr, "--state-dir", t.TempDir(), "--metrics-bind-address", "0", "--health-bind-address", "0",
		"--tls-mode", "plaintext", "--ensemble-checkpoints", a+","+b)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := pb.NewAgentServiceClient(conn).Recommend(ctx, request())
	if err != nil {
		t.Fatal(err)
	}
	if r.Stage != pb.Stage_STAGE_BOOTSTRAPPING || !strings.HasPrefix(r.PolicyVersion, "ensemble-2of2-") {
		t.Errorf("first response %v", r)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a checkpoint"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, member, want string
	}{
		{"paper action space", writePolicy(t, smallPPO(t, learn.StateDim)), "paper's action space"},
		{"not a checkpoint", garbage, "--ensemble-checkpoints " + garbage},
		{"missing", filepath.Join(t.TempDir(), "missing"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newServeCommand()
			cmd.SetArgs([]string{"--listen-address", freeAddr(t), "--state-dir", t.TempDir(), "--metrics-bind-address", "0", "--health-bind-address", "0",
				"--tls-mode", "plaintext", "--ensemble-checkpoints", a + "," + tc.member})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestServeMutualTLS serves with certificates from files: the
// recommender's identity may call everything; another client of the same
// CA may only read; clients without a certificate, with one from another
// CA, or in plaintext are refused, and every refusal is counted.
func TestServeMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("link", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := certs.NewCA("stranger", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pair := func(ca *certs.CA, name string, l certs.Leaf) (certFile, keyFile string) {
		c, k, err := ca.Issue(l, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", c), write(name+".key", k)
	}
	client := func(cn string) certs.Leaf {
		return certs.Leaf{CommonName: cn, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	}
	caFile := write("ca.crt", ca.CertPEM)
	sc, sk := pair(ca, "agent", certs.Leaf{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	addr, metrics := freeAddr(t), freeAddr(t)
	runCommand(t, "--listen-address", addr, "--state-dir", filepath.Join(dir, "state"),
		"--metrics-bind-address", metrics, "--health-bind-address", "0",
		"--tls-cert-file", sc, "--tls-key-file", sk, "--tls-ca-file", caFile, "--tls-check-interval", "1s")

	dial := func(name string, ca *certs.CA, l *certs.Leaf) *grpc.ClientConn {
		t.Helper()
		cfg := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		cfg.RootCAs.AppendCertsFromPEM(caFilePEM(t, caFile))
		if l != nil {
			c, k := pair(ca, name, *l)
			kp, err := tls.LoadX509KeyPair(c, k)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	recommender := dial("recommender", ca, ptr(client("aware-recommender")))
	waitServing(t, recommender)
	reader := dial("reader", ca, ptr(client("aware-dashboard")))
	foreign := dial("foreign", stranger, ptr(client("aware-recommender")))
	anonymous := dial("anonymous", nil, nil)
	plain, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status := &pb.GetPolicyStatusRequest{Workload: request().Workload}
	outcome := &pb.ReportOutcomeRequest{
		Workload: request().Workload, Observation: request().Observation, Applied: request().DefaultRecommendation,
		AppliedSource: pb.Source_SOURCE_DEFAULT, NextObservation: nextObservation(), Config: request().Config,
	}
	call := func(conn *grpc.ClientConn, method string) codes.Code {
		c := pb.NewAgentServiceClient(conn)
		var err error
		switch method {
		case "Recommend":
			_, err = c.Recommend(ctx, request())
		case "ReportOutcome":
			_, err = c.ReportOutcome(ctx, outcome)
		case "GetPolicyStatus":
			_, err = c.GetPolicyStatus(ctx, status)
		case "Health":
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		}
		return grpcstatus.Code(err)
	}
	for _, tc := range []struct {
		name   string
		conn   *grpc.ClientConn
		method string
		want   codes.Code
	}{
		{"recommender recommends", recommender, "Recommend", codes.OK},
		{"recommender reports", recommender, "ReportOutcome", codes.OK},
		{"recommender reads", recommender, "GetPolicyStatus", codes.OK},
		{"another identity may not recommend", reader, "Recommend", codes.PermissionDenied},
		{"another identity may not report", reader, "ReportOutcome", codes.PermissionDenied},
		{"another identity may read", reader, "GetPolicyStatus", codes.OK},
		{"another identity may check health", reader, "Health", codes.OK},
		{"a certificate of another CA", foreign, "GetPolicyStatus", codes.Unavailable},
		{"no client certificate", anonymous, "GetPolicyStatus", codes.Unavailable},
		{"plaintext", plain, "Health", codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := call(tc.conn, tc.method); got != tc.want {
				t.Fatalf("%s: %v, want %v", tc.method, got, tc.want)
			}
		})
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`aware_rlagent_unauthorized_requests_total{method="Recommend",reason="forbidden"} 1`,
		`aware_rlagent_unauthorized_requests_total{method="ReportOutcome",reason="forbidden"} 1`,
		`aware_rlagent_requests_total{code="PermissionDenied",method="Recommend"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func caFilePEM(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
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

func TestInitialPolicy(t *testing.T) {
	o := train.DefaultOptions()
	o.Policy = train.PolicyMetaPPO
	meta, err := train.NewLearner(o)
	if err != nil {
		t.Fatal(err)
	}
	ddpg, err := nn.NewDDPG(nn.DefaultDDPGConfig(learn.StateDim, 2))
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	defaults := nn.DefaultMetaConfig(learn.StateDim, int(learn.NumActions))
	trainedPPO := writePolicy(t, smallPPO(t, learn.StateDim))
	trainedMeta := writePolicy(t, meta)
	ro := train.DefaultOptions()
	ro.ActionSpace, ro.Hidden = train.ActionSpaceResidual, []int{8}
	residualLearner, err := train.NewLearner(ro)
	if err != nil {
		t.Fatal(err)
	}
	trainedResidual := writePolicy(t, residualLearner)
	ro.Policy, ro.Window = train.PolicyMetaPPO, 4
	residualMeta, err := train.NewLearner(ro)
	if err != nil {
		t.Fatal(err)
	}
	trainedResidualMeta := writePolicy(t, residualMeta)
	for _, tc := range []struct {
		name, path, policy string
		hidden             []int
		window             int // 0: PPO
		err                string
		space              string // --action-space, and the shape served
	}{
		{"none: random PPO", "", "", defaults.Hidden, 0, "", ""},
		{"none, --policy=ppo: random PPO", "", nn.KindPPO, defaults.Hidden, 0, "", ""},
		{"none, --policy=meta-ppo: random Meta-PPO", "", nn.KindMetaPPO, defaults.Hidden, defaults.Window, "", ""},
		{"trained PPO", trainedPPO, "", []int{8}, 0, "", ""},
		{"trained PPO, --policy=ppo", trainedPPO, nn.KindPPO, []int{8}, 0, "", ""},
		{"trained PPO, --policy=meta-ppo", trainedPPO, nn.KindMetaPPO, nil, 0, `holds a "ppo" policy, --policy is "meta-ppo"`, ""},
		{"trained meta-ppo", trainedMeta, "", o.Hidden, o.Window, "", ""},
		{"trained meta-ppo, --policy=meta-ppo", trainedMeta, nn.KindMetaPPO, o.Hidden, o.Window, "", ""},
		{"trained meta-ppo, --policy=ppo", trainedMeta, nn.KindPPO, nil, 0, `holds a "meta-ppo" policy, --policy is "ppo"`, ""},
		{"small meta-ppo", writePolicy(t, smallMeta(t, learn.StateDim, 5)), "", []int{8}, 5, "", ""},
		{"missing file", filepath.Join(t.TempDir(), "missing"), "", nil, 0, "no such file", ""},
		{"garbage", garbage, "", nil, 0, "--initial-checkpoint", ""},
		{"ddpg", writePolicy(t, ddpg), "", nil, 0, `holds a "ddpg" policy; serve runs "ppo" and "meta-ppo" policies`, ""},
		{"PPO with other features", writePolicy(t, smallPPO(t, learn.StateDim+1)), "", nil, 0, "incompatible", ""},
		{"meta-ppo with other features", writePolicy(t, smallMeta(t, learn.StateDim+1, 4)), "", nil, 0, "incompatible", ""},
		{"none, --action-space=residual: random residual PPO", "", "", defaults.Hidden, 0, "", "residual"},
		{"trained residual", trainedResidual, "", []int{8}, 0, "", ""},
		{"trained residual, --action-space=residual", trainedResidual, "", []int{8}, 0, "", "residual"},
		{"trained residual, --action-space=paper", trainedResidual, "", nil, 0, `acts in the residual action space, --action-space is "paper"`, "paper"},
		{"trained PPO, --action-space=residual", trainedPPO, "", nil, 0, `acts in the paper action space, --action-space is "residual"`, "residual"},
		{"none, --policy=meta-ppo --action-space=residual: random residual Meta-PPO", "", nn.KindMetaPPO, defaults.Hidden, defaults.Window, "", "residual"},
		{"trained residual meta-ppo", trainedResidualMeta, "", []int{8}, 4, "", ""},
		{"trained residual meta-ppo, --action-space=residual", trainedResidualMeta, nn.KindMetaPPO, []int{8}, 4, "", "residual"},
		{"trained residual meta-ppo, --action-space=paper", trainedResidualMeta, "", nil, 0, `acts in the residual action space, --action-space is "paper"`, "paper"},
		{"trained meta-ppo, --action-space=residual", trainedMeta, "", nil, 0, `acts in the paper action space, --action-space is "residual"`, "residual"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, m, err := initialPolicy(&serveOptions{InitialCheckpoint: tc.path, Policy: tc.policy, Seed: 1, ActionSpace: tc.space})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (p == nil) == (m == nil) {
				t.Fatalf("got PPO %v and Meta-PPO %v, want exactly one", p != nil, m != nil)
			}
			var hidden []int
			window := 0
			if m != nil {
				hidden, window = m.Config().Hidden, m.Config().Window
			} else {
				hidden = p.Config().Hidden
			}
			if !slices.Equal(hidden, tc.hidden) || window != tc.window {
				t.Fatalf("hidden %v window %d, want %v and %d", hidden, window, tc.hidden, tc.window)
			}
			c := nn.Config{}
			if m != nil {
				c = m.Config().Config
			} else {
				c = p.Config()
			}
			sh, err := learn.ShapeOf(c)
			if err != nil {
				t.Fatal(err)
			}
			wantResidual := tc.space == "residual" || tc.path == trainedResidual || tc.path == trainedResidualMeta ||
				(tc.space == "" && tc.path == "" && tc.policy != nn.KindMetaPPO)
			if (sh.Residual != nil) != wantResidual {
				t.Fatalf("serving shape %v, want residual: %v", sh, wantResidual)
			}
		})
	}
	// `rl-agent train --meta-signature`: the served Meta-PPO reads the
	// workload's signature, and the agent answers with it.
	t.Run("trained residual meta-ppo reading signatures", func(t *testing.T) {
		ro.MetaSignature = true
		l, err := train.NewLearner(ro)
		if err != nil {
			t.Fatal(err)
		}
		ckpt := writePolicy(t, l)
		_, m, err := initialPolicy(&serveOptions{InitialCheckpoint: ckpt, Seed: 1})
		if err != nil || m == nil || m.Config().SignatureDim != learn.SignatureDim {
			t.Fatalf("got %v, %v; want a Meta-PPO reading %d signature values", m, err, learn.SignatureDim)
		}
		// A fresh one with --meta-signature, and without it.
		for _, on := range []bool{true, false} {
			_, m, err := initialPolicy(&serveOptions{Policy: nn.KindMetaPPO, MetaSignature: on, Seed: 1})
			if want := map[bool]int{true: learn.SignatureDim}[on]; err != nil || m == nil || m.Config().SignatureDim != want {
				t.Fatalf("--meta-signature=%t: got %v, %v; want a Meta-PPO reading %d signature values", on, m, err, want)
			}
		}
		_, stop, conn := startServe(t, t.TempDir(), "--initial-checkpoint", ckpt)
		defer func() {
			if err := stop(); err != nil {
				t.Errorf("serve returned %v", err)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := pb.NewAgentServiceClient(conn).Recommend(ctx, request()); err != nil {
			t.Fatal(err)
		}
	})
}

// The agent starts from a trained policy, persists it as its own state, and
// refuses (without touching the state) to restart with a policy of another
// architecture.
func TestServeFromInitialCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ckpt := writePolicy(t, smallPPO(t, learn.StateDim))
	base, stop, conn := startServe(t, dir, "--initial-checkpoint", ckpt)
	args := append(slices.Clone(base), "--initial-checkpoint", ckpt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pb.NewAgentServiceClient(conn).Recommend(ctx, request()); err != nil {
		t.Fatal(err)
	}
	state := stopForState(t, stop, dir)

	// Without the flag the default architecture cannot take the state.
	refusedStart(callCtx(t), t, dir, state, args[:len(args)-2]...)

	stop = runCommand(t, args...)
	waitServing(t, conn)
	if _, err := pb.NewAgentServiceClient(conn).GetPolicyStatus(callCtx(t), &pb.GetPolicyStatusRequest{Workload: request().Workload}); err != nil {
		t.Fatalf("after restart with the flag: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServeFromMetaCheckpoint: the agent serves a Meta-PPO policy from
// --initial-checkpoint (Recommend, GetPolicyStatus), persists it as its
// own state, refuses without touching that state to restart with the
// default PPO policy, a PPO checkpoint or a Meta-PPO of another
// architecture, and restarts with the flag. A Meta-PPO pre-trained with
// an auxiliary head (--meta-aux-weight) is served the same way: the head
// only shaped the embedding; serving acts without it and, with no
// hidden parameters to learn from, never trains it.
func TestServeFromMetaCheckpoint(t *testing.T) {
	for _, auxDim := range []int{0, 4} {
		t.Run(fmt.Sprintf("auxDim=%d", auxDim), func(t *testing.T) { testServeFromMetaCheckpoint(t, auxDim) })
	}
}

func testServeFromMetaCheckpoint(t *testing.T, auxDim int) {
	dir := t.TempDir()
	ckpt := writePolicy(t, smallMetaAux(t, learn.StateDim, 4, auxDim))
	base, stop, conn := startServe(t, dir, "--initial-checkpoint", ckpt)
	args := append(slices.Clone(base), "--initial-checkpoint", ckpt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := pb.NewAgentServiceClient(conn)
	r, err := c.Recommend(ctx, request())
	if err != nil {
		t.Fatal(err)
	}
	if r.Stage != pb.Stage_STAGE_BOOTSTRAPPING || r.Source != pb.Source_SOURCE_DEFAULT {
		t.Errorf("first response %v", r)
	}
	if _, err := c.ReportOutcome(ctx, &pb.ReportOutcomeRequest{
		Workload: request().Workload, Observation: request().Observation, Applied: request().DefaultRecommendation,
		AppliedSource: pb.Source_SOURCE_DEFAULT, NextObservation: nextObservation(), Config: request().Config,
	}); err != nil {
		t.Fatal(err)
	}
	st, err := c.GetPolicyStatus(ctx, &pb.GetPolicyStatusRequest{Workload: request().Workload})
	if err != nil || st.Status.Transitions != 1 {
		t.Fatalf("status %v, %v", st, err)
	}
	state := stopForState(t, stop, dir)
	if !bytes.Contains(state, []byte(`"policy":`)) {
		t.Fatalf("checkpoint without a policy: %.200s", state)
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default PPO policy", base},
		{"PPO checkpoint", append(slices.Clone(base), "--initial-checkpoint", writePolicy(t, smallPPO(t, learn.StateDim)))},
		{"Meta-PPO of another window", append(slices.Clone(base), "--initial-checkpoint", writePolicy(t, smallMeta(t, learn.StateDim, 8)))},
		{"Meta-PPO with another auxiliary head", append(slices.Clone(base), "--initial-checkpoint", writePolicy(t, smallMetaAux(t, learn.StateDim, 4, 4-auxDim)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedStart(callCtx(t), t, dir, state, tc.args...)
		})
	}

	stop = runCommand(t, args...)
	waitServing(t, conn)
	ctx = callCtx(t)
	st, err = c.GetPolicyStatus(ctx, &pb.GetPolicyStatusRequest{Workload: request().Workload})
	if err != nil || st.Status.Transitions != 1 {
		t.Fatalf("after restart with the flag: %v, %v", st, err)
	}
	if _, err := c.Recommend(ctx, request()); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServeFreshMetaPPO: --policy=meta-ppo without a checkpoint serves a
// random Meta-PPO policy, persists it, and the state then refuses a start
// as the default PPO but takes a restart with the same flag.
func TestServeFreshMetaPPO(t *testing.T) {
	dir := t.TempDir()
	base, stop, conn := startServe(t, dir, "--policy", "meta-ppo")
	args := append(slices.Clone(base), "--policy", "meta-ppo")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := pb.NewAgentServiceClient(conn)
	if _, err := c.Recommend(ctx, request()); err != nil {
		t.Fatal(err)
	}
	state := stopForState(t, stop, dir)
	refusedStart(callCtx(t), t, dir, state, base...)
	refusedStart(callCtx(t), t, dir, state, append(slices.Clone(base), "--policy", "ppo")...)

	stop = runCommand(t, args...)
	waitServing(t, conn)
	if _, err := c.Recommend(callCtx(t), request()); err != nil {
		t.Fatalf("after restart with the flag: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
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
