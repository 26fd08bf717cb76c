// Command azuresample writes a synthetic sample of the Azure Functions 2019
// trace (sim.WriteAzureSample) in the layout real samples come in: minute
// columns for a window of the day, a memory file with a HashFunction column
// first. The project ships no copy of the trace; docs/serverless.md runs
// its tables on this.
//
// Usage: go run ./hack/azuresample -dir DIR [-functions 300] [-first 480] [-minutes 480] [-seed 1]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "azuresample:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("azuresample", flag.ContinueOnError)
	dir := fs.String("dir", "", "folder the three files are written to (required)")
	o := sim.AzureSampleOptions{}
	fs.IntVar(&o.Functions, "functions", 300, "functions (rows of the invocations file)")
	fs.IntVar(&o.FirstMinute, "first", 480, "first minute of the day kept (1..1440)")
	fs.IntVar(&o.Minutes, "minutes", 480, "minutes kept")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed; equal flags write equal files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	f, err := sim.WriteAzureSample(*dir, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n%s\n%s\n", f.Invocations, f.Durations, f.Memory)
	return nil
}
