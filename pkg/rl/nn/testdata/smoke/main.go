// Command smoke creates a policy, acts once and trains once. It is built and
// run by TestGorgoniaBinaryStarts so that a Gorgonia or tensor version that
// breaks at start-up (as tensor's default go4.org/unsafe/assume-no-moving-gc
// does on new Go releases) fails the tests instead of production.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/aware-k8s/aware/pkg/rl/nn"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "smoke:", err)
		os.Exit(1)
	}
	fmt.Println("OK")
}

func run() error {
	p, err := nn.NewPPO(nn.DefaultConfig(3, 4))
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	state := []float64{0.1, 0.2, 0.3}
	d, err := p.Act(state, []bool{true, true, false, true}, false, rng)
	if err != nil {
		return err
	}
	if _, err := p.Update([]nn.Transition{{State: state, Action: d.Action, Reward: 1, Done: true}}); err != nil {
		return err
	}
	_, err = p.MarshalBinary()
	return err
}
