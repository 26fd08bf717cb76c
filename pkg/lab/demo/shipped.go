package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/train"
)

// The demo ships its default agents, trained by `make agents` (WriteAgents)
// exactly as the demo trains them, so that `make demo` evaluates without
// training: training the three took about two thirds of the demo's time
// (docs/results/demo.md). An agent is used only when the options it was
// trained with, recorded beside it (AgentKey), are those the demo would
// train it with now; otherwise, or with AgentOptions.Fresh, it is trained.
// What the options do not record, the code, a test guards instead: it
// trains a small configuration with the same command and compares the
// checkpoints byte for byte with the ones `make agents` wrote
// (rl-agent/app's TestWriteAgentsReproduces).
//
//go:embed agents
var shippedAgents embed.FS

// ShippedDir is the folder of this package the shipped agents are in,
// relative to the repository's root: where `make agents` writes them.
const ShippedDir = "pkg/lab/demo/agents"

// ShippedAgents returns the agents shipped with the demo, as a file system
// whose root holds ManifestFile and the checkpoints.
func ShippedAgents() fs.FS {
	sub, err := fs.Sub(shippedAgents, "agents")
	if err != nil {
		panic(err) // "agents" is a valid path
	}
	return sub
}

// ManifestFile lists the agents of a folder WriteAgents wrote.
const ManifestFile = "agents.json"

// Manifest is ManifestFile: what WriteAgents trained, and how.
type Manifest struct {
	// Command says how to write the folder again.
	Command string         `json:"command"`
	Agents  []ShippedAgent `json:"agents"`
}

// ShippedAgent is one agent of a Manifest.
type ShippedAgent struct {
	// File is the checkpoint (train.WriteCheckpoint) in the folder.
	File string `json:"file"`
	// SHA256 is the checkpoint's, so that a checkpoint replaced without
	// its manifest is not taken for the one the options describe.
	SHA256 string `json:"sha256"`
	// Summary and Details are what the demo printed of the training,
	// without its times (agentSummary).
	Summary string   `json:"summary"`
	Details []string `json:"details"`
	// Key is the options the agent was trained with (AgentKey).
	Key json.RawMessage `json:"key"`
}

// agentKey is what decides a trained agent, besides the code: its training
// options as the demo sets them and the validation that selects its
// snapshot.
type agentKey struct {
	Training   train.Options     `json:"training"`
	Validation ValidationOptions `json:"validation"`
}

// AgentKey returns the options agent k of o is trained with, as JSON: the
// training options (trainOptions), without those that do not change the
// result (the number of workers: parallelism does not change training, the
// checkpoint's path, the progress bar), and the validation options. Two
// agents of equal keys are equal, byte for byte, if the code is the same.
func AgentKey(o Options, k int) (json.RawMessage, error) {
	t := o.trainOptions(k)
	t.Workers, t.Checkpoint, t.Progress = 0, "", nil
	v := o.Agent.Validation
	if v.Apps == 0 {
		v = ValidationOptions{} // off: the other fields do nothing
	}
	b, err := json.Marshal(agentKey{Training: t, Validation: v})
	if err != nil {
		return nil, fmt.Errorf("agent key: %w", err)
	}
	return b, nil
}

// ReadManifest reads ManifestFile of fsys; a folder without one has no
// agents.
func ReadManifest(fsys fs.FS) (Manifest, error) {
	b, err := fs.ReadFile(fsys, ManifestFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, nil
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("shipped agents: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("shipped agents: %s: %w", ManifestFile, err)
	}
	return m, nil
}

// find returns the agent of m trained with key and its checkpoint, or
// ok false when there is none.
func (m *Manifest) find(fsys fs.FS, key json.RawMessage) (a ShippedAgent, ckpt []byte, ok bool, err error) {
	for _, a := range m.Agents {
		// Compact both: the manifest is indented for people to read.
		var x, y bytes.Buffer
		if err := json.Compact(&x, a.Key); err != nil {
			return ShippedAgent{}, nil, false, fmt.Errorf("shipped agents: %s: key: %w", a.File, err)
		}
		if err := json.Compact(&y, key); err != nil {
			return ShippedAgent{}, nil, false, err
		}
		if !bytes.Equal(x.Bytes(), y.Bytes()) {
			continue
		}
		b, err := fs.ReadFile(fsys, a.File)
		if err != nil {
			return ShippedAgent{}, nil, false, fmt.Errorf("shipped agents: %w", err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != a.SHA256 {
			return ShippedAgent{}, nil, false, fmt.Errorf("shipped agents: %s does not have the SHA-256 %s records (make agents writes both)", a.File, ManifestFile)
		}
		return a, b, true, nil
	}
	return ShippedAgent{}, nil, false, nil
}

// shippedAgent loads agent k of o, named name, from the shipped agents when
// one was trained with its options (ok false otherwise), prints what its
// training printed and copies its checkpoint into dir, as training would
// have written it.
func shippedAgent(o Options, k int, name, dir string, stdout io.Writer) (c eval.Contender, l train.Learner, files []string, ok bool, err error) {
	fsys := o.Agent.Shipped
	if fsys == nil {
		fsys = ShippedAgents()
	}
	m, err := ReadManifest(fsys)
	if err != nil {
		return eval.Contender{}, nil, nil, false, err
	}
	key, err := AgentKey(o, k)
	if err != nil {
		return eval.Contender{}, nil, nil, false, err
	}
	a, b, ok, err := m.find(fsys, key)
	if err != nil || !ok {
		return eval.Contender{}, nil, nil, false, err
	}
	if l, err = train.ParseLearner(b); err != nil {
		return eval.Contender{}, nil, nil, false, fmt.Errorf("shipped agents: %s: %w", a.File, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return eval.Contender{}, nil, nil, false, err
	}
	path := agentFile(dir, name, k, AgentCheckpointFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return eval.Contender{}, nil, nil, false, err
	}
	fmt.Fprintf(stdout, "Agent %q %s, ahead of this run (shipped agents, make agents; --train trains it afresh).\n", name, a.Summary)
	for _, d := range a.Details {
		fmt.Fprintf(stdout, "  %s\n", d)
	}
	c = train.Contender(l, train.AgentOptions{})
	c.Name = name
	return c, l, []string{path}, true, nil
}

// WriteAgents trains o's agents as Run trains them (o.Agent.Checkpoints is
// ignored) and writes their checkpoints and ManifestFile to dir, replacing
// what dir held once all are trained. command is recorded as the way to
// write dir again.
func WriteAgents(ctx context.Context, o Options, dir, command string, stdout, stderr io.Writer) error {
	if o.Agent == nil {
		return errors.New("agents: no agent to train")
	}
	a := *o.Agent
	a.Checkpoints = nil
	o.Agent = &a
	if err := o.Validate(); err != nil {
		return fmt.Errorf("agents: invalid options: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	defer os.RemoveAll(tmp)
	n := o.Agent.count()
	m := Manifest{Command: command}
	for k := range n {
		name := agentName(k, n)
		tr, err := trainAgent(ctx, o, k, name, tmp, false, stdout, stderr)
		if err != nil {
			return fmt.Errorf("agents: %s: %w", name, err)
		}
		b, err := os.ReadFile(tr.checkpoint)
		if err != nil {
			return fmt.Errorf("agents: %w", err)
		}
		key, err := AgentKey(o, k)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m.Agents = append(m.Agents, ShippedAgent{
			File: filepath.Base(tr.checkpoint), SHA256: hex.EncodeToString(sum[:]),
			Summary: tr.summary, Details: tr.details, Key: key,
		})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ManifestFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's is 0o700
		return fmt.Errorf("agents: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	fmt.Fprintf(stdout, "Wrote %d agents and %s to %s.\n", n, ManifestFile, dir)
	return nil
}
