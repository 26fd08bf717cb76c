package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testSpec(t *testing.T) Spec {
	t.Helper()
	p := filepath.Join(t.TempDir(), "recommender")
	if err := os.WriteFile(p, []byte("not really a program"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Spec{Binary: "recommender", Path: p, Version: "v1.2.3", Revision: "abc123",
		Source: "https://example.com/aware", Created: time.Unix(1700000000, 0), Arch: "amd64"}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"empty binary name", func(s *Spec) { s.Binary = "" }, "plain program name"},
		{"binary name with a slash", func(s *Spec) { s.Binary = "a/b" }, "plain program name"},
		{"no version", func(s *Spec) { s.Version = "" }, "version is empty"},
		{"no revision", func(s *Spec) { s.Revision = "" }, "revision is empty"},
		{"no source", func(s *Spec) { s.Source = "" }, "source is empty"},
		{"zero time", func(s *Spec) { s.Created = time.Time{} }, "creation time is zero"},
		{"missing binary", func(s *Spec) { s.Path = filepath.Join(t.TempDir(), "absent") }, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t)
			tc.mutate(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestBuildReproducible: the same inputs give the same digest, and each
// input that the image records changes it.
func TestBuildReproducible(t *testing.T) {
	base := testSpec(t)
	digest := func(t *testing.T, s Spec) string {
		t.Helper()
		img, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	want := digest(t, base)
	if again := digest(t, base); again != want {
		t.Fatalf("two builds of the same spec: %s then %s", want, again)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Spec)
	}{
		{"another time", func(s *Spec) { s.Created = s.Created.Add(time.Second) }},
		{"another revision", func(s *Spec) { s.Revision = "def456" }},
		{"another version", func(s *Spec) { s.Version = "v1.2.4" }},
		{"another binary", func(s *Spec) {
			if err := os.WriteFile(s.Path, []byte("another program"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t)
			tc.mutate(&s)
			if got := digest(t, s); got == want {
				t.Errorf("digest %s unchanged", got)
			}
		})
	}
}

func TestLayoutRoundTrip(t *testing.T) {
	s := testSpec(t)
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "aware-recommender")
	// Written twice: the second write replaces the first, not appends.
	for range 2 {
		if err := WriteLayout(dir, img, "v1.2.3"); err != nil {
			t.Fatal(err)
		}
	}
	got, tag, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tag != "v1.2.3" {
		t.Errorf("tag %q, want v1.2.3", tag)
	}
	if err := checkImage(got, s, s.Version); err != nil {
		t.Error(err)
	}
	content, err := extractFile(got, s.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if string(content) != "not really a program" {
		t.Errorf("binary in the layer %q", content)
	}
	if _, _, err := ReadLayout(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("ReadLayout of a missing directory: no error")
	}
}

func TestRun(t *testing.T) {
	s := testSpec(t)
	binDir := filepath.Dir(s.Path)
	out := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string // "" means success
	}{
		{"no subcommand", nil, "usage"},
		{"unknown subcommand", []string{"load"}, "unknown subcommand"},
		{"build without flags", []string{"build", "recommender"}, "needs --binaries"},
		{"build without binaries", []string{"build", "--binaries", binDir, "--out", out, "--tag", "t", "--epoch", "1"}, "at least one BINARY"},
		{"build with a bad epoch", []string{"build", "--binaries", binDir, "--out", out, "--tag", "t", "--epoch", "yesterday", "recommender"}, "--epoch"},
		{"build with a missing binary", []string{"build", "--binaries", binDir, "--out", out, "--tag", "t", "--epoch", "1",
			"--version", "v", "--revision", "r", "--source", "s", "--arch", "amd64", "updater"}, "no such file"},
		{"push without registry", []string{"push", "--dir", out, "recommender"}, "needs --dir and --registry"},
		{"push of a missing layout", []string{"push", "--dir", t.TempDir(), "--registry", "127.0.0.1:1/x", "recommender"}, "OCI layout"},
		{"build", []string{"build", "--binaries", binDir, "--out", out, "--tag", "t", "--epoch", "1",
			"--version", "v", "--revision", "r", "--source", "s", "--arch", "amd64", "recommender"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := run(context.Background(), tc.args, &buf)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("run: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("run: error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, tag, err := ReadLayout(filepath.Join(out, "aware-recommender")); err != nil || tag != "t" {
		t.Errorf("the build wrote no layout tagged t: %q, %v", tag, err)
	}
}
