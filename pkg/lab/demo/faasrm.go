package demo

import (
	"fmt"
	"io"
	"slices"

	"github.com/aware-k8s/aware/pkg/lab/faas"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// PolicyFaaSRM is FaaSRM's harvesting rule behind the safeguard
// (pkg/lab/faas) against fixed allocation, over functions packed on shared
// nodes. It is not a per-app policy: the demo runs it as its own study,
// over --apps functions for each of FaaSRMSeeds seeds from --seed, for
// --steps windows of --step, on nodes of the simulator's capacity (packed
// first fit, then each made full: its capacity its functions' user
// allocations).
const PolicyFaaSRM = faas.PolicyHarvest

// FaaSRMSeeds is how many seeds the FaaSRM study pools.
const FaaSRMSeeds = 3

// runFaaSRM runs the FaaSRM study and prints it.
func runFaaSRM(o Options, stdout io.Writer) error {
	seeds := make([]uint64, FaaSRMSeeds)
	for k := range seeds {
		seeds[k] = o.Seed + uint64(k)
	}
	so := faas.StudyOptions{
		Functions: o.Apps, Seeds: seeds, Steps: o.Steps,
		Capacity: sim.DefaultConfig().NodeCapacity, Options: faas.Options{Step: o.Step, Timeout: o.FaaSRMTimeout},
	}
	st, err := faas.RunStudy(so)
	if err != nil {
		return fmt.Errorf("%s: %w", o.name(), err)
	}
	if err := st.Write(stdout, o.Step, o.Steps); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout)
	return err
}

// withoutFaaSRM returns the policies other than PolicyFaaSRM.
func withoutFaaSRM(ps []string) []string {
	return slices.DeleteFunc(slices.Clone(ps), func(p string) bool { return p == PolicyFaaSRM })
}
