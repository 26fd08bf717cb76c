package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func TestDemoCommand(t *testing.T) {
	azure, err := sim.WriteAzureFixture(t.TempDir(), 2, 1)
	if err != nil {
		t.Fatal(err)
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
			wantErr: azure.Memory + ": azure durations: line 1: header has 12 columns",
		},
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
