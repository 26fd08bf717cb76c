package nn

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
)

// smallConfig is a fast configuration for tests.
func smallConfig(stateDim, numActions int, seed uint64) Config {
	cfg := DefaultConfig(stateDim, numActions)
	cfg.Hidden = []int{16, 16}
	cfg.MinibatchSize = 32
	cfg.Seed = seed
	return cfg
}

func mustPPO(t testing.TB, cfg Config) *PPO {
	t.Helper()
	p, err := NewPPO(cfg)
	if err != nil {
		t.Fatalf("NewPPO: %v", err)
	}
	return p
}

func mustMarshal(t testing.TB, p *PPO) []byte {
	t.Helper()
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x7e57)) }

func randomState(rng *rand.Rand, dim int) []float64 {
	s := make([]float64, dim)
	for i := range s {
		s[i] = rng.Float64()*2 - 1
	}
	return s
}

// randomBatch returns episodes of random experience with random masks; every
// fifth step ends an episode.
func randomBatch(rng *rand.Rand, n, stateDim, numActions int) []Transition {
	batch := make([]Transition, n)
	state := randomState(rng, stateDim)
	for i := range batch {
		mask := make([]bool, numActions)
		for j := range mask {
			mask[j] = rng.IntN(4) != 0
		}
		a := rng.IntN(numActions)
		mask[a] = true
		next := randomState(rng, stateDim)
		batch[i] = Transition{
			State: state, Mask: mask, Action: a, Reward: rng.Float64()*2 - 1,
			NextState: next, Done: i%5 == 4,
		}
		state = next
		if batch[i].Done {
			state = randomState(rng, stateDim)
		}
	}
	return batch
}

func requireSameBytes(t *testing.T, what string, a, b []byte) {
	t.Helper()
	if !bytes.Equal(a, b) {
		t.Fatalf("%s differ (len %d vs %d)", what, len(a), len(b))
	}
}

// runGraph runs m once and returns the scalar loss and copies of the
// gradients, the form gradCheck compares.
func runGraph(t *testing.T, m *machine, loss *G.Value, grads []*G.Value) (float64, [][]float64) {
	t.Helper()
	if err := m.run(); err != nil {
		t.Fatal(err)
	}
	l, err := scalarOf(loss)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float64
	for _, g := range grads {
		d, err := float64s(g)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float64(nil), d...))
	}
	return l, out
}

// absSum is the sum of the absolute values of grads: zero when a loss does
// not depend on the parameters they belong to.
func absSum(grads [][]float64) float64 {
	var sum float64
	for _, g := range grads {
		for _, v := range g {
			sum += math.Abs(v)
		}
	}
	return sum
}
