// Package docs holds no code: its test checks that the documentation's
// relative links resolve, so a moved page or a renamed heading fails CI
// instead of a new user's click.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	link  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence = regexp.MustCompile("(?s)```.*?```")
	// A heading's anchor as GitHub makes it: lower case, punctuation
	// other than '-' and '_' dropped, spaces to '-'.
	punct = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	url   = regexp.MustCompile(`^[a-z]+:`)
)

func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	return strings.ReplaceAll(punct.ReplaceAllString(h, ""), " ", "-")
}

func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(fence.ReplaceAllString(string(b), ""), "\n") {
		if strings.HasPrefix(line, "#") {
			out[slug(strings.TrimLeft(line, "#"))] = true
		}
	}
	return out
}

// markdown lists the repository's *.md files, outside generated or
// third-party trees.
func markdown(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "vendor", "node_modules", "bench-vpa-out", "bench-real-out":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestRelativeLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := markdown(t, root)
	if len(files) < 10 {
		t.Fatalf("found %d markdown files under %s; the walk is wrong", len(files), root)
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if url.MatchString(target) {
				continue // a URL
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := f
			if path != "" {
				resolved = filepath.Join(filepath.Dir(f), path)
			}
			checked++
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s: link %q: no such file", rel, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchors(t, resolved)[anchor] {
				t.Errorf("%s: link %q: no heading with that anchor", rel, target)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d links; the pattern is wrong", checked)
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"A real node (`make e2e-node`, not part of the testbed)", "a-real-node-make-e2e-node-not-part-of-the-testbed"},
		{"The benchmark: `make bench-real`", "the-benchmark-make-bench-real"},
		{" Install on a cluster ", "install-on-a-cluster"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := slug(tc.in); got != tc.want {
				t.Fatalf("slug(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
