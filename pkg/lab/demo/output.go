package demo

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// writeFileRuns says what the runs under the files' traces are, when
// there are any: their rate mode and how long they run (at most the
// file's data, which may be shorter than o.Steps).
func writeFileRuns(w io.Writer, o Options, runs []eval.Run, per int) {
	for k, label := range o.traces()[len(o.Traces):] {
		lo, hi := math.MaxInt, 0
		for i := len(o.Traces) + k; i < len(runs); i += per {
			n := len(runs[i].Trace.Rates)
			lo, hi = min(lo, n), max(hi, n)
		}
		what := fmt.Sprintf("rate series %s, as recorded", o.Series.Path)
		if label == AzureTraceLabel {
			rate, _ := sim.ParseAzureRate(string(o.AzureRate))
			what = fmt.Sprintf("Azure functions of %s, rate %s", o.Azure.Invocations, rate)
		}
		span := strconv.Itoa(lo)
		if hi != lo {
			span = fmt.Sprintf("%d to %d", lo, hi)
		}
		fmt.Fprintf(w, "%s runs: %s; %s windows each\n", label, what, span)
	}
	if len(o.traces()) > len(o.Traces) {
		fmt.Fprintln(w)
	}
}

func (o *Options) name() string {
	if o.Name == "" {
		return "demo"
	}
	return o.Name
}

// outDir returns o.OutDir, or a fresh ./aware-<name>-<seed>[-k].
func outDir(o Options) (string, error) {
	if o.OutDir != "" {
		return o.OutDir, nil
	}
	base := "aware-" + o.name() + "-" + strconv.FormatUint(o.Seed, 10)
	for k := 1; k < 1000; k++ {
		dir := base
		if k > 1 {
			dir = base + "-" + strconv.Itoa(k)
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return dir, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free output folder named %s-<n>", base)
}
