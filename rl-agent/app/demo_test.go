package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func TestDemoCommand(t *testing.T) {
	azure, err := sim.WriteAzureFixture(t.TempDir(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sample, err := sim.WriteAzureSample(dir, sim.AzureSampleOptions{Functions: 10, FirstMinute: 480, Minutes: 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	series, uneven := filepath.Join(dir, "rates.csv"), filepath.Join(dir, "uneven.csv")
	for p, text := range map[string]string{series: "time,rate\n0,5\n60,10\n", uneven: "0,1\n60,1\n180,1\n"} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantErr  string
		wantRows []string
		wantText string
	}{
		{
			name:     "tiny run",
			args:     []string{"--apps=1", "--steps=40", "--traces=steady", "--series-trace=steady", "--policies=hpa,oracle", "--no-progress", "--no-agent"},
			wantRows: []string{"hpa", "oracle"},
		},
		{
			name: "tiny run with a tiny agent",
			args: []string{"--apps=1", "--steps=40", "--traces=steady", "--series-trace=steady", "--policies=fused", "--no-progress",
				"--train-apps=2", "--train-episodes=4", "--train-bootstrap-episodes=2", "--train-episode-steps=10", "--train-batch-episodes=2", "--train-hidden=8",
				"--train-validate-apps=1", "--train-validate-steps=20"},
			wantRows: []string{"fused", "aware-1", "aware-3"},
			wantText: "aware (pooled)",
		},
		{
			name: "one tiny agent",
			args: []string{"--apps=1", "--steps=40", "--traces=steady", "--series-trace=steady", "--policies=fused", "--no-progress", "--agent-seeds=1",
				"--train-apps=2", "--train-episodes=4", "--train-bootstrap-episodes=2", "--train-episode-steps=10", "--train-batch-episodes=2", "--train-hidden=8",
				"--train-validate-apps=1", "--train-validate-steps=20"},
			wantRows: []string{"fused", "aware"},
			wantText: "Paired against fused on the same (app, trace, seed)",
		},
		{
			// The demo selects each agent's snapshot on validation apps
			// by default; only their number and length are set here.
			name: "validation by default",
			args: []string{"--apps=1", "--steps=40", "--traces=steady", "--policies=fused", "--no-progress", "--agent-seeds=1",
				"--train-apps=2", "--train-episodes=4", "--train-bootstrap-episodes=2", "--train-episode-steps=10", "--train-batch-episodes=2", "--train-hidden=8",
				"--train-validate-steps=20"},
			wantRows: []string{"fused", "aware"},
			wantText: "  validation: ",
		},
		{
			// The plotted series follows --traces when left at its default.
			name:     "traces without series trace",
			args:     []string{"--apps=1", "--steps=40", "--traces=steady", "--policies=fused", "--no-progress", "--no-agent"},
			wantRows: []string{"fused"},
		},
		{
			name: "azure files",
			args: []string{"--apps=1", "--steps=40", "--traces=steady", "--policies=fused", "--no-progress", "--no-agent",
				"--azure-csv=" + azure.Invocations, "--azure-durations-csv=" + azure.Durations, "--azure-memory-csv=" + azure.Memory},
			wantRows: []string{"fused"},
			wantText: "2 traces (steady,azure)",
		},
		{
			name: "azure memory file in place of the durations",
			args: []string{"--apps=1", "--steps=40", "--traces=steady", "--no-progress", "--no-agent",
				"--azure-csv=" + azure.Invocations, "--azure-durations-csv=" + azure.Memory},
			wantErr: azure.Memory + ": azure durations: line 1: header has no column HashFunction",
		},
		{
			name: "azure sample of part of a day, recorded, and a rate series, without trace kinds",
			args: []string{"--apps=1", "--steps=5760", "--traces=", "--policies=fused", "--no-progress", "--no-agent",
				"--azure-csv=" + sample.Invocations, "--azure-durations-csv=" + sample.Durations, "--azure-memory-csv=" + sample.Memory,
				"--azure-rate=recorded", "--trace-csv=" + series, "--trace-csv-cpu=0.02", "--trace-csv-memory=64"},
			wantRows: []string{"fused"},
			wantText: "azure runs: Azure functions of " + sample.Invocations + ", rate recorded; 80 windows each\ncsv runs: rate series " + series + ", as recorded; 8 windows each",
		},
		{name: "bad azure rate", args: []string{"--azure-rate=loud"}, wantErr: `unknown azure rate mode "loud"`},
		{name: "uneven rate series", args: []string{"--apps=1", "--steps=10", "--traces=", "--no-progress", "--no-agent", "--trace-csv=" + uneven},
			wantErr: uneven + ": rate series: line 3: 120s after line 2"},
		{name: "series demand without a series", args: []string{"--trace-csv-cpu=1"}, wantErr: "no series file is named"},
		{name: "no trace at all", args: []string{"--traces="}, wantErr: "at least one trace kind, Azure invocations file or rate series"},
		{name: "series trace not run", args: []string{"--traces=steady", "--series-trace=ramp"}, wantErr: `series trace "ramp" is not among`},
		{name: "bad agent training", args: []string{"--train-episodes=0"}, wantErr: "episodes must be > 0"},
		{name: "missing agent checkpoint", args: []string{"--apps=1", "--steps=10", "--agent-checkpoint=nope.ckpt", "--no-progress"}, wantErr: "nope.ckpt"},
		{name: "bad policy", args: []string{"--policies=magic"}, wantErr: `unknown policy "magic"`},
		{name: "bad apps", args: []string{"--apps=-1"}, wantErr: "apps must be > 0"},
		{name: "positional argument", args: []string{"extra"}, wantErr: "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			cmd := newDemoCommand()
			var out, errOut bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, errOut.String())
			}
			for _, r := range tc.wantRows {
				if !strings.Contains(out.String(), "  "+r+"  ") {
					t.Errorf("no %s row in:\n%s", r, out.String())
				}
			}
			if !strings.Contains(out.String(), tc.wantText) {
				t.Errorf("output lacks %q:\n%s", tc.wantText, out.String())
			}
			if errOut.Len() != 0 {
				t.Errorf("--no-progress still wrote to stderr: %q", errOut.String())
			}
		})
	}
}
