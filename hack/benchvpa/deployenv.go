//go:build benchvpa

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// deployedEnv returns the literal environment (name=value) that the
// Deployment manifests in file give container: each side's admission
// controller runs here with the settings its project ships it with (ours
// sets GOGC and GOMEMLIMIT for the webhook's tail; VPA's sets none), not
// with whatever the harness's own environment holds. Variables taken from
// fields or secrets have no literal value and are left out; a file with no
// such container is an error, so a renamed manifest cannot silently drop
// the settings.
func deployedEnv(file, container string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	found := false
	var env []string
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != container {
				continue
			}
			found = true
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					env = append(env, e.Name+"="+e.Value)
				}
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: no Deployment with a container %q", file, container)
	}
	return env, nil
}
