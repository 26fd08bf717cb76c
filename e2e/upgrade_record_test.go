//go:build e2e && upgraderecord

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// The autoscalers of the fixture, both in mode On, so that the upgraded
// agent's first answer for the first is applied (source Agent):
//
//   - "serving" has the fastest gates spec.rl allows (as rlGates in
//     agent_test.go: one tick per episode, any two rewards promote, none
//     retrains), so it reaches Serving within a minute and stays there;
//   - "bootstrapping" has the default gates (10 episodes of 30 ticks), so
//     it is still Bootstrapping when recorded, and must still be after the
//     upgrade, neither promoted nor reset.
const (
	upgradeServingRL = `  rl:
    mode: "On"
    gates:
      window: 2
      episodeSteps: 1
      promoteMinMean: -1
      promoteMaxStdDev: 2
      retrainBelowMean: -1
      retrainAboveStdDev: 2
`
	upgradeBootstrappingRL = `  rl:
    mode: "On"
`
)

// upgradeAgentArgs are the agent's flags in the fixture and after the
// upgrade (beside --listen-address and --state-dir): the paper's actions,
// so that the agent answers with its own weights from the start; and
// frequent checkpoints.
var upgradeAgentArgs = []string{"--action-space=paper", "--checkpoint-interval=1s"}

// TestRecordUpgradeFixture records the upgrade fixture of this tree's
// version into $AWARE_UPGRADE_FIXTURE_OUT: it runs the agent and the
// recommender until one autoscaler is Serving and another Bootstrapping,
// with the recommender's checkpoints written, stops them, and copies the
// agent's state directory and the custom resources as etcd stores them.
// It is not part of the e2e tier (build tag upgraderecord):
// hack/upgrade-fixture.sh runs it in a checkout of the version to record.
func TestRecordUpgradeFixture(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	out, version, commit := os.Getenv("AWARE_UPGRADE_FIXTURE_OUT"), os.Getenv("AWARE_UPGRADE_FIXTURE_VERSION"), os.Getenv("AWARE_UPGRADE_FIXTURE_COMMIT")
	if out == "" || version == "" || commit == "" {
		t.Fatal("AWARE_UPGRADE_FIXTURE_OUT, AWARE_UPGRADE_FIXTURE_VERSION and AWARE_UPGRADE_FIXTURE_COMMIT must be set (hack/upgrade-fixture.sh sets them)")
	}
	requireAWARE(t)
	ctx := context.Background()
	etcd, err := etcdURL(tb)
	if err != nil {
		t.Fatal(err)
	}
	ns := tb.CreateNamespace(t, "upgrade")
	serving := startMPAWorkload(t, ns, "serving", upgradeServingRL)
	bootstrapping := startMPAWorkload(t, ns, "bootstrapping", upgradeBootstrappingRL)

	stateDir := t.TempDir()
	agentAddr := freeAddr(t)
	agent := startProcess(t, processSpec{Binary: "rl-agent", Args: append([]string{
		"--listen-address=" + agentAddr, "--state-dir=" + stateDir,
	}, upgradeAgentArgs...)})
	rec := startProcess(t, processSpec{Binary: "recommender", Args: recommenderArgs(ns,
		"--leader-elect=false",
		"--checkpoints-interval=15s",
		"--rl-agent-endpoint="+agentAddr,
	)})

	serving.waitRecommendation(t, 4*time.Minute, "serving: Serving, the agent's answer applied", time.Time{}, func(m *v1alpha1.MultidimPodAutoscaler) error {
		if rl := m.Status.RL; rl == nil || rl.Stage != v1alpha1.RLStageServing || rl.Source != v1alpha1.SourceAgent {
			return fmt.Errorf("want stage Serving, source Agent")
		}
		return nil
	}, rec, agent)
	bootstrapping.waitRecommendation(t, time.Minute, "bootstrapping: Bootstrapping, the default applied", time.Time{}, func(m *v1alpha1.MultidimPodAutoscaler) error {
		if rl := m.Status.RL; rl == nil || rl.Stage != v1alpha1.RLStageBootstrapping || rl.Source != v1alpha1.SourceDefault || rl.LastAgentContactTime == nil {
			return fmt.Errorf("want stage Bootstrapping, source Default, an answer from the agent")
		}
		return nil
	}, rec, agent)
	checkpoints := serving.client.AutoscalingV1alpha1().MultidimPodAutoscalerCheckpoints(ns)
	framework.Eventually(t, 2*time.Minute, "a checkpoint with samples for each autoscaler", func(ctx context.Context) (bool, error) {
		l, err := checkpoints.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		have := map[string]bool{}
		for _, cp := range l.Items {
			if cp.Status.TotalSamplesCount >= 2 {
				have[cp.Spec.MPAObjectName] = true
			}
		}
		if !have["serving"] || !have["bootstrapping"] {
			return false, fmt.Errorf("checkpoints with samples for %v", have)
		}
		return true, nil
	})

	// The recommender first, so that nothing changes the agent's state
	// between what is read here and its last checkpoint, written at
	// shutdown.
	if err := rec.terminate(t); err != nil {
		t.Fatalf("the recommender did not exit cleanly: %v", err)
	}
	client := pb.NewAgentServiceClient(agentConn(t, agentAddr, "aware-e2e-reader"))
	fix := upgradeFixtureManifest{Version: version, Commit: commit, Recorded: time.Now().UTC().Truncate(time.Second), Namespace: ns, AgentArgs: upgradeAgentArgs}
	for _, w := range []*mpaWorkload{serving, bootstrapping} {
		m, err := w.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := client.GetPolicyStatus(cctx, &pb.GetPolicyStatusRequest{Workload: &pb.WorkloadRef{Namespace: ns, Name: w.name, Uid: string(m.UID)}})
		cancel()
		if err != nil {
			t.Fatalf("GetPolicyStatus %s: %v", w.name, err)
		}
		st := resp.GetStatus()
		fix.Workloads = append(fix.Workloads, upgradeFixtureWorkload{
			Name: w.name, UID: string(m.UID),
			Stage: string(m.Status.RL.Stage), Episodes: st.GetEpisodes(), Transitions: st.GetTransitions(), PolicyVersion: st.GetPolicyVersion(),
			Source: string(m.Status.RL.Source), Reason: m.Status.RL.Reason,
		})
		t.Logf("%s: %s; agent: stage %s, %d episodes, %d transitions, policy %s", w.name, rlString(m.Status.RL), st.GetStage(), st.GetEpisodes(), st.GetTransitions(), st.GetPolicyVersion())
	}
	if err := agent.terminate(t); err != nil {
		t.Fatalf("the agent did not exit cleanly: %v", err)
	}

	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	for _, plural := range []string{"multidimpodautoscalers", "multidimpodautoscalercheckpoints"} {
		kvs, err := etcdList(ctx, etcd, etcdGroupPrefix+plural+"/"+ns+"/")
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range kvs {
			name := path.Base(string(kv.Key))
			file := path.Join("objects", plural, name+".json")
			writeFixtureFile(t, filepath.Join(out, file), kv.Value)
			fix.Objects = append(fix.Objects, upgradeFixtureObject{Key: string(kv.Key), File: file})
			if plural == "multidimpodautoscalercheckpoints" {
				for i := range fix.Workloads {
					if strings.HasPrefix(name, fix.Workloads[i].Name+"-") {
						fix.Workloads[i].Checkpoints = append(fix.Workloads[i].Checkpoints, name)
					}
				}
			}
		}
	}
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// The lock is the running agent's, not state.
		if e.Name() == "LOCK" || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(stateDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFixtureFile(t, filepath.Join(out, "state", e.Name()), b)
		fix.StateFiles = append(fix.StateFiles, e.Name())
	}
	sort.Strings(fix.StateFiles)
	b, err := json.MarshalIndent(fix, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFixtureFile(t, filepath.Join(out, "manifest.json"), append(b, '\n'))
	t.Logf("recorded %s (%s): %d objects, state files %v, into %s", version, commit, len(fix.Objects), fix.StateFiles, out)
}

func writeFixtureFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
