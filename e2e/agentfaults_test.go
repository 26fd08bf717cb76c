//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// rlOnFastGates puts an autoscaler in mode On with rlGates' thresholds, so
// the agent acts (Serving) about six loops after it is first asked.
const rlOnFastGates = `  rl:
    mode: "On"
    gates:
      window: 2
      episodeSteps: 1
      promoteMinMean: -1
      promoteMaxStdDev: 2
      retrainBelowMean: -1
      retrainAboveStdDev: 2
`

// Faults the agent proxy injects.
const (
	proxyPass        int32 = iota
	proxySlow              // Recommend answers after the caller's deadline
	proxyOutOfBounds       // Recommend answers far outside the constraints
)

// agentProxy stands between the recommender and the real agent and, on
// demand, turns the agent into a slow one or one that answers out of
// bounds: any server of the contract may be the recommender's agent, so
// the faults of a misbehaving one are injected here rather than built into
// rl-agent. It forwards everything else unchanged, errors included, over
// mutual TLS as the recommender's identity.
type agentProxy struct {
	pb.UnimplementedAgentServiceServer
	up    pb.AgentServiceClient
	fault atomic.Int32
	addr  string
}

func startAgentProxy(t *testing.T, up pb.AgentServiceClient) *agentProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &agentProxy{up: up, addr: lis.Addr().String()}
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

func (p *agentProxy) Recommend(ctx context.Context, req *pb.RecommendRequest) (*pb.RecommendResponse, error) {
	switch p.fault.Load() {
	case proxySlow:
		// Answer only after the caller gave up.
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond)
		return nil, status.Error(codes.DeadlineExceeded, "the agent proxy answers late")
	case proxyOutOfBounds:
		resp, err := p.up.Recommend(ctx, req)
		if err != nil {
			return nil, err
		}
		// An acting agent that asks for 50 replicas and 64 cores.
		resp.Stage, resp.Source = pb.Stage_STAGE_SERVING, pb.Source_SOURCE_AGENT
		resp.Recommendation.Replicas = 50
		for _, c := range resp.Recommendation.Containers {
			c.Target.CpuCores = 64
		}
		return resp, nil
	}
	return p.up.Recommend(ctx, req)
}

func (p *agentProxy) ReportOutcome(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error) {
	return p.up.ReportOutcome(ctx, req)
}

func (p *agentProxy) GetPolicyStatus(ctx context.Context, req *pb.GetPolicyStatusRequest) (*pb.GetPolicyStatusResponse, error) {
	return p.up.GetPolicyStatus(ctx, req)
}

func (p *agentProxy) ForgetWorkload(ctx context.Context, req *pb.ForgetWorkloadRequest) (*pb.ForgetWorkloadResponse, error) {
	return p.up.ForgetWorkload(ctx, req)
}

// mountTmpfs mounts a tmpfs of size at a new directory and unmounts it when
// the test ends (after the processes started later, which the cleanups stop
// first). A real small filesystem, not a simulated one, is what fills up;
// mounting needs root (CAP_SYS_ADMIN), which CI's runner has; without it the
// test fails and says so rather than pretend.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs for the agent's state directory (needs root): %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillUp writes path until the filesystem is full, and returns how much
// it wrote.
func fillUp(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xaa}, 64<<10)
	var n int64
	for {
		w, err := f.Write(chunk)
		n += int64(w)
		if err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("filling %s: %v", path, err)
			}
			return n
		}
	}
}

// TestAgentFaults runs a real rl-agent, on a small tmpfs, behind a proxy
// that can make it slow or answer out of bounds, for a pinned workload in
// mode On, and checks for each fault that the default is applied with
// status.rl saying why, that nothing is lost, and that the agent's
// answers are applied again after the fault with its state intact.
func TestAgentFaults(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "agentfaults")
	stateDir := mountTmpfs(t, "8m")
	w := startPinnedWorkload(t, ns, "steady", rlOnFastGates, "")

	agentAddr := freeAddr(t)
	agent := startProcess(t, processSpec{Binary: "rl-agent", Args: []string{
		"--listen-address=" + agentAddr,
		"--state-dir=" + stateDir,
		"--checkpoint-interval=1s",
		// The paper's actions: a fresh residual policy follows the
		// default, and these cases need the agent's own answers applied.
		"--action-space=paper",
	}})
	proxy := startAgentProxy(t, pb.NewAgentServiceClient(agentConn(t, agentAddr, "aware-recommender")))
	rec := startProcess(t, processSpec{Binary: "recommender", Args: append([]string{
		"--namespace=" + ns,
		"--checkpoints-interval=1m",
		"--rl-agent-endpoint=" + proxy.addr,
		// The proxy listens in plaintext on loopback; it reaches the
		// agent over mutual TLS.
		"--rl-agent-tls-mode=plaintext",
		"--rl-agent-timeout=1s",
		"--rl-agent-failure-threshold=2",
		"--rl-agent-cooldown=10s",
	}, faultLoopFlags...)})
	upd := startUpdater(t, ns, "aware-admission-controller-"+ns, "--leader-elect=false", "--update-interval=5s")

	reader := pb.NewAgentServiceClient(agentConn(t, agentAddr, "aware-e2e-reader"))
	ref := &pb.WorkloadRef{Namespace: ns, Name: w.name, Uid: string(w.mpa.UID)}
	policyStatus := func(t *testing.T) *pb.PolicyStatus {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := reader.GetPolicyStatus(cctx, &pb.GetPolicyStatusRequest{Workload: ref})
		if err != nil {
			t.Fatalf("GetPolicyStatus: %v", err)
		}
		return resp.GetStatus()
	}
	// acting waits for the agent's answer to be applied after since.
	acting := func(t *testing.T, since time.Time, what string) *v1alpha1.MultidimPodAutoscaler {
		t.Helper()
		return w.waitRecommendation(t, 3*time.Minute, what, since, func(m *v1alpha1.MultidimPodAutoscaler) error {
			rl := m.Status.RL
			switch {
			case rl == nil || rl.Source != v1alpha1.SourceAgent || rl.Reason != "AgentActing":
				return errors.New("the agent's answer is not applied")
			case rl.LastAgentContactTime == nil || rl.LastAgentContactTime.Time.Before(since):
				return errors.New("no contact with the agent yet")
			}
			return nil
		}, rec, upd)
	}
	// defaulted waits for the default to be applied after since for one
	// of reasons, and checks that it is the pinned one.
	defaulted := func(t *testing.T, since time.Time, ok func(*v1alpha1.RLStatus) error) *v1alpha1.MultidimPodAutoscaler {
		t.Helper()
		m := w.waitRecommendation(t, 2*time.Minute, "the default applied, status.rl saying why", since, func(m *v1alpha1.MultidimPodAutoscaler) error {
			rl := m.Status.RL
			if rl == nil || rl.Source != v1alpha1.SourceDefault {
				return errors.New("source is not Default")
			}
			return ok(rl)
		}, rec, upd)
		if m.Status.DesiredReplicas != pinnedReplicas {
			t.Errorf("desiredReplicas %d under the fault", m.Status.DesiredReplicas)
		}
		if cpu := m.Status.Recommendation.ContainerRecommendations[0].Target.Cpu().MilliValue(); cpu != 100 {
			t.Errorf("cpu target %dm under the fault, want the pinned 100m", cpu)
		}
		return m
	}
	reason := func(want ...string) func(*v1alpha1.RLStatus) error {
		return func(rl *v1alpha1.RLStatus) error {
			for _, r := range want {
				if rl.Reason == r {
					return nil
				}
			}
			return fmt.Errorf("reason %s, want one of %v", rl.Reason, want)
		}
	}

	start := time.Now()
	m := acting(t, time.Time{}, "the agent acting (Serving, mode On)")
	t.Logf("agent acting after %s: %s", time.Since(start).Round(time.Second), rlString(m.Status.RL))

	t.Run("agent slower than the deadline", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		proxy.fault.Store(proxySlow)
		since := time.Now()
		m := defaulted(t, since, reason("AgentTimeout"))
		t.Logf("slow agent: %s", rlString(m.Status.RL))
		if n := mustMetric(t, rec, "aware_recommender_agent_errors_total", "method=Recommend", "code=DeadlineExceeded"); n < 1 {
			t.Errorf("%g Recommend calls counted as DeadlineExceeded", n)
		}
		proxy.fault.Store(proxyPass)
		acting(t, time.Now(), "the agent acting again once it answers in time")
		w.nothingLost(t)
	})

	t.Run("agent answers out of bounds", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		proxy.fault.Store(proxyOutOfBounds)
		since := time.Now()
		m := defaulted(t, since, reason("OutOfConstraints"))
		t.Logf("out-of-bounds agent: %s", rlString(m.Status.RL))
		if !strings.Contains(m.Status.RL.Message, "50") {
			t.Errorf("status.rl.message %q does not name the refused replica count", m.Status.RL.Message)
		}
		proxy.fault.Store(proxyPass)
		acting(t, time.Now(), "the agent acting again once it answers within bounds")
		w.nothingLost(t)
	})

	t.Run("agent's state directory full", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		before := policyStatus(t)
		failedBefore, _, err := agent.metric(ctx, "aware_rlagent_persist_operations_total", "result=failed")
		if err != nil {
			t.Fatal(err)
		}
		filler := filepath.Join(stateDir, "filler")
		n := fillUp(t, filler)
		full := time.Now()
		t.Logf("filled the state directory's tmpfs with %d KiB", n>>10)
		framework.Eventually(t, time.Minute, "the agent to be unready", func(ctx context.Context) (bool, error) {
			agent.running(t)
			ok, err := httpOK(ctx, "http://"+agent.healthAddr+"/readyz")
			return !ok && err != nil && strings.Contains(err.Error(), "cannot persist"), fmt.Errorf("/readyz: %v", err)
		})
		m := defaulted(t, full, func(rl *v1alpha1.RLStatus) error {
			if rl.Reason != "AgentUnavailable" || !strings.Contains(rl.Message, "no space left on device") {
				return fmt.Errorf("reason %s message %q, want AgentUnavailable naming the full disk", rl.Reason, rl.Message)
			}
			return nil
		})
		t.Logf("state directory full: %s", rlString(m.Status.RL))
		if n, _, err := agent.metric(ctx, "aware_rlagent_persist_operations_total", "result=failed"); err != nil || n <= failedBefore {
			t.Errorf("failed persist operations %g (before %g): %v", n, failedBefore, err)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		freed := time.Now()
		framework.Eventually(t, time.Minute, "the agent to be ready again", func(ctx context.Context) (bool, error) {
			agent.running(t)
			return httpOK(ctx, "http://"+agent.healthAddr+"/readyz")
		})
		acting(t, freed, "the agent acting again once it can persist")
		after := policyStatus(t)
		if after.GetStage() != before.GetStage() || after.GetEpisodes() < before.GetEpisodes() || after.GetTransitions() < before.GetTransitions() {
			t.Errorf("after the disk was freed: stage %s, %d episodes, %d transitions; before: %s, %d, %d",
				after.GetStage(), after.GetEpisodes(), after.GetTransitions(), before.GetStage(), before.GetEpisodes(), before.GetTransitions())
		}
		w.nothingLost(t)
	})

	t.Run("corrupted checkpoint at agent start", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		before := policyStatus(t)
		if err := agent.terminate(t); err != nil {
			t.Errorf("the agent did not exit cleanly on SIGTERM: %v", err)
		}
		stopped := time.Now()
		path := filepath.Join(stateDir, "state.ckpt")
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(good)
		bad[len(bad)/2] ^= 0xff
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, agent.binary, agent.args...)
		cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("the agent started over a corrupt checkpoint:\n%s", out)
		}
		for _, want := range []string{"corrupt checkpoint", "refusing to start", stateDir} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("the agent's exit (%v) does not say %q:\n%s", err, want, out)
			}
		}
		if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, bad) {
			t.Errorf("the refused checkpoint was changed or removed (%v)", err)
		}
		m := defaulted(t, stopped, reason("AgentUnavailable", "CircuitOpen"))
		t.Logf("agent down (refused its checkpoint): %s", rlString(m.Status.RL))

		// The operator restores the checkpoint from a backup.
		if err := os.WriteFile(path, good, 0o600); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		agent.restart(t)
		// It resumes from the restored checkpoint: nothing it had learnt
		// is lost.
		st := policyStatus(t)
		if st.GetStage() != before.GetStage() || st.GetEpisodes() < before.GetEpisodes() || st.GetTransitions() < before.GetTransitions() {
			t.Errorf("after restoring the checkpoint: stage %s, %d episodes, %d transitions; before the stop: %s, %d, %d",
				st.GetStage(), st.GetEpisodes(), st.GetTransitions(), before.GetStage(), before.GetEpisodes(), before.GetTransitions())
		}
		acting(t, restarted, "the agent acting again after its checkpoint was restored")
		w.nothingLost(t)
	})
}
