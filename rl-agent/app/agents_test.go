package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/demo"
)

// agentsSmall is the small configuration `make agents` trains besides the
// demo's own agents, and the folder it writes them to.
const (
	agentsSmallConfig = "testdata/agents-small.yaml"
	agentsSmallDir    = "testdata/agents-small"
)

// TestWriteAgentsReproduces: the command `make agents` runs reproduces,
// byte for byte, the agents it wrote for the small configuration. The
// agents shipped with the demo are written by the same command with the
// demo's options, so when this fails after a change of the training, the
// simulator or the default they learn beside, the shipped agents are
// stale too: run make agents (and re-measure docs/results/demo.md).
func TestWriteAgentsReproduces(t *testing.T) {
	config, err := filepath.Abs(agentsSmallConfig)
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(agentsSmallDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	cmd := newDemoCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--config=" + config, "--write-agents=agents", "--no-progress"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("demo --write-agents: %v\n%s", err, out.String())
	}
	names := func(dir string) []string {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, e := range es {
			ns = append(ns, e.Name())
		}
		return ns
	}
	got, wantNames := names("agents"), names(want)
	if !slices.Equal(got, wantNames) {
		t.Fatalf("wrote %v, make agents wrote %v", got, wantNames)
	}
	for _, n := range got {
		a, err := os.ReadFile(filepath.Join("agents", n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(want, n))
		if err != nil {
			t.Fatal(err)
		}
		// make agents ran on amd64, where Go does not fuse multiply-adds;
		// elsewhere the weights may differ in their last bits, so there
		// only the manifest's options and the checkpoints' sizes are held
		// to it.
		switch {
		case bytes.Equal(a, b):
		case runtime.GOARCH != "amd64" && n == demo.ManifestFile:
			if ka, kb := manifestKeys(t, a), manifestKeys(t, b); !slices.Equal(ka, kb) {
				t.Errorf("%s: the agents' options differ from make agents':\n%v\nvs\n%v", n, ka, kb)
			}
		case runtime.GOARCH != "amd64" && len(a) == len(b):
		default:
			t.Errorf("%s differs from the one make agents wrote (%d and %d bytes): the training changed; run make agents", n, len(a), len(b))
		}
	}
	if t.Failed() {
		t.Logf("demo --write-agents said:\n%s", out.String())
	}
}

// manifestKeys returns the files and options of a manifest's agents.
func manifestKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, demo.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := demo.ReadManifest(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, a := range m.Agents {
		var c bytes.Buffer
		if err := json.Compact(&c, a.Key); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, a.File+" "+c.String())
	}
	return ks
}

// TestDemoAgentFlags: --write-agents and --shipped-agents, and what they
// refuse.
func TestDemoAgentFlags(t *testing.T) {
	config, err := filepath.Abs(agentsSmallConfig)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := filepath.Abs(agentsSmallDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantErr  string
		wantText []string
	}{
		{name: "shipped agents of a folder", args: []string{"--config=" + config, "--shipped-agents=" + shipped, "--policies=fused", "--apps=1", "--no-progress"},
			wantText: []string{"aware-1\" (residual actions, training seed 1): trained on 4 training apps", "ahead of this run", "aware (3 of 3 agree)"}},
		{name: "another seed trains the agents it has not", args: []string{"--config=" + config, "--shipped-agents=" + shipped, "--policies=fused", "--apps=1", "--no-progress", "--seed=3"},
			wantText: []string{"Agent \"aware-1\" (residual actions, training seed 3): trained on 4 training apps (none held out) for 96 episodes (20 bootstrapping) of 60 windows, ahead of this run", "training seed 4): trained on 4 training apps (none held out) for 96 episodes (20 bootstrapping) of 60 windows in "}},
		{name: "write agents without agents", args: []string{"--write-agents=x", "--no-agent"}, wantErr: "--write-agents trains the agents, which --no-agent leaves out"},
		{name: "folder without a manifest", args: []string{"--config=" + config, "--shipped-agents=.", "--policies=fused", "--apps=1", "--no-progress", "--agent-seeds=1"},
			wantText: []string{"windows in "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			cmd := newDemoCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, out.String())
			}
			for _, w := range tc.wantText {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
