package pkg

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/aware-k8s/aware/"

// layerRule says what one layer's files may import beyond the standard
// library: module packages under the listed prefixes, and third-party
// modules under the listed prefixes. Test files are held to the same rule,
// so a layer's tests cannot reach into a layer above it either.
type layerRule struct {
	own      []string // module paths (after module) the layer may import
	external []string // third-party import path prefixes it may import
}

var layers = map[string]layerRule{
	"core": {own: []string{"pkg/core/"}},
	"rl":   {own: []string{"pkg/core/", "pkg/rl/"}, external: []string{"gorgonia.org/", "gonum.org/"}},
	// gonum: numerics in pure Go (the simulator's order statistics).
	"lab":  {own: []string{"pkg/core/", "pkg/rl/", "pkg/lab/"}, external: []string{"gonum.org/"}},
	"kube": {own: []string{"pkg/core/", "pkg/kube/", "pkg/apis/", "pkg/generated/", "pkg/version", "proto/"}, external: []string{""}},
}

// gorgoniaHome is the one package that may link Gorgonia: its build
// quirks and types stay behind nn's plain-Go API.
const gorgoniaHome = "pkg/rl/nn"

// TestLayers: every Go file under pkg/core, pkg/rl, pkg/kube and pkg/lab
// imports only what its layer may (doc.go). The pure layers import neither
// client-go nor gRPC nor anything else outside the standard library and
// their own lower layers.
func TestLayers(t *testing.T) {
	for layer, rule := range layers {
		t.Run(layer, func(t *testing.T) {
			files := 0
			err := filepath.WalkDir(layer, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() && d.Name() == "testdata" {
					return filepath.SkipDir
				}
				if d.IsDir() || !strings.HasSuffix(path, ".go") {
					return nil
				}
				files++
				f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
				if err != nil {
					return err
				}
				dir := "pkg/" + filepath.ToSlash(filepath.Dir(path))
				for _, is := range f.Imports {
					imp, err := strconv.Unquote(is.Path.Value)
					if err != nil {
						return err
					}
					if why := refused(rule, dir, imp); why != "" {
						t.Errorf("%s imports %s: %s", path, imp, why)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if files == 0 {
				t.Fatalf("no Go files under %s", layer)
			}
		})
	}
}

// refused says why a file in dir may not import imp under rule, or "".
func refused(rule layerRule, dir, imp string) string {
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") {
		return "" // the standard library
	}
	if own, ok := strings.CutPrefix(imp, module); ok {
		for _, p := range rule.own {
			if strings.HasPrefix(own, p) || own == strings.TrimSuffix(p, "/") {
				return ""
			}
		}
		return "a layer imports only the layers below it (pkg/doc.go)"
	}
	if strings.HasPrefix(imp, "gorgonia.org/") && dir != gorgoniaHome && !strings.HasPrefix(dir, gorgoniaHome+"/") {
		return "only " + gorgoniaHome + " links Gorgonia"
	}
	for _, p := range rule.external {
		if strings.HasPrefix(imp, p) {
			return ""
		}
	}
	return "this layer is pure Go: no third-party imports outside its rule"
}

// TestRefused: the rule refuses what it must, so TestLayers can fail.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name, layer, dir, imp string
		refused               bool
	}{
		{"core reads the standard library", "core", "pkg/core/hpa", "math", false},
		{"core reads core", "core", "pkg/core/fusion", module + "pkg/core/hpa", false},
		{"core may not read rl", "core", "pkg/core/fusion", module + "pkg/rl/learn", true},
		{"core may not read client-go", "core", "pkg/core/hpa", "k8s.io/client-go/kubernetes", true},
		{"lab may not read kube", "lab", "pkg/lab/sim", module + "pkg/kube/usage", true},
		{"lab may not read gRPC", "lab", "pkg/lab/eval", "google.golang.org/grpc", true},
		{"rl's nn links Gorgonia", "rl", "pkg/rl/nn", "gorgonia.org/gorgonia", false},
		{"rl's learn may not link Gorgonia", "rl", "pkg/rl/learn", "gorgonia.org/gorgonia", true},
		{"kube may read client-go", "kube", "pkg/kube/target", "k8s.io/client-go/scale", false},
		{"kube may not read lab", "kube", "pkg/kube/usage", module + "pkg/lab/sim", true},
		{"kube may not read rl", "kube", "pkg/kube/agentclient", module + "pkg/rl/learn", true},
		{"kube may not link Gorgonia", "kube", "pkg/kube/serve", "gorgonia.org/tensor", true},
		{"kube reads the contract", "kube", "pkg/kube/agentclient", module + "proto/aware/rlagent/wire", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refused(layers[tc.layer], tc.dir, tc.imp) != ""; got != tc.refused {
				t.Fatalf("refused(%s, %s) = %v, want %v", tc.dir, tc.imp, got, tc.refused)
			}
		})
	}
}
