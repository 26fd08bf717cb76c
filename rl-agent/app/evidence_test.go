package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/policy"
)

// TestTrainMetaThenEval trains Meta-PPO through `rl-agent train
// --policy=meta-ppo` and evaluates the checkpoint through `rl-agent eval`,
// which tells the kind from the checkpoint.
func TestTrainMetaThenEval(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ckpt := filepath.Join(dir, "meta.ckpt")
	out, errOut, err := execute(t, newTrainCommand(), append(tinyTraining, "--policy=meta-ppo", "--meta-window=3", "--meta-embed-dim=2", "--no-progress", "--checkpoint="+ckpt)...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "Training meta-ppo") || !strings.Contains(out, "Episodes per stage: Bootstrapping 2, OnlineTraining 2") {
		t.Errorf("train output:\n%s", out)
	}
	b, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if kind, err := policy.CheckpointKind(b); err != nil || kind != policy.KindMetaPPO {
		t.Fatalf("checkpoint kind %q, %v", kind, err)
	}
	out, errOut, err = execute(t, newEvalCommand(), "--checkpoint="+ckpt, "--apps=1", "--steps=30", "--traces=steady",
		"--series-trace=steady", "--policies=fused", "--no-progress")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "  aware  ") {
		t.Errorf("no aware row in:\n%s", out)
	}
}

// TestEvidenceCommand runs the bootstrap experiment with tiny flags and
// checks the table and the JSON; bad flags are refused.
func TestEvidenceCommand(t *testing.T) {
	dir := t.TempDir()
	out, errOut, err := execute(t, newEvidenceCommand(), "--experiment=bootstrap", "--out="+dir, "--apps=2", "--adapt-apps=1",
		"--episode-steps=12", "--bootstrap-k=6", "--bootstrap-cap=1", "--bootstrap-batch=2")
	if err != nil {
		t.Fatalf("evidence: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "== bootstrap (seed 1)") || !strings.Contains(out, "bootstrapped") {
		t.Errorf("output:\n%s", out)
	}
	var res struct {
		Arms []struct {
			Name     string `json:"name"`
			Episodes int    `json:"episodes"`
		} `json:"arms"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res.Arms) != 2 || res.Arms[0].Episodes != 6 {
		t.Errorf("bootstrap.json: %v %+v", err, res)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown experiment", []string{"--experiment=magic"}, `--experiment must be one of`},
		{"bad factor", []string{"--cpu-factor=0"}, "CPU and rate factors"},
		{"more adapt apps than apps", []string{"--apps=1", "--adapt-apps=2"}, "adapt apps (2)"},
		{"retraining min above its cap", []string{"--retrain-min=9", "--retrain-cap=3"}, "retraining min 9 must not exceed max 3"},
		{"bad adapt threshold", []string{"--adapt-thresholds=0.9,1.5"}, "adapt thresholds must be in (0, 1]"},
		{"bad adapt factor", []string{"--adapt-cpu-factor=-2"}, "adapt CPU and memory factors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := execute(t, newEvidenceCommand(), append(tc.args, "--out="+dir)...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
