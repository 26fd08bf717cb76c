package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// The experiment file of the lab subcommands (train, eval, demo, evidence):
//
//	apiVersion: lab.aware.dev/v1alpha1
//	kind: Train
//	spec:
//	  episodes: 2000
//	  learner:
//	    learningRate: 0.0005
//
// spec holds the subcommand's options in the sections of its options
// struct (train.Options: learner, metaPPO, apps, simulation, reward,
// lifecycle, output); what the file leaves out keeps its default, and a
// flag given on the command line overrides the file. Keys are the fields'
// JSON names, or their Go names in lowerCamelCase where a struct has no
// JSON tags; durations are strings (15s), state features a list (trend,peak).
const (
	// ExperimentAPIVersion is the one version of the file read so far.
	ExperimentAPIVersion = "lab.aware.dev/v1alpha1"

	configFlag      = "config"
	printConfigFlag = "print-config"
)

// The kinds of experiment file, one per lab subcommand, so that a file
// written for one is not silently read by another.
const (
	kindTrain    = "Train"
	kindEval     = "Eval"
	kindDemo     = "Demo"
	kindEvidence = "Evidence"
)

// experimentFile is the file's envelope.
type experimentFile struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Spec       json.RawMessage `json:"spec"`
}

// experimentConfig adds --config and --print-config to a lab subcommand
// whose options spec (a pointer to a struct whose fields are, or point to,
// the variables its flags set) the file fills in.
type experimentConfig struct {
	kind  string
	spec  any
	path  string
	print bool
}

// AddFlags registers --config and --print-config on fs.
func (c *experimentConfig) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.path, configFlag, c.path, "experiment file (YAML, apiVersion "+ExperimentAPIVersion+", kind "+c.kind+") whose spec sets these options in sections, as --"+printConfigFlag+" writes them; flags given on the command line override it, and what it leaves out keeps its default (docs/experiments.md)")
	fs.BoolVar(&c.print, printConfigFlag, c.print, "write the effective configuration (defaults, then --"+configFlag+", then the flags given) as an experiment file to stdout and exit without running")
}

// Apply reads the experiment file, if any, into the spec and applies the
// flags given on the command line on top of it.
func (c *experimentConfig) Apply(fs *pflag.FlagSet) error {
	if c.path == "" {
		return nil
	}
	data, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("--%s: %w", configFlag, err)
	}
	// The flags hold values already: keep those given on the command line,
	// decode the file, then give them back.
	type given struct {
		f     *pflag.Flag
		value string
		list  []string
	}
	var flags []given
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == configFlag || f.Name == printConfigFlag {
			return
		}
		g := given{f: f, value: f.Value.String()}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			g.list = slices.Clone(sv.GetSlice())
		}
		flags = append(flags, g)
	})
	if err := decodeExperiment(c.path, data, c.kind, c.spec); err != nil {
		return err
	}
	for _, g := range flags {
		var err error
		if sv, ok := g.f.Value.(pflag.SliceValue); ok {
			// Set would append to a list already set.
			err = sv.Replace(g.list)
		} else {
			err = g.f.Value.Set(g.value)
		}
		if err != nil {
			return fmt.Errorf("--%s: %w", g.f.Name, err)
		}
	}
	return nil
}

// Print writes the effective configuration when --print-config asks for it
// and says whether it did.
func (c *experimentConfig) Print(w io.Writer) (bool, error) {
	if !c.print {
		return false, nil
	}
	return true, encodeExperiment(w, c.kind, c.spec)
}

// wrapRunE reads the experiment file before run and handles --print-config.
func (c *experimentConfig) wrapRunE(run func(cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := c.Apply(cmd.Flags()); err != nil {
			return err
		}
		if done, err := c.Print(cmd.OutOrStdout()); done {
			return err
		}
		return run(cmd)
	}
}

// decodeExperiment reads an experiment file of the given kind into spec,
// strictly: an unknown field, a wrong apiVersion or kind, or a value of
// the wrong type is refused with the file and the field's path.
func decodeExperiment(path string, data []byte, kind string, spec any) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("experiment file %s: %s", path, fmt.Sprintf(format, args...))
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fail("%v", err)
	}
	var doc experimentFile
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return fail("%v (the file holds apiVersion, kind and spec)", err)
	}
	if doc.APIVersion != ExperimentAPIVersion {
		return fail("apiVersion %q is not supported (want %s)", doc.APIVersion, ExperimentAPIVersion)
	}
	if doc.Kind != kind {
		return fail("kind %q is not this command's (want %s)", doc.Kind, kind)
	}
	if len(doc.Spec) == 0 || string(doc.Spec) == "null" {
		return nil
	}
	var tree any
	if err := unmarshalNumbers(doc.Spec, &tree); err != nil {
		return fail("spec: %v", err)
	}
	tree, err = fromFile(tree, reflect.ValueOf(spec), "spec")
	if err != nil {
		return fail("%v", err)
	}
	js, err = json.Marshal(tree)
	if err != nil {
		return fail("%v", err)
	}
	dec = json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(spec); err != nil {
		return fail("spec: %v", err)
	}
	return nil
}

// encodeExperiment writes spec as an experiment file of the given kind.
func encodeExperiment(w io.Writer, kind string, spec any) error {
	tree, err := toFile(reflect.ValueOf(spec))
	if err != nil {
		return err
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": ExperimentAPIVersion, "kind": kind, "spec": tree})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	featuresType = reflect.TypeFor[learn.Features]()
)

// fileField is a field of a struct as the file names it.
type fileField struct {
	name  string
	index []int
}

// fileFields lists the fields of struct type t the file may hold, as
// encoding/json would see them: embedded structs without a name are
// inlined, fields tagged "-" and unexported ones are left out.
func fileFields(t reflect.Type) []fileField {
	var out []fileField
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			for _, sub := range fileFields(ft) {
				out = append(out, fileField{name: sub.name, index: append([]int{i}, sub.index...)})
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		name := tag
		if name == "" {
			name = lowerCamel(f.Name)
		}
		out = append(out, fileField{name: name, index: []int{i}})
	}
	return out
}

// lowerCamel is a Go name as a key: CPUSeconds is cpuSeconds, Window window.
func lowerCamel(s string) string {
	r := []rune(s)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) {
		n-- // the last capital starts the next word
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

// field is v's field at index, allocating nil embedded pointers.
func field(v reflect.Value, index []int) reflect.Value {
	for _, i := range index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v
}

// fromFile checks the decoded JSON tree of a file against v, the value it
// goes into, refusing unknown keys with their path, and turns durations
// and state features into the numbers encoding/json reads. A list the file
// sets replaces the default's: v's slice is cleared so that decoding does
// not write into a backing array a default may share.
func fromFile(tree any, v reflect.Value, path string) (any, error) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return tree, nil
		}
		v = v.Elem()
	}
	switch {
	case v.Type() == durationType:
		if s, ok := tree.(string); ok {
			d, err := time.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return int64(d), nil
		}
		return tree, nil
	case v.Type() == featuresType:
		if s, ok := tree.(string); ok {
			if s == "" {
				return 0, nil // ParseFeatures reads "" as all, which here would turn them all off
			}
			off, err := learn.ParseFeatures(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return int(off), nil
		}
		return tree, nil
	case v.Kind() == reflect.Slice:
		if err := checkLeaf(tree, v.Type(), path); err != nil {
			return nil, err
		}
		if tree != nil && v.CanSet() {
			v.Set(reflect.Zero(v.Type()))
		}
		return tree, nil
	case v.Kind() != reflect.Struct:
		return tree, checkLeaf(tree, v.Type(), path)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		if tree == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: want a mapping, got %T", path, tree)
	}
	fields := fileFields(v.Type())
	for k, sub := range m {
		i := slices.IndexFunc(fields, func(f fileField) bool { return f.name == k })
		if i < 0 {
			known := make([]string, len(fields))
			for j, f := range fields {
				known[j] = f.name
			}
			sort.Strings(known)
			return nil, fmt.Errorf("%s.%s: unknown field (known: %s)", path, k, strings.Join(known, ", "))
		}
		out, err := fromFile(sub, field(v, fields[i].index), path+"."+k)
		if err != nil {
			return nil, err
		}
		m[k] = out
	}
	return m, nil
}

// checkLeaf refuses a value of the wrong type with its path, which the
// decoding of the whole spec would name by Go types instead.
func checkLeaf(tree any, t reflect.Type, path string) error {
	b, err := json.Marshal(tree)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s: want %s, got %s %s", path, t, te.Value, b)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// toFile is v as the tree of an experiment file: structs as mappings of
// their file fields, durations as strings, state features as the list of
// those left out.
func toFile(v reflect.Value) (any, error) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil, nil
		}
		v = v.Elem()
	}
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String(), nil
	case v.Type() == featuresType:
		return learn.Features(v.Uint()).String(), nil
	case v.Kind() == reflect.Struct:
		m := map[string]any{}
		for _, f := range fileFields(v.Type()) {
			fv, ok := fieldIfSet(v, f.index)
			if !ok {
				continue
			}
			x, err := toFile(fv)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
			m[f.name] = x
		}
		return m, nil
	case v.Kind() == reflect.Slice && v.IsNil():
		return []any{}, nil
	}
	// Leaves go through encoding/json, as they come back.
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, err
	}
	var x any
	return x, unmarshalNumbers(b, &x)
}

// unmarshalNumbers decodes JSON keeping numbers as written, so that a
// 64-bit seed survives the round trip through a generic tree.
func unmarshalNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// fieldIfSet is v's field at index, false when a nil pointer is on the way.
func fieldIfSet(v reflect.Value, index []int) (reflect.Value, bool) {
	for _, i := range index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}
