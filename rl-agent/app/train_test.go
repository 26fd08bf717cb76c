package app

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func execute(t *testing.T, cmd *cobra.Command, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

var tinyTraining = []string{"--apps=2", "--episodes=4", "--bootstrap-episodes=1", "--episode-steps=12", "--batch-episodes=2", "--hidden=8", "--traces=steady,flash-crowd"}

// TestTrainThenEval trains through `rl-agent train` and evaluates the
// checkpoint through `rl-agent eval`, with tiny options.
func TestTrainThenEval(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ckpt := filepath.Join(dir, "agent.ckpt")
	out, errOut, err := execute(t, newTrainCommand(), append(tinyTraining, "--checkpoint="+ckpt)...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, errOut)
	}
	for _, f := range []string{ckpt, filepath.Join(dir, "agent-reward.svg"), filepath.Join(dir, "agent-reward.json")} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out, "Checkpoint: "+ckpt) || !strings.Contains(out, "simulated windows per second") || !strings.Contains(errOut, "4/4") {
		t.Errorf("train output:\n%s\nprogress:\n%s", out, errOut)
	}

	// Same flags, same checkpoint bytes.
	again := filepath.Join(dir, "again.ckpt")
	if _, errOut, err := execute(t, newTrainCommand(), append(tinyTraining, "--checkpoint="+again, "--no-progress")...); err != nil {
		t.Fatalf("train: %v\n%s", err, errOut)
	}
	a, _ := os.ReadFile(ckpt)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("equal flags gave different checkpoints")
	}

	out, errOut, err = execute(t, newEvalCommand(), "--checkpoint="+ckpt, "--apps=1", "--steps=40", "--traces=steady",
		"--series-trace=steady", "--policies=fused,oracle", "--no-progress")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut)
	}
	for _, r := range []string{"fused", "oracle", "aware"} {
		if !strings.Contains(out, "  "+r+"  ") {
			t.Errorf("no %s row in:\n%s", r, out)
		}
	}
	if !strings.Contains(out, "AWARE eval") {
		t.Errorf("eval output:\n%s", out)
	}
	for _, f := range []string{eval.JSONFile, eval.ScatterFile, eval.TimeSeriesFile} {
		if _, err := os.Stat(filepath.Join(dir, "aware-eval-1", f)); err != nil {
			t.Error(err)
		}
	}
	if errOut != "" {
		t.Errorf("--no-progress still wrote to stderr: %q", errOut)
	}
}

// TestTrainAzure trains with the three Azure files: episodes cycle through
// the kind "azure", whose apps take the measured demand.
func TestTrainAzure(t *testing.T) {
	dir := t.TempDir()
	azure, err := sim.WriteAzureFixture(dir, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(dir, "azure.ckpt")
	args := []string{"--apps=2", "--episodes=6", "--bootstrap-episodes=1", "--episode-steps=12", "--batch-episodes=2", "--hidden=8",
		"--traces=steady", "--no-progress", "--checkpoint=" + ckpt,
		"--azure-csv=" + azure.Invocations, "--azure-durations-csv=" + azure.Durations, "--azure-memory-csv=" + azure.Memory}
	if _, errOut, err := execute(t, newTrainCommand(), args...); err != nil {
		t.Fatalf("train: %v\n%s", err, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "azure-reward.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"azure"`) {
		t.Errorf("no azure episode in the reward curve:\n%.400s", data)
	}
	bad := append(slices.Clone(args[:len(args)-3]), "--azure-memory-csv="+azure.Memory)
	if _, _, err := execute(t, newTrainCommand(), bad...); err == nil || !strings.Contains(err.Error(), "need the invocations file") {
		t.Errorf("memory file without invocations: error %v", err)
	}
}

// TestTrainValidation trains with validation through `rl-agent train`:
// every snapshot is judged and listed, and the checkpoint is the one
// marked.
func TestTrainValidation(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "agent.ckpt")
	out, errOut, err := execute(t, newTrainCommand(), append(tinyTraining, "--checkpoint="+ckpt, "--no-progress",
		"--validate-apps=1", "--validate-steps=40", "--validate-every=1", "--validate-max-worse=1")...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, errOut)
	}
	// 4 episodes in batches of 2, the first batch bootstrapping: the
	// initial policy and 1 update (the residual space trains nothing on
	// bootstrapping).
	for _, want := range []string{
		"Validation of 2 snapshots:",
		"after    0 updates (    0 episodes): against fused on 2 runs: SLO ",
		"after    1 updates (    4 episodes): against fused on 2 runs: SLO ",
		"The checkpoint holds the snapshot after ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if n := strings.Count(out, " * after "); n != 1 {
		t.Errorf("%d snapshots marked as the checkpoint's, want 1:\n%s", n, out)
	}
}

func TestTrainEvalFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		name    string
		cmd     *cobra.Command
		args    []string
		wantErr string
	}{
		{"train: no episodes", newTrainCommand(), []string{"--episodes=0"}, "episodes must be > 0"},
		{"train: no checkpoint", newTrainCommand(), []string{"--checkpoint="}, "--checkpoint is required"},
		{"train: bad trace", newTrainCommand(), []string{"--traces=sawtooth"}, `unknown trace kind "sawtooth"`},
		{"train: validation baseline", newTrainCommand(), []string{"--validate-apps=1", "--validate-baseline=magic"}, `validation baseline: unknown policy "magic"`},
		{"train: validation seed", newTrainCommand(), []string{"--validate-apps=1", "--validate-seed=1", "--seed=1"}, "validation seed 1 is the training seed"},
		{"train: validation interval", newTrainCommand(), []string{"--validate-apps=1", "--validate-every=0"}, "validation steps (5760) and interval (0 updates) must be > 0"},
		{"eval: no checkpoint", newEvalCommand(), nil, "--checkpoint is required"},
		{"eval: missing checkpoint", newEvalCommand(), []string{"--checkpoint=nope.ckpt", "--apps=1", "--steps=10", "--no-progress"}, "nope.ckpt"},
		{"eval: bad policy", newEvalCommand(), []string{"--checkpoint=x", "--policies=magic"}, `unknown policy "magic"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := execute(t, tc.cmd, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
