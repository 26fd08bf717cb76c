//go:build images

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// maxImageBytes is the size budget of one image as a registry stores it
// (compressed layer, config and manifest).
const maxImageBytes = 40 << 20

// TestBuiltImages opens each image `make images` wrote (make images-test
// passes where and with what) and checks the contract: entrypoint, user,
// labels, one layer, the size budget, that the binary from its layer runs
// --version, and that deploy/ names the image. The real-node workload's
// images (AWARE_IMAGES_WORKLOAD) keep the same contract, but deploy/ does
// not run them.
func TestBuiltImages(t *testing.T) {
	env := func(k string) string {
		v := os.Getenv(k)
		if v == "" {
			t.Fatalf("%s is not set: run make images-test", k)
		}
		return v
	}
	dir, tag, version := env("AWARE_IMAGES_DIR"), env("AWARE_IMAGES_TAG"), env("AWARE_IMAGES_VERSION")
	revision, source := env("AWARE_IMAGES_REVISION"), env("AWARE_IMAGES_SOURCE")
	manifests := map[string]string{
		"recommender":          "../../deploy/recommender/recommender.yaml",
		"updater":              "../../deploy/updater/updater.yaml",
		"admission-controller": "../../deploy/admission-controller/admission-controller.yaml",
		"rl-agent":             "../../deploy/rl-agent/rl-agent.yaml",
	}
	for _, b := range strings.Fields(env("AWARE_IMAGES_WORKLOAD")) {
		if _, ok := manifests[b]; ok {
			t.Fatalf("%s is both a product and a workload image", b)
		}
		manifests[b] = ""
	}
	imageLine := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)\s*$`)
	for binary, manifest := range manifests {
		t.Run(binary, func(t *testing.T) {
			img, gotTag, err := ReadLayout(filepath.Join(dir, Prefix+binary))
			if err != nil {
				t.Fatal(err)
			}
			if gotTag != tag {
				t.Errorf("layout tag %q, want %q", gotTag, tag)
			}
			s := Spec{Binary: binary, Revision: revision, Source: source, Arch: runtime.GOARCH, Created: time.Unix(1, 0)}
			if err := checkImage(img, s, version); err != nil {
				t.Error(err)
			}
			size, err := imageSize(img)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.1f MB", Prefix+binary, float64(size)/1e6)
			if size > maxImageBytes {
				t.Errorf("image is %d bytes, over the budget of %d", size, maxImageBytes)
			}
			content, err := extractFile(img, binary)
			if err != nil {
				t.Fatal(err)
			}
			exe := filepath.Join(t.TempDir(), binary)
			if err := os.WriteFile(exe, content, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(exe, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", binary, err, out)
			}
			if want := binary + " version " + version + " "; !strings.HasPrefix(string(out), want) {
				t.Errorf("%s --version printed %q, want it to start with %q", binary, out, want)
			}
			if manifest == "" {
				return // a workload image: deploy/ does not run it
			}
			raw, err := os.ReadFile(manifest)
			if err != nil {
				t.Fatal(err)
			}
			m := imageLine.FindAllStringSubmatch(string(raw), -1)
			if len(m) != 1 {
				t.Fatalf("%s names %d images, want 1", manifest, len(m))
			}
			if repo, _, _ := strings.Cut(m[0][1], ":"); repo != Prefix+binary {
				t.Errorf("%s runs image %s, but make images builds %s", manifest, m[0][1], Prefix+binary)
			}
		})
	}
}
