//go:build benchvpa

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDeployedEnv(t *testing.T) {
	const manifest = `apiVersion: v1
kind: Service
metadata: {name: s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  template:
    spec:
      containers:
      - name: sidecar
        env: [{name: OTHER, value: "1"}]
      - name: admission-controller
        env:
        - name: NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - name: GOGC
          value: "400"
        - name: EMPTY
          value: ""
`
	dir := t.TempDir()
	file := filepath.Join(dir, "d.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, container string
		want                  []string
		wantErr               string
	}{
		{name: "literal values of the named container only", file: file, container: "admission-controller", want: []string{"GOGC=400", "EMPTY="}},
		{name: "no such container", file: file, container: "webhook", wantErr: `no Deployment with a container "webhook"`},
		{name: "no such file", file: filepath.Join(dir, "none.yaml"), container: "admission-controller", wantErr: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := deployedEnv(tc.file, tc.container)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDeployedEnvOfOurManifest: the harness runs our admission controller
// with the GC settings its Deployment ships.
func TestDeployedEnvOfOurManifest(t *testing.T) {
	env, err := deployedEnv(filepath.Join("..", "..", "deploy", "admission-controller", "admission-controller.yaml"), "admission-controller")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "GOGC=") }) {
		t.Errorf("env %q has no GOGC", env)
	}
}
