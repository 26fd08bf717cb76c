package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

const serveChildEnv = "AWARE_RLAGENT_SERVE_CHILD_ARGS"

// TestMain turns the test binary into `rl-agent serve` when the crash test
// re-executes it.
func TestMain(m *testing.M) {
	if raw := os.Getenv(serveChildEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cmd := newServeCommand()
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startServeChild(t *testing.T, args []string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveChildEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, &out
}

// TestServeSurvivesKill promotes a workload, SIGKILLs the agent without any
// shutdown, and checks that the restarted agent resumes the stage the
// recommender was told about.
func TestServeSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	args := []string{"--listen-address", addr, "--state-dir", dir, "--metrics-bind-address", "0", "--health-bind-address", "0", "--tls-mode", "plaintext"}
	child, out := startServeChild(t, args)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, conn)
	c := pb.NewAgentServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	obs := request().Observation
	next := request().Observation
	next.Time = timestamppb.New(obs.Time.AsTime().Add(time.Minute))
	cfg := &pb.Config{Mode: pb.RLMode_RL_MODE_ON, Alpha: 0.5, Gates: &pb.Gates{Window: 2, EpisodeSteps: 1, PromoteMinMean: 0.5}}
	var last *pb.ReportOutcomeResponse
	for range 2 {
		last, err = c.ReportOutcome(ctx, &pb.ReportOutcomeRequest{
			Workload: request().Workload, Observation: obs, Applied: request().DefaultRecommendation,
			AppliedSource: pb.Source_SOURCE_DEFAULT, NextObservation: next, Config: cfg,
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if last.Stage != pb.Stage_STAGE_ONLINE_TRAINING {
		t.Fatalf("not promoted: %v (reward %v)", last.Stage, last.Reward)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	startServeChild(t, args)
	waitServing(t, conn)
	st, err := c.GetPolicyStatus(callCtx(t), &pb.GetPolicyStatusRequest{Workload: request().Workload})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Stage != pb.Stage_STAGE_ONLINE_TRAINING || st.Status.Episodes != 2 {
		t.Errorf("after kill -9 and restart: %v", st.Status)
	}
}

// TestServeRefusesCorruptCheckpoint: a checkpoint that fails its checks
// stops the agent at start with an error naming it and the remedy, and
// the file is left as it was (an agent that started empty would overwrite
// it at its first checkpoint).
func TestServeRefusesCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	st, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveCheckpoint("state", []byte(`{"policy_version": 7}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.ckpt")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0xff // bit rot in the payload
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newServeCommand()
	cmd.SetArgs([]string{"--listen-address", "127.0.0.1:0", "--state-dir", dir, "--metrics-bind-address", "0", "--health-bind-address", "0", "--tls-mode", "plaintext"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err = cmd.ExecuteContext(context.Background())
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("serve over a corrupt checkpoint: %v, want ErrCorrupt", err)
	}
	for _, want := range []string{"checksum mismatch", "refusing to start", dir, "restore the checkpoint from a backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(after, b) {
		t.Errorf("the corrupt checkpoint was changed or removed (%v)", err)
	}
}
