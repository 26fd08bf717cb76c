package cli_test

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinaries builds each component and runs it as a user would. Starting
// the real process (rather than calling NewCommand) is what catches a
// dependency that panics at init, e.g. a bad gorgonia pin in rl-agent.
func TestBinaries(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/",
		"github.com/aware-k8s/aware/recommender",
		"github.com/aware-k8s/aware/updater",
		"github.com/aware-k8s/aware/admission-controller",
		"github.com/aware-k8s/aware/rl-agent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		bin      string
		args     []string
		wantCode int
		want     string
	}{
		{"recommender", []string{"--help"}, 0, "--kubeconfig"},
		{"updater", []string{"--help"}, 0, "--metrics-bind-address"},
		{"admission-controller", []string{"--help"}, 0, "--logging-format"},
		{"rl-agent", []string{"--help"}, 0, "demo"},
		{"rl-agent", []string{"demo", "--help"}, 0, "Usage:"},
		{"recommender", []string{"--version"}, 0, "version"},
		{"updater", []string{"--no-such-flag"}, 1, "unknown flag: --no-such-flag"},
		{"recommender", []string{"--metrics-bind-address", "nonsense"}, 1, "--metrics-bind-address"},
		{"rl-agent", []string{"frobnicate"}, 1, "unknown command"},
	} {
		t.Run(tc.bin+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, tc.bin), tc.args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			code := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\n%s", code, tc.wantCode, out.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out.String())
			}
		})
	}
}
