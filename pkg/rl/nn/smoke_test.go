package nn

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGorgoniaBinaryStarts builds and runs a tiny program that uses this
// package. Some Gorgonia dependency versions panic during package
// initialisation on newer Go releases, which no in-process test can catch
// once the test binary itself has started.
func TestGorgoniaBinaryStarts(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build the smoke binary: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "smoke")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		// Same flags as this test binary, so the build reuses its cache.
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, goTool, append(args, "./testdata/smoke")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	run := exec.CommandContext(ctx, bin)
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("smoke binary failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "OK") {
		t.Fatalf("smoke binary did not print OK\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
