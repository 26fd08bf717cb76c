package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/eval"
)

// shippedOptions are tiny options of the demo with three agents, whose
// snapshots validation selects, as the demo's are, when validate is set.
// A small bias towards following the default makes even the untrained
// weights deviate from it (with the default's, tiny agents act as the
// default does, whatever their weights), so that the agents' rows say
// something of their weights.
func shippedOptions(validate bool) Options {
	o := tinyOptions()
	o.Policies = []string{PolicyFused}
	o.Progress = false
	o.Agent = tinyAgent()
	o.Agent.Train.Episodes, o.Agent.Train.FollowBias = 24, 0.01
	o.Agent.Seeds, o.Agent.Quorums = 3, DefaultQuorums()
	o.Agent.Validation = DefaultValidationOptions()
	if validate {
		o.Agent.Validation.Apps, o.Agent.Validation.Steps, o.Agent.Validation.Every = 1, 40, 1
	}
	return o
}

// results is the demo's output from its table to the list of files it
// wrote: what must not depend on where the agents came from.
func results(t *testing.T, out string) string {
	t.Helper()
	i, j := strings.Index(out, "POLICY"), strings.Index(out, "Report and plots in")
	if i < 0 || j < i {
		t.Fatalf("no table in:\n%s", out)
	}
	return out[i:j]
}

// TestShippedAgentsGiveTheFreshTable: agents written by WriteAgents, taken
// by the demo in place of training, give the table, the paired
// comparisons and the report that training them afresh gives, and are
// copied into the output folder as the trained ones are written.
func TestShippedAgentsGiveTheFreshTable(t *testing.T) {
	for _, validate := range []bool{false, true} {
		t.Run(fmt.Sprintf("validation %v", validate), func(t *testing.T) {
			testShippedAgentsGiveTheFreshTable(t, shippedOptions(validate))
		})
	}
}

func testShippedAgentsGiveTheFreshTable(t *testing.T, o Options) {
	t.Chdir(t.TempDir())
	var out bytes.Buffer
	if err := WriteAgents(context.Background(), o, "agents", "make agents", &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Wrote 3 agents") {
		t.Errorf("WriteAgents says:\n%s", out.String())
	}
	m, err := ReadManifest(os.DirFS("agents"))
	if err != nil || len(m.Agents) != 3 {
		t.Fatalf("manifest: %d agents, %v", len(m.Agents), err)
	}

	fresh, shipped := o, o
	fresh.Agent, shipped.Agent = new(*o.Agent), new(*o.Agent)
	fresh.Agent.Fresh, fresh.Agent.Shipped, fresh.OutDir = true, os.DirFS("agents"), "fresh"
	shipped.Agent.Shipped, shipped.OutDir = os.DirFS("agents"), "shipped"
	var fo, so bytes.Buffer
	if err := Run(context.Background(), fresh, &fo, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), shipped, &so, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fo.String(), "ahead of this run") || strings.Count(so.String(), "ahead of this run") != 3 {
		t.Errorf("--train did not train, or the shipped agents were not taken:\n%s\n%s", fo.String(), so.String())
	}
	// The shipped agents' training, as WriteAgents printed it, is printed
	// again without its times.
	for _, a := range m.Agents {
		if !strings.Contains(so.String(), a.Summary+", ahead of this run") || !strings.Contains(so.String(), a.Details[len(a.Details)-1]) {
			t.Errorf("the demo does not say how %s was trained:\n%s", a.File, so.String())
		}
	}
	if f, s := results(t, fo.String()), results(t, so.String()); f != s {
		t.Errorf("the shipped agents' table differs from the fresh ones':\n%s\nvs\n%s", s, f)
	}
	for _, f := range []string{eval.JSONFile, "agent-1.ckpt", "agent-2.ckpt", "agent-3.ckpt"} {
		a, err := os.ReadFile(filepath.Join("fresh", f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("shipped", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the fresh and the shipped run", f)
		}
	}
	// The agents act otherwise than the default, so that equal tables say
	// that their weights are the same.
	rows := map[string]string{}
	for _, line := range strings.Split(results(t, so.String()), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "4" {
			rows[f[0]] = strings.Join(f[1:], " ")
		}
	}
	if rows[PolicyFused] == "" || rows["aware-1"] == rows[PolicyFused] && rows["aware-2"] == rows[PolicyFused] && rows["aware-3"] == rows[PolicyFused] {
		t.Errorf("every agent acts as the default does:\n%s", so.String())
	}
	if _, err := os.Stat(filepath.Join("fresh", "reward-curve-1.svg")); err != nil {
		t.Errorf("a fresh agent's reward curve: %v", err)
	}
}

// TestShippedAgentsOnlyForTheirOptions: an agent is taken only when the
// options it would be trained with are those it was trained with, and a
// checkpoint that is not the one its manifest records is refused.
func TestShippedAgentsOnlyForTheirOptions(t *testing.T) {
	t.Chdir(t.TempDir())
	o := shippedOptions(true)
	o.Agent.Seeds, o.Agent.Quorums = 2, nil
	if err := WriteAgents(context.Background(), o, "agents", "make agents", io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		change  func(o *Options)
		taken   int // agents taken from the folder
		wantErr string
	}{
		{name: "same options", change: func(*Options) {}, taken: 2},
		{name: "parallelism does not matter", change: func(o *Options) { o.Agent.Train.Workers = 1 }, taken: 2},
		{name: "evaluation options do not matter", change: func(o *Options) { o.Apps, o.Policies = 1, []string{PolicyHPA} }, taken: 2},
		// Seed 2's first agent is seed 1's second: trained alike.
		{name: "next seed", change: func(o *Options) { o.Seed = 2 }, taken: 1},
		{name: "more agents", change: func(o *Options) { o.Agent.Seeds = 3 }, taken: 2},
		{name: "other training", change: func(o *Options) { o.Agent.Train.Episodes = 4 }, taken: 0},
		{name: "other window", change: func(o *Options) { o.Steps, o.Step = 60, 2*o.Step }, taken: 0},
		{name: "other validation", change: func(o *Options) { o.Agent.Validation.MaxWorse = 0.5 }, taken: 0},
		{name: "no validation", change: func(o *Options) { o.Agent.Validation.Apps = 0 }, taken: 0},
		{name: "fresh", change: func(o *Options) { o.Agent.Fresh = true }, taken: 0},
		{name: "replaced checkpoint", change: func(o *Options) {
			o.Agent.Shipped = tampered(t, "agents", "agent-2.ckpt")
		}, wantErr: "agent-2.ckpt does not have the SHA-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := o
			c.Agent = new(*o.Agent)
			c.Agent.Shipped, c.OutDir = os.DirFS("agents"), t.TempDir()
			tc.change(&c)
			var out bytes.Buffer
			err := Run(context.Background(), c, &out, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(out.String(), "ahead of this run"); got != tc.taken {
				t.Errorf("%d agents taken from the folder, want %d:\n%s", got, tc.taken, out.String())
			}
		})
	}
}

// tampered returns dir as a file system in which file's bytes differ.
func tampered(t *testing.T, dir, file string) fs.FS {
	t.Helper()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(cp, file))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(filepath.Join(cp, file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return os.DirFS(cp)
}

// TestShippedAgentsAreTheDemos: the agents shipped with the demo are those
// `rl-agent demo` without flags would train, and their checkpoints are the
// ones the manifest records. A change of the demo's default options fails
// here until `make agents` is run; a change of the code that trains them,
// rl-agent/app's TestWriteAgentsReproduces.
func TestShippedAgentsAreTheDemos(t *testing.T) {
	o := DefaultOptions()
	fsys := ShippedAgents()
	m, err := ReadManifest(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Agents) != o.Agent.count() {
		t.Fatalf("%d agents shipped, the demo has %d: run make agents", len(m.Agents), o.Agent.count())
	}
	for k := range o.Agent.count() {
		key, err := AgentKey(o, k)
		if err != nil {
			t.Fatal(err)
		}
		a, b, ok, err := m.find(fsys, key)
		if err != nil || !ok {
			t.Fatalf("agent %d: no shipped agent has the demo's options (%v): run make agents", k+1, err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != a.SHA256 || a.File != filepath.Base(agentFile(".", agentName(k, o.Agent.count()), k, AgentCheckpointFile)) {
			t.Errorf("agent %d: file %s, SHA-256 %x", k+1, a.File, sum)
		}
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(m.Agents)+1 {
		t.Errorf("%d files shipped, want the %d checkpoints and %s: a stale file is compiled into rl-agent", len(entries), len(m.Agents), ManifestFile)
	}
}
