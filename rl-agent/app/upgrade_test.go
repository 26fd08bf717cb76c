package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// upgradeFixtures is where hack/upgrade-fixture.sh records the state of
// earlier versions (e2e/upgrade_fixture_test.go describes the layout).
const upgradeFixtures = "../../e2e/testdata/upgrade"

// fixtureManifest is the part of a fixture's manifest.json read here.
type fixtureManifest struct {
	Version   string   `json:"version"`
	Commit    string   `json:"commit"`
	Namespace string   `json:"namespace"`
	AgentArgs []string `json:"agentArgs"`
	Workloads []struct {
		Name          string `json:"name"`
		UID           string `json:"uid"`
		Stage         string `json:"stage"`
		Episodes      int64  `json:"episodes"`
		Transitions   int64  `json:"transitions"`
		PolicyVersion string `json:"policyVersion"`
	} `json:"workloads"`
	StateFiles []string `json:"stateFiles"`
}

var stageOf = map[string]pb.Stage{
	"Bootstrapping":  pb.Stage_STAGE_BOOTSTRAPPING,
	"OnlineTraining": pb.Stage_STAGE_ONLINE_TRAINING,
	"Serving":        pb.Stage_STAGE_SERVING,
	"Retraining":     pb.Stage_STAGE_RETRAINING,
}

// TestServeLoadsUpgradeFixtures starts this tree's agent on a copy of the
// state directory of every earlier version recorded under
// e2e/testdata/upgrade, with the flags it ran with, and checks that each
// workload is restored as the old agent last reported it: stage, episodes,
// transitions and the version of the weights that answer it (a Serving
// workload's frozen copy). A change of the state format that breaks the
// upgrade from a supported version fails here, in make test, and not only
// in the e2e tier's TestUpgrade.
func TestServeLoadsUpgradeFixtures(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(upgradeFixtures, "*", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("no fixture in %s: the upgrade promise is untested", upgradeFixtures)
	}
	for _, mf := range dirs {
		dir := filepath.Dir(mf)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(mf)
			if err != nil {
				t.Fatal(err)
			}
			var fix fixtureManifest
			if err := json.Unmarshal(b, &fix); err != nil {
				t.Fatal(err)
			}
			if len(fix.Workloads) == 0 || len(fix.StateFiles) == 0 {
				t.Fatalf("fixture %s has no workloads or no state files", dir)
			}
			state := t.TempDir()
			for _, f := range fix.StateFiles {
				b, err := os.ReadFile(filepath.Join(dir, "state", f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(state, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			addr := freeAddr(t)
			args := append([]string{"--listen-address", addr, "--state-dir", state, "--metrics-bind-address", "0", "--health-bind-address", "0", "--tls-mode", "plaintext",
				// The fixture's workloads last called when it was
				// recorded; no TTL may forget them before they are read.
				"--workload-ttl", "0"}, fix.AgentArgs...)
			stop := runCommand(t, args...)
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			waitServing(t, conn)
			c := pb.NewAgentServiceClient(conn)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, w := range fix.Workloads {
				want, ok := stageOf[w.Stage]
				if !ok {
					t.Fatalf("%s: unknown stage %q in the manifest", w.Name, w.Stage)
				}
				resp, err := c.GetPolicyStatus(ctx, &pb.GetPolicyStatusRequest{Workload: &pb.WorkloadRef{Namespace: fix.Namespace, Name: w.Name, Uid: w.UID}})
				if err != nil {
					t.Errorf("%s: GetPolicyStatus: %v (the workload was not restored)", w.Name, err)
					continue
				}
				st := resp.GetStatus()
				if st.GetStage() != want || st.GetEpisodes() != w.Episodes || st.GetTransitions() != w.Transitions || st.GetPolicyVersion() != w.PolicyVersion {
					t.Errorf("%s restored as stage %s, %d episodes, %d transitions, policy %s; %s (%s) recorded %s, %d, %d, %s",
						w.Name, st.GetStage(), st.GetEpisodes(), st.GetTransitions(), st.GetPolicyVersion(),
						fix.Version, fix.Commit, want, w.Episodes, w.Transitions, w.PolicyVersion)
				}
			}
			if err := stop(); err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
}

// TestServeRefusesNewerState: a state directory written by a newer agent
// (a newer framing of the experience log or of the checkpoint, or a newer
// snapshot inside a checkpoint this agent can unframe) stops the agent at
// start with store.ErrUnsupportedVersion and a message saying what to do,
// and every file is left as it was: downgrades are not supported, and an
// agent that started empty would overwrite the newer state.
func TestServeRefusesNewerState(t *testing.T) {
	newer := func(b []byte) []byte {
		// The byte after the 7-byte magic is the framing's version.
		b = bytes.Clone(b)
		b[7] = store.FormatVersion + 1
		return b
	}
	for _, tc := range []struct {
		name string
		// change edits the files of a state directory an agent of this
		// tree wrote (experience.log and state.ckpt, each framed).
		change func(t *testing.T, dir string)
		want   string
	}{
		{"newer experience log framing", func(t *testing.T, dir string) { rewrite(t, filepath.Join(dir, "experience.log"), newer) }, "experience log"},
		{"newer checkpoint framing", func(t *testing.T, dir string) { rewrite(t, filepath.Join(dir, "state.ckpt"), newer) }, "checkpoint state has format version 2"},
		{"newer snapshot format", func(t *testing.T, dir string) {
			st, _, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.SaveCheckpoint("state", []byte(`{"format": 2, "policyVersion": 7}`)); err != nil {
				t.Fatal(err)
			}
		}, "snapshot of format 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, _, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(st.Append([][]byte{[]byte("x")}), st.SaveCheckpoint("state", []byte(`{"policyVersion": 7}`)), st.Close()); err != nil {
				t.Fatal(err)
			}
			tc.change(t, dir)
			before := readDir(t, dir)
			cmd := newServeCommand()
			cmd.SetArgs([]string{"--listen-address", "127.0.0.1:0", "--state-dir", dir, "--metrics-bind-address", "0", "--health-bind-address", "0", "--tls-mode", "plaintext"})
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err = cmd.ExecuteContext(context.Background())
			if !errors.Is(err, store.ErrUnsupportedVersion) {
				t.Fatalf("serve over newer state: %v, want ErrUnsupportedVersion", err)
			}
			for _, want := range []string{tc.want, "newer rl-agent", "downgrades are not supported", "refusing to start", dir} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			after := readDir(t, dir)
			for name, b := range before {
				if !bytes.Equal(after[name], b) {
					t.Errorf("%s was changed", name)
				}
			}
		})
	}
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readDir returns the content of every file of dir but its lock.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}
