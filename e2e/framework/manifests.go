package framework

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Workload is one component's container as the install runs it: the
// Deployment that holds it, the ServiceAccount it runs as, and its
// arguments and environment as the kubelet would hand them to the process.
type Workload struct {
	// Component is the container's name in deploy/ (recommender, updater,
	// admission-controller, rl-agent); it names the binary.
	Component                             string
	Deployment, Namespace, ServiceAccount string
	// Env holds NAME=value, resolved as the kubelet resolves it: literal
	// values, keys of the install's ConfigMaps and the pod's namespace.
	Env []string
	// Args are the container's args with every $(NAME) of Env expanded.
	Args []string
}

// Documents splits a multi-document YAML stream into its documents.
func Documents(raw []byte) ([][]byte, error) {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML documents: %w", err)
		}
		docs = append(docs, doc)
	}
}

// Workloads reads a rendered install (`kubectl kustomize deploy/` or the
// chart's `helm template`) and returns the container of each Deployment by
// its name. A Deployment with more than one container, or a variable the
// e2e cannot resolve as the kubelet would, is an error: the e2e would run
// something other than what the install runs.
func Workloads(rendered []byte) (map[string]Workload, error) {
	type meta struct {
		Kind string `json:"kind"`
	}
	var deployments []appsv1.Deployment
	configMaps := map[string]map[string]string{} // namespace/name -> data
	docs, err := Documents(rendered)
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		var m meta
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		switch m.Kind {
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict(doc, &d); err != nil {
				return nil, fmt.Errorf("deployment: %w", err)
			}
			deployments = append(deployments, d)
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
				return nil, fmt.Errorf("configmap: %w", err)
			}
			configMaps[cm.Namespace+"/"+cm.Name] = cm.Data
		}
	}
	out := map[string]Workload{}
	for _, d := range deployments {
		cs := d.Spec.Template.Spec.Containers
		if len(cs) != 1 {
			return nil, fmt.Errorf("deployment %s/%s has %d containers, want 1", d.Namespace, d.Name, len(cs))
		}
		c := cs[0]
		w := Workload{Component: c.Name, Deployment: d.Name, Namespace: d.Namespace, ServiceAccount: d.Spec.Template.Spec.ServiceAccountName}
		if w.ServiceAccount == "" {
			return nil, fmt.Errorf("deployment %s/%s names no ServiceAccount: the e2e would not know whose token to run it with", d.Namespace, d.Name)
		}
		values := map[string]string{}
		for _, e := range c.Env {
			v, err := envValue(e, d.Namespace, configMaps)
			if err != nil {
				return nil, fmt.Errorf("deployment %s/%s: env %s: %w", d.Namespace, d.Name, e.Name, err)
			}
			values[e.Name] = v
			w.Env = append(w.Env, e.Name+"="+v)
		}
		for _, a := range c.Args {
			w.Args = append(w.Args, expand(a, values))
		}
		if _, dup := out[w.Component]; dup {
			return nil, fmt.Errorf("two Deployments run container %s", w.Component)
		}
		out[w.Component] = w
	}
	return out, nil
}

func envValue(e corev1.EnvVar, namespace string, configMaps map[string]map[string]string) (string, error) {
	switch {
	case e.ValueFrom == nil:
		return e.Value, nil
	case e.ValueFrom.ConfigMapKeyRef != nil:
		ref := e.ValueFrom.ConfigMapKeyRef
		data, ok := configMaps[namespace+"/"+ref.Name]
		if !ok {
			return "", fmt.Errorf("ConfigMap %s/%s is not part of the install", namespace, ref.Name)
		}
		v, ok := data[ref.Key]
		if !ok && (ref.Optional == nil || !*ref.Optional) {
			return "", fmt.Errorf("ConfigMap %s/%s has no key %s", namespace, ref.Name, ref.Key)
		}
		return v, nil
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
		return namespace, nil
	default:
		return "", errors.New("only literal values, ConfigMap keys and metadata.namespace can be resolved outside a pod")
	}
}

// expand replaces $(NAME) by NAME's value in one pass, as the kubelet
// does for the variables a container defines: $$ is an escaped $, and a
// reference to an undefined name stays as written.
func expand(arg string, values map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(arg); i++ {
		if arg[i] != '$' || i+1 == len(arg) {
			b.WriteByte(arg[i])
			continue
		}
		switch next := arg[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(arg[i:], ')')
			if end < 0 {
				b.WriteString(arg[i:])
				return b.String()
			}
			ref := arg[i : i+end+1]
			if v, ok := values[ref[2:len(ref)-1]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(ref)
			}
			i += end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
