package app

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/rl/nn"
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
	if kind, err := nn.CheckpointKind(b); err != nil || kind != nn.KindMetaPPO {
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

// TestEvidenceCommand runs the bootstrap experiment over two seeds with
// tiny flags in both action spaces and checks the tables and the JSON;
// bad flags are refused.
func TestEvidenceCommand(t *testing.T) {
	for _, space := range []string{"paper", "residual"} {
		t.Run(space, func(t *testing.T) {
			dir := t.TempDir()
			out, errOut, err := execute(t, newEvidenceCommand(), "--experiment=bootstrap", "--out="+dir, "--apps=2", "--adapt-apps=1", "--seeds=2",
				"--episode-steps=12", "--bootstrap-k=6", "--bootstrap-cap=1", "--bootstrap-batch=2", "--action-space="+space)
			if err != nil {
				t.Fatalf("evidence: %v\n%s", err, errOut)
			}
			for _, want := range []string{"== bootstrap (seed 1, " + space + " action space)", "== bootstrap (seed 2, ", "== bootstrap over seeds [1 2]", "4 pairs over seeds [1 2]", "bootstrapped"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in output:\n%s", want, out)
				}
			}
			var res struct {
				Seeds   []uint64 `json:"seeds"`
				PerSeed []struct {
					Arms []struct {
						Name     string `json:"name"`
						Episodes int    `json:"episodes"`
					} `json:"arms"`
				} `json:"perSeed"`
				Pairs []struct {
					Seed    uint64 `json:"seed"`
					Windows int    `json:"windows"`
				} `json:"pairs"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "bootstrap.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &res); err != nil || len(res.PerSeed) != 2 || len(res.PerSeed[1].Arms) != 2 || res.PerSeed[1].Arms[0].Episodes != 6 || len(res.Pairs) != 4 {
				t.Fatalf("bootstrap.json: %v %+v", err, res)
			}
			// The six episodes cycle over the two apps of each seed.
			for _, p := range res.Pairs {
				if p.Windows != 3*12 {
					t.Errorf("pair %+v: want 3 episodes of 12 windows", p)
				}
			}
		})
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown experiment", []string{"--experiment=magic"}, `--experiment must be one of`},
		{"bad factor", []string{"--cpu-factor=0"}, "CPU and rate factors"},
		{"more adapt apps than apps", []string{"--apps=1", "--adapt-apps=2"}, "adapt apps (2)"},
		{"more retrain apps than apps", []string{"--apps=2", "--adapt-apps=1", "--retrain-apps=3"}, "retrain apps (3)"},
		{"retraining min above its cap", []string{"--retrain-min=9", "--retrain-cap=3"}, "retraining min 9 must not exceed max 3"},
		{"bad adapt threshold", []string{"--adapt-thresholds=0.9,1.5"}, "adapt thresholds must be in (0, 1]"},
		{"bad adapt factor", []string{"--adapt-cpu-factor=-2"}, "adapt CPU, memory and start-up factors"},
		{"bad start-up factor", []string{"--adapt-startup-factor=0"}, "adapt CPU, memory and start-up factors"},
		{"no seeds", []string{"--seeds=0"}, "seeds must be > 0"},
		{"unknown action space", []string{"--action-space=fancy"}, "action space must be"},
		{"negative reference", []string{"--retrain-reference=-1"}, "reference fine-tuning episodes must be >= 0"},
		{"negative auxiliary weight", []string{"--meta-aux-weight=-1"}, "auxiliary weight must be finite and >= 0"},
		{"parameter spread below 1", []string{"--pretrain-param-spread=0.5"}, "pretrain parameter spread must be 0 (off) or at least 1"},
		{"unknown guard", []string{"--meta-guard=sphere", "--action-space=residual"}, "embedding guard must be box, mahalanobis or empty"},
		{"guard in the paper space", []string{"--meta-guard=box", "--action-space=paper"}, "embedding guard needs the residual action space"},
		{"blind Meta-PPO guarded", []string{"--meta-guard=box", "--action-space=residual", "--meta-blind"}, "--meta-guard and --meta-blind exclude each other"},
		{"blind Meta-PPO's embedding", []string{"--experiment=embedding", "--meta-blind"}, "a blind Meta-PPO does not have"},
		{"parameter spread with checkpoints", []string{"--pretrain-param-spread=4", "--pretrained=" + dir}, "--pretrain-param-spread shapes the pre-training"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := execute(t, newEvidenceCommand(), append(tc.args, "--out="+dir)...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestEvidencePretrainedPerSeed: a two-seed run writes each seed's
// checkpoints to seed-<N>; a second run with --pretrained reads them and
// gives the same numbers; a seed without checkpoints is an error.
func TestEvidencePretrainedPerSeed(t *testing.T) {
	tiny := []string{"--experiment=after", "--apps=1", "--adapt-apps=1", "--seeds=2", "--episode-steps=12", "--pretrain-apps=2", "--pretrain-episodes=4",
		"--meta-window=2", "--eval-steps=30", "--eval-traces=steady", "--workers=2"}
	first, second := t.TempDir(), t.TempDir()
	out, errOut, err := execute(t, newEvidenceCommand(), append(tiny, "--out="+first)...)
	if err != nil {
		t.Fatalf("evidence: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "== after over seeds [1 2]") || !strings.Contains(out, "aware-ppo") {
		t.Errorf("output:\n%s", out)
	}
	for _, seed := range []string{"seed-1", "seed-2"} {
		for _, f := range []string{"pretrained-ppo.ckpt", "pretrained-meta-ppo.ckpt"} {
			if _, err := os.Stat(filepath.Join(first, seed, f)); err != nil {
				t.Error(err)
			}
		}
	}
	out, errOut, err = execute(t, newEvidenceCommand(), append(tiny, "--out="+second, "--pretrained="+first)...)
	if err != nil {
		t.Fatalf("evidence --pretrained: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "Seed 2: pre-trained PPO and Meta-PPO loaded from "+filepath.Join(first, "seed-2")) {
		t.Errorf("output:\n%s", out)
	}
	a, errA := os.ReadFile(filepath.Join(first, "after.json"))
	b, errB := os.ReadFile(filepath.Join(second, "after.json"))
	if errA != nil || errB != nil || string(a) != string(b) {
		t.Errorf("after.json differs with the checkpoints reloaded (%v, %v)", errA, errB)
	}
	if err := os.RemoveAll(filepath.Join(first, "seed-2")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t, newEvidenceCommand(), append(tiny, "--out="+second, "--pretrained="+first)...); err == nil || !strings.Contains(err.Error(), "no checkpoints for seed 2") {
		t.Errorf("error %v, want no checkpoints for seed 2", err)
	}
}

// TestEvidenceMetaGuard: a residual adapt run with --meta-guard fits the
// guard in pre-training and stores it in the Meta-PPO's checkpoint; reading
// the checkpoints back, with the guard refitted on load (on the same spread
// pre-training apps) or as stored, gives the same numbers.
func TestEvidenceMetaGuard(t *testing.T) {
	tiny := []string{"--experiment=adapt", "--apps=1", "--adapt-apps=1", "--adapt-episodes=10", "--adapt-batch=2", "--episode-steps=12", "--pretrain-apps=2",
		"--pretrain-episodes=4", "--meta-window=2", "--workers=2", "--action-space=residual"}
	first := t.TempDir()
	out, errOut, err := execute(t, newEvidenceCommand(), append(tiny, "--out="+first, "--meta-guard=box", "--pretrain-param-spread=4")...)
	if err != nil {
		t.Fatalf("evidence: %v\n%s", err, errOut)
	}
	for _, want := range []string{"Seed 1: Meta-PPO embedding guard fitted on the 2 pre-training apps: lo [", "spread by factors log-uniform in [1, 4]"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in output:\n%s", want, out)
		}
	}
	ckpt, err := os.ReadFile(filepath.Join(first, "seed-1", "pretrained-meta-ppo.ckpt"))
	if err != nil || !strings.Contains(string(ckpt), `"guard"`) {
		t.Fatalf("the Meta-PPO checkpoint holds no guard (%v)", err)
	}
	want, err := os.ReadFile(filepath.Join(first, "adapt.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, wantOut string
		args          []string
	}{
		{"refitted on load", "guard fitted on the 2 pre-training apps (", []string{"--meta-guard=box", "--pretrain-param-spread=4"}},
		{"as stored", "loaded from", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, errOut, err := execute(t, newEvidenceCommand(), append(append(tiny, "--out="+dir, "--pretrained="+first), tc.args...)...)
			if err != nil {
				t.Fatalf("evidence: %v\n%s", err, errOut)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("no %q in output:\n%s", tc.wantOut, out)
			}
			got, err := os.ReadFile(filepath.Join(dir, "adapt.json"))
			if err != nil || !slices.Equal(adaptRuns(t, got), adaptRuns(t, want)) {
				t.Errorf("adapt.json's runs differ from the run that pre-trained (%v)", err)
			}
		})
	}
}

// adaptRuns returns the runs of an adapt.json, one JSON text each: the
// numbers, without the pre-training's wall time.
func adaptRuns(t *testing.T, b []byte) []string {
	t.Helper()
	var res struct {
		PerSeed []struct {
			Runs []json.RawMessage `json:"runs"`
		} `json:"perSeed"`
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res.PerSeed) == 0 {
		t.Fatalf("adapt.json: %v", err)
	}
	var out []string
	for _, s := range res.PerSeed {
		for _, r := range s.Runs {
			out = append(out, string(r))
		}
	}
	return out
}

// TestEvidenceEmbedding runs the embedding experiment over two seeds with
// tiny flags: a table per seed and over seeds, embedding.json, and one
// well-formed plot per seed with one point per app.
func TestEvidenceEmbedding(t *testing.T) {
	dir := t.TempDir()
	out, errOut, err := execute(t, newEvidenceCommand(), "--experiment=embedding", "--out="+dir, "--apps=5", "--adapt-apps=1", "--seeds=2",
		"--episode-steps=12", "--pretrain-apps=2", "--pretrain-episodes=4", "--meta-window=2", "--workers=2")
	if err != nil {
		t.Fatalf("evidence: %v\n%s", err, errOut)
	}
	for _, want := range []string{"== embedding (seed 2, ", "== embedding over seeds [1 2]", "Spearman rho", "Goal: rho >= 0.6", "Plot: " + filepath.Join(dir, "embedding-seed-2.svg")} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in output:\n%s", want, out)
		}
	}
	var res struct {
		PerSeed []struct {
			Apps []struct {
				App string `json:"app"`
			} `json:"apps"`
		} `json:"perSeed"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "embedding.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res.PerSeed) != 2 || len(res.PerSeed[0].Apps) != 5 {
		t.Fatalf("embedding.json: %v %+v", err, res)
	}
	for _, seed := range []string{"1", "2"} {
		svg, err := os.ReadFile(filepath.Join(dir, "embedding-seed-"+seed+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(bytes.NewReader(svg))
		points := 0
		for {
			tok, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("seed %s: SVG not well-formed: %v", seed, err)
			}
			if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "circle" {
				points++
			}
		}
		if points != 5 {
			t.Errorf("seed %s: %d points, want one per app (5)", seed, points)
		}
	}
}
