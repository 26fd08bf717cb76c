package app

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aware-k8s/aware/pkg/lab/train"
	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// labCommands are the subcommands that read an experiment file.
var labCommands = map[string]func() *cobra.Command{
	"train":    newTrainCommand,
	"eval":     newEvalCommand,
	"demo":     newDemoCommand,
	"evidence": newEvidenceCommand,
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExperimentRoundTrip: what --print-config writes, read back with
// --config, prints the same, for every lab subcommand; and with flags
// given, the printed file carries them.
func TestExperimentRoundTrip(t *testing.T) {
	for name, newCmd := range labCommands {
		t.Run(name, func(t *testing.T) {
			first, errOut, err := execute(t, newCmd(), "--print-config", "--seed=7", "--workers=3")
			if err != nil {
				t.Fatalf("print: %v\n%s", err, errOut)
			}
			if !strings.HasPrefix(first, "apiVersion: "+ExperimentAPIVersion+"\n") || !strings.Contains(first, "\n  seed: 7\n") {
				t.Fatalf("printed configuration:\n%s", first)
			}
			path := writeTemp(t, name+".yaml", first)
			again, errOut, err := execute(t, newCmd(), "--config="+path, "--print-config")
			if err != nil {
				t.Fatalf("read back: %v\n%s", err, errOut)
			}
			if again != first {
				t.Errorf("round trip changed the file:\nfirst:\n%s\nagain:\n%s", first, again)
			}
		})
	}
}

// TestExperimentDefaults: a file without a spec, and the printed defaults
// read back, leave train.Options as DefaultOptions gives them.
func TestExperimentDefaults(t *testing.T) {
	printed, _, err := execute(t, newTrainCommand(), "--print-config")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"apiVersion: " + ExperimentAPIVersion + "\nkind: Train\n", printed} {
		o := newTrainOptions()
		if err := decodeExperiment("f.yaml", []byte(text), kindTrain, o.config.spec); err != nil {
			t.Fatal(err)
		}
		want := newTrainOptions()
		if got, exp := encode(t, o), encode(t, want); got != exp {
			t.Errorf("defaults changed:\n%s\nwant\n%s", got, exp)
		}
		if !slices.Equal(o.Traces, want.Traces) || o.Step != want.Step || o.Gates != want.Gates {
			t.Errorf("traces %v step %s gates %+v, want %v %s %+v", o.Traces, o.Step, o.Gates, want.Traces, want.Step, want.Gates)
		}
	}
}

func encode(t *testing.T, o *trainOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := encodeExperiment(&b, kindTrain, o.config.spec); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestExperimentOverrides: the file sets the options it names, in their
// sections; flags given on the command line win over it, lists included
// (which pflag would otherwise append to); the rest keep their defaults.
func TestExperimentOverrides(t *testing.T) {
	path := writeTemp(t, "train.yaml", `apiVersion: lab.aware.dev/v1alpha1
kind: Train
spec:
  seed: 9
  episodes: 10
  learner:
    hidden: [16, 16]
    learningRate: 0.0005
    featuresOff: trend
  apps:
    traces: [steady, ramp]
  simulation:
    step: 30s
  lifecycle:
    gates:
      promoteMinMean: 0.7
  validation:
    apps: 3
`)
	for _, tc := range []struct {
		name  string
		flags []string
		check func(t *testing.T, o *trainOptions)
	}{
		{"file only", nil, func(t *testing.T, o *trainOptions) {
			if o.Seed != 9 || o.Episodes != 10 || !slices.Equal(o.Hidden, []int{16, 16}) || o.LearningRate != 0.0005 ||
				!slices.Equal(o.Traces, []string{"steady", "ramp"}) || o.Step != 30*time.Second ||
				o.Gates.PromoteMinMean != 0.7 || o.validation.Apps != 3 || o.FeaturesOff != learn.FeaturesTrend {
				t.Errorf("file not applied: %+v", o.Options)
			}
			d := train.DefaultOptions()
			if o.Apps != d.Apps || o.Gates.Window != d.Gates.Window || o.EntropyCoef != d.EntropyCoef {
				t.Errorf("options the file leaves out changed: apps %d gate window %d entropy %v", o.Apps, o.Gates.Window, o.EntropyCoef)
			}
		}},
		{"flags win", []string{"--seed=3", "--traces=bursty", "--hidden=8", "--step=1m", "--promote-min-mean=0.65", "--features=none"}, func(t *testing.T, o *trainOptions) {
			if o.Seed != 3 || !slices.Equal(o.Traces, []string{"bursty"}) || !slices.Equal(o.Hidden, []int{8}) ||
				o.Step != time.Minute || o.Gates.PromoteMinMean != 0.65 || o.FeaturesOff != learn.AllFeatures {
				t.Errorf("flags did not override the file: %+v", o.Options)
			}
			if o.Episodes != 10 || o.LearningRate != 0.0005 {
				t.Errorf("file lost where no flag was given: episodes %d rate %v", o.Episodes, o.LearningRate)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newTrainOptions()
			fs := pflag.NewFlagSet("train", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--config=" + path}, tc.flags...)); err != nil {
				t.Fatal(err)
			}
			if err := o.config.Apply(fs); err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// TestExperimentRefusals: a file that is not this command's, or holds what
// no option takes, is refused naming the file and the field.
func TestExperimentRefusals(t *testing.T) {
	head := "apiVersion: lab.aware.dev/v1alpha1\nkind: Train\n"
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"wrong apiVersion", "apiVersion: lab.aware.dev/v1\nkind: Train\n", []string{`apiVersion "lab.aware.dev/v1" is not supported`, ExperimentAPIVersion}},
		{"no apiVersion", "kind: Train\n", []string{`apiVersion "" is not supported`}},
		{"another command's kind", "apiVersion: lab.aware.dev/v1alpha1\nkind: Demo\n", []string{`kind "Demo"`, "want Train"}},
		{"unknown top-level field", head + "metadata: {}\n", []string{`unknown field "metadata"`}},
		{"unknown spec field", head + "spec:\n  epochs: 3\n", []string{"spec.epochs: unknown field", "learner"}},
		{"unknown section field", head + "spec:\n  learner:\n    learningRat: 0.1\n", []string{"spec.learner.learningRat: unknown field", "learningRate"}},
		{"field of a file-less option", head + "spec:\n  apps:\n    appList: []\n", []string{"spec.apps.appList: unknown field"}},
		{"case matters", head + "spec:\n  Seed: 2\n", []string{"spec.Seed: unknown field"}},
		{"wrong type", head + "spec:\n  episodes: ten\n", []string{"spec.episodes: want int"}},
		{"section not a mapping", head + "spec:\n  learner: 3\n", []string{"spec.learner: want a mapping"}},
		{"bad duration", head + "spec:\n  simulation:\n    step: 30x\n", []string{"spec.simulation.step", "30x"}},
		{"bad features", head + "spec:\n  learner:\n    featuresOff: colour\n", []string{"spec.learner.featuresOff", "colour"}},
		{"not YAML", "apiVersion: [\n", []string{"experiment file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, "x.yaml", tc.text)
			_, _, err := execute(t, newTrainCommand(), "--config="+path, "--print-config")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append([]string{"experiment file " + path}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if _, _, err := execute(t, newTrainCommand(), "--config="+filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("missing file: %v", err)
	}
}

// TestServeFlagsAreServingOnly: serve registers none of the lab
// subcommands' flags beyond the few both kinds of command have in their
// own sense (the policy served or trained, the seed, the retraining
// bounds), and no experiment file.
func TestServeFlagsAreServingOnly(t *testing.T) {
	shared := []string{"help", "seed", "policy", "action-space", "meta-signature", "retrain-min-episodes", "retrain-max-episodes", "ensemble-quorum"}
	serve := newServeCommand().Flags()
	lab := 0
	for name, newCmd := range labCommands {
		newCmd().Flags().VisitAll(func(f *pflag.Flag) {
			lab++
			if slices.Contains(shared, f.Name) {
				return
			}
			if serve.Lookup(f.Name) != nil {
				t.Errorf("serve has %s's flag --%s", name, f.Name)
			}
		})
	}
	if lab < 100 {
		t.Errorf("only %d lab flags seen: the test lost its subject", lab)
	}
	for _, f := range []string{"config", "print-config", "episodes", "apps", "traces", "train-episodes"} {
		if serve.Lookup(f) != nil {
			t.Errorf("serve has --%s", f)
		}
	}
	// A back-quoted phrase in a usage string becomes the value's name in
	// --help ("--initial-checkpoint rl-agent train").
	serve.VisitAll(func(f *pflag.Flag) {
		if name, _ := pflag.UnquoteUsage(f); strings.Contains(name, " ") {
			t.Errorf("--%s shows its value as %q", f.Name, name)
		}
	})
	// Nothing reaches serve through the root's persistent flags either.
	root := NewCommand()
	for _, c := range root.Commands() {
		if c.Name() == "serve" {
			c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.HasPrefix(f.Name, "log") && f.Name != "v" && f.Name != "vmodule" {
					t.Errorf("serve inherits --%s", f.Name)
				}
			})
		}
	}
}

// FuzzDecodeExperiment: no file makes the decoder panic, and what it
// accepts prints as a file it accepts again unchanged.
func FuzzDecodeExperiment(f *testing.F) {
	var printed bytes.Buffer
	if err := encodeExperiment(&printed, kindTrain, newTrainOptions().config.spec); err != nil {
		f.Fatal(err)
	}
	f.Add(printed.String())
	f.Add("apiVersion: lab.aware.dev/v1alpha1\nkind: Train\nspec:\n  learner:\n    hidden: [4]\n  simulation:\n    step: 1m\n")
	f.Add("apiVersion: lab.aware.dev/v1alpha1\nkind: Train\nspec:\n  lifecycle:\n    gates: {window: 3}\n  seed: 18446744073709551615\n")
	f.Fuzz(func(t *testing.T, text string) {
		o := newTrainOptions()
		if err := decodeExperiment("f.yaml", []byte(text), kindTrain, o.config.spec); err != nil {
			return
		}
		first := encode(t, o)
		p := newTrainOptions()
		if err := decodeExperiment("f.yaml", []byte(first), kindTrain, p.config.spec); err != nil {
			t.Fatalf("printed file refused: %v\n%s", err, first)
		}
		if again := encode(t, p); again != first {
			t.Fatalf("not stable:\n%s\nthen\n%s", first, again)
		}
	})
}

// TestExperimentDocExamples: the example files of docs/experiments.md are
// read by the subcommand their kind names.
func TestExperimentDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/experiments.md")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]func() *cobra.Command{kindTrain: newTrainCommand, kindEval: newEvalCommand, kindDemo: newDemoCommand, kindEvidence: newEvidenceCommand}
	n := 0
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		text, _, _ := strings.Cut(block, "```")
		kind := ""
		for _, line := range strings.Split(text, "\n") {
			if k, ok := strings.CutPrefix(line, "kind: "); ok {
				kind, _, _ = strings.Cut(k, " ")
			}
		}
		newCmd, ok := kinds[kind]
		if !ok {
			t.Fatalf("example without a known kind:\n%s", text)
		}
		path := writeTemp(t, "example.yaml", text)
		if _, errOut, err := execute(t, newCmd(), "--config="+path, "--print-config"); err != nil {
			t.Errorf("example refused: %v\n%s\n%s", err, errOut, text)
		}
		n++
	}
	if n == 0 {
		t.Error("no examples found")
	}
}
