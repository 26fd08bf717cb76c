// Command crdbounds post-processes the CRDs controller-gen writes: it bounds
// every quantity string (int-or-string with a pattern) to 64 characters.
//
// Why: the API server estimates the worst-case cost of each CEL rule from
// the schema. controller-gen cannot attach markers to the values of a
// corev1.ResourceList, so those strings are unbounded and any rule that
// parses them (minAllowed <= maxAllowed) is rejected as too expensive. No
// real quantity is longer than a few dozen characters.
//
// Usage: crdbounds FILE...  (rewrites each file in place)
package main

import (
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const maxQuantityLength = 64

func main() {
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdbounds: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			bound(s.OpenAPIV3Schema)
		}
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// bound walks the schema and sets maxLength on quantity-like strings.
func bound(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	if s.XIntOrString && s.Pattern != "" && s.MaxLength == nil {
		n := int64(maxQuantityLength)
		s.MaxLength = &n
	}
	for k, p := range s.Properties {
		bound(&p)
		s.Properties[k] = p
	}
	if s.AdditionalProperties != nil {
		bound(s.AdditionalProperties.Schema)
	}
	if s.Items != nil {
		bound(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			bound(&s.Items.JSONSchemas[i])
		}
	}
	for _, group := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range group {
			bound(&group[i])
		}
	}
}
