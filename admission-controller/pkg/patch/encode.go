package patch

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// AppendJSON appends the JSON encoding of ops to dst and returns the
// extended buffer. For the operations Compute returns the bytes are exactly
// those of json.Marshal(ops) (tests hold the two equal); the value types
// Compute produces are written directly, without reflection, because this
// runs once per admitted pod inside the 2 ms budget. Any other value type
// goes through json.Marshal. Quantities are written in canonical form,
// which is what json.Marshal writes for every Quantity not parsed from a
// non-canonical string such as "+1"; Compute only computes them.
func AppendJSON(dst []byte, ops []Operation) ([]byte, error) {
	if ops == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i := range ops {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"op":`...)
		dst = appendString(dst, ops[i].Op)
		dst = append(dst, `,"path":`...)
		dst = appendString(dst, ops[i].Path)
		dst = append(dst, `,"value":`...)
		var err error
		if dst, err = appendValue(dst, ops[i].Value); err != nil {
			return dst, fmt.Errorf("encode value of %s %s: %w", ops[i].Op, ops[i].Path, err)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

func appendValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendString(dst, v), nil
	case resource.Quantity:
		return appendQuantity(dst, &v), nil
	case corev1.ResourceList:
		return appendResourceList(dst, v), nil
	case corev1.ResourceRequirements:
		if len(v.Claims) > 0 {
			break
		}
		// Field order and omitempty as in the type's json tags.
		dst = append(dst, '{')
		if len(v.Limits) > 0 {
			dst = append(dst, `"limits":`...)
			dst = appendResourceList(dst, v.Limits)
		}
		if len(v.Requests) > 0 {
			if len(v.Limits) > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `"requests":`...)
			dst = appendResourceList(dst, v.Requests)
		}
		return append(dst, '}'), nil
	case map[string]string:
		return appendMap(dst, v, appendString), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendResourceList writes the list as json.Marshal does.
func appendResourceList(dst []byte, rl corev1.ResourceList) []byte {
	return appendMap(dst, rl, func(dst []byte, q resource.Quantity) []byte { return appendQuantity(dst, &q) })
}

// appendMap writes m as json.Marshal writes a map with string keys: null
// for nil, else the keys sorted, each followed by its value as
// appendValue writes it. Up to four keys (the resources of a container,
// the annotations of a patch) are sorted without allocating.
func appendMap[K ~string, V any](dst []byte, m map[K]V, appendValue func([]byte, V) []byte) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	var buf [4]K
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, string(k))
		dst = append(dst, ':')
		dst = appendValue(dst, m[k])
	}
	return append(dst, '}')
}

// appendQuantity writes what Quantity.MarshalJSON writes for a computed
// quantity: the canonical form, quoted. The canonical form has only digits, '-', '.', 'e' and SI
// suffix letters, which need no escaping.
func appendQuantity(dst []byte, q *resource.Quantity) []byte {
	dst = append(dst, '"')
	var buf [32]byte
	number, suffix := q.CanonicalizeBytes(buf[:0])
	dst = append(dst, number...)
	dst = append(dst, suffix...)
	return append(dst, '"')
}

// appendString writes s as a JSON string. Printable ASCII that
// encoding/json leaves alone (everything but '"', '\\' and the HTML
// characters it escapes) is copied; anything else, rare in a patch, is
// left to json.Marshal so the escaping is exactly its own.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
