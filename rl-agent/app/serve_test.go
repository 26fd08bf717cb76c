package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/aware-k8s/aware/pkg/kube/certs"
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
