package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func smallDDPGConfig(stateDim, actionDim int, seed uint64) DDPGConfig {
	cfg := DefaultDDPGConfig(stateDim, actionDim)
	cfg.Hidden = []int{16, 16}
	cfg.MinibatchSize = 16
	cfg.Seed = seed
	return cfg
}

func mustDDPG(t testing.TB, cfg DDPGConfig) *DDPG {
	t.Helper()
	d, err := NewDDPG(cfg)
	if err != nil {
		t.Fatalf("NewDDPG: %v", err)
	}
	return d
}

func randomContinuousBatch(rng *rand.Rand, n, stateDim, actionDim int) []ContinuousTransition {
	batch := make([]ContinuousTransition, n)
	for i := range batch {
		a := make([]float64, actionDim)
		for j := range a {
			a[j] = rng.Float64()*2 - 1
		}
		batch[i] = ContinuousTransition{
			State: randomState(rng, stateDim), Action: a, Reward: rng.NormFloat64(),
			NextState: randomState(rng, stateDim), Done: i%7 == 6,
		}
	}
	return batch
}

func TestDDPGGradientCheck(t *testing.T) {
	cfg := smallDDPGConfig(3, 2, 4)
	cfg.Hidden = []int{5, 4}
	cfg.MinibatchSize = 6
	d := mustDDPG(t, cfg)
	for _, q := range append(append([]*param{}, d.actor...), d.critic...) {
		for i := range q.data {
			q.data[i] *= 3
		}
	}
	rows := randomContinuousBatch(newRNG(8), 5, 3, 2) // one padding row
	y := make([]float64, len(rows))
	for i := range y {
		y[i] = rows[i].Reward
	}
	t.Run("critic", func(t *testing.T) {
		if err := d.criticG.fill(rows, y, cfg); err != nil {
			t.Fatal(err)
		}
		gradCheck(t, d.critic, func() (float64, [][]float64) {
			return runGraph(t, &d.criticG.m, d.criticG.loss, d.criticG.grads)
		})
	})
	t.Run("actor through the critic", func(t *testing.T) {
		d.actorG.fill(rows, cfg)
		gradCheck(t, d.actor, func() (float64, [][]float64) {
			return runGraph(t, &d.actorG.m, d.actorG.loss, d.actorG.grads)
		})
	})
}

// TestDDPGActorLossMatchesReference recomputes -mean Q(s, μ(s)) in plain Go.
func TestDDPGActorLossMatchesReference(t *testing.T) {
	cfg := smallDDPGConfig(3, 2, 4)
	d := mustDDPG(t, cfg)
	rows := randomContinuousBatch(newRNG(9), 11, 3, 2)
	d.actorG.fill(rows, cfg)
	if err := d.actorG.m.run(); err != nil {
		t.Fatal(err)
	}
	got, err := scalarOf(d.actorG.loss)
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	for _, r := range rows {
		mu := refMLP(d.actor, r.State)
		xa := append([]float64(nil), r.State...)
		for _, m := range mu {
			xa = append(xa, math.Tanh(m))
		}
		want -= refMLP(d.critic, xa)[0] / float64(len(rows))
		act, err := d.Act(r.State, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := range mu {
			if !closeTo(act[j], math.Tanh(mu[j]), 1e-12) {
				t.Errorf("Act()[%d] = %v, want %v", j, act[j], math.Tanh(mu[j]))
			}
		}
	}
	if !closeTo(got, want, 1e-9) {
		t.Fatalf("actor loss = %v, want %v", got, want)
	}
}

// The 1-D control task: x' = clip(x + 0.5a, -2, 2), reward -x'^2, episodes
// of 8 steps from x0 ~ U(-1, 1) ending by time limit (not terminal). The
// best policy is a = clip(-2x, -1, 1).
const ddpgEpisodeLen = 8

func controlStep(x, a float64) (float64, float64) {
	next := math.Max(-2, math.Min(2, x+0.5*a))
	return next, -next * next
}

// controlCost is the mean episode cost of the deterministic policy from 11
// evenly spaced starts, and the mean final |x|.
func controlCost(t *testing.T, act func(x float64) float64) (cost, final float64) {
	t.Helper()
	for i := 0; i <= 10; i++ {
		x := -1 + 0.2*float64(i)
		for range ddpgEpisodeLen {
			var r float64
			x, r = controlStep(x, act(x))
			cost -= r
		}
		final += math.Abs(x)
	}
	return cost / 11, final / 11
}

func TestDDPGLearns1DControl(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { learn1DControl(t, seed) })
	}
}

func learn1DControl(t *testing.T, seed uint64) {
	cfg := DefaultDDPGConfig(1, 1)
	cfg.Hidden = []int{16, 16}
	cfg.ActorLearningRate = 1e-3
	cfg.CriticLearningRate = 3e-3
	cfg.Gamma = 0.9
	cfg.Tau = 0.02
	cfg.MinibatchSize = 32
	cfg.Seed = seed
	d := mustDDPG(t, cfg)
	rng := newRNG(seed)
	policy := func(x float64) float64 {
		a, err := d.Act([]float64{x}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a[0]
	}
	zeroCost, _ := controlCost(t, func(float64) float64 { return 0 })

	var replay []ContinuousTransition
	x, steps := rng.Float64()*2-1, 0
	const maxEnvSteps = 3000
	for envStep := 1; envStep <= maxEnvSteps; envStep++ {
		a, err := d.Act([]float64{x}, 0.3, rng)
		if err != nil {
			t.Fatal(err)
		}
		if envStep <= 300 { // warm-up with uniform actions
			a[0] = rng.Float64()*2 - 1
		}
		next, r := controlStep(x, a[0])
		replay = append(replay, ContinuousTransition{State: []float64{x}, Action: a, Reward: r, NextState: []float64{next}})
		x, steps = next, steps+1
		if steps == ddpgEpisodeLen {
			x, steps = rng.Float64()*2-1, 0
		}
		if envStep < 300 {
			continue
		}
		mb := make([]ContinuousTransition, cfg.MinibatchSize)
		for i := range mb {
			mb[i] = replay[rng.IntN(len(replay))]
		}
		if _, err := d.Update(mb); err != nil {
			t.Fatal(err)
		}
		if envStep%100 == 0 {
			if cost, final := controlCost(t, policy); cost < 0.1*zeroCost && final < 0.05 {
				t.Logf("solved after %d environment steps: cost %.3f (zero policy %.3f), final |x| %.3f", envStep, cost, zeroCost, final)
				return
			}
		}
	}
	cost, final := controlCost(t, policy)
	t.Fatalf("not solved in %d steps: cost %.3f (zero policy %.3f), final |x| %.3f", maxEnvSteps, cost, zeroCost, final)
}

func TestDDPGCheckpointAndDeterminism(t *testing.T) {
	train := func(seed uint64) *DDPG {
		d := mustDDPG(t, smallDDPGConfig(3, 2, seed))
		for i := range 3 {
			if _, err := d.Update(randomContinuousBatch(newRNG(uint64(i)), 40, 3, 2)); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	a, b := train(1), train(1)
	ab, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	bb, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	requireSameBytes(t, "DDPG runs with the same seed", ab, bb)

	loaded, err := NewDDPGFromCheckpoint(ab)
	if err != nil {
		t.Fatal(err)
	}
	s := []float64{0.1, -0.5, 0.9}
	x, _ := a.Act(s, 0, nil)
	y, _ := loaded.Act(s, 0, nil)
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("loaded actor differs: %v vs %v", x, y)
		}
	}
	batch := randomContinuousBatch(newRNG(50), 40, 3, 2)
	if _, err := a.Update(batch); err != nil {
		t.Fatal(err)
	}
	if _, err := loaded.Update(batch); err != nil {
		t.Fatal(err)
	}
	ab, _ = a.MarshalBinary()
	lb, _ := loaded.MarshalBinary()
	requireSameBytes(t, "DDPG checkpoints after identical training", ab, lb)

	wrong := mustDDPG(t, smallDDPGConfig(3, 1, 1))
	if err := wrong.UnmarshalBinary(ab); !errors.Is(err, ErrIncompatibleCheckpoint) {
		t.Errorf("action dim mismatch: err = %v, want ErrIncompatibleCheckpoint", err)
	}
	ppo := mustPPO(t, smallConfig(3, 2, 1))
	if err := ppo.UnmarshalBinary(ab); !errors.Is(err, ErrIncompatibleCheckpoint) {
		t.Errorf("DDPG checkpoint into PPO: err = %v, want ErrIncompatibleCheckpoint", err)
	}
	if err := wrong.UnmarshalBinary(ab[:len(ab)-3]); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("truncated: err = %v, want ErrCorruptCheckpoint", err)
	}
}

func TestDDPGRejectsBadInput(t *testing.T) {
	d := mustDDPG(t, smallDDPGConfig(2, 1, 1))
	before, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	good := func() []ContinuousTransition { return randomContinuousBatch(newRNG(3), 5, 2, 1) }
	cases := []struct {
		name   string
		mutate func([]ContinuousTransition)
		want   error
	}{
		{"NaN reward", func(b []ContinuousTransition) { b[1].Reward = math.NaN() }, ErrNonFinite},
		{"Inf state", func(b []ContinuousTransition) { b[0].State[1] = math.Inf(1) }, ErrNonFinite},
		{"NaN action", func(b []ContinuousTransition) { b[2].Action[0] = math.NaN() }, ErrNonFinite},
		{"action out of range", func(b []ContinuousTransition) { b[2].Action[0] = 1.5 }, ErrInvalidInput},
		{"wrong action length", func(b []ContinuousTransition) { b[2].Action = []float64{0, 0} }, ErrInvalidInput},
		{"missing next state", func(b []ContinuousTransition) { b[0].Done = false; b[0].NextState = nil }, ErrInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := good()
			tc.mutate(b)
			if _, err := d.Update(b); !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("err = %v, want %v (and ErrInvalidInput)", err, tc.want)
			}
			after, err := d.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			requireSameBytes(t, "DDPG before and after rejected update", before, after)
		})
	}
	t.Run("divergence rolls back", func(t *testing.T) {
		b := good()
		for i := range b {
			b[i].Reward = 1e300
		}
		if _, err := d.Update(b); !errors.Is(err, ErrDiverged) {
			t.Fatalf("err = %v, want ErrDiverged", err)
		}
		after, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		requireSameBytes(t, "DDPG before and after diverged update", before, after)
	})
	t.Run("act", func(t *testing.T) {
		if _, err := d.Act([]float64{math.NaN(), 0}, 0, nil); !errors.Is(err, ErrNonFinite) {
			t.Errorf("NaN state: err = %v", err)
		}
		if _, err := d.Act([]float64{0, 0}, 0.1, nil); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("noise without rng: err = %v", err)
		}
		if _, err := d.Act([]float64{0, 0}, -1, nil); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("negative noise: err = %v", err)
		}
		a, err := d.Act([]float64{0, 0}, 100, newRNG(1))
		if err != nil || a[0] < -1 || a[0] > 1 {
			t.Errorf("noisy action %v (err %v) outside [-1, 1]", a, err)
		}
	})
}
