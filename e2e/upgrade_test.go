//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// TestUpgrade installs each earlier version recorded in
// e2e/testdata/upgrade (hack/upgrade-fixture.sh) and upgrades it to this
// tree: the custom resources go into etcd as that version's API server
// stored them (UIDs, status and owner references included, as an upgrade
// finds them; this tree's CRDs are installed), the agent's state directory
// is copied, and this tree's rl-agent and recommender start on them. It
// checks that every autoscaler keeps its spec and status.rl.stage, every
// MultidimPodAutoscalerCheckpoint is restored by the recommender, the
// agent restores every workload at the stage, episode count and weights
// it had, and its next answers come from them: the Serving autoscaler is
// answered by the agent at once, with the frozen weights it was promoted
// with, and no workload goes through Bootstrapping again.
func TestUpgrade(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	manifests, err := filepath.Glob(filepath.Join(upgradeFixtureDir(), "*", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(manifests) == 0 {
		t.Fatalf("no fixture in %s (make upgrade-fixture): the upgrade is untested", upgradeFixtureDir())
	}
	for _, mf := range manifests {
		dir := filepath.Dir(mf)
		fix, err := readUpgradeFixture(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("from "+fix.Version, func(t *testing.T) {
			tb.DumpLogsOnFailure(t)
			upgradeFrom(t, dir, fix)
		})
	}
}

func upgradeFrom(t *testing.T, dir string, fix *upgradeFixtureManifest) {
	ctx := context.Background()
	t.Logf("fixture %s: commit %s, recorded %s", fix.Version, fix.Commit, fix.Recorded.Format(time.RFC3339))
	etcd, err := etcdURL(tb)
	if err != nil {
		t.Fatal(err)
	}
	client, err := versioned.NewForConfig(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := fix.Namespace
	createNamedNamespace(t, ns)

	// The workloads first, as they were: the autoscalers' targets with
	// their pods, and the load.
	for _, w := range fix.Workloads {
		createLoopDeployment(t, ctx, ns, w.Name)
		runEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": w.Name}), baseRate)
	}

	// The custom resources, autoscalers first: a checkpoint whose owner
	// the garbage collector cannot find would be deleted.
	stored := map[string]map[string]any{} // file → the stored object
	for _, plural := range []string{"multidimpodautoscalers", "multidimpodautoscalercheckpoints"} {
		for _, o := range fix.Objects {
			if filepath.Base(filepath.Dir(o.File)) != plural {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, o.File))
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := json.Unmarshal(b, &obj); err != nil {
				t.Fatalf("%s: %v", o.File, err)
			}
			stored[o.File] = obj
			if err := etcdPut(ctx, etcd, o.Key, b); err != nil {
				t.Fatal(err)
			}
		}
		if plural == "multidimpodautoscalers" {
			for _, w := range fix.Workloads {
				framework.Eventually(t, 30*time.Second, "the API server to serve MPA "+w.Name, func(ctx context.Context) (bool, error) {
					m, err := client.AutoscalingV1alpha1().MultidimPodAutoscalers(ns).Get(ctx, w.Name, metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					return string(m.UID) == w.UID, fmt.Errorf("uid %s, recorded %s", m.UID, w.UID)
				})
			}
		}
	}

	t.Run("every autoscaler and checkpoint is served as stored", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		dyn, err := dynamic.NewForConfig(tb.Config)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range fix.Objects {
			obj := stored[o.File]
			meta, _ := obj["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			// The dynamic client: what the API server serves, not what
			// this tree's Go types make of it.
			served, err := dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(filepath.Base(filepath.Dir(o.File)))).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: %v", o.File, err)
				continue
			}
			u := served.Object
			// What was stored must be served unchanged; this tree may add
			// fields (defaults of a newer schema), not drop or change any.
			for _, part := range []string{"spec", "status"} {
				if diff := subsetDiff(part, obj[part], u[part]); diff != "" {
					t.Errorf("%s: %s", o.File, diff)
				}
			}
			if got := u["metadata"].(map[string]any)["uid"]; got != meta["uid"] {
				t.Errorf("%s: uid %v, stored %v", o.File, got, meta["uid"])
			}
		}
	})

	// The agent on a copy of the state directory, with the flags the
	// fixture's ran with.
	stateDir := t.TempDir()
	for _, f := range fix.StateFiles {
		b, err := os.ReadFile(filepath.Join(dir, "state", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stateDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	agentAddr := freeAddr(t)
	agent := startProcess(t, processSpec{Binary: "rl-agent", Args: append([]string{
		"--listen-address=" + agentAddr, "--state-dir=" + stateDir,
		// The fixture's workloads last called when it was recorded,
		// which may be longer ago than the default TTL; an upgrade takes
		// minutes.
		"--workload-ttl=0",
	}, fix.AgentArgs...)})
	agentClient := pb.NewAgentServiceClient(agentConn(t, agentAddr, "aware-e2e-reader"))
	policyStatus := func(ctx context.Context, w upgradeFixtureWorkload) (*pb.PolicyStatus, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := agentClient.GetPolicyStatus(cctx, &pb.GetPolicyStatusRequest{Workload: &pb.WorkloadRef{Namespace: ns, Name: w.Name, Uid: w.UID}})
		return resp.GetStatus(), err
	}

	if !t.Run("the agent restores every workload as recorded", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		// Nothing has called the agent yet: what it reports is what it
		// read from the state directory, exactly.
		for _, w := range fix.Workloads {
			st, err := policyStatus(ctx, w)
			if err != nil {
				t.Errorf("%s: GetPolicyStatus: %v (not restored)", w.Name, err)
				continue
			}
			if got := stageName(st.GetStage()); got != w.Stage || st.GetEpisodes() != w.Episodes || st.GetTransitions() != w.Transitions || st.GetPolicyVersion() != w.PolicyVersion {
				t.Errorf("%s restored as stage %s, %d episodes, %d transitions, policy %s; recorded %s, %d, %d, %s",
					w.Name, got, st.GetEpisodes(), st.GetTransitions(), st.GetPolicyVersion(), w.Stage, w.Episodes, w.Transitions, w.PolicyVersion)
			}
		}
		stages := map[string]float64{}
		for _, w := range fix.Workloads {
			stages[w.Stage]++
		}
		for stage, n := range stages {
			if got := mustMetric(t, agent, "aware_rlagent_workloads", "stage="+stage); got != n {
				t.Errorf("aware_rlagent_workloads{stage=%q} = %g, want %g", stage, got, n)
			}
		}
	}) {
		t.FailNow()
	}

	started := time.Now()
	rec := startProcess(t, processSpec{Binary: "recommender", Args: recommenderArgs(ns,
		"--leader-elect=false",
		"--checkpoints-interval=15s",
		"--rl-agent-endpoint="+agentAddr,
	)})

	t.Run("the next recommendations come from the restored agent and history", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		for _, w := range fix.Workloads {
			mw := &mpaWorkload{ns: ns, name: w.Name, client: client}
			m := mw.waitRecommendation(t, 2*time.Minute, w.Name+": a recommendation by the upgraded components", started, func(m *v1alpha1.MultidimPodAutoscaler) error {
				rl := m.Status.RL
				switch {
				case rl == nil || rl.LastAgentContactTime == nil || rl.LastAgentContactTime.Time.Before(started):
					return fmt.Errorf("no answer from the upgraded agent yet")
				case string(rl.Stage) != w.Stage:
					return fmt.Errorf("%w: stage %s, recorded %s", framework.ErrPermanent, rl.Stage, w.Stage)
				case string(rl.Source) != w.Source || rl.Reason != w.Reason:
					return fmt.Errorf("source %s reason %s, recorded %s %s", rl.Source, rl.Reason, w.Source, w.Reason)
				}
				if c := condition(m, v1alpha1.FetchingHistory); len(w.Checkpoints) > 0 && (c == nil || c.Status != corev1.ConditionFalse || c.Reason != "CheckpointRestored") {
					return fmt.Errorf("FetchingHistory %+v, want False CheckpointRestored", c)
				}
				return nil
			}, rec, agent)
			t.Logf("%s after the upgrade: %s", w.Name, rlString(m.Status.RL))
			// A Serving workload is answered by the frozen copy it was
			// promoted with: the same version, not a new policy's.
			if w.Stage == string(v1alpha1.RLStageServing) && m.Status.RL.PolicyVersion != w.PolicyVersion {
				t.Errorf("%s answered by policy %s, recorded (frozen at promotion) %s", w.Name, m.Status.RL.PolicyVersion, w.PolicyVersion)
			}
		}
		var checkpoints float64
		for _, w := range fix.Workloads {
			checkpoints += float64(len(w.Checkpoints))
		}
		if n := mustMetric(t, rec, "aware_recommender_checkpoint_operations_total", "operation=restore", "result=success"); n != checkpoints {
			t.Errorf("%g checkpoints restored, the fixture has %g", n, checkpoints)
		}
		if n, _, err := rec.metric(ctx, "aware_recommender_checkpoint_operations_total", "operation=restore", "result=error"); err != nil || n != 0 {
			t.Errorf("%g checkpoints refused as unusable (%v)", n, err)
		}
	})

	t.Run("the agent resumes without retraining", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		// The agent counts on from the recorded state once the
		// recommender reports the outcome of its first decision (a loop
		// later); a workload it had lost would have started again from
		// Bootstrapping with no transitions.
		for _, w := range fix.Workloads {
			framework.Eventually(t, time.Minute, w.Name+": transitions counted on from the recorded ones", func(ctx context.Context) (bool, error) {
				agent.running(t)
				st, err := policyStatus(ctx, w)
				if err != nil {
					return false, err
				}
				if stageName(st.GetStage()) != w.Stage || st.GetEpisodes() < w.Episodes {
					return false, fmt.Errorf("%w: stage %s, %d episodes; recorded %s, %d", framework.ErrPermanent, st.GetStage(), st.GetEpisodes(), w.Stage, w.Episodes)
				}
				if st.GetTransitions() <= w.Transitions {
					return false, fmt.Errorf("%d transitions, recorded %d", st.GetTransitions(), w.Transitions)
				}
				t.Logf("%s: stage %s, %d episodes, %d transitions (recorded %d, %d)", w.Name, st.GetStage(), st.GetEpisodes(), st.GetTransitions(), w.Episodes, w.Transitions)
				return true, nil
			})
		}
		// No stage changed since the start: nothing bootstrapped again.
		if n, _, err := agent.metric(ctx, "aware_rlagent_stage_transitions_total"); err != nil || n != 0 {
			t.Errorf("%g stage transitions since the upgrade, want 0 (%v)", n, err)
		}
	})
}

// createNamedNamespace creates namespace name (a fixture's, so its
// autoscalers' etcd keys are right), waiting out one a previous run left
// terminating, and deletes it when the test ends.
func createNamedNamespace(t *testing.T, name string) {
	t.Helper()
	framework.Eventually(t, 3*time.Minute, "namespace "+name+" left by an earlier run to go", func(ctx context.Context) (bool, error) {
		_, err := tb.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there: %v", err)
	})
	_, err := tb.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"aware.e2e/test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := tb.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	framework.Eventually(t, 30*time.Second, "default ServiceAccount in "+name, func(ctx context.Context) (bool, error) {
		_, err := tb.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// stageName is the API's name of an agent's stage.
func stageName(s pb.Stage) string {
	switch s {
	case pb.Stage_STAGE_BOOTSTRAPPING:
		return string(v1alpha1.RLStageBootstrapping)
	case pb.Stage_STAGE_ONLINE_TRAINING:
		return string(v1alpha1.RLStageOnlineTraining)
	case pb.Stage_STAGE_SERVING:
		return string(v1alpha1.RLStageServing)
	case pb.Stage_STAGE_RETRAINING:
		return string(v1alpha1.RLStageRetraining)
	}
	return s.String()
}

// subsetDiff says where want (decoded JSON) is not contained in got: every
// key of every object of want must be in got with an equal value; got may
// have more keys. Numbers are compared as float64, as JSON decodes them.
func subsetDiff(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: served %T, stored an object", path, got)
		}
		for k, v := range w {
			if d := subsetDiff(path+"."+k, v, g[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: served %v, stored %v", path, got, want)
		}
		for i := range w {
			if d := subsetDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); d != "" {
				return d
			}
		}
		return ""
	case float64:
		if g, ok := toFloat(got); !ok || g != w {
			return fmt.Sprintf("%s: served %v, stored %v", path, got, want)
		}
		return ""
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Sprintf("%s: served %v, stored %v", path, got, want)
	}
	return ""
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}
